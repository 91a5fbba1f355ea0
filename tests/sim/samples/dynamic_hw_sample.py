"""A dynamic image-size classification program in the style of Ascend's public pyACL samples.

Written here from the pyACL reference; nothing in it knows about ge-plugin. Usage:
    python dynamic_hw_sample.py MODEL.om INPUT.npy EXPECTED.npy HEIGHT WIDTH
As the public dynamic-HW sample does, it copies the largest gear's input size from a ``bytes`` object that
holds a smaller image (``bytes_to_ptr(img.tobytes())``): a read past the end of the object, which real
hardware lets through (the smaller gear never looks at those bytes).
"""

import sys

import acl
import numpy as np

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
DYNAMIC_TENSOR = "ascend_mbatch_shape_data"


def check(ret, what):
    if ret != ACL_SUCCESS:
        raise RuntimeError(f"{what} failed: {ret}: {acl.get_recent_err_msg()}")


class Net:
    def __init__(self, model_path):
        check(acl.init(), "acl.init")
        check(acl.rt.set_device(0), "set_device")
        self.context, ret = acl.rt.create_context(0)
        check(ret, "create_context")
        self.model_id, ret = acl.mdl.load_from_file(model_path)
        check(ret, "load_from_file")
        self.desc = acl.mdl.create_desc()
        check(acl.mdl.get_desc(self.desc, self.model_id), "get_desc")
        self.inputs = self._dataset(acl.mdl.get_num_inputs(self.desc), acl.mdl.get_input_size_by_index)
        self.outputs = self._dataset(acl.mdl.get_num_outputs(self.desc), acl.mdl.get_output_size_by_index)

    def _dataset(self, count, size_of):
        dataset = acl.mdl.create_dataset()
        buffers = []
        for i in range(count):
            size = size_of(self.desc, i)
            dev, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
            check(ret, "malloc")
            buf = acl.create_data_buffer(dev, size)
            _, ret = acl.mdl.add_dataset_buffer(dataset, buf)
            check(ret, "add_dataset_buffer")
            buffers.append((dev, size, buf))
        return dataset, buffers

    def run(self, img, height, width):
        dataset, buffers = self.inputs
        dev, _, _ = buffers[0]
        size = acl.mdl.get_input_size_by_index(self.desc, 0)  # the largest gear's
        ptr = acl.util.bytes_to_ptr(img.tobytes())
        check(acl.rt.memcpy(dev, size, ptr, size, ACL_MEMCPY_HOST_TO_DEVICE), "memcpy")
        index, ret = acl.mdl.get_input_index_by_name(self.desc, DYNAMIC_TENSOR)
        check(ret, "get_input_index_by_name")
        check(
            acl.mdl.set_dynamic_hw_size(self.model_id, dataset, index, height, width), "set_dynamic_hw_size"
        )
        check(acl.mdl.execute(self.model_id, dataset, self.outputs[0]), "execute")
        dims, ret = acl.mdl.get_cur_output_dims(self.desc, 0)
        check(ret, "get_cur_output_dims")
        shape = tuple(dims["dims"])
        host = bytes(int(np.prod(shape)) * 4)
        out_dev, _, _ = self.outputs[1][0]
        check(
            acl.rt.memcpy(
                acl.util.bytes_to_ptr(host), len(host), out_dev, len(host), ACL_MEMCPY_DEVICE_TO_HOST
            ),
            "memcpy",
        )
        return np.frombuffer(host, dtype=np.float32).reshape(shape).copy()

    def release(self):
        for dataset, buffers in (self.inputs, self.outputs):
            for dev, _, buf in buffers:
                check(acl.destroy_data_buffer(buf), "destroy_data_buffer")
                check(acl.rt.free(dev), "free")
            check(acl.mdl.destroy_dataset(dataset), "destroy_dataset")
        check(acl.mdl.unload(self.model_id), "unload")
        check(acl.mdl.destroy_desc(self.desc), "destroy_desc")
        check(acl.rt.destroy_context(self.context), "destroy_context")
        check(acl.rt.reset_device(0), "reset_device")
        check(acl.finalize(), "finalize")


def main(model_path, input_path, expected_path, height, width):
    net = Net(model_path)
    img = np.ascontiguousarray(np.load(input_path), dtype=np.float32)
    expected = np.load(expected_path)
    for _ in range(3):  # one image after another, as the sample's loop over a folder
        result = net.run(img, height, width)
        assert result.shape == expected.shape and np.allclose(result, expected, rtol=1e-5, atol=1e-5)
    net.release()
    print("dynamic hw sample OK", result.shape)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
