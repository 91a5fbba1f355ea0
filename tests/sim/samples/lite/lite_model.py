"""An offline model the lite way: load once, keep one device buffer per input and output, feed numpy arrays,
pick the gear, execute, and hand the outputs back as numpy arrays."""

import acl
import lite_constants as const
import lite_utils as utils
import numpy as np
from lite_logger import log_info, log_warning
from lite_resource import resource_list


class LiteModel:
    # acllite-style programs ask the run mode when the class is defined, before acl.init
    _run_mode, _ = acl.rt.get_run_mode()

    def __init__(self, model_path, load_type=0):
        self._model_path = model_path
        self._model_id = None
        self._desc = None
        self._inputs = []  # (device pointer, size, data buffer) per model input
        self._outputs = []
        self._input_dataset = None
        self._output_dataset = None
        self._mbatch_index = None
        self._copy_out = (
            const.ACL_MEMCPY_DEVICE_TO_HOST
            if self._run_mode == const.ACL_HOST
            else const.ACL_MEMCPY_DEVICE_TO_DEVICE
        )
        self._load(load_type)
        self._describe()
        self._input_dataset = self._dataset(
            self._inputs, acl.mdl.get_num_inputs, acl.mdl.get_input_size_by_index
        )
        self._output_dataset = self._dataset(
            self._outputs, acl.mdl.get_num_outputs, acl.mdl.get_output_size_by_index
        )
        resource_list.register(self)
        log_info(
            "model ", model_path, " ready: ", len(self._inputs), " inputs, ", len(self._outputs), " outputs"
        )

    def _load(self, load_type):
        if load_type == 0:
            self._model_id, ret = acl.mdl.load_from_file(self._model_path)
            utils.check_ret("acl.mdl.load_from_file", ret)
        else:
            with open(self._model_path, "rb") as f:
                om = f.read()
            self._model_id, ret = acl.mdl.load_from_mem(utils.host_ptr(om), len(om))
            utils.check_ret("acl.mdl.load_from_mem", ret)
        self._desc = acl.mdl.create_desc()
        utils.check_ret("acl.mdl.get_desc", acl.mdl.get_desc(self._desc, self._model_id))

    def _describe(self):
        index, ret = acl.mdl.get_input_index_by_name(self._desc, const.DYNAMIC_TENSOR_NAME)
        if ret == const.ACL_SUCCESS:
            self._mbatch_index = index
            gears, ret = acl.mdl.get_dynamic_batch(self._desc)
            utils.check_ret("acl.mdl.get_dynamic_batch", ret)
            self.batches = list(gears["batch"])
        else:
            acl.get_recent_err_msg()  # a static model: the lookup failing is the answer
            self.batches = []
        self.input_shapes = []
        for i in range(acl.mdl.get_num_inputs(self._desc)):
            if i == self._mbatch_index:
                continue
            dims, ret = acl.mdl.get_input_dims_v2(self._desc, i)
            utils.check_ret("acl.mdl.get_input_dims_v2", ret)
            aipp, _, ret = acl.mdl.get_aipp_type(self._model_id, i)
            utils.check_ret("acl.mdl.get_aipp_type", ret)
            if aipp != const.ACL_DATA_WITHOUT_AIPP:
                log_warning("input ", dims["name"], " has AIPP; feed it images, not tensors")
            self.input_shapes.append(tuple(dims["dims"]))

    def _dataset(self, entries, count_of, size_of):
        dataset = acl.mdl.create_dataset()
        for i in range(count_of(self._desc)):
            size = size_of(self._desc, i)
            dev, ret = acl.rt.malloc(size, const.ACL_MEM_MALLOC_HUGE_FIRST)
            utils.check_ret("acl.rt.malloc", ret)
            buf = acl.create_data_buffer(dev, size)
            _, ret = acl.mdl.add_dataset_buffer(dataset, buf)
            utils.check_ret("acl.mdl.add_dataset_buffer", ret)
            entries.append((dev, size, buf))
        return dataset

    def _feed(self, arrays, batch):
        for (dev, size, _), array in zip(self._inputs, arrays):
            data = np.ascontiguousarray(array).tobytes()
            if len(data) > size:
                raise ValueError(f"an input of {len(data)} bytes does not fit the model's {size}")
            kind = (
                const.ACL_MEMCPY_HOST_TO_DEVICE
                if self._run_mode == const.ACL_HOST
                else const.ACL_MEMCPY_DEVICE_TO_DEVICE
            )
            utils.check_ret("acl.rt.memcpy", acl.rt.memcpy(dev, size, utils.host_ptr(data), len(data), kind))
        if self._mbatch_index is not None:
            ret = acl.mdl.set_dynamic_batch_size(
                self._model_id, self._input_dataset, self._mbatch_index, batch
            )
            utils.check_ret("acl.mdl.set_dynamic_batch_size", ret)

    def execute(self, arrays, batch=None):
        """The outputs for ``arrays`` (one per data input), run synchronously."""
        self._feed(arrays, batch or arrays[0].shape[0])
        utils.check_ret(
            "acl.mdl.execute", acl.mdl.execute(self._model_id, self._input_dataset, self._output_dataset)
        )
        return self._fetch()

    def execute_async(self, arrays, stream, batch=None):
        """The same, queued on ``stream`` and synchronized."""
        self._feed(arrays, batch or arrays[0].shape[0])
        ret = acl.mdl.execute_async(self._model_id, self._input_dataset, self._output_dataset, stream)
        utils.check_ret("acl.mdl.execute_async", ret)
        utils.check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
        return self._fetch()

    def _fetch(self):
        results = []
        for j in range(acl.mdl.get_dataset_num_buffers(self._output_dataset)):
            dims, ret = acl.mdl.get_cur_output_dims(self._desc, j)
            utils.check_ret("acl.mdl.get_cur_output_dims", ret)
            dtype = np.dtype(const.NUMPY_TYPES[acl.mdl.get_output_data_type(self._desc, j)])
            shape = tuple(dims["dims"])
            nbytes = int(np.prod(shape)) * dtype.itemsize
            buf = acl.mdl.get_dataset_buffer(self._output_dataset, j)
            dev, size = acl.get_data_buffer_addr(buf), acl.get_data_buffer_size(buf)
            if nbytes > size:
                raise RuntimeError(f"output {j} has {nbytes} bytes, its buffer {size}")
            host = bytes(nbytes)
            ret = acl.rt.memcpy(utils.host_ptr(host), nbytes, dev, nbytes, self._copy_out)
            utils.check_ret("acl.rt.memcpy", ret)
            results.append(np.frombuffer(host, dtype=dtype).reshape(shape).copy())
        return results

    def destroy(self):
        for dataset, entries in ((self._input_dataset, self._inputs), (self._output_dataset, self._outputs)):
            for dev, _, buf in entries:
                utils.check_ret("acl.destroy_data_buffer", acl.destroy_data_buffer(buf))
                utils.check_ret("acl.rt.free", acl.rt.free(dev))
            entries.clear()
            if dataset:
                utils.check_ret("acl.mdl.destroy_dataset", acl.mdl.destroy_dataset(dataset))
        self._input_dataset = self._output_dataset = None
        if self._model_id is not None:
            utils.check_ret("acl.mdl.unload", acl.mdl.unload(self._model_id))
            self._model_id = None
        if self._desc:
            utils.check_ret("acl.mdl.destroy_desc", acl.mdl.destroy_desc(self._desc))
            self._desc = None
        resource_list.unregister(self)
        log_info("model ", self._model_path, " released")
