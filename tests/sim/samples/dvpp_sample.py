"""A DVPP program in the style of Ascend's public pyACL image samples, written here from the pyACL reference.

Nothing in it knows about ge-plugin. Usage:
    python dvpp_sample.py IMAGE.jpg OUT_DIR
It decodes the JPEG with JPEGD (NV12 and NV21), resizes it with VPC, crops, crops and pastes, crops a batch,
encodes the result back to JPEG, and writes every picture it made to OUT_DIR as raw YUV420SP files named
after the step (``resize_224x224.yuv``) plus ``info.txt`` with their strides, for the caller to check.
"""

import os
import sys

import acl
import numpy as np

ACL_SUCCESS = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_HOST = 1
PIXEL_FORMAT_YUV_SEMIPLANAR_420 = 1
PIXEL_FORMAT_YVU_SEMIPLANAR_420 = 2


def check(ret, what):
    if ret != ACL_SUCCESS:
        raise RuntimeError(f"{what} failed: {ret}: {acl.get_recent_err_msg()}")


def align_up(value, align):
    return (value + align - 1) // align * align


class Picture:
    """A picture in DVPP memory and the description that says what it is."""

    def __init__(self, width, height, align_w, align_h, fmt=PIXEL_FORMAT_YUV_SEMIPLANAR_420, size=None):
        self.width, self.height = width, height
        self.stride_w, self.stride_h = align_up(width, align_w), align_up(height, align_h)
        self.size = size or self.stride_w * self.stride_h * 3 // 2
        self.buffer, ret = acl.media.dvpp_malloc(self.size)
        check(ret, "dvpp_malloc")
        self.desc = acl.media.dvpp_create_pic_desc()
        self.describe(self.desc, fmt)

    def describe(self, desc, fmt):
        check(acl.media.dvpp_set_pic_desc_data(desc, self.buffer), "set_pic_desc_data")
        check(acl.media.dvpp_set_pic_desc_format(desc, fmt), "set_pic_desc_format")
        check(acl.media.dvpp_set_pic_desc_width(desc, self.width), "set_pic_desc_width")
        check(acl.media.dvpp_set_pic_desc_height(desc, self.height), "set_pic_desc_height")
        check(acl.media.dvpp_set_pic_desc_width_stride(desc, self.stride_w), "set_pic_desc_width_stride")
        check(acl.media.dvpp_set_pic_desc_height_stride(desc, self.stride_h), "set_pic_desc_height_stride")
        check(acl.media.dvpp_set_pic_desc_size(desc, self.size), "set_pic_desc_size")
        check(acl.media.dvpp_set_pic_desc_ret_code(desc, 0), "set_pic_desc_ret_code")

    def to_host(self):
        host = np.zeros(self.size, dtype=np.uint8)
        ptr = acl.util.numpy_to_ptr(host)
        check(acl.rt.memcpy(ptr, self.size, self.buffer, self.size, ACL_MEMCPY_DEVICE_TO_HOST), "memcpy")
        return host

    def release(self):
        if self.desc:
            check(acl.media.dvpp_destroy_pic_desc(self.desc), "destroy_pic_desc")
        check(acl.media.dvpp_free(self.buffer), "dvpp_free")


def save(out_dir, name, picture, info):
    picture.to_host().tofile(os.path.join(out_dir, f"{name}.yuv"))
    info.append(f"{name} {picture.width} {picture.height} {picture.stride_w} {picture.stride_h}")


def main(image_path, out_dir):
    check(acl.init(), "acl.init")
    check(acl.rt.set_device(0), "set_device")
    context, ret = acl.rt.create_context(0)
    check(ret, "create_context")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    run_mode, ret = acl.rt.get_run_mode()
    check(ret, "get_run_mode")

    channel = acl.media.dvpp_create_channel_desc()
    check(acl.media.dvpp_create_channel(channel), "dvpp_create_channel")
    assert acl.media.dvpp_get_channel_desc_channel_id(channel) > 0
    resize_config = acl.media.dvpp_create_resize_config()
    check(acl.media.dvpp_set_resize_config_interpolation(resize_config, 1), "set_resize_config_interpolation")
    assert acl.media.dvpp_get_resize_config_interpolation(resize_config) == 1

    # the JPEG: its header is read on the host, its data goes to DVPP memory
    jpeg = np.fromfile(image_path, dtype=np.uint8)
    host_ptr = acl.util.numpy_to_ptr(jpeg)
    width, height, components, ret = acl.media.dvpp_jpeg_get_image_info(host_ptr, jpeg.size)
    check(ret, "jpeg_get_image_info")
    out_size, ret = acl.media.dvpp_jpeg_predict_dec_size(host_ptr, jpeg.size, PIXEL_FORMAT_YUV_SEMIPLANAR_420)
    check(ret, "jpeg_predict_dec_size")
    jpeg_dev, ret = acl.media.dvpp_malloc(jpeg.size)
    check(ret, "dvpp_malloc")
    if run_mode == ACL_HOST:
        check(acl.rt.memcpy(jpeg_dev, jpeg.size, host_ptr, jpeg.size, ACL_MEMCPY_HOST_TO_DEVICE), "memcpy")
    else:
        acl.util.ptr_to_numpy(jpeg_dev, (jpeg.size,), 2)[:] = jpeg
    info = [f"image {width} {height} {components}"]

    decoded = {}
    for name, fmt in (("nv12", PIXEL_FORMAT_YUV_SEMIPLANAR_420), ("nv21", PIXEL_FORMAT_YVU_SEMIPLANAR_420)):
        picture = Picture(width, height, 128, 16, fmt, size=out_size)
        check(
            acl.media.dvpp_jpeg_decode_async(channel, jpeg_dev, jpeg.size, picture.desc, stream),
            "jpeg_decode",
        )
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")
        assert acl.media.dvpp_get_pic_desc_ret_code(picture.desc) == 0
        assert acl.media.dvpp_get_pic_desc_format(picture.desc) == fmt
        picture.width = acl.media.dvpp_get_pic_desc_width(picture.desc)
        picture.height = acl.media.dvpp_get_pic_desc_height(picture.desc)
        assert acl.media.dvpp_get_pic_desc_width_stride(picture.desc) == picture.stride_w
        assert acl.media.dvpp_get_pic_desc_height_stride(picture.desc) == picture.stride_h
        assert acl.media.dvpp_get_pic_desc_size(picture.desc) == out_size
        assert acl.media.dvpp_get_pic_desc_data(picture.desc) == picture.buffer
        save(out_dir, f"decode_{name}", picture, info)
        decoded[name] = picture
    source = decoded["nv12"]
    # VPC reads its input with 16 x 2 strides: describe the decoded picture so (its 128 x 16 strides are both)
    vpc_in = acl.media.dvpp_create_pic_desc()
    source.describe(vpc_in, PIXEL_FORMAT_YUV_SEMIPLANAR_420)

    resized = Picture(224, 224, 16, 2)
    check(
        acl.media.dvpp_vpc_resize_async(channel, vpc_in, resized.desc, resize_config, stream),
        "vpc_resize_async",
    )
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    save(out_dir, "resize_224x224", resized, info)

    crop_area = acl.media.dvpp_create_roi_config(0, 1, 0, 1)
    check(acl.media.dvpp_set_roi_config(crop_area, 10, 73, 4, 51), "set_roi_config")  # 64 x 48 at (10, 4)
    cropped = Picture(64, 48, 16, 2)
    check(acl.media.dvpp_vpc_crop_async(channel, vpc_in, cropped.desc, crop_area, stream), "vpc_crop_async")
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    save(out_dir, "crop_64x48", cropped, info)

    scaled = Picture(32, 24, 16, 2)
    check(
        acl.media.dvpp_vpc_crop_resize_async(channel, vpc_in, scaled.desc, crop_area, resize_config, stream),
        "vpc_crop_resize_async",
    )
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    save(out_dir, "crop_resize_32x24", scaled, info)

    # letterbox: the whole image into the middle of a 128 x 96 grey canvas
    canvas = Picture(128, 96, 16, 2)
    grey = np.full(canvas.size, 128, dtype=np.uint8)
    if run_mode == ACL_HOST:
        grey_ptr = acl.util.numpy_to_ptr(grey)
        check(
            acl.rt.memcpy(canvas.buffer, canvas.size, grey_ptr, canvas.size, ACL_MEMCPY_HOST_TO_DEVICE),
            "memcpy",
        )
    else:
        acl.util.ptr_to_numpy(canvas.buffer, (canvas.size,), 2)[:] = grey
    whole = acl.media.dvpp_create_roi_config(0, (source.width & ~1) - 1, 0, (source.height & ~1) - 1)
    paste_area = acl.media.dvpp_create_roi_config(0, 1, 0, 1)
    check(acl.media.dvpp_set_roi_config_left(paste_area, 32), "set_roi_config_left")
    check(acl.media.dvpp_set_roi_config_right(paste_area, 95), "set_roi_config_right")
    check(acl.media.dvpp_set_roi_config_top(paste_area, 16), "set_roi_config_top")
    check(acl.media.dvpp_set_roi_config_bottom(paste_area, 79), "set_roi_config_bottom")
    check(
        acl.media.dvpp_vpc_crop_and_paste_async(channel, vpc_in, canvas.desc, whole, paste_area, stream),
        "vpc_crop_and_paste_async",
    )
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    save(out_dir, "paste_128x96", canvas, info)

    # a batch: two crops of the one image, each into its own 32 x 32 picture
    sources = acl.media.dvpp_create_batch_pic_desc(1)
    source.describe(acl.media.dvpp_get_pic_desc(sources, 0), PIXEL_FORMAT_YUV_SEMIPLANAR_420)
    targets = acl.media.dvpp_create_batch_pic_desc(2)
    tiles = [Picture(32, 32, 16, 2) for _ in range(2)]
    for i, tile in enumerate(tiles):
        check(acl.media.dvpp_destroy_pic_desc(tile.desc), "destroy_pic_desc")
        tile.desc = 0
        tile.describe(acl.media.dvpp_get_pic_desc(targets, i), PIXEL_FORMAT_YUV_SEMIPLANAR_420)
    areas = [acl.media.dvpp_create_roi_config(0, 31, 0, 31), acl.media.dvpp_create_roi_config(32, 95, 32, 95)]
    out_batch, ret = acl.media.dvpp_vpc_batch_crop_async(channel, sources, [2], targets, areas, stream)
    check(ret, "vpc_batch_crop_async")
    assert out_batch == targets
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    for i, tile in enumerate(tiles):
        save(out_dir, f"batch_{i}_32x32", tile, info)

    # and back to a JPEG
    jpege_config = acl.media.dvpp_create_jpege_config()
    check(acl.media.dvpp_set_jpege_config_level(jpege_config, 90), "set_jpege_config_level")
    assert acl.media.dvpp_get_jpege_config_level(jpege_config) == 90
    enc_size, ret = acl.media.dvpp_jpeg_predict_enc_size(resized.desc, jpege_config)
    check(ret, "jpeg_predict_enc_size")
    enc_dev, ret = acl.media.dvpp_malloc(enc_size)
    check(ret, "dvpp_malloc")
    enc_len = np.array([enc_size], dtype=np.uint32)
    check(
        acl.media.dvpp_jpeg_encode_async(
            channel, resized.desc, enc_dev, acl.util.numpy_to_ptr(enc_len), jpege_config, stream
        ),
        "jpeg_encode_async",
    )
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    encoded = np.zeros(int(enc_len[0]), dtype=np.uint8)
    check(
        acl.rt.memcpy(
            acl.util.numpy_to_ptr(encoded), encoded.size, enc_dev, encoded.size, ACL_MEMCPY_DEVICE_TO_HOST
        ),
        "memcpy",
    )
    encoded.tofile(os.path.join(out_dir, "encoded.jpg"))

    with open(os.path.join(out_dir, "info.txt"), "w") as f:
        f.write("\n".join(info) + "\n")

    for roi in (crop_area, whole, paste_area, *areas):
        check(acl.media.dvpp_destroy_roi_config(roi), "destroy_roi_config")
    check(acl.media.dvpp_destroy_pic_desc(vpc_in), "destroy_pic_desc")
    check(acl.media.dvpp_destroy_batch_pic_desc(sources), "destroy_batch_pic_desc")
    check(acl.media.dvpp_destroy_batch_pic_desc(targets), "destroy_batch_pic_desc")
    for picture in (*decoded.values(), resized, cropped, scaled, canvas, *tiles):
        picture.release()
    check(acl.media.dvpp_free(jpeg_dev), "dvpp_free")
    check(acl.media.dvpp_free(enc_dev), "dvpp_free")
    check(acl.media.dvpp_destroy_jpege_config(jpege_config), "destroy_jpege_config")
    check(acl.media.dvpp_destroy_resize_config(resize_config), "destroy_resize_config")
    check(acl.media.dvpp_destroy_channel(channel), "dvpp_destroy_channel")
    check(acl.media.dvpp_destroy_channel_desc(channel), "dvpp_destroy_channel_desc")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.destroy_context(context), "destroy_context")
    check(acl.rt.reset_device(0), "reset_device")
    check(acl.finalize(), "finalize")
    print("dvpp sample OK", width, height)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
