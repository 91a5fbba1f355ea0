"""JPEG in against float tensors in: the demo CNN served both ways by one tritonserver, measured with
perf_analyzer, side by side.

    .venv/bin/python benchmarks/jpeg.py [--work build/jpeg-bench] [--rounds 2] [--measurement-ms 3000]

The same ONNX model (tiny_cnn, 224 x 224) compiled twice: ``cnn_float`` takes the normalised image as FP32
[3, 224, 224] (602 KB a request), ``cnn_jpeg`` takes the JPEG's bytes (TYPE_UINT8, a 320 x 240 photograph
of 17 KB at quality 90) and decodes, resizes and normalises it on the device (DVPP, then the OM's AIPP).
Both on batch gears 1, 2, 4, 8 with a 1 ms queue delay, one instance, one stream. perf_analyzer sends the
same request over and over, over HTTP (through ge-plugin's front) and gRPC, at concurrency 1 and 8; the
rounds alternate the models, so drift on a shared machine hits both. Prints, per protocol and concurrency,
the median over rounds of each model's requests/s and p50, and writes them with the machine (and its load
average when the run began) to ``jpeg.json``.

The device here is ge-plugin's simulator, computing (its default, no device-time profile): an execute is
onnxruntime on this host's CPU, JPEGD is libjpeg-turbo (through Pillow), VPC's resize and AIPP's conversion
are numpy, all on the same two cores as tritonserver, the front and perf_analyzer. So the JPEG side pays the
decode on the host CPU that a real Ascend card does in its DVPP engine beside the AI Core; the float side pays
35 times the bytes through HTTP or gRPC, the front, Triton and the stub's shared memory. Neither is NPU time.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

from benchmarks.front import perf_row
from ge_plugin.atc.command import atc_args
from ge_plugin.atc.flags import parse_args
from ge_plugin.atc.simbuild import build
from ge_plugin.measure.machine import describe as describe_machine
from ge_plugin.measure.perf import SERVER_APIS, version
from ge_plugin.models import write_demo_models
from ge_plugin.render import write_repository
from ge_plugin.serve import ServerOptions, TritonServer, free_port
from ge_plugin.spec import load_spec

MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)
COMMON = """\
outputs:
  - name: logits
    dtype: fp32
    dims: [10]
batching:
  gears: [1, 2, 4, 8]
  max_queue_delay_us: 1000
precision: origin
"""
SPECS = {
    "cnn_float": f"""\
name: cnn_float
model: {{om: cnn_float.om, source: tiny_cnn.onnx, soc_version: Ascend310P3}}
inputs:
  - name: images
    dtype: fp32
    dims: [3, 224, 224]
{COMMON}""",
    "cnn_jpeg": f"""\
name: cnn_jpeg
model: {{om: cnn_jpeg.om, source: tiny_cnn.onnx, soc_version: Ascend310P3}}
inputs:
  - name: images
    dtype: fp32
    dims: [3, 224, 224]
    preprocess:
      mean: {list(MEAN)}
      std: {list(STD)}
      max_bytes: 1048576
      max_side: 2048
{COMMON}""",
}
PROTOCOLS = ("http", "grpc")
CONCURRENCIES = (1, 8)


def photo() -> bytes:
    """A 320 x 240 photograph (matplotlib's sample data) as a camera saves it (quality 90)."""
    import matplotlib
    from PIL import Image

    source = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    out = io.BytesIO()
    Image.open(source).convert("RGB").resize((320, 240), Image.Resampling.LANCZOS).save(
        out, "JPEG", quality=90
    )
    return out.getvalue()


def inputs(work: Path, jpeg: bytes) -> dict[str, Path]:
    """perf_analyzer's input files: the JPEG's bytes, and the same picture as the floats a client would send
    (decoded, resized and normalised by Pillow on the client)."""
    from PIL import Image

    pixels = np.asarray(
        Image.open(io.BytesIO(jpeg)).convert("RGB").resize((224, 224), Image.Resampling.BILINEAR)
    )
    floats = ((pixels - np.float32(MEAN)) / np.float32(STD)).astype(np.float32).transpose(2, 0, 1)
    files = {
        "cnn_jpeg": {"images": {"b64": base64.b64encode(jpeg).decode(), "shape": [len(jpeg)]}},
        "cnn_float": {"images": {"b64": base64.b64encode(floats.tobytes()).decode(), "shape": [3, 224, 224]}},
    }
    paths = {}
    for model, data in files.items():
        paths[model] = work / f"{model}.json"
        paths[model].write_text(json.dumps({"data": [data]}))
    return paths


def repository(work: Path) -> Path:
    models = work / "models"
    write_demo_models(models)
    repo = work / "repo"
    specs = []
    for name, text in SPECS.items():
        path = models / f"{name}.yaml"
        path.write_text(text)
        spec = load_spec(path)
        output = repo / name / "1" / name
        output.parent.mkdir(parents=True, exist_ok=True)
        build(parse_args(atc_args(spec, output=output)))
        specs.append(spec)
    write_repository(specs, repo)
    return repo


def measure(
    url: str, protocol: str, model: str, data: Path, concurrency: int, work: Path, ms: int
) -> tuple[float, float]:
    """(requests/s, p50 ms) of one perf_analyzer run."""
    row = perf_row(url, model, [], data, concurrency, work, ms, protocol)
    return row.throughput, row.p50_us / 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("build/jpeg-bench"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--measurement-ms", type=int, default=3000)
    args = parser.parse_args()
    load = os.getloadavg()
    args.work.mkdir(parents=True, exist_ok=True)
    repo = repository(args.work)
    jpeg = photo()
    files = inputs(args.work, jpeg)
    options = ServerOptions(
        repository=repo,
        http_port=free_port(),
        grpc_port=free_port(),
        metrics_port=free_port(),
        work_dir=args.work,
        open_apis=SERVER_APIS,  # perf_analyzer reads the model's config and statistics
    )
    results = []
    with (
        open(args.work / "tritonserver.log", "wb") as log,
        TritonServer(options, stdout=log, stderr=log) as server,
    ):
        server.wait_ready(timeout=180)
        urls = {"http": server.http_url, "grpc": server.grpc_url}
        for protocol in PROTOCOLS:
            for concurrency in CONCURRENCIES:
                runs: dict[str, list[tuple[float, float]]] = {model: [] for model in files}
                for _ in range(args.rounds):
                    for model, data in files.items():  # alternating, so drift hits both
                        runs[model].append(
                            measure(
                                urls[protocol],
                                protocol,
                                model,
                                data,
                                concurrency,
                                args.work,
                                args.measurement_ms,
                            )
                        )
                row: dict[str, object] = {"protocol": protocol, "concurrency": concurrency}
                for model, points in runs.items():
                    row[f"{model}_rps"] = round(statistics.median(p[0] for p in points), 1)
                    row[f"{model}_p50_ms"] = round(statistics.median(p[1] for p in points), 2)
                    row[f"{model}_runs"] = points
                results.append(row)
                print(
                    f"{protocol:4s} c={concurrency:<2d} JPEG in: {row['cnn_jpeg_rps']:7.1f} req/s p50 {row['cnn_jpeg_p50_ms']:7.2f} ms"
                    f"   floats in: {row['cnn_float_rps']:7.1f} req/s p50 {row['cnn_float_p50_ms']:7.2f} ms",
                    flush=True,
                )
    machine = describe_machine(tritonserver="2.51.0", perf_analyzer=version(), load_average=load)
    report = {
        "machine": machine,
        "request_bytes": {"cnn_jpeg": len(jpeg), "cnn_float": 3 * 224 * 224 * 4},
        "device": "ge-plugin simulator, computing: onnxruntime, libjpeg-turbo and numpy on the host CPU",
        "results": results,
    }
    (args.work / "jpeg.json").write_text(json.dumps(report, indent=1))
    print(f"request bytes: JPEG {len(jpeg)}, floats {3 * 224 * 224 * 4}; machine: {machine}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
