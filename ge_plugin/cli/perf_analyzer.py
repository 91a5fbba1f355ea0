"""``ge-plugin perf-analyzer ARGS...``: Triton's perf_analyzer, as the tritonclient wheel ships it, made to start.

The binary links libcudart.so.12 without a RUNPATH, so from a shell it does not start unless
``LD_LIBRARY_PATH`` names pip's nvidia-cuda-runtime-cu12 (``ge_plugin.measure.perf``, where bench and tune
get the same path). This command puts it there and replaces itself with perf_analyzer: every argument after
``perf-analyzer`` is perf_analyzer's, untouched (``--help`` is perf_analyzer's help), and the exit status
is perf_analyzer's.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ge_plugin.cli._common import add_command
from ge_plugin.errors import BenchError

EXAMPLES = """
  ge-plugin perf-analyzer -m llama_model -i grpc -u 127.0.0.1:8001 --shape input_ids:16
  ge-plugin perf-analyzer --help                 # perf_analyzer's own help
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Listed in ``ge-plugin --help``; ``main`` hands the command line to ``run_raw`` before argparse."""
    add_command(
        subparsers,
        "perf-analyzer",
        help="run Triton's perf_analyzer (shipped in tritonclient) with the libraries it needs",
        description=(
            "Run the perf_analyzer of the tritonclient wheel with libcudart.so.12 (pip's "
            "nvidia-cuda-runtime-cu12) on LD_LIBRARY_PATH. Every argument is perf_analyzer's own."
        ),
        examples=EXAMPLES,
    )


def run_raw(argv: Sequence[str]) -> int:
    """exec perf_analyzer with ``argv``; returns (1) only when it cannot."""
    from ge_plugin.measure import perf

    try:
        binary = perf.binary()
        env = perf.environment()
    except BenchError as exc:
        print(f"ge-plugin perf-analyzer: error: {exc}", file=sys.stderr)
        return 1
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(binary, [str(binary), *argv], env)
    except OSError as exc:
        print(f"ge-plugin perf-analyzer: error: cannot run {binary}: {exc.strerror or exc}", file=sys.stderr)
    return 1
