"""Image processing on the device's DVPP the lite way: one channel, JPEGD into YUV420SP, VPC resize and
letterbox (crop and paste). Written here in the style of acllite's image processing class."""

import acl
import lite_constants as const
import lite_utils as utils
from lite_image import LiteImage
from lite_resource import resource_list


def align_up(value, align):
    return (value + align - 1) // align * align


def yuv420sp_size(width, height):
    return width * height * 3 // 2


class LiteImageProc:
    def __init__(self, resource):
        self._stream = resource.stream
        self._channel = acl.media.dvpp_create_channel_desc()
        utils.check_ret("acl.media.dvpp_create_channel", acl.media.dvpp_create_channel(self._channel))
        self._resize_config = acl.media.dvpp_create_resize_config()
        self._jpege_config = acl.media.dvpp_create_jpege_config()
        utils.check_ret(
            "acl.media.dvpp_set_jpege_config_level",
            acl.media.dvpp_set_jpege_config_level(self._jpege_config, 100),
        )
        resource_list.register(self)

    def _pic_desc(self, data, width, height, stride_w, stride_h, size):
        desc = acl.media.dvpp_create_pic_desc()
        acl.media.dvpp_set_pic_desc_data(desc, data)
        acl.media.dvpp_set_pic_desc_format(desc, const.PIXEL_FORMAT_YUV_SEMIPLANAR_420)
        acl.media.dvpp_set_pic_desc_width(desc, width)
        acl.media.dvpp_set_pic_desc_height(desc, height)
        acl.media.dvpp_set_pic_desc_width_stride(desc, stride_w)
        acl.media.dvpp_set_pic_desc_height_stride(desc, stride_h)
        acl.media.dvpp_set_pic_desc_size(desc, size)
        return desc

    def jpegd(self, image):
        """A JPEG in DVPP memory -> YUV420SP (strides 128 x 16)."""
        size, ret = acl.media.dvpp_jpeg_predict_dec_size(
            image.data(), image.size, const.PIXEL_FORMAT_YUV_SEMIPLANAR_420
        )
        utils.check_ret("acl.media.dvpp_jpeg_predict_dec_size", ret)
        out, ret = acl.media.dvpp_malloc(size)
        utils.check_ret("acl.media.dvpp_malloc", ret)
        stride_w, stride_h = align_up(image.width, 128), align_up(image.height, 16)
        desc = self._pic_desc(out, image.width, image.height, stride_w, stride_h, size)
        ret = acl.media.dvpp_jpeg_decode_async(self._channel, image.data(), image.size, desc, self._stream)
        utils.check_ret("acl.media.dvpp_jpeg_decode_async", ret)
        utils.check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(self._stream))
        width, height = acl.media.dvpp_get_pic_desc_width(desc), acl.media.dvpp_get_pic_desc_height(desc)
        acl.media.dvpp_destroy_pic_desc(desc)
        return LiteImage(out, width, height, stride_w, stride_h, size, const.MEMORY_DVPP)

    def resize(self, image, width, height):
        """YUV420SP -> YUV420SP of ``width`` x ``height`` (strides 16 x 2)."""
        in_desc = self._pic_desc(
            image.data(), image.width, image.height, image.alignWidth, image.alignHeight, image.size
        )
        stride_w, stride_h = align_up(width, 16), align_up(height, 2)
        size = yuv420sp_size(stride_w, stride_h)
        out, ret = acl.media.dvpp_malloc(size)
        utils.check_ret("acl.media.dvpp_malloc", ret)
        out_desc = self._pic_desc(out, width, height, stride_w, stride_h, size)
        ret = acl.media.dvpp_vpc_resize_async(
            self._channel, in_desc, out_desc, self._resize_config, self._stream
        )
        utils.check_ret("acl.media.dvpp_vpc_resize_async", ret)
        utils.check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(self._stream))
        acl.media.dvpp_destroy_pic_desc(in_desc)
        acl.media.dvpp_destroy_pic_desc(out_desc)
        return LiteImage(out, width, height, stride_w, stride_h, size, const.MEMORY_DVPP)

    def destroy(self):
        if self._channel:
            acl.media.dvpp_destroy_channel(self._channel)
            acl.media.dvpp_destroy_channel_desc(self._channel)
            acl.media.dvpp_destroy_resize_config(self._resize_config)
            acl.media.dvpp_destroy_jpege_config(self._jpege_config)
            self._channel = None
        resource_list.unregister(self)
