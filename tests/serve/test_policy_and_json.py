"""The front's pure parts: the policy on an inference header, strict JSON, content codings, the target and
header rules of a forwarded request."""

from __future__ import annotations

import gzip
import json
import re
import zlib

import pytest
from tritonclient.grpc import service_pb2

from ge_plugin.serve.access import Access, parse_restriction
from ge_plugin.serve.front import strict_json
from ge_plugin.serve.front.encoding import content_coding, inflate
from ge_plugin.serve.front.forward import Incoming, Rules, accept_encoding, origin_form, prepare
from ge_plugin.serve.policy import MAX_INPUT_BYTES, Refused, check_infer_header, check_infer_request


def one(**item) -> dict:
    return {"inputs": [{"name": "input_ids", "datatype": "INT64", **item}]}


# -- policy -----------------------------------------------------------------------------------------------


def test_policy_refuses_a_shape_its_data_does_not_fill():
    # the request that aborts tritonserver 2.51 in its HTTP front end (std::bad_alloc)
    with pytest.raises(Refused) as caught:
        check_infer_header(one(shape=[1, 1099511627776], data=[1, 2]))
    assert str(caught.value).startswith(
        "input 'input_ids': shape [1, 1099511627776] declares 8796093022208 bytes"
    )
    assert caught.value.status == 400


def test_policy_refuses_data_of_another_size_and_counts_nested_data():
    with pytest.raises(
        Refused, match=r"input 'input_ids': shape \[1, 3\] holds 3 elements but its data has 2"
    ):
        check_infer_header(one(shape=[1, 3], data=[1, 2]))
    check_infer_header(one(shape=[2, 2], data=[[1, 2], [3, 4]]))
    with pytest.raises(Refused, match="holds 4 elements but its data has 3"):
        check_infer_header(one(shape=[2, 2], data=[[1, 2], [3]]))


def test_policy_refuses_negative_and_non_integer_dims():
    with pytest.raises(Refused, match=r"shape \[1, -4\] has a negative dim"):
        check_infer_header(one(shape=[1, -4], data=[]))
    for shape in ([1.5], "1,2", [True], [[1]]):
        with pytest.raises(Refused, match="shape must be a list of integers"):
            check_infer_header(one(shape=shape, data=[1]))


def test_policy_refuses_more_than_the_limit_even_with_binary_data():
    header = one(shape=[1, MAX_INPUT_BYTES // 8 + 1], parameters={"binary_data_size": 16})
    with pytest.raises(Refused, match="more than the 4294967296 an input may have"):
        check_infer_header(header)
    check_infer_header(one(shape=[1, 16], parameters={"binary_data_size": 128}), max_input_bytes=128)


def test_policy_leaves_what_triton_refuses_itself_to_triton():
    headers = [{}, {"inputs": "x"}, {"inputs": [1]}, {"inputs": [{"name": "x"}]}]
    # not Refused (Triton answers each with its own 400), and nothing in them changed on the way
    assert [check_infer_header(header) for header in headers] == [None] * 4
    assert headers == [{}, {"inputs": "x"}, {"inputs": [1]}, {"inputs": [{"name": "x"}]}]


# -- strict JSON ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"inputs":[],"inputs":[{"shape":[1]}]}', 'the key "inputs" more than once'),
        (b'{"a":{"b":1,"b":2}}', 'the key "b" more than once'),
        (b'{"a":"\xff"}', "not UTF-8: byte 0xff at offset 6"),
        (b'{"a":"\xed\xa0\x80"}', "not UTF-8"),  # a surrogate encoded in UTF-8 (CESU)
        (b"\xef\xbb\xbf{}", "does not parse"),  # a BOM
        (b'{"a":1} {"a":2}', "Extra data"),
        (b'{"a":1}\x00', "Extra data"),
        (b'{"a":NaN}', "NaN, which is not a JSON number"),
        (b'{"a":-Infinity}', "-Infinity, which is not a JSON number"),
    ],
)
def test_strict_json_refuses_what_two_parsers_read_differently(body, message):
    with pytest.raises(Refused, match=re.escape(message)):
        strict_json.dumps(strict_json.loads(body))


def test_strict_json_refuses_what_has_no_json_form_on_the_way_out():
    with pytest.raises(Refused, match="does not fit a double"):
        strict_json.dumps(strict_json.loads(b'{"a":1e400}'))
    with pytest.raises(Refused, match="lone surrogate"):
        strict_json.dumps(strict_json.loads(b'{"a":"\\ud800"}'))


def test_strict_json_bounds_nesting_before_any_parser_recurses():
    limit = strict_json.MAX_DEPTH
    strict_json.loads(b"[" * limit + b"]" * limit)
    strict_json.loads(b'{"a":"' + b"[" * 10_000 + b'"}')  # brackets inside a string do not nest
    strict_json.loads(b"[" + b"[1],[2]," * 10_000 + b"[3]]")  # many brackets, two levels
    for deep in (
        b"[" * (limit + 1) + b"]" * (limit + 1),
        b'{"a":' * (limit + 1) + b"1" + b"}" * (limit + 1),
        b"[" * 1_000_000,  # would be a RecursionError in json, a SIGSEGV in a parser recursing in C
        b"[[]," * 200_000 + b"1" + b"]" * 200_000,
    ):
        with pytest.raises(Refused, match=f"nests deeper than {limit} levels"):
            strict_json.loads(deep)


def test_strict_json_round_trip_is_compact_utf8():
    value = strict_json.loads('{"name":"ü", "data":[1, 2.5, -3e-7, true, null]}'.encode())
    assert strict_json.dumps(value) == '{"name":"ü","data":[1,2.5,-3e-07,true,null]}'.encode()


# -- content codings --------------------------------------------------------------------------------------


def test_inflate_reads_what_tritonclient_sends():
    body = b'{"inputs":[]}'
    assert inflate(gzip.compress(body), "gzip", 100) == body
    assert inflate(zlib.compress(body), "deflate", 100) == body  # tritonclient's deflate is zlib's


def test_inflate_stops_at_the_limit_whatever_the_ratio():
    bomb = gzip.compress(b"\0" * (64 << 20))  # 64 MiB in ~64 KiB
    with pytest.raises(Refused, match="decodes to more than 1048576 bytes") as caught:
        inflate(bomb, "gzip", 1 << 20)
    assert caught.value.status == 413


@pytest.mark.parametrize(
    ("body", "coding", "message"),
    [
        (gzip.compress(b"{}")[:-3], "gzip", "cut short"),
        (gzip.compress(b"{}") + gzip.compress(b"[]"), "gzip", "bytes after its end"),
        (b"not compressed", "gzip", "does not decode"),
        (zlib.compress(b"{}"), "gzip", "does not decode"),
    ],
)
def test_inflate_refuses_what_is_not_one_whole_stream(body, coding, message):
    with pytest.raises(Refused, match=message):
        inflate(body, coding, 1 << 20)


def test_content_coding_names_what_triton_accepts():
    assert content_coding(None) is None
    assert content_coding(b"identity") is None
    assert content_coding(b"GZIP") == "gzip"
    for value in (b"br", b"gzip, gzip", b"x-gzip", b"compress"):
        with pytest.raises(Refused, match="only 'gzip', 'deflate' and 'identity' are supported") as caught:
            content_coding(value)
        assert caught.value.status == 415


# -- what is forwarded ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (b"/v2/models/m/infer", b"/v2/models/m/infer"),
        (b"http://127.0.0.1/v2/models/m/infer", b"/v2/models/m/infer"),
        (b"HTTP://example:80/v2/health/ready?x=1", b"/v2/health/ready?x=1"),
    ],
)
def test_targets_become_origin_form(target, expected):
    assert origin_form(target) == expected


@pytest.mark.parametrize(
    "target",
    [
        b"*",
        b"127.0.0.1:8000",
        b"ftp://x/v2",
        b"/v2//models/m/infer",
        b"/v2/models/../health/ready",
        b"/v2/models/m%2Finfer",
        b"/v2/models/m/infer#frag",
        b"http://user@x/v2/models/m/infer",
        b"/v2/models/\xff/infer",
    ],
)
def test_targets_that_cannot_be_classified_are_refused(target):
    with pytest.raises(Refused):
        origin_form(target)


def request(
    body: bytes, *headers: tuple[bytes, bytes], target=b"/v2/models/m/infer", method="POST"
) -> Incoming:
    return Incoming(method, target, list(headers), body)


def test_prepare_re_encodes_and_reframes():
    header = json.dumps(
        {
            "inputs": [
                {"name": "x", "shape": [1, 4], "datatype": "FP32", "parameters": {"binary_data_size": 16}}
            ]
        },
        indent=2,
    ).encode()
    incoming = request(
        gzip.compress(header + b"\1" * 16),
        (b"content-encoding", b"gzip"),
        (b"inference-header-content-length", str(len(header)).encode()),
        (b"accept-encoding", b"br, gzip;q=0.5"),
        (b"x-secret", b"1"),
        target=b"http://h/v2/models/m/versions/2/infer",
    )
    out = prepare(incoming, Rules())
    compact = json.dumps(json.loads(header), separators=(",", ":")).encode()
    assert out.json == compact and bytes(out.tail) == b"\1" * 16
    assert out.head == (
        b"POST /v2/models/m/versions/2/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Length: %d\r\nInference-Header-Content-Length: %d\r\nAccept-Encoding: gzip;q=0.5\r\n\r\n"
        % (len(compact) + 16, len(compact))
    )


def test_prepare_forwards_only_the_headers_it_was_told_triton_reads():
    # the operator's own restriction on inference: the front checks the key and writes it itself, and a key
    # header is never passed on by the forward pattern, even one that matches it
    mine = parse_restriction("inference:admin-key=s3cret")
    rules = Rules(
        access=Access("k" * 32, passed={"http": (mine,)}),
        forward_pattern=re.compile("^x-trace|admin-key", re.I),
    )
    out = prepare(
        request(
            b"",
            (b"admin-key", b"s3cret"),
            (b"ge-admin-key", b"k" * 32),
            (b"x-trace-id", b"7"),
            (b"x-other", b"no"),
            (b"content-length", b"0"),
        ),
        rules,
    )
    assert out.head.endswith(b"\r\nx-trace-id: 7\r\nadmin-key: s3cret\r\n\r\n")
    assert b"ge-admin-key" not in out.head


@pytest.mark.parametrize(
    ("incoming", "status", "message"),
    [
        (
            request(b"{}", (b"content-encoding", b"gzip"), (b"content-encoding", b"gzip")),
            400,
            "appears 2 times",
        ),
        (request(b"{}", (b"inference-header-content-length", b"9")), 400, "not a length within"),
        (request(b"{}", (b"inference-header-content-length", b"-1")), 400, "not a length within"),
        (
            request(b"{}", (b"inference-header-content-length", b"1"), target=b"/v2/repository/index"),
            400,
            "only for inference",
        ),
        (request(b"[]"), 400, "must be an object"),
        (request(b"x", method="GET", target=b"/v2/health/ready"), 400, "has no body"),
        (request(b"", method="PUT"), 405, "method PUT"),
        (request(b"{}", (b"accept-encoding", b"gzip;q=\x01")), 400, "does not parse"),
    ],
)
def test_prepare_refuses_what_it_cannot_read_one_way(incoming, status, message):
    with pytest.raises(Refused, match=re.escape(message)) as caught:
        prepare(incoming, Rules())
    assert caught.value.status == status


def test_prepare_checks_every_json_body_not_only_inference():
    with pytest.raises(Refused, match='key "parameters" more than once'):
        prepare(
            request(b'{"parameters":{},"parameters":{}}', target=b"/v2/repository/models/m/load"), Rules()
        )
    out = prepare(request(b' { "parameters" : { } } ', target=b"/v2/repository/models/m/load"), Rules())
    assert out.json == b'{"parameters":{}}'


def test_accept_encoding_keeps_what_triton_can_do():
    assert accept_encoding(b"gzip, deflate") == b"gzip, deflate"
    assert accept_encoding(b"br;q=1.0, identity;q=0.5") == b"identity;q=0.5"


# -- the same rule on a gRPC ModelInferRequest ------------------------------------------------------------


def grpc_request(shape, **tensor) -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="m")
    item = request.inputs.add(name="input_ids", datatype=tensor.pop("datatype", "INT64"), shape=shape)
    if "raw" in tensor:
        request.raw_input_contents.append(tensor.pop("raw"))
    for key, value in tensor.pop("parameters", {}).items():
        item.parameters[key].CopyFrom(value)
    for field, values in tensor.items():
        getattr(item.contents, field).extend(values)
    return request


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (grpc_request([1, 1 << 61], raw=b""), "declares 18446744073709551616 bytes"),
        (grpc_request([1, (1 << 61) + 2], raw=bytes(16)), "declares 18446744073709551632 bytes"),
        (grpc_request([1, -(1 << 63)], raw=b""), "has a negative dim"),
        (grpc_request([1, 4], raw=bytes(24)), "shape [1, 4] of INT64 is 32 bytes but its data has 24"),
        (grpc_request([1, 4], int64_contents=[1, 2, 3]), "shape [1, 4] holds 4 elements but its data has 3"),
        (
            grpc_request([2], datatype="FP16"),
            "shape [2] holds 2 elements but its data has 0",
        ),  # FP16: raw only
        (
            grpc_request(
                [1, 4],
                parameters={
                    "shared_memory_region": service_pb2.InferParameter(string_param="r"),
                    "shared_memory_byte_size": service_pb2.InferParameter(int64_param=8),
                },
            ),
            "shape [1, 4] of INT64 is 32 bytes but its data has 8",
        ),
        (
            grpc_request(
                [1, 4],
                raw=bytes(32),
                parameters={"shared_memory_offset": service_pb2.InferParameter(int64_param=-1)},
            ),
            "input 'input_ids': parameter 'shared_memory_offset' must be an integer from 0 to 2^64-1, not -1",
        ),
    ],
)
def test_the_rule_refuses_grpc_inputs_naming_them(request_, message):
    with pytest.raises(Refused) as caught:
        check_infer_request(request_)
    assert message in str(caught.value) and str(caught.value).startswith("input 'input_ids'")


def test_the_rule_reads_grpc_parameters_as_their_json_values():
    request = grpc_request([1, 4], raw=bytes(32))
    request.parameters["priority"].CopyFrom(service_pb2.InferParameter(string_param="high"))
    with pytest.raises(Refused, match="request parameter 'priority' must be an integer from 0 to 2\\^64-1"):
        check_infer_request(request)
    request.parameters["priority"].CopyFrom(service_pb2.InferParameter(uint64_param=3))
    request.parameters["custom"].CopyFrom(service_pb2.InferParameter())  # no value at all
    with pytest.raises(
        Refused, match="request parameter 'custom' must be a string, a number or a boolean, not None"
    ):
        check_infer_request(request)
    del request.parameters["custom"]
    output = request.outputs.add(name="out")
    output.parameters["classification"].CopyFrom(service_pb2.InferParameter(bool_param=True))
    with pytest.raises(Refused, match="output 'out': parameter 'classification'"):
        check_infer_request(request)
    del output.parameters["classification"]
    check_infer_request(request)


def test_an_http_binary_or_shared_memory_size_must_fill_the_shape():
    with pytest.raises(Refused, match=r"shape \[1, 16\] of INT64 is 128 bytes but its data has 64"):
        check_infer_header(one(shape=[1, 16], parameters={"binary_data_size": 64}))
    shm = {"shared_memory_region": "r", "shared_memory_byte_size": 64, "binary_data_size": 128}
    with pytest.raises(Refused, match="is 128 bytes but its data has 64"):
        check_infer_header(one(shape=[1, 16], parameters=shm))
    check_infer_header(one(shape=[1, 8], parameters=shm))
    check_infer_header(
        one(shape=[2], datatype="BYTES", parameters={"binary_data_size": 11})
    )  # lengths inside


def test_a_shape_of_millions_of_dims_is_refused_before_its_product():
    """math.prod over millions of dims near 2^63 would keep the front busy for hours, on either protocol."""
    huge = [(1 << 62) + 1] * 2_000_000
    with pytest.raises(Refused, match="input 'input_ids': shape has 2000000 dims, more than the 64"):
        check_infer_header(one(shape=huge))
    with pytest.raises(Refused, match="shape has 2000000 dims"):
        check_infer_request(grpc_request(huge, raw=b""))
