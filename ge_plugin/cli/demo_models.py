"""``ge-plugin demo-models DIR``: write the tiny example ONNX models that specs/, the demo and tests use."""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ge_plugin.cli._common import add_command

if TYPE_CHECKING:
    import onnx

EXAMPLES = """
  ge-plugin demo-models models
      writes models/tiny_llama.onnx, models/tiny_bert.onnx, models/identity.onnx, ... and the demo
      LLaMA's tokenizer (models/tokenizer.json, models/tokenizer_config.json); a second run rewrites
      nothing, because the files are byte-identical every time
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "demo-models",
        help="write the tiny example ONNX models (LLaMA, BERT, identity)",
        description=(
            "Write deterministic tiny ONNX models into DIR:\n"
            "  tiny_llama.onnx  input_ids -> logits over 32000 tokens; predicts input_id + 1 everywhere\n"
            "  tiny_bert.onnx   input_ids, attention_mask -> last_hidden_state\n"
            "  identity.onnx    INPUT0 -> OUTPUT0, the overhead floor for benchmarks\n"
            "  tokenizer.json, tokenizer_config.json  the demo LLaMA's tokenizer: a byte-level BPE of 512 tokens\n"
            "                   (<pad>=0, <s>=1, </s>=2) trained here, offline, with a LLaMA-2 chat template\n"
            "A file whose bytes would not change is left alone. See docs/models.md."
        ),
        examples=EXAMPLES,
    )
    parser.add_argument(
        "directory", metavar="DIR", type=Path, help="directory to write to (created if missing)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # onnx is imported here, not at module level, so `ge-plugin --help` does not pay for it.
    from ge_plugin.models import DEMO_MODELS, write_model

    directory: Path = args.directory
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for stem, build in DEMO_MODELS.items():
            model = build()
            path = directory / f"{stem}.onnx"
            status = "written" if write_model(path, model) else "unchanged"
            data = path.read_bytes()
            print(
                f"{path}  {_size(len(data))}  sha256 {hashlib.sha256(data).hexdigest()[:12]}  "
                f"{_signature(model)}  ({status})"
            )
        _write_tokenizer(directory)
    except OSError as exc:
        print(f"ge-plugin demo-models: error: cannot write models to {directory}: {exc}", file=sys.stderr)
        return 1
    return 0


def _write_tokenizer(directory: Path) -> None:
    """The demo LLaMA's tokenizer; skipped with a note where the ``text`` extra is not installed."""
    try:
        from ge_plugin.text.demo import VOCAB_SIZE, write_demo_tokenizer_files
    except ImportError as exc:
        print(
            f"ge-plugin demo-models: no tokenizer written ({exc.name} is not installed: pip install "
            "'ge-plugin[text]')",
            file=sys.stderr,
        )
        return
    for path, written in write_demo_tokenizer_files(directory):
        data = path.read_bytes()
        print(
            f"{path}  {_size(len(data))}  sha256 {hashlib.sha256(data).hexdigest()[:12]}  "
            f"byte-level BPE, {VOCAB_SIZE} tokens, <pad>=0 <s>=1 </s>=2  ({'written' if written else 'unchanged'})"
        )


def _signature(model: onnx.ModelProto) -> str:
    """``input_ids int64[batch,seq] -> logits float32[batch,seq,32000]``, read from the graph itself."""
    from onnx import helper

    def describe(value: onnx.ValueInfoProto) -> str:
        kind = value.type.tensor_type
        dims = ",".join(d.dim_param or str(d.dim_value) for d in kind.shape.dim)
        return f"{value.name} {helper.tensor_dtype_to_np_dtype(kind.elem_type)}[{dims}]"

    inputs = ", ".join(describe(v) for v in model.graph.input)
    outputs = ", ".join(describe(v) for v in model.graph.output)
    return f"{inputs} -> {outputs}"


def _size(count: int) -> str:
    return f"{count / 1e6:.1f} MB" if count >= 100_000 else f"{count} B"
