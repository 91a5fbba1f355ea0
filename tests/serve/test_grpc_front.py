"""The gRPC front against a stand-in upstream (conftest ``Standin``): what it forwards is what it parsed and
checked, re-encoded; what it refuses never leaves it; keys, metadata, streams, cancellation and the bounds of
grpc's own layer; and fuzzed messages, each either refused or forwarded holding to the rule."""

from __future__ import annotations

import gzip
import json
import struct
import threading
import time

import grpc
import numpy as np
import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tritonclient.grpc import model_config_pb2, service_pb2

from ge_plugin.serve.access import Access
from ge_plugin.serve.grpc_front import GrpcRules
from ge_plugin.serve.policy import ITEMSIZE, check_infer_request

SERVICE = "/inference.GRPCInferenceService/"
KEY = "k" * 32
ADMIN = ("triton-grpc-protocol-ge-admin-key", KEY)


def channel(front) -> grpc.Channel:
    return grpc.insecure_channel(f"127.0.0.1:{front.port}")


def call(front, method: str, message: bytes, **kwargs) -> bytes:
    return channel(front).unary_unary(SERVICE + method)(message, timeout=20, **kwargs)


def refused(front, method: str, message: bytes, **kwargs) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call(front, method, message, **kwargs)
    return caught.value


def infer(model: str = "m", shape=(1, 4), raw: bytes | None = None, datatype: str = "INT64", **fields):
    request = service_pb2.ModelInferRequest(model_name=model, id="r1", **fields)
    request.inputs.add(name="input_ids", datatype=datatype, shape=list(shape))
    request.raw_input_contents.append(np.arange(4, dtype=np.int64).tobytes() if raw is None else raw)
    return request


# -- forwarded as parsed and re-encoded -------------------------------------------------------------------


def test_a_good_request_goes_on_re_encoded_and_its_answer_comes_back(make_grpc_front, grpc_upstream):
    front = make_grpc_front()
    message = (
        infer().SerializeToString() + b"\xf8\x07\x01"
    )  # an unknown field 127: tritonserver never sees it
    answer = service_pb2.ModelInferResponse.FromString(call(front, "ModelInfer", message))
    assert (answer.model_name, answer.id) == ("m", "r1")
    (seen,) = grpc_upstream.seen
    assert seen.raw == infer().SerializeToString()


def test_garbage_is_refused_naming_the_message_it_is_not(make_grpc_front, grpc_upstream):
    error = refused(make_grpc_front(), "ModelInfer", b"\xff\xff\xff")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == "the ModelInfer request is not a ModelInferRequest message"
    assert grpc_upstream.seen == []


@pytest.mark.parametrize(
    ("shape", "raw", "message"),
    [
        (
            [1, 1 << 61],
            b"",
            "input 'input_ids': shape [1, 2305843009213693952] declares 18446744073709551616 bytes",
        ),
        ([1, (1 << 61) + 2], bytes(16), "input 'input_ids': shape [1, 2305843009213693954] declares"),
        ([1, -(1 << 63)], b"", "input 'input_ids': shape [1, -9223372036854775808] has a negative dim"),
        ([1, 4], bytes(16), "input 'input_ids': shape [1, 4] of INT64 is 32 bytes but its data has 16"),
    ],
)
def test_what_would_crash_a_stub_never_leaves_the_front(make_grpc_front, grpc_upstream, shape, raw, message):
    error = refused(make_grpc_front(), "ModelInfer", infer(shape=shape, raw=raw).SerializeToString())
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details().startswith(message), error.details()
    assert grpc_upstream.seen == []


def test_unknown_methods_are_unimplemented_and_not_forwarded(make_grpc_front, grpc_upstream):
    front = make_grpc_front()
    for path in ("/inference.GRPCInferenceService/Nope", "/grpc.health.v1.Health/Watch", "/x.Y/Z"):
        with pytest.raises(grpc.RpcError) as caught:
            channel(front).unary_unary(path)(b"", timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert grpc_upstream.seen == []


# -- keys and metadata --------------------------------------------------------------------------------------


def test_restricted_groups_need_the_key_which_the_front_writes_itself(make_grpc_front, grpc_upstream):
    front = make_grpc_front(rules=GrpcRules(access=Access(KEY, operator_key=True)))
    error = refused(front, "LogSettings", b"")
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "the logging API is restricted and it needs a key" in error.details()
    wrong = refused(front, "LogSettings", b"", metadata=[(ADMIN[0], "x" * 32)])
    assert "not the one it needs" in wrong.details() and KEY not in wrong.details()
    assert grpc_upstream.seen == []
    call(front, "LogSettings", b"", metadata=[ADMIN, ("x-other", "1")])
    call(front, "ServerLive", b"", metadata=[ADMIN])  # open: the key is not passed on
    logging, live = grpc_upstream.seen
    assert logging.metadata.get(ADMIN[0]) == KEY and "x-other" not in logging.metadata
    assert ADMIN[0] not in live.metadata


def test_only_metadata_the_forward_pattern_names_goes_on(make_grpc_front, grpc_upstream):
    import re

    rules = GrpcRules(forward_pattern=re.compile("^x-trace"))
    call(
        make_grpc_front(rules=rules),
        "ModelInfer",
        infer().SerializeToString(),
        metadata=[("x-trace-id", "7"), ("x-no", "1")],
    )
    (seen,) = grpc_upstream.seen
    assert seen.metadata.get("x-trace-id") == "7" and "x-no" not in seen.metadata


def test_a_load_is_checked_as_over_http(make_grpc_front, grpc_upstream, tmp_path):
    (tmp_path / "m" / "1").mkdir(parents=True)
    front = make_grpc_front(rules=GrpcRules(access=Access(KEY, operator_key=True, repository=tmp_path)))
    upload = service_pb2.RepositoryModelLoadRequest(model_name="m")
    upload.parameters["file:1/model.py"].bytes_param = b"import os"
    error = refused(front, "RepositoryModelLoad", upload.SerializeToString(), metadata=[ADMIN])
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED and "--allow-model-files" in error.details()
    config = model_config_pb2.ModelConfig(name="m", backend="ge")
    config.parameters["om_model_path"].string_value = "/etc/hostname"
    outside = service_pb2.RepositoryModelLoadRequest(model_name="m")
    outside.parameters["config"].string_param = json_format.MessageToJson(config)
    error = refused(front, "RepositoryModelLoad", outside.SerializeToString(), metadata=[ADMIN])
    assert "resolves outside the model's own folder" in error.details() and "hostname" not in error.details()
    assert grpc_upstream.seen == []
    config.parameters["om_model_path"].string_value = "model.om"
    inside = service_pb2.RepositoryModelLoadRequest(model_name="m")
    inside.parameters["config"].string_param = json_format.MessageToJson(config, indent=4)
    call(front, "RepositoryModelLoad", inside.SerializeToString(), metadata=[ADMIN])
    (seen,) = grpc_upstream.seen
    forwarded = service_pb2.RepositoryModelLoadRequest.FromString(seen.raw).parameters["config"].string_param
    assert json.loads(forwarded) == {
        "name": "m",
        "backend": "ge",
        "parameters": {"om_model_path": {"string_value": "model.om"}},
    }


# -- streams and cancellation -------------------------------------------------------------------------------


def test_a_stream_forwards_the_good_answers_every_response_and_refuses_the_bad_in_band(
    make_grpc_front, grpc_upstream
):
    front = make_grpc_front()
    bad = infer(shape=[1, 1 << 61], raw=b"")
    bad.id = "bad"
    good2 = infer()
    good2.id = "r2"
    stream = channel(front).stream_stream(SERVICE + "ModelStreamInfer")
    raw = [m.SerializeToString() for m in (infer(), bad, good2)]
    answers = [service_pb2.ModelStreamInferResponse.FromString(a) for a in stream(iter(raw), timeout=20)]
    ids = [a.infer_response.id for a in answers]
    assert ids.index("bad") < ids.index(
        "r2/1"
    )  # in order: the refusal comes before the next request's answers
    assert sorted(ids) == ["bad", "r1/1", "r1/2", "r2/1", "r2/2"]
    (refusal,) = [a for a in answers if a.error_message]
    assert refusal.error_message.startswith("input 'input_ids': shape [1, 2305843009213693952] declares")
    assert [r.id for r in grpc_upstream.requests("ModelStreamInfer")] == ["r1", "r2"]


@pytest.mark.parametrize("streaming", [False, True])
def test_a_client_that_goes_away_cancels_the_upstream_call(make_grpc_front, grpc_upstream, streaming):
    front = make_grpc_front()
    request = infer(model="slow").SerializeToString()
    if streaming:
        answers = channel(front).stream_stream(SERVICE + "ModelStreamInfer")(iter([request]), timeout=20)
        next(answers)  # the upstream call is open
        answers.cancel()
    else:
        future = channel(front).unary_unary(SERVICE + "ModelInfer").future(request, timeout=20)
        deadline = time.monotonic() + 10
        while not grpc_upstream.seen and time.monotonic() < deadline:
            time.sleep(0.01)
        future.cancel()
    assert grpc_upstream.cancelled.wait(10), "the upstream call was not cancelled"


def test_a_deadline_reaches_the_upstream_call(make_grpc_front, grpc_upstream):
    front = make_grpc_front()
    with pytest.raises(grpc.RpcError) as caught:
        channel(front).unary_unary(SERVICE + "ModelInfer")(
            infer(model="slow").SerializeToString(), timeout=0.5
        )
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert grpc_upstream.cancelled.wait(10)


# -- what grpc's own layer would chew on -------------------------------------------------------------------


def test_metadata_past_the_limit_is_refused_as_it_arrives(make_grpc_front, grpc_upstream):
    front = make_grpc_front()
    started = time.monotonic()
    error = refused(front, "ServerLive", b"", metadata=[("x-big", "a" * (32 << 20))])
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "metadata" in error.details()
    assert time.monotonic() - started < 5
    call(front, "ServerLive", b"", metadata=[("x-ok", "a" * 8000)])  # what tritonclients send passes
    assert len(grpc_upstream.seen) == 1


def test_messages_past_the_limit_are_refused_inflated_or_not(make_grpc_front, grpc_upstream):
    front = make_grpc_front(max_message_bytes=1 << 20)
    big = infer(shape=[1, 1 << 18], raw=bytes(8 << 18)).SerializeToString()  # 2 MiB of zeros
    assert len(gzip.compress(big)) < 10 << 10
    for compression in (None, grpc.Compression.Gzip):
        error = refused(front, "ModelInfer", big, compression=compression)
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
    assert grpc_upstream.seen == []
    call(front, "ModelInfer", infer().SerializeToString(), compression=grpc.Compression.Gzip)
    assert len(grpc_upstream.requests()) == 1


def test_a_large_request_is_checked_off_the_loop_while_small_ones_are_answered(
    make_grpc_front, grpc_upstream
):
    front = make_grpc_front()
    rows = 4 << 20  # 32 MiB of int64
    big = infer(shape=[1, rows], raw=np.zeros(rows, np.int64).tobytes()).SerializeToString()
    done = threading.Event()
    thread = threading.Thread(target=lambda: (call(front, "ModelInfer", big), done.set()))
    thread.start()
    for _ in range(5):
        call(front, "ModelInfer", infer().SerializeToString())
    thread.join(30)
    assert done.is_set() and len(grpc_upstream.requests()) == 6


# -- fuzzed -------------------------------------------------------------------------------------------------

DATATYPES = [*ITEMSIZE, "BYTES", "NOPE"]
dims = st.one_of(st.integers(-4, 64), st.integers(-(1 << 63), (1 << 63) - 1))


@st.composite
def infer_requests(draw) -> bytes:
    request = service_pb2.ModelInferRequest(model_name="m")
    for index in range(draw(st.integers(0, 3))):
        tensor = request.inputs.add(name=f"in{index}", datatype=draw(st.sampled_from(DATATYPES)))
        tensor.shape.extend(draw(st.lists(dims, max_size=4)))
        form = draw(st.sampled_from(["raw", "typed", "none"]))
        if form == "raw":
            request.raw_input_contents.append(draw(st.binary(max_size=96)))
        elif form == "typed":
            tensor.contents.int64_contents.extend(draw(st.lists(st.integers(-5, 5), max_size=8)))
    return request.SerializeToString()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=st.one_of(infer_requests(), st.binary(max_size=128)))
def test_fuzzed_messages_are_refused_or_forwarded_holding_to_the_rule(
    make_grpc_front, grpc_upstream, message
):
    front = _fuzz_front(make_grpc_front)
    before = len(grpc_upstream.seen)
    try:
        call(front, "ModelInfer", message)
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
        assert len(grpc_upstream.seen) == before
        return
    (forwarded,) = grpc_upstream.requests()[before:]
    check_infer_request(forwarded)  # what went on holds to the rule, parsed as tritonserver parses it
    for index, tensor in enumerate(forwarded.inputs):
        if index < len(forwarded.raw_input_contents) and tensor.datatype in ITEMSIZE:
            count = int(np.prod(list(tensor.shape), dtype=object))
            assert len(forwarded.raw_input_contents[index]) == count * ITEMSIZE[tensor.datatype]


_FUZZ_FRONTS: dict[int, object] = {}


def _fuzz_front(make):
    """One front for all of a test's examples (hypothesis calls the test body many times)."""
    key = id(make)
    if key not in _FUZZ_FRONTS:
        _FUZZ_FRONTS.clear()
        _FUZZ_FRONTS[key] = make()
    return _FUZZ_FRONTS[key]


def test_bytes_elements_are_counted_from_their_lengths(make_grpc_front, grpc_upstream):
    front = make_grpc_front()
    two = struct.pack("<I", 2) + b"ab" + struct.pack("<I", 0)
    call(front, "ModelInfer", infer(shape=[2], raw=two, datatype="BYTES").SerializeToString())
    error = refused(front, "ModelInfer", infer(shape=[3], raw=two, datatype="BYTES").SerializeToString())
    assert error.details() == "input 'input_ids': shape [3] holds 3 elements but its BYTES data has 2"
