"""ge-plugin's gRPC front before the real tritonserver 2.51: the requests that crashed a model's Python stub
over gRPC, and every request whose tensors do not hold together, are answered by the front naming the input;
tritonserver never sees them, no stub dies and the model serves on. Stock clients (tritonclient.grpc with and
without compression, grpc's own health service) are answered through it; a 100 MiB metadata value is refused
at once. The session server runs as ``ge-plugin serve`` does: the front on the gRPC port, tritonserver's
endpoint on a private Unix socket."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

pytestmark = pytest.mark.e2e

LLAMA = "llama_e2e"  # input_ids int64 [batch, -1] (sequence gears up to 64), logits out
IDENTITY = "identity_e2e"  # INPUT0 fp32 [batch, 16]
ROWS = np.arange(32, dtype=np.float32).reshape(2, 16)
#: what crashed the stub over gRPC: tritonserver's byte size of each wraps to exactly the bytes sent
CRASHING = {
    "[1, 2^61], no bytes": ([1, 1 << 61], b""),
    "[1, 2^61 + 2], 16 bytes": ([1, (1 << 61) + 2], bytes(16)),
    "[1, -2^63], no bytes": ([1, -(1 << 63)], b""),
}


def stub(server) -> service_pb2_grpc.GRPCInferenceServiceStub:
    return service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_url))


def request(model: str, name: str, datatype: str, shape, raw: bytes | None = None, **contents) -> bytes:
    message = service_pb2.ModelInferRequest(model_name=model, id="r1")
    tensor = message.inputs.add(name=name, datatype=datatype, shape=shape)
    if raw is not None:
        message.raw_input_contents.append(raw)
    for field, values in contents.items():
        getattr(tensor.contents, field).extend(values)
    return message


def good_llama() -> service_pb2.ModelInferRequest:
    return request(LLAMA, "input_ids", "INT64", [1, 4], np.arange(4, dtype=np.int64).tobytes())


def assert_llama_serves(server) -> None:
    """tritonserver alive and a stock client's request answered."""
    assert server.triton.process.poll() is None, server.log_tail()
    logits = server.infer("grpc", LLAMA, {"input_ids": np.arange(6, dtype=np.int64).reshape(1, 6)})["logits"]
    assert logits.shape == (1, 6, 32000)


def refusal(call, message, **kwargs) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call(message, timeout=30, **kwargs)
    return caught.value


# -- what crashed a stub ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(CRASHING))
def test_shapes_that_crashed_the_stub_are_refused_over_model_infer(server, case):
    """On main these reached tritonserver, passed its wrapping byte-size check, and the stub aborted
    ("array is too big", "negative dimensions are not allowed"): INTERNAL "Stub process is not healthy"."""
    shape, raw = CRASHING[case]
    stubs = server.stub_pids()
    refused = server.metrics().total("ge_serve_grpc_refused_total")
    error = refusal(stub(server).ModelInfer, request(LLAMA, "input_ids", "INT64", shape, raw))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert error.details().startswith("input 'input_ids': shape [1, "), error.details()
    assert_llama_serves(server)
    assert server.stub_pids() == stubs, "a stub died"
    assert server.metrics().total("ge_serve_grpc_refused_total") == refused + 1  # counted on the metrics port


def test_shapes_that_crashed_the_stub_are_refused_in_a_stream_which_goes_on(server):
    """ModelStreamInfer: each refusal is answered in the stream (``error_message``, as tritonserver answers a
    stream request that fails) and the good requests around them are answered on the same stream."""
    stubs = server.stub_pids()
    sent = [good_llama()]
    for number, (shape, raw) in enumerate(CRASHING.values()):
        bad = request(LLAMA, "input_ids", "INT64", shape, raw)
        bad.id = f"bad{number}"
        sent.append(bad)
    sent.append(good_llama())
    answers = list(stub(server).ModelStreamInfer(iter(sent), timeout=60))
    refused = [a for a in answers if a.error_message]
    served = [a for a in answers if not a.error_message]
    assert [a.infer_response.id for a in refused] == ["bad0", "bad1", "bad2"]
    assert all(a.error_message.startswith("input 'input_ids': shape [1, ") for a in refused), refused
    assert len(served) == 2 and all(a.infer_response.outputs[0].name == "logits" for a in served)
    assert server.stub_pids() == stubs, "a stub died"


# -- tensors that do not hold together: never sent on ------------------------------------------------------


def _bytes(*items: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(item)) + item for item in items)


#: (request, the start of the front's message): tritonserver answers most of these itself too, in its own
#: words; the front's words show it never got them
MALFORMED = {
    "a negative dim": (
        request(IDENTITY, "INPUT0", "FP32", [1, -16], bytes(64)),
        "input 'INPUT0': shape [1, -16] has a negative dim",
    ),
    "a product past 2^64": (
        request(IDENTITY, "INPUT0", "FP32", [1 << 32, 1 << 32], b""),
        "input 'INPUT0': shape [4294967296, 4294967296] declares 73786976294838206464 bytes",
    ),
    "raw bytes short of the shape": (
        request(IDENTITY, "INPUT0", "FP32", [1, 16], bytes(60)),
        "input 'INPUT0': shape [1, 16] of FP32 is 64 bytes but its data has 60",
    ),
    "raw bytes past the shape": (
        request(IDENTITY, "INPUT0", "FP32", [1, 16], bytes(68)),
        "input 'INPUT0': shape [1, 16] of FP32 is 64 bytes but its data has 68",
    ),
    "typed contents short of the shape": (
        request(IDENTITY, "INPUT0", "FP32", [1, 16], fp32_contents=[1.0] * 15),
        "input 'INPUT0': shape [1, 16] holds 16 elements but its data has 15",
    ),
    "typed contents of another datatype": (
        request(IDENTITY, "INPUT0", "FP32", [1, 16], int_contents=[1] * 16),
        "input 'INPUT0': shape [1, 16] holds 16 elements but its data has 0",
    ),
    "BYTES elements fewer than the shape": (
        request(IDENTITY, "INPUT0", "BYTES", [3], _bytes(b"ab", b"c")),
        "input 'INPUT0': shape [3] holds 3 elements but its BYTES data has 2",
    ),
    "a BYTES element past the data's end": (
        request(IDENTITY, "INPUT0", "BYTES", [1], struct.pack("<I", 1 << 30) + b"xy"),
        "input 'INPUT0': BYTES element 0 claims 1073741824 bytes past the data's end",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_tensors_that_do_not_hold_together_never_reach_tritonserver(server, case):
    message, expected = MALFORMED[case]
    error = refusal(stub(server).ModelInfer, message)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details().startswith(expected), error.details()
    assert np.array_equal(server.infer("grpc", IDENTITY, {"INPUT0": ROWS})["OUTPUT0"], ROWS)


# -- what grpc's own layer would chew on -------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_100_mib_metadata_value_is_refused_at_once_and_tritonserver_stays_idle(server):
    """On main tritonserver's gRPC layer spent over 45 s of a core on it, answering nothing."""
    value = "a" * (100 << 20)
    before = cpu_seconds(server.triton.process.pid)
    started = time.monotonic()
    error = refusal(stub(server).ServerLive, service_pb2.ServerLiveRequest(), metadata=[("x-big", value)])
    took = time.monotonic() - started
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
    assert "metadata" in error.details()
    assert took < 2.0, f"refused after {took:.2f} s"
    assert cpu_seconds(server.triton.process.pid) - before < 0.5
    assert stub(server).ServerLive(service_pb2.ServerLiveRequest(), timeout=10).live


# -- the clients users bring -------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [None, "gzip", "deflate"])
def test_tritonclient_grpc_with_and_without_compression(server, compression):
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        tensor = grpcclient.InferInput("INPUT0", [2, 16], "FP32")
        tensor.set_data_from_numpy(ROWS)
        result = client.infer(IDENTITY, [tensor], compression_algorithm=compression)
        assert np.array_equal(result.as_numpy("OUTPUT0"), ROWS)
        assert client.is_server_live() and client.is_model_ready(IDENTITY)
        assert client.get_model_metadata(IDENTITY).inputs[0].name == "INPUT0"
        assert client.get_server_metadata().version == "2.51.0"
    finally:
        client.close()


def test_grpcs_own_health_service_answers_through_the_front(server):
    channel = grpc.insecure_channel(server.grpc_url)
    check = channel.unary_unary("/grpc.health.v1.Health/Check")
    assert check(b"", timeout=10) == b"\x08\x01"  # HealthCheckResponse{status: SERVING}
    with pytest.raises(grpc.RpcError) as caught:
        channel.unary_unary("/grpc.health.v1.Health/Watch")(b"", timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_a_taken_grpc_port_stops_the_start_naming_it(triton_work_dir, tmp_path):
    import socket

    from ge_plugin.errors import ServeError
    from ge_plugin.serve import ServerOptions, TritonServer, free_port

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        empty = tmp_path / "empty"
        empty.mkdir()
        options = ServerOptions(
            repository=empty, http_port=free_port(), grpc_port=port, metrics_port=free_port(),
            work_dir=triton_work_dir, model_control_mode="explicit",
        )  # fmt: skip
        with (
            open(tmp_path / "log", "wb") as log,
            TritonServer(options, stdout=log, stderr=log) as server,
            pytest.raises(
                ServeError, match=f"the gRPC front exited .* before it listened on 127.0.0.1:{port}"
            ),
        ):
            server.wait_ready(timeout=60)
        assert server.process.poll() is not None
    assert (
        "Failed to bind" in (tmp_path / "log").read_text()
        or "cannot listen" in (tmp_path / "log").read_text()
    )
