"""A picture the lite helpers pass around: a JPEG read from a file (host memory) or YUV in DVPP memory."""

import acl
import lite_constants as const
import lite_utils as utils
import numpy as np


class LiteImage:
    def __init__(
        self, data, width=0, height=0, align_width=0, align_height=0, size=0, memory=const.MEMORY_NORMAL
    ):
        if isinstance(data, str):  # a file: its bytes on the host
            self._bytes = np.fromfile(data, dtype=np.uint8).tobytes()
            self.size = len(self._bytes)
            self._data = 0
            self.memory = const.MEMORY_NORMAL
        else:  # a pointer to device memory the image owns
            self._bytes = None
            self._data = data
            self.size = size
            self.memory = memory
        self.width, self.height = width, height
        self.alignWidth, self.alignHeight = align_width, align_height

    def is_local(self):
        return self._bytes is not None

    def data(self):
        # the pointer into the bytes this image holds (they live as long as it does)
        return acl.util.bytes_to_ptr(self._bytes) if self._bytes is not None else self._data

    def copy_to_dvpp(self):
        """The same JPEG in DVPP memory, for JPEGD."""
        dev, ret = acl.media.dvpp_malloc(self.size)
        utils.check_ret("acl.media.dvpp_malloc", ret)
        run_mode, _ = acl.rt.get_run_mode()
        kind = (
            const.ACL_MEMCPY_HOST_TO_DEVICE
            if run_mode == const.ACL_HOST
            else const.ACL_MEMCPY_DEVICE_TO_DEVICE
        )
        utils.check_ret("acl.rt.memcpy", acl.rt.memcpy(dev, self.size, self.data(), self.size, kind))
        image = LiteImage(dev, self.width, self.height, 0, 0, self.size, const.MEMORY_DVPP)
        return image

    def to_host(self):
        """The picture's bytes, copied from DVPP memory."""
        host = bytes(self.size)
        run_mode, _ = acl.rt.get_run_mode()
        kind = (
            const.ACL_MEMCPY_DEVICE_TO_HOST
            if run_mode == const.ACL_HOST
            else const.ACL_MEMCPY_DEVICE_TO_DEVICE
        )
        utils.check_ret(
            "acl.rt.memcpy", acl.rt.memcpy(utils.host_ptr(host), self.size, self._data, self.size, kind)
        )
        return np.frombuffer(host, dtype=np.uint8)

    def destroy(self):
        if self.memory == const.MEMORY_DVPP and self._data:
            utils.check_ret("acl.media.dvpp_free", acl.media.dvpp_free(self._data))
            self._data = 0
