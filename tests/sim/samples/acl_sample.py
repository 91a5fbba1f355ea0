"""A pyACL program written only from the pyACL reference, in the style of Ascend's acllite samples.

Nothing here knows about ge-plugin: run on an Ascend host it uses the real ``acl``. Usage:
    python acl_sample.py MODEL.om INPUT.npy EXPECTED.npy BATCH
It loads a dynamic-batch model, inspects it, builds datasets (with ascend_mbatch_shape_data), sets the gear,
executes synchronously and asynchronously, copies results back and tears everything down.
"""

import sys

import acl
import numpy as np

# pyACL exports no constants
ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_HOST = 1
ACL_FLOAT = 0
DYNAMIC_TENSOR = "ascend_mbatch_shape_data"


def check(ret, what):
    if ret != ACL_SUCCESS:
        raise RuntimeError(f"{what} failed: {ret}: {acl.get_recent_err_msg()}")


def main(model_path, input_path, expected_path, batch):
    device_id = 0
    check(acl.init(), "acl.init")
    check(acl.rt.set_device(device_id), "set_device")
    context, ret = acl.rt.create_context(device_id)
    check(ret, "create_context")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    run_mode, ret = acl.rt.get_run_mode()
    check(ret, "get_run_mode")
    assert run_mode == ACL_HOST

    model_id, ret = acl.mdl.load_from_file(model_path)
    check(ret, "load_from_file")
    desc = acl.mdl.create_desc()
    check(acl.mdl.get_desc(desc, model_id), "get_desc")
    num_inputs = acl.mdl.get_num_inputs(desc)
    num_outputs = acl.mdl.get_num_outputs(desc)
    batch_info, ret = acl.mdl.get_dynamic_batch(desc)
    check(ret, "get_dynamic_batch")
    assert batch in batch_info["batch"], batch_info
    mbatch_index, ret = acl.mdl.get_input_index_by_name(desc, DYNAMIC_TENSOR)
    check(ret, "get_input_index_by_name")

    input_dataset = acl.mdl.create_dataset()
    input_buffers = []
    for i in range(num_inputs):
        size = acl.mdl.get_input_size_by_index(desc, i)
        dev, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        buf = acl.create_data_buffer(dev, size)
        _, ret = acl.mdl.add_dataset_buffer(input_dataset, buf)
        check(ret, "add_dataset_buffer")
        input_buffers.append((dev, size, buf))
    output_dataset = acl.mdl.create_dataset()
    output_buffers = []
    for i in range(num_outputs):
        size = acl.mdl.get_output_size_by_index(desc, i)
        dev, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        buf = acl.create_data_buffer(dev, size)
        _, ret = acl.mdl.add_dataset_buffer(output_dataset, buf)
        check(ret, "add_dataset_buffer")
        output_buffers.append((dev, size, buf))

    data = np.ascontiguousarray(np.load(input_path))
    dims, ret = acl.mdl.get_input_dims(desc, 0)
    check(ret, "get_input_dims")
    assert dims["dims"][0] == -1 and acl.mdl.get_input_data_type(desc, 0) == ACL_FLOAT
    raw = data.tobytes()
    dev, size, _ = input_buffers[0]
    check(acl.rt.memcpy(dev, size, acl.util.bytes_to_ptr(raw), len(raw), ACL_MEMCPY_HOST_TO_DEVICE), "memcpy")
    check(
        acl.mdl.set_dynamic_batch_size(model_id, input_dataset, mbatch_index, batch), "set_dynamic_batch_size"
    )

    expected = np.load(expected_path)
    results = []
    # synchronous execute
    check(acl.mdl.execute(model_id, input_dataset, output_dataset), "execute")
    results.append(fetch(desc, output_buffers))
    # asynchronous execute on the stream
    check(acl.mdl.execute_async(model_id, input_dataset, output_dataset, stream), "execute_async")
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    results.append(fetch(desc, output_buffers))
    for result in results:
        assert result.shape == expected.shape, (result.shape, expected.shape)
        assert np.allclose(result, expected, rtol=1e-6, atol=1e-6)

    for dev, _, buf in input_buffers + output_buffers:
        check(acl.destroy_data_buffer(buf), "destroy_data_buffer")
        check(acl.rt.free(dev), "free")
    check(acl.mdl.destroy_dataset(input_dataset), "destroy_dataset")
    check(acl.mdl.destroy_dataset(output_dataset), "destroy_dataset")
    check(acl.mdl.unload(model_id), "unload")
    check(acl.mdl.destroy_desc(desc), "destroy_desc")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.destroy_context(context), "destroy_context")
    check(acl.rt.reset_device(device_id), "reset_device")
    check(acl.finalize(), "finalize")
    print("sample OK", results[0].shape)


def fetch(desc, output_buffers):
    dims, ret = acl.mdl.get_cur_output_dims(desc, 0)
    check(ret, "get_cur_output_dims")
    shape = tuple(dims["dims"])
    nbytes = int(np.prod(shape)) * 4
    host = bytes(nbytes)
    dev, _, _ = output_buffers[0]
    check(
        acl.rt.memcpy(acl.util.bytes_to_ptr(host), nbytes, dev, nbytes, ACL_MEMCPY_DEVICE_TO_HOST), "memcpy"
    )
    return np.frombuffer(host, dtype=np.float32).reshape(shape).copy()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
