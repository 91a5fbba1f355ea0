"""The baseline users would write by hand: the GE backend's published per-request path, in Python on pyACL.

Per request, in the order of the CANN GE backend's ``src/inference.cpp`` (hicann/triton-inference-server-ge-backend):
malloc the device input, synchronous H2D memcpy, malloc pinned host memory and device memory for
each output, create the datasets and data buffers, set the request's gear, synchronous ``acl.mdl.execute``,
synchronous D2H memcpy, copy from the pinned buffer into the response's own array, then free and destroy
everything. Requests of one ``execute`` call run one after another, as the GE backend runs requests it does
not combine. What it does *not* do is reload the model per request: it is loaded once, as anyone would.

It is a fair baseline, not a strawman: the same sim OM, config, batching and instances as the ge model it is
rendered from, and the same acl.json (its ``acl_json`` parameter, passed to ``acl.init`` as a user passes
theirs), so it runs on the same simulated device. The
request must already have a gear's shape (the bench sends sequences of a dims gear), so nothing is padded;
any other shape gets INVALID_ARG naming the gears, as the GE backend has no padding either.

``import acl`` is the real pyACL on an Ascend host and the ge-plugin simulator elsewhere, the way a user's
script runs under ``python -m ge_plugin.sim run``.
"""

import ctypes
import json
import os
import tempfile

import numpy as np
import triton_python_backend_utils as pb_utils

try:
    import acl
except ImportError:
    from ge_plugin import sim

    acl = sim.install()

# pyACL exports no constants; every pyACL program defines the few it uses.
ACL_SUCCESS = 0
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID = 145013
ACL_MEM_MALLOC_NORMAL_ONLY = 2  # what the GE backend asks for
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
MBATCH = "ascend_mbatch_shape_data"
NUMPY_TYPES = {0: np.float32, 1: np.float16, 2: np.int8, 3: np.int32, 4: np.uint8, 9: np.int64, 12: np.bool_}


class AclCallFailed(Exception):
    def __init__(self, call: str, ret: int):
        detail = (acl.get_recent_err_msg() or "").strip()
        super().__init__(f"{call} returned {ret}" + (f": {detail}" if detail else ""))
        self.ret = ret


def check(ret: int, call: str) -> None:
    if ret != ACL_SUCCESS:
        raise AclCallFailed(call, ret)


def _init(config_json: str) -> int:
    """``acl.init`` with the model's acl.json, written to a file as pyACL wants it."""
    if not config_json:
        return acl.init()
    fd, path = tempfile.mkstemp(prefix="naive-acl-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(config_json)
        return acl.init(path)
    finally:
        os.unlink(path)


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        om_path = os.path.join(
            args["model_repository"], args.get("model_version", "1"), params["om_model_path"]
        )
        self.device = int((params.get("device_ids") or "0").split(",")[0])
        self.output_names = [o["name"] for o in config["output"]]
        ret = _init(params.get("acl_json", ""))
        if ret != ACL_ERROR_REPEAT_INITIALIZE:
            check(ret, "acl.init")
        check(acl.rt.set_device(self.device), "acl.rt.set_device")
        self.context, ret = acl.rt.create_context(self.device)
        check(ret, "acl.rt.create_context")
        self.model_id, ret = acl.mdl.load_from_file(om_path)
        check(ret, "acl.mdl.load_from_file")
        self.desc = acl.mdl.create_desc()
        check(acl.mdl.get_desc(self.desc, self.model_id), "acl.mdl.get_desc")
        count = acl.mdl.get_num_inputs(self.desc)
        index, ret = acl.mdl.get_input_index_by_name(self.desc, MBATCH)
        self.mbatch = index if ret == ACL_SUCCESS else None
        self.input_names = [
            acl.mdl.get_input_name_by_index(self.desc, i) for i in range(count) if i != self.mbatch
        ]
        gear_count, ret = acl.mdl.get_input_dynamic_gear_count(self.desc, -1)
        self.dims_gears = ret == ACL_SUCCESS and gear_count > 0
        self.outputs = []
        for j in range(acl.mdl.get_num_outputs(self.desc)):
            name = acl.mdl.get_output_name_by_index(self.desc, j)
            if name in self.output_names:
                self.outputs.append((j, name, NUMPY_TYPES[acl.mdl.get_output_data_type(self.desc, j)]))

    def execute(self, requests: list) -> list:
        check(acl.rt.set_context(self.context), "acl.rt.set_context")
        responses = []
        for request in requests:
            try:
                responses.append(self._infer(request))
            except AclCallFailed as exc:
                code = (
                    pb_utils.TritonError.INVALID_ARG if exc.ret == 145013 else pb_utils.TritonError.INTERNAL
                )
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc), code)))
        return responses

    def _infer(self, request) -> object:
        arrays = [
            np.ascontiguousarray(pb_utils.get_input_tensor_by_name(request, name).as_numpy())
            for name in self.input_names
        ]
        device_ptrs: list[int] = []
        host_ptrs: list[int] = []
        buffers: list[int] = []
        datasets: list[int] = []
        try:
            inputs = acl.mdl.create_dataset()
            datasets.append(inputs)
            for array in arrays:
                ptr = self._malloc(array.nbytes, device_ptrs)
                check(
                    acl.rt.memcpy(
                        ptr, array.nbytes, array.ctypes.data, array.nbytes, ACL_MEMCPY_HOST_TO_DEVICE
                    ),
                    "acl.rt.memcpy",
                )
                self._add(inputs, ptr, array.nbytes, buffers)
            if self.mbatch is not None:
                size = acl.mdl.get_input_size_by_index(self.desc, self.mbatch)
                self._add(inputs, self._malloc(size, device_ptrs), size, buffers)
                if self.dims_gears:
                    dims = [d for array in arrays for d in array.shape]
                    ret = acl.mdl.set_input_dynamic_dims(
                        self.model_id, inputs, self.mbatch, {"dimCount": len(dims), "name": "", "dims": dims}
                    )
                    check(ret, "acl.mdl.set_input_dynamic_dims")
                else:
                    ret = acl.mdl.set_dynamic_batch_size(
                        self.model_id, inputs, self.mbatch, arrays[0].shape[0]
                    )
                    check(ret, "acl.mdl.set_dynamic_batch_size")
            outputs = acl.mdl.create_dataset()
            datasets.append(outputs)
            pending = []
            for j, name, dtype in self.outputs:
                info, ret = acl.mdl.get_cur_output_dims(self.desc, j)
                check(ret, "acl.mdl.get_cur_output_dims")
                shape = tuple(info["dims"])
                nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
                host, ret = acl.rt.malloc_host(nbytes)
                check(ret, "acl.rt.malloc_host")
                host_ptrs.append(host)
                ptr = self._malloc(nbytes, device_ptrs)
                self._add(outputs, ptr, nbytes, buffers)
                pending.append((name, shape, dtype, host, ptr, nbytes))
            check(acl.mdl.execute(self.model_id, inputs, outputs), "acl.mdl.execute")
            tensors = []
            for name, shape, dtype, host, ptr, nbytes in pending:
                check(acl.rt.memcpy(host, nbytes, ptr, nbytes, ACL_MEMCPY_DEVICE_TO_HOST), "acl.rt.memcpy")
                result = np.empty(shape, dtype)
                ctypes.memmove(result.ctypes.data, host, nbytes)  # the GE backend's std::copy
                tensors.append(pb_utils.Tensor(name, result))
            return pb_utils.InferenceResponse(output_tensors=tensors)
        finally:
            for buffer in buffers:
                acl.destroy_data_buffer(buffer)
            for dataset in datasets:
                acl.mdl.destroy_dataset(dataset)
            for ptr in device_ptrs:
                acl.rt.free(ptr)
            for host in host_ptrs:
                acl.rt.free_host(host)

    def _malloc(self, nbytes: int, owned: list) -> int:
        ptr, ret = acl.rt.malloc(nbytes, ACL_MEM_MALLOC_NORMAL_ONLY)
        check(ret, "acl.rt.malloc")
        owned.append(ptr)
        return ptr

    def _add(self, dataset: int, ptr: int, nbytes: int, buffers: list) -> None:
        buffer = acl.create_data_buffer(ptr, nbytes)
        if not buffer:
            raise AclCallFailed("acl.create_data_buffer", -1)
        buffers.append(buffer)
        _, ret = acl.mdl.add_dataset_buffer(dataset, buffer)
        check(ret, "acl.mdl.add_dataset_buffer")

    def finalize(self) -> None:
        acl.mdl.unload(self.model_id)
        acl.mdl.destroy_desc(self.desc)
        acl.rt.destroy_context(self.context)
        acl.rt.reset_device(self.device)
        acl.finalize()
