"""Asynchronous inference with events and callbacks, written only from the pyACL documentation.

In the style of Ascend's pyACL samples: nothing here knows about ge-plugin, so on an Ascend host it uses the
real ``acl``. Usage:
    python acl_async_sample.py MODEL.om INPUT.npy EXPECTED.npy BATCH
It loads a dynamic-batch model into memory it allocates itself (query_size + load_from_file_with_mem),
starts a callback thread (acl.util.start_thread + acl.rt.process_report), and for each of a few requests
queues on one stream: a start event, execute_async, an end event and a blocking callback that copies the
result back and checks it. A second stream waits on each request's end event (stream_wait_event) and copies
the output into pinned host memory. Then it waits on the events, reads their elapsed time and tears down.
"""

import sys

import acl
import numpy as np

# pyACL exports no constants
ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_CALLBACK_BLOCK = 1
ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
DYNAMIC_TENSOR = "ascend_mbatch_shape_data"
REQUESTS = 3


def check(ret, what):
    if ret != ACL_SUCCESS:
        raise RuntimeError(f"{what} failed: {ret}: {acl.get_recent_err_msg()}")


class CallbackThread:
    """The thread acl.rt.subscribe_report binds to the stream: it loops on acl.rt.process_report."""

    def __init__(self, context, timeout_ms=100):
        self.running = True
        self.thread_id, ret = acl.util.start_thread(self._run, [context, timeout_ms])
        check(ret, "acl.util.start_thread")

    def _run(self, args_list):
        context, timeout_ms = args_list
        check(acl.rt.set_context(context), "acl.rt.set_context (callback thread)")
        while self.running:
            acl.rt.process_report(timeout_ms)

    def stop(self):
        self.running = False
        check(acl.util.stop_thread(self.thread_id), "acl.util.stop_thread")


def main(model_path, input_path, expected_path, batch):
    device_id = 0
    check(acl.init(), "acl.init")
    check(acl.rt.set_device(device_id), "acl.rt.set_device")
    context, ret = acl.rt.create_context(device_id)
    check(ret, "acl.rt.create_context")
    stream, ret = acl.rt.create_stream()
    check(ret, "acl.rt.create_stream")
    copy_stream, ret = acl.rt.create_stream()
    check(ret, "acl.rt.create_stream")

    # model memory owned by the application
    work_size, weight_size, ret = acl.mdl.query_size(model_path)
    check(ret, "acl.mdl.query_size")
    work_ptr, ret = acl.rt.malloc(work_size, ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "acl.rt.malloc (work)")
    weight_ptr, ret = acl.rt.malloc(weight_size, ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "acl.rt.malloc (weight)")
    model_id, ret = acl.mdl.load_from_file_with_mem(model_path, work_ptr, work_size, weight_ptr, weight_size)
    check(ret, "acl.mdl.load_from_file_with_mem")
    desc = acl.mdl.create_desc()
    check(acl.mdl.get_desc(desc, model_id), "acl.mdl.get_desc")
    mbatch_index, ret = acl.mdl.get_input_index_by_name(desc, DYNAMIC_TENSOR)
    check(ret, "acl.mdl.get_input_index_by_name")

    def dataset(count, size_of):
        ds = acl.mdl.create_dataset()
        entries = []
        for i in range(count):
            size = size_of(desc, i)
            dev, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
            check(ret, "acl.rt.malloc")
            buf = acl.create_data_buffer(dev, size)
            _, ret = acl.mdl.add_dataset_buffer(ds, buf)
            check(ret, "acl.mdl.add_dataset_buffer")
            entries.append((dev, size, buf))
        return ds, entries

    input_dataset, inputs = dataset(acl.mdl.get_num_inputs(desc), acl.mdl.get_input_size_by_index)
    output_dataset, outputs = dataset(acl.mdl.get_num_outputs(desc), acl.mdl.get_output_size_by_index)

    data = np.ascontiguousarray(np.load(input_path))
    expected = np.load(expected_path)
    raw = data.tobytes()
    dev, size, _ = inputs[0]
    check(acl.rt.memcpy(dev, size, acl.util.bytes_to_ptr(raw), len(raw), ACL_MEMCPY_HOST_TO_DEVICE), "memcpy")
    check(
        acl.mdl.set_dynamic_batch_size(model_id, input_dataset, mbatch_index, batch), "set_dynamic_batch_size"
    )

    out_dev, _, _ = outputs[0]
    nbytes = expected.nbytes
    pinned, ret = acl.rt.malloc_host(nbytes)
    check(ret, "acl.rt.malloc_host")

    checked = []

    def post_process(user_data):
        request = user_data[0]
        host = bytes(nbytes)
        check(
            acl.rt.memcpy(acl.util.bytes_to_ptr(host), nbytes, out_dev, nbytes, ACL_MEMCPY_DEVICE_TO_HOST),
            "memcpy",
        )
        result = np.frombuffer(host, dtype=np.float32).reshape(expected.shape)
        checked.append((request, bool(np.allclose(result, expected, rtol=1e-6, atol=1e-6))))

    callbacks = CallbackThread(context)
    check(acl.rt.subscribe_report(callbacks.thread_id, stream), "acl.rt.subscribe_report")

    events = []
    for request in range(REQUESTS):
        start, ret = acl.rt.create_event()
        check(ret, "acl.rt.create_event")
        end, ret = acl.rt.create_event()
        check(ret, "acl.rt.create_event")
        events.append((start, end))
        check(acl.rt.record_event(start, stream), "acl.rt.record_event")
        check(acl.mdl.execute_async(model_id, input_dataset, output_dataset, stream), "acl.mdl.execute_async")
        check(acl.rt.record_event(end, stream), "acl.rt.record_event")
        check(
            acl.rt.launch_callback(post_process, [request], ACL_CALLBACK_BLOCK, stream),
            "acl.rt.launch_callback",
        )
        check(acl.rt.stream_wait_event(copy_stream, end), "acl.rt.stream_wait_event")
        check(
            acl.rt.memcpy_async(pinned, nbytes, out_dev, nbytes, ACL_MEMCPY_DEVICE_TO_HOST, copy_stream),
            "acl.rt.memcpy_async",
        )

    for start, end in events:
        check(acl.rt.synchronize_event(end), "acl.rt.synchronize_event")
        status, ret = acl.rt.query_event_status(end)
        check(ret, "acl.rt.query_event_status")
        assert status == ACL_EVENT_RECORDED_STATUS_COMPLETE, status
        elapsed_ms, ret = acl.rt.event_elapsed_time(start, end)
        check(ret, "acl.rt.event_elapsed_time")
        assert elapsed_ms >= 0.0, elapsed_ms
    check(acl.rt.synchronize_stream(stream), "acl.rt.synchronize_stream")
    check(acl.rt.synchronize_stream(copy_stream), "acl.rt.synchronize_stream")
    assert checked == [(request, True) for request in range(REQUESTS)], checked
    copied = np.frombuffer(acl.util.ptr_to_bytes(pinned, nbytes), dtype=np.float32).reshape(expected.shape)
    assert np.allclose(copied, expected, rtol=1e-6, atol=1e-6)

    check(acl.rt.unsubscribe_report(callbacks.thread_id, stream), "acl.rt.unsubscribe_report")
    callbacks.stop()
    for start, end in events:
        check(acl.rt.destroy_event(start), "acl.rt.destroy_event")
        check(acl.rt.destroy_event(end), "acl.rt.destroy_event")
    check(acl.rt.free_host(pinned), "acl.rt.free_host")
    for dev, _, buf in inputs + outputs:
        check(acl.destroy_data_buffer(buf), "acl.destroy_data_buffer")
        check(acl.rt.free(dev), "acl.rt.free")
    check(acl.mdl.destroy_dataset(input_dataset), "acl.mdl.destroy_dataset")
    check(acl.mdl.destroy_dataset(output_dataset), "acl.mdl.destroy_dataset")
    check(acl.mdl.unload(model_id), "acl.mdl.unload")
    check(acl.mdl.destroy_desc(desc), "acl.mdl.destroy_desc")
    check(acl.rt.free(work_ptr), "acl.rt.free (work)")
    check(acl.rt.free(weight_ptr), "acl.rt.free (weight)")
    check(acl.rt.destroy_stream(copy_stream), "acl.rt.destroy_stream")
    check(acl.rt.destroy_stream(stream), "acl.rt.destroy_stream")
    check(acl.rt.destroy_context(context), "acl.rt.destroy_context")
    check(acl.rt.reset_device(device_id), "acl.rt.reset_device")
    check(acl.finalize(), "acl.finalize")
    print(f"async sample OK: {REQUESTS} requests, callbacks in thread {callbacks.thread_id}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
