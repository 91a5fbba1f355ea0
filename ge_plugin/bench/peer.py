"""``--peer pytriton``: the same tiny LLaMA ONNX served by PyTriton, with onnxruntime in its callable.

The peer is what a user gets without ge-plugin and without an NPU toolchain: PyTriton's bundled server, a
``@batch`` callable that stacks the dynamic batch and runs onnxruntime (one intra-op thread, as the
simulator runs it), with the batching and instance count of ``ge_llama``. It runs in a child process
(``python -m ge_plugin.bench.peer``) on its own ports, next to the bench's server, so perf_analyzer measures
it in the same sweep.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ge_plugin.bench.repository import BenchModel
from ge_plugin.bench.serverstats import get_json
from ge_plugin.errors import BenchError
from ge_plugin.serve import find_distribution, server_environment
from ge_plugin.spec.model import ModelSpec

MODEL = "pytriton_llama"


def model(seq: int) -> BenchModel:
    return BenchModel(
        MODEL,
        "pytriton",
        "llama",
        f"PyTriton + onnxruntime callable, seq {seq}",
        "input_ids",
        f"input_ids:{seq}",
    )


def serve(
    onnx: Path,
    *,
    http_port: int,
    grpc_port: int,
    metrics_port: int,
    instances: int,
    max_batch_size: int,
    preferred: Sequence[int],
    delay_us: int,
) -> None:
    import numpy as np
    import onnxruntime as ort
    from pytriton.decorators import batch
    from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
    from pytriton.triton import DEFAULT_PROTECTED_ENDPOINTS, Triton, TritonConfig, TritonSecurityConfig

    def callable_over(session: ort.InferenceSession):
        @batch
        def infer(input_ids: np.ndarray) -> dict[str, np.ndarray]:
            return {"logits": session.run(["logits"], {"input_ids": input_ids})[0]}

        return infer

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    callables = [
        callable_over(ort.InferenceSession(str(onnx), options, providers=["CPUExecutionProvider"]))
        for _ in range(instances)
    ]
    config = TritonConfig(
        http_address="127.0.0.1",
        http_port=http_port,
        grpc_address="127.0.0.1",
        grpc_port=grpc_port,
        metrics_address="127.0.0.1",
        metrics_port=metrics_port,
        log_verbose=0,
    )
    # The statistics extension stays open (on loopback only) so the bench reads requests per execute, as it
    # does for its own server; everything else PyTriton protects stays protected.
    security = TritonSecurityConfig(
        restricted_endpoints=[e for e in DEFAULT_PROTECTED_ENDPOINTS if e != "statistics"]
    )
    with Triton(config=config, security_config=security) as triton:
        triton.bind(
            model_name=MODEL,
            infer_func=callables,
            inputs=[Tensor(name="input_ids", dtype=np.int64, shape=(-1,))],
            outputs=[Tensor(name="logits", dtype=np.float32, shape=(-1, 32000))],
            config=ModelConfig(
                max_batch_size=max_batch_size,
                batcher=DynamicBatcher(
                    max_queue_delay_microseconds=delay_us, preferred_batch_size=list(preferred)
                ),
            ),
            strict=True,
        )
        triton.serve()


class Peer:
    """The PyTriton child process: started by ``start``, stopped (SIGINT, then its whole session) by ``stop``."""

    def __init__(self, process: subprocess.Popen, http_url: str, grpc_url: str, metrics_url: str, log: Path):
        self.process = process
        self.http_url = http_url
        self.grpc_url = grpc_url
        self.metrics_url = metrics_url
        self.log = log

    @classmethod
    def start(cls, onnx: Path, *, work: Path, ports: Sequence[int], like: ModelSpec) -> Peer:
        """``like``: the ge_llama spec whose batching (preferred sizes as rendered) and instances the peer copies."""
        http_port, grpc_port, metrics_port = ports
        batching = like.batching
        cmd = [
            sys.executable,
            "-m",
            "ge_plugin.bench.peer",
            str(onnx),
            f"--http-port={http_port}",
            f"--grpc-port={grpc_port}",
            f"--metrics-port={metrics_port}",
            f"--instances={like.placement.instances_per_device * len(like.placement.devices)}",
            f"--max-batch-size={like.max_batch_size}",
            f"--preferred={','.join(map(str, batching.preferred))}",
            f"--delay-us={batching.max_queue_delay_us}",
        ]
        log = work / "pytriton.log"
        # PyTriton's stubs need this Python's libpython first on the path, as ours do (ge_plugin.serve):
        # with the system's older libpython 3.11 its multiprocessing fails inside the stub.
        env = server_environment(find_distribution())
        with open(log, "wb") as out:
            process = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        peer = cls(
            process,
            f"127.0.0.1:{http_port}",
            f"127.0.0.1:{grpc_port}",
            f"http://127.0.0.1:{metrics_port}/metrics",
            log,
        )
        peer.wait_ready()
        return peer

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BenchError(
                    f"the PyTriton peer exited with status {self.process.returncode}; see {self.log}"
                )
            try:
                get_json(f"http://{self.http_url}/v2/models/{MODEL}")
                return
            except BenchError:
                time.sleep(0.5)
        self.stop()
        raise BenchError(f"the PyTriton peer was not ready after {timeout:.0f} s; see {self.log}")

    def stop(self, timeout: float = 60.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)  # its own session: PyTriton's server with it
            self.process.wait()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ge_plugin.bench.peer",
        description="Serve the tiny LLaMA ONNX with PyTriton (bench peer).",
    )
    parser.add_argument("onnx", type=Path)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    parser.add_argument("--metrics-port", type=int, required=True)
    parser.add_argument("--instances", type=int, default=1)
    parser.add_argument("--max-batch-size", type=int, default=8)
    parser.add_argument("--preferred", default="1,4,8")
    parser.add_argument("--delay-us", type=int, default=0)
    args = parser.parse_args(argv)
    # PyTriton says what it does at INFO; with timestamps, its log shows how long start and stop took.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    with contextlib.suppress(KeyboardInterrupt):  # SIGINT is how the bench stops it
        serve(
            args.onnx,
            http_port=args.http_port,
            grpc_port=args.grpc_port,
            metrics_port=args.metrics_port,
            instances=args.instances,
            max_batch_size=args.max_batch_size,
            preferred=[int(v) for v in args.preferred.split(",")],
            delay_us=args.delay_us,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
