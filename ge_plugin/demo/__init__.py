"""``make demo``: from ONNX to answers served by tritonserver with the ``ge`` backend, on the simulator.

The steps are the ones a user follows (docs/serving.md): example ONNX models, sim OM files built with ATC's
flags, the model repository rendered from the specs, tritonserver, then real Triton clients over HTTP and
gRPC. The demo checks its own answers (the tiny LLaMA counts: the next token after ``n`` is ``n + 1``;
BERT must equal onnxruntime; the generating LLaMA streams the tokens 12 back, and its chat answer through the
OpenAI endpoint is the tokenizer's text of those tokens; the CNN that takes JPEGs must answer as onnxruntime
does on Pillow's decode and resize, within the pixel tolerance) and exits non-zero when they are wrong.

Everything the demo needs ships in the package, so that ``pip install "ge-plugin[sim,serve]"`` then
``ge-plugin demo`` works in an empty folder: the specs are ``ge_plugin/demo/specs/`` (byte for byte the
checkout's ``specs/``, which a test checks) and the models are built by ``ge_plugin.models``. The demo
writes only under its output folder, laid out like the checkout: ``specs/`` (a copy of a spec that is
missing), ``build/models/``, ``model_repository/`` and ``build/triton/``.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import attrs
import numpy as np
from numpy.typing import NDArray

from ge_plugin._files import write_atomic
from ge_plugin.atc.command import atc_args, atc_command
from ge_plugin.atc.flags import parse_args
from ge_plugin.atc.simbuild import build
from ge_plugin.demo import tokenizer
from ge_plugin.errors import DemoFailed
from ge_plugin.models import write_demo_models
from ge_plugin.promtext import scrape
from ge_plugin.render import write_repository
from ge_plugin.serve import ServerOptions, TritonServer, free_port
from ge_plugin.spec import load_spec
from ge_plugin.spec.model import ModelSpec
from ge_plugin.text.demo import write_demo_tokenizer

PROMPTS = ("1 2 3 4 5 6 7 8", "41 hello 99 world 7")

#: the packaged specs, in the order ``load_specs(["specs"])`` reads the checkout's copies
SPEC_FILES = ("bert.yaml", "cnn_jpeg.yaml", "llama.yaml", "llama_generate.yaml", "llama_generate_layers.yaml")


def packaged_spec_text(name: str) -> bytes:
    """The bytes of one packaged demo spec (``ge_plugin/demo/specs/NAME``)."""
    return (resources.files(__name__) / "specs" / name).read_bytes()


def demo_specs(output: Path, say: Callable[[str], None] = print) -> list[ModelSpec]:
    """The packaged specs, placed as if they were ``output/specs/NAME`` so their ``source`` resolves under
    ``output/build/models``.

    A missing ``output/specs/NAME`` gets a copy, so the commands the demo prints work afterwards. An existing
    file is never overwritten: when it differs, the demo says so and still serves its own copy, whose
    answers it knows how to check.
    """
    specs = []
    for name in SPEC_FILES:
        target = output / "specs" / name
        text = packaged_spec_text(name)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, text)
            say(f"      {target} (written: the demo's spec)")
        elif target.read_bytes() != text:
            say(f"      {target} differs from the demo's spec; the demo serves its own copy")
        with resources.as_file(resources.files(__name__) / "specs" / name) as path:
            spec = load_spec(path)
        specs.append(attrs.evolve(spec, path=target))
    return specs


def run(output: Path = Path("."), *, say: Callable[[str], None] = print, keep_running: bool = False) -> None:
    started = time.perf_counter()
    # onnxruntime (the simulator's executor and the BERT check, here and in every Triton stub, which inherit
    # this environment) otherwise records a device id under ~/.cache/Microsoft: the demo writes only under
    # its output folder. A user's own setting wins.
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    repo = output / "model_repository"
    build_dir = output / "build"

    say("[1/5] example ONNX models and the LLaMA's tokenizer (ge-plugin demo-models build/models)")
    for path in write_demo_models(build_dir / "models").values():
        say(f"      {path}  {path.stat().st_size / 1e6:.1f} MB")
    for path in write_demo_tokenizer(build_dir / "models"):
        say(f"      {path}  {path.stat().st_size / 1e3:.0f} kB")

    say("[2/5] sim OM files, built from ATC's own flags (ge-plugin atc SPEC --sim)")
    specs = demo_specs(output, say)
    for spec in specs:
        om = repo / spec.name / "1" / Path(spec.om_filename).stem
        t0 = time.perf_counter()
        build(parse_args(atc_args(spec, output=om)))
        say(f"      {atc_command(spec, output=om)}")
        say(f"      -> {om}.om ({time.perf_counter() - t0:.1f} s)")

    say("[3/5] model repository (ge-plugin render specs -o model_repository)")
    for path in write_repository(specs, repo):
        say(f"      {path}")

    options = ServerOptions(
        repository=repo,
        http_port=free_port(),
        grpc_port=free_port(),
        metrics_port=free_port(),
        work_dir=build_dir / "triton",
    )
    log_path = build_dir / "demo-tritonserver.log"
    say(f"[4/5] tritonserver 2.51 with backend ge on 127.0.0.1 (log: {log_path})")
    with open(log_path, "wb") as log, TritonServer(options, stdout=log, stderr=log) as server:
        t0 = time.perf_counter()
        server.wait_ready(timeout=180)
        say(
            f"      ready in {time.perf_counter() - t0:.1f} s: HTTP {server.http_url}, gRPC {server.grpc_url}"
        )
        say("[5/5] requests with the official Triton clients")
        _ask(server, build_dir / "models", say)
        _jpeg(server, build_dir / "models", next(spec for spec in specs if spec.name == "cnn_jpeg"), say)
        if keep_running:
            say("      serving until Ctrl-C")
            server.process.wait()
    say(f"done in {time.perf_counter() - started:.1f} s; every answer checked. (CPU simulator, not NPU time)")


def _ask(server: TritonServer, models: Path, say: Callable[[str], None]) -> None:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    http = httpclient.InferenceServerClient(server.http_url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        for prompt, (name, client, module) in zip(
            PROMPTS, (("HTTP", http, httpclient), ("gRPC", grpc, grpcclient))
        ):
            ids = np.array([tokenizer.encode(prompt)], dtype=np.int64)
            tensor = module.InferInput("input_ids", list(ids.shape), "INT64")
            tensor.set_data_from_numpy(ids)
            t0 = time.perf_counter()
            logits = client.infer("llama_model", [tensor]).as_numpy("logits")
            latency = (time.perf_counter() - t0) * 1e3
            predicted = logits.argmax(-1)[0]
            say(f"      llama_model over {name}: prompt {prompt!r} -> ids {ids[0].tolist()}")
            say(f"        next token at each position: {tokenizer.decode(predicted)!r}  ({latency:.1f} ms)")
            if not np.array_equal(predicted, (ids[0] + 1) % tokenizer.VOCAB):
                raise DemoFailed(f"llama_model predicted {predicted.tolist()}, expected each id + 1")

        ids = np.random.default_rng(0).integers(0, 1000, (2, 11), dtype=np.int64)
        mask = np.ones_like(ids)
        mask[1, 7:] = 0
        inputs = []
        for name, value in (("input_ids", ids), ("attention_mask", mask)):
            tensor = grpcclient.InferInput(name, list(value.shape), "INT64")
            tensor.set_data_from_numpy(value)
            inputs.append(tensor)
        t0 = time.perf_counter()
        hidden = grpc.infer("bert_model", inputs).as_numpy("last_hidden_state")
        latency = (time.perf_counter() - t0) * 1e3
        expected = _onnxruntime(models / "tiny_bert.onnx", ids, mask)
        diff = float(np.abs(hidden - expected).max())
        say(
            f"      bert_model over gRPC: input_ids {list(ids.shape)} -> last_hidden_state {list(hidden.shape)}"
        )
        say(f"        max |served - onnxruntime| = {diff:.2e}  ({latency:.1f} ms)")
        if diff > 1e-4:
            raise DemoFailed(f"bert_model differs from onnxruntime by {diff}")

        say("      16 concurrent llama_model requests of different lengths (Triton's dynamic batcher):")
        lengths = [3 + 7 * (i % 5) for i in range(16)]

        def one(length: int) -> NDArray[np.int64]:
            ids = np.arange(100, 100 + length, dtype=np.int64)[None]
            tensor = grpcclient.InferInput("input_ids", list(ids.shape), "INT64")
            tensor.set_data_from_numpy(ids)
            client = grpcclient.InferenceServerClient(server.grpc_url)
            try:
                predicted: NDArray[np.int64] = (
                    client.infer("llama_model", [tensor]).as_numpy("logits").argmax(-1)[0]
                )
                return predicted
            finally:
                client.close()

        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(one, lengths))
        elapsed = (time.perf_counter() - t0) * 1e3
        for length, predicted in zip(lengths, answers):
            if not np.array_equal(predicted, np.arange(101, 101 + length)):
                raise DemoFailed(f"a concurrent request of {length} tokens got {predicted.tolist()}")
        gears = _executes_by_gear(server.metrics_url, "llama_model")
        say(f"        all 16 correct in {elapsed:.0f} ms; executes by gear: {', '.join(gears)}")
        _generate(server, say)
        _chat(server, models, say)
    finally:
        http.close()
        grpc.close()


def _generate(server: TritonServer, say: Callable[[str], None]) -> None:
    """A streamed generation over Triton's generate_stream (SSE), token by token as the events arrive, and
    a whole one over generate; the generating LLaMA copies the token 12 back, so the answer is known."""
    import json
    import urllib.request

    from ge_plugin.models import llama_kv

    prompt = [int(t) for t in np.random.default_rng(7).integers(3, llama_kv.VOCAB, 16)]
    expected = list(prompt)
    for _ in range(12):
        expected.append(expected[-1 - llama_kv.COPY_DISTANCE])
    expected = expected[len(prompt) :]
    say(f"      llama_generate over HTTP generate_stream: prompt ids {prompt}")
    body = json.dumps({"input_ids": prompt, "max_tokens": 12, "stream": True}).encode()
    request = urllib.request.Request(
        f"http://{server.http_url}/v2/models/llama_generate/generate_stream", data=body, method="POST"
    )
    got: list[int] = []
    finish = ""
    t0 = time.perf_counter()
    first = 0.0
    with urllib.request.urlopen(request, timeout=60) as response:
        for line in response:
            if not line.startswith(b"data: "):
                continue
            event = json.loads(line[len(b"data: ") :])
            ids = event["output_ids"] if isinstance(event["output_ids"], list) else [event["output_ids"]]
            if ids and not got:
                first = (time.perf_counter() - t0) * 1e3
            got.extend(ids)
            finish = str(event["finish_reason"]).strip("[]'\"")
            if ids:
                say(f"        +{ids}")
    total = (time.perf_counter() - t0) * 1e3
    say(f"        finish_reason {finish!r}; first token {first:.1f} ms, all 12 in {total:.1f} ms")
    if got != expected or finish != "length":
        raise DemoFailed(f"llama_generate streamed {got} ({finish}), expected {expected} (length)")
    body = json.dumps({"input_ids": prompt, "max_tokens": 12}).encode()
    request = urllib.request.Request(
        f"http://{server.http_url}/v2/models/llama_generate_layers/generate", data=body, method="POST"
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.loads(response.read())
    say(f"      llama_generate_layers (per-layer KV form) over HTTP generate: {answer['output_ids']}")
    if answer["output_ids"] != expected:
        raise DemoFailed(f"llama_generate_layers generated {answer['output_ids']}, expected {expected}")


#: the demo's chat; long enough (13 tokens or more) that every generated token is a copy of one before it
CHAT = ({"role": "user", "content": "Tell me a story about a small robot."},)


def _chat(server: TritonServer, models: Path, say: Callable[[str], None]) -> None:
    """A chat round trip through the OpenAI-compatible endpoint, streamed (SSE) and printed as the text
    arrives, then Triton's generate with text_input. The demo LLaMA copies the token 12 back, so its answer
    repeats the end of the chat's prompt (the chat template's ``[/INST]`` included): the text expected is
    the tokenizer's decode of those ids."""
    import json
    import urllib.request

    from ge_plugin.models import llama_kv
    from ge_plugin.text.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_files(models / "tokenizer.json", models / "tokenizer_config.json")
    ids = tokenizer.encode_chat(CHAT)
    for _ in range(16):
        ids.append(ids[-1 - llama_kv.COPY_DISTANCE])
    expected = tokenizer.decode(ids[-16:])
    body = {"model": "llama_generate", "messages": list(CHAT), "max_tokens": 16, "stream": True}
    body["stream_options"] = {"include_usage": True}
    say(
        f"      llama_generate over the OpenAI chat endpoint (POST /v1/chat/completions): {CHAT[0]['content']!r}"
    )
    request = urllib.request.Request(
        f"http://{server.http_url}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    pieces: list[str] = []
    usage: dict[str, int] = {}
    t0 = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as response:
        for line in response:
            if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
                continue
            chunk = json.loads(line[len(b"data: ") :])
            usage = chunk.get("usage") or usage
            for choice in chunk["choices"]:
                if choice["delta"].get("content"):
                    pieces.append(choice["delta"]["content"])
                    say(f"        +{choice['delta']['content']!r}")
    text = "".join(pieces)
    say(
        f"        answer {text!r} ({usage.get('prompt_tokens')} prompt + {usage.get('completion_tokens')} "
        f"completion tokens, {(time.perf_counter() - t0) * 1e3:.1f} ms)"
    )
    if text != expected or usage.get("completion_tokens") != 16:
        raise DemoFailed(f"the chat answered {text!r} ({usage}), expected {expected!r} (16 tokens)")
    prompt = "Once upon a time there was a small robot who wanted to learn"
    ids = tokenizer.encode_prompt(prompt)
    for _ in range(8):
        ids.append(ids[-1 - llama_kv.COPY_DISTANCE])
    expected = tokenizer.decode(ids[-8:])
    request = urllib.request.Request(
        f"http://{server.http_url}/v2/models/llama_generate_layers/generate",
        data=json.dumps({"text_input": prompt, "max_tokens": 8}).encode(),
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.loads(response.read())
    say(f"      llama_generate_layers over HTTP generate, text_input {prompt!r}")
    say(f"        text_output {answer['text_output']!r}")
    if answer["text_output"] != expected:
        raise DemoFailed(f"text_output {answer['text_output']!r}, expected {expected!r}")


#: how far the JPEG model's logits may be from onnxruntime's on Pillow's pixels (docs/simulator.md: DVPP and
#: AIPP keep the pixels within a few levels of Pillow's; the CNN's global average cancels most of that)
JPEG_LOGITS_TOLERANCE = 0.05


def _jpeg(server: TritonServer, models: Path, spec: ModelSpec, say: Callable[[str], None]) -> None:
    """A JPEG over HTTP to the CNN that takes them (decoded and resized by DVPP, normalised by the OM's AIPP),
    checked against onnxruntime on the same picture decoded and resized by Pillow; then a PNG, which the model
    refuses with 400 naming it."""
    import io

    import onnxruntime as ort
    import tritonclient.http as httpclient
    from PIL import Image
    from tritonclient.utils import InferenceServerException

    found = spec.preprocessed
    assert found is not None
    _, tensor = found
    prep = tensor.preprocess
    assert prep is not None
    height, width = tensor.dims[1], tensor.dims[2]
    y, x = np.mgrid[0:240, 0:320].astype(np.float32)
    picture = np.stack([x * 0.8, y, 128 + 100 * np.sin((x + 2 * y) / 23)], -1).clip(0, 255).astype(np.uint8)
    encoded = io.BytesIO()
    Image.fromarray(picture).save(encoded, "JPEG", quality=90)
    data = encoded.getvalue()
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        request = httpclient.InferInput("images", [1, len(data)], "UINT8")
        request.set_data_from_numpy(np.frombuffer(data, np.uint8)[None])
        t0 = time.perf_counter()
        logits = client.infer(spec.name, [request]).as_numpy("logits")
        latency = (time.perf_counter() - t0) * 1e3
        pixels = np.asarray(
            Image.open(io.BytesIO(data)).convert("RGB").resize((width, height), Image.Resampling.BILINEAR)
        )
        normalised = (pixels.astype(np.float32) - np.asarray(prep.mean, np.float32)) / np.asarray(
            prep.std, np.float32
        )
        session = ort.InferenceSession(str(models / "tiny_cnn.onnx"), providers=["CPUExecutionProvider"])
        (expected,) = session.run(
            ["logits"], {"images": normalised.transpose(2, 0, 1)[None].astype(np.float32)}
        )
        diff = float(np.abs(logits - expected).max())
        floats = 3 * height * width * 4
        say(
            f"      {spec.name} over HTTP: a 320x240 JPEG of {len(data) / 1e3:.0f} KB (not {floats / 1e3:.0f} KB of floats)"
        )
        say(
            f"        class {int(logits.argmax())}; max |served - onnxruntime on Pillow's pixels| = {diff:.3f}  ({latency:.1f} ms)"
        )
        if diff > JPEG_LOGITS_TOLERANCE or logits.argmax() != expected.argmax():
            raise DemoFailed(f"{spec.name} differs from onnxruntime on Pillow's pixels by {diff}")
        png = io.BytesIO()
        Image.fromarray(picture).save(png, "PNG")
        request = httpclient.InferInput("images", [1, len(png.getvalue())], "UINT8")
        request.set_data_from_numpy(np.frombuffer(png.getvalue(), np.uint8)[None])
        try:
            client.infer(spec.name, [request])
        except InferenceServerException as exc:
            say(f"        a PNG instead: {exc.status()} {exc.message()}")
        else:
            raise DemoFailed(f"{spec.name} answered a PNG")
    finally:
        client.close()


def _onnxruntime(path: Path, ids: NDArray[np.int64], mask: NDArray[np.int64]) -> NDArray[np.float32]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    hidden: NDArray[np.float32] = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    return hidden


def _executes_by_gear(url: str, model: str, timeout: float = 10.0) -> list[str]:
    """``gear xN`` per gear, once the backend's timer has flushed at least one engine execute per execute
    Triton counted (each Triton execute is one or more engine executes)."""
    deadline = time.monotonic() + timeout
    while True:
        metrics = scrape(url)
        engine = metrics.total("ge_executes_total", model=model)
        if engine >= metrics.total("nv_inference_exec_count", model=model) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    totals: dict[str, float] = {}
    for labels, value in metrics.select("ge_executes_total", model=model):
        totals[labels["gear"]] = totals.get(labels["gear"], 0) + value
    return [f"{gear} x{int(count)}" for gear, count in sorted(totals.items())]
