"""The device, context and stream a lite program runs on, and the resources released before them."""

import acl
import lite_utils as utils
from lite_logger import log_info


class ResourceList:
    """Objects with a ``destroy()`` that must be released before the device is reset."""

    def __init__(self):
        self.items = []

    def register(self, resource):
        self.items.append(resource)

    def unregister(self, resource):
        if resource in self.items:
            self.items.remove(resource)

    def destroy(self):
        for resource in reversed(list(self.items)):
            resource.destroy()
        self.items.clear()


resource_list = ResourceList()


class LiteResource:
    def __init__(self, device_id=0):
        self.device_id = device_id
        self.context = None
        self.stream = None
        self.run_mode = None

    def init(self):
        log_info("init resource stage")
        utils.check_ret("acl.init", acl.init())
        utils.check_ret("acl.rt.set_device", acl.rt.set_device(self.device_id))
        self.context, ret = acl.rt.create_context(self.device_id)
        utils.check_ret("acl.rt.create_context", ret)
        self.stream, ret = acl.rt.create_stream()
        utils.check_ret("acl.rt.create_stream", ret)
        self.run_mode, ret = acl.rt.get_run_mode()
        utils.check_ret("acl.rt.get_run_mode", ret)
        count, ret = acl.rt.get_device_count()
        utils.check_ret("acl.rt.get_device_count", ret)
        log_info(
            "init resource success: device ", self.device_id, " of ", count, ", run mode ", self.run_mode
        )

    def release(self):
        """Explicit teardown (the CANN docs warn against acl.finalize in __del__)."""
        log_info("release resource stage")
        resource_list.destroy()
        if self.stream:
            utils.check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(self.stream))
            self.stream = None
        if self.context:
            utils.check_ret("acl.rt.destroy_context", acl.rt.destroy_context(self.context))
            self.context = None
        utils.check_ret("acl.rt.reset_device", acl.rt.reset_device(self.device_id))
        utils.check_ret("acl.finalize", acl.finalize())
