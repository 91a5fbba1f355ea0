"""Classify JPEGs the way the public acllite samples do: DVPP decodes and resizes them on the device
(lite/lite_imageproc.py), the host turns YUV420SP into the model's RGB floats, the model runs at its 16 x 16
image-size gear. Nothing here knows about ge-plugin. Usage:
    python lite_dvpp_sample.py MODEL.om A.jpg B.jpg LOGITS.npy
"""

import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lite"))

import acl
import lite_constants as const
import lite_utils as utils
import numpy as np
from lite_image import LiteImage
from lite_imageproc import LiteImageProc
from lite_resource import LiteResource

SIZE = 16


def yuv_to_rgb(raw, width, height, stride_w, stride_h):
    """YUV420SP NV12 (full-range BT.601, as JPEG) -> RGB floats in [0, 1], CHW."""
    y = raw[: stride_w * stride_h].reshape(stride_h, stride_w)[:height, :width].astype(np.float32)
    uv = (
        raw[stride_w * stride_h :]
        .reshape(stride_h // 2, stride_w)[: height // 2, :width]
        .reshape(height // 2, width // 2, 2)
    )
    u = uv[..., 0].repeat(2, 0).repeat(2, 1).astype(np.float32) - 128
    v = uv[..., 1].repeat(2, 0).repeat(2, 1).astype(np.float32) - 128
    rgb = np.stack([y + 1.402 * v, y - 0.344136 * u - 0.714136 * v, y + 1.772 * u])
    return np.clip(np.rint(rgb), 0, 255) / 255.0


def classify(model_path, batch):
    model_id, ret = acl.mdl.load_from_file(model_path)
    utils.check_ret("acl.mdl.load_from_file", ret)
    desc = acl.mdl.create_desc()
    utils.check_ret("acl.mdl.get_desc", acl.mdl.get_desc(desc, model_id))
    datasets, buffers = [], []
    for count, size_of in (
        (acl.mdl.get_num_inputs, acl.mdl.get_input_size_by_index),
        (acl.mdl.get_num_outputs, acl.mdl.get_output_size_by_index),
    ):
        dataset = acl.mdl.create_dataset()
        for i in range(count(desc)):
            size = size_of(desc, i)
            dev, ret = acl.rt.malloc(size, const.ACL_MEM_MALLOC_HUGE_FIRST)
            utils.check_ret("acl.rt.malloc", ret)
            buf = acl.create_data_buffer(dev, size)
            acl.mdl.add_dataset_buffer(dataset, buf)
            buffers.append((dev, buf))
        datasets.append(dataset)
    data = np.ascontiguousarray(batch, dtype=np.float32).tobytes()
    run_mode, _ = acl.rt.get_run_mode()
    kind = (
        const.ACL_MEMCPY_HOST_TO_DEVICE if run_mode == const.ACL_HOST else const.ACL_MEMCPY_DEVICE_TO_DEVICE
    )
    first = buffers[0][0]
    size = acl.mdl.get_input_size_by_index(desc, 0)
    utils.check_ret("acl.rt.memcpy", acl.rt.memcpy(first, size, utils.host_ptr(data), len(data), kind))
    index, ret = acl.mdl.get_input_index_by_name(desc, const.DYNAMIC_TENSOR_NAME)
    utils.check_ret("acl.mdl.get_input_index_by_name", ret)
    utils.check_ret(
        "acl.mdl.set_dynamic_hw_size", acl.mdl.set_dynamic_hw_size(model_id, datasets[0], index, SIZE, SIZE)
    )
    utils.check_ret("acl.mdl.execute", acl.mdl.execute(model_id, datasets[0], datasets[1]))
    dims, ret = acl.mdl.get_cur_output_dims(desc, 0)
    shape = tuple(dims["dims"])
    host = bytes(int(np.prod(shape)) * 4)
    out_kind = (
        const.ACL_MEMCPY_DEVICE_TO_HOST if run_mode == const.ACL_HOST else const.ACL_MEMCPY_DEVICE_TO_DEVICE
    )
    out_dev = buffers[acl.mdl.get_num_inputs(desc)][0]
    utils.check_ret(
        "acl.rt.memcpy", acl.rt.memcpy(utils.host_ptr(host), len(host), out_dev, len(host), out_kind)
    )
    logits = np.frombuffer(host, dtype=np.float32).reshape(shape).copy()
    for dev, buf in buffers:
        acl.destroy_data_buffer(buf)
        utils.check_ret("acl.rt.free", acl.rt.free(dev))
    for dataset in datasets:
        acl.mdl.destroy_dataset(dataset)
    utils.check_ret("acl.mdl.unload", acl.mdl.unload(model_id))
    acl.mdl.destroy_desc(desc)
    return logits


def main(model_path, paths, out_path):
    resource = LiteResource()
    resource.init()
    try:
        dvpp = LiteImageProc(resource)
        batch = []
        for path in paths:
            jpeg = LiteImage(path)
            width, height, _, ret = acl.media.dvpp_jpeg_get_image_info(jpeg.data(), jpeg.size)
            utils.check_ret("acl.media.dvpp_jpeg_get_image_info", ret)
            jpeg.width, jpeg.height = width, height
            on_device = jpeg.copy_to_dvpp()
            yuv = dvpp.jpegd(on_device)
            small = dvpp.resize(yuv, SIZE, SIZE)
            batch.append(yuv_to_rgb(small.to_host(), SIZE, SIZE, small.alignWidth, small.alignHeight))
            for image in (on_device, yuv, small):
                image.destroy()
        np.save(out_path, classify(model_path, np.stack(batch)))
    finally:
        resource.release()
    print("lite dvpp sample OK")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:-1], sys.argv[-1])
