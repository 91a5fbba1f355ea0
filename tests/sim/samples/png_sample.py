"""A PNGD program in the style of Ascend's public pyACL image samples, written here from the pyACL reference.

Nothing in it knows about ge-plugin. Usage:
    python png_sample.py IMAGE.png OUT_DIR
It reads the PNG's size with dvpp_png_get_image_info, asks dvpp_png_predict_dec_size how much DVPP memory the
decode needs, decodes it with PNGD as the source's format (PIXEL_FORMAT_UNKNOWN) and as RGB888, and writes
each picture to OUT_DIR as a raw file named after its format (``rgb888.raw``) plus ``info.txt`` with its
width, height, strides and format, for the caller to check.
"""

import os
import sys

import acl
import numpy as np

ACL_SUCCESS = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
PIXEL_FORMAT_RGB_888 = 12
PIXEL_FORMAT_RGBA_8888 = 16
PIXEL_FORMAT_UNKNOWN = 10000


def check(ret, what):
    if ret != ACL_SUCCESS:
        raise RuntimeError(f"{what} failed: {ret}: {acl.get_recent_err_msg()}")


def align_up(value, align):
    return (value + align - 1) // align * align


def decode(channel, stream, png_dev, png_size, width, height, fmt, name, out_dir, info):
    """One PNGD decode into DVPP memory sized by the prediction; the picture copied back and saved."""
    size, ret = acl.media.dvpp_png_predict_dec_size(png_dev, png_size, fmt)
    check(ret, "dvpp_png_predict_dec_size")
    buffer, ret = acl.media.dvpp_malloc(size)
    check(ret, "dvpp_malloc")
    pixel_bytes = 4 if fmt in (PIXEL_FORMAT_RGBA_8888, PIXEL_FORMAT_UNKNOWN) else 3
    stride_w, stride_h = align_up(width, 128) * pixel_bytes, align_up(height, 16)
    desc = acl.media.dvpp_create_pic_desc()
    check(acl.media.dvpp_set_pic_desc_data(desc, buffer), "set_pic_desc_data")
    check(acl.media.dvpp_set_pic_desc_size(desc, size), "set_pic_desc_size")
    check(acl.media.dvpp_set_pic_desc_format(desc, fmt), "set_pic_desc_format")
    check(acl.media.dvpp_set_pic_desc_width(desc, width), "set_pic_desc_width")
    check(acl.media.dvpp_set_pic_desc_height(desc, height), "set_pic_desc_height")
    check(acl.media.dvpp_set_pic_desc_width_stride(desc, stride_w), "set_pic_desc_width_stride")
    check(acl.media.dvpp_set_pic_desc_height_stride(desc, stride_h), "set_pic_desc_height_stride")
    check(acl.media.dvpp_png_decode_async(channel, png_dev, png_size, desc, stream), "dvpp_png_decode_async")
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    check(acl.media.dvpp_get_pic_desc_ret_code(desc), "the decode's ret code")
    written = acl.media.dvpp_get_pic_desc_format(desc)
    host = np.zeros(size, dtype=np.uint8)
    check(
        acl.rt.memcpy(acl.util.numpy_to_ptr(host), size, buffer, size, ACL_MEMCPY_DEVICE_TO_HOST),
        "memcpy D2H",
    )
    host.tofile(os.path.join(out_dir, f"{name}.raw"))
    info.append(f"{name} {width} {height} {stride_w} {stride_h} {written}")
    check(acl.media.dvpp_destroy_pic_desc(desc), "destroy_pic_desc")
    check(acl.media.dvpp_free(buffer), "dvpp_free")


def main(image_path, out_dir):
    check(acl.init(), "acl.init")
    check(acl.rt.set_device(0), "set_device")
    context, ret = acl.rt.create_context(0)
    check(ret, "create_context")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    channel = acl.media.dvpp_create_channel_desc()
    check(acl.media.dvpp_create_channel(channel), "dvpp_create_channel")

    data = np.fromfile(image_path, dtype=np.uint8)
    width, height, components, ret = acl.media.dvpp_png_get_image_info(acl.util.numpy_to_ptr(data), data.size)
    check(ret, "dvpp_png_get_image_info")
    png_dev, ret = acl.media.dvpp_malloc(data.size)
    check(ret, "dvpp_malloc")
    check(
        acl.rt.memcpy(png_dev, data.size, acl.util.numpy_to_ptr(data), data.size, ACL_MEMCPY_HOST_TO_DEVICE),
        "memcpy H2D",
    )
    info = [f"image {width} {height} {components}"]
    decode(channel, stream, png_dev, data.size, width, height, PIXEL_FORMAT_UNKNOWN, "source", out_dir, info)
    decode(channel, stream, png_dev, data.size, width, height, PIXEL_FORMAT_RGB_888, "rgb888", out_dir, info)
    with open(os.path.join(out_dir, "info.txt"), "w") as fh:
        fh.write("\n".join(info) + "\n")

    check(acl.media.dvpp_free(png_dev), "dvpp_free")
    check(acl.media.dvpp_destroy_channel(channel), "dvpp_destroy_channel")
    check(acl.media.dvpp_destroy_channel_desc(channel), "dvpp_destroy_channel_desc")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.destroy_context(context), "destroy_context")
    check(acl.rt.reset_device(0), "reset_device")
    check(acl.finalize(), "acl.finalize")
    print("png sample OK", width, height, components)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
