"""Running a sim OM's ONNX graph with onnxruntime, as the static-gear OM that ATC would have built.

One InferenceSession per loaded model, created at load (``GE_PLUGIN_SIM_THREADS`` intra-op threads, default
1, no spinning: Triton shares the CPU). Inputs arrive in the OM's dtypes (fp16 for ``--input_fp16_nodes``)
and are cast to the graph's; outputs are rounded as the build's precision says (through float16 for ATC's
default fp16 modes, through bfloat16 for the bf16 modes, untouched for ``must_keep_origin_dtype`` /
``origin``), then cast to the OM's output dtypes (``--output_type``). The real NPU computes the whole graph
in reduced precision; rounding only the outputs makes the simulator somewhat more accurate than hardware,
never less.

A graph with bfloat16 inputs or outputs (an ONNX model exported in bf16) runs on the same words the device
holds: numpy has no bfloat16, so those tensors cross into onnxruntime as OrtValues of ONNX type BFLOAT16
over the uint16 bits (IO binding), and the graph's own Casts round to bfloat16 to nearest even, as the NPU
does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ge_plugin import acl_constants as C
from ge_plugin.sim import _aipp
from ge_plugin.sim._fail import Fail
from ge_plugin.sim.model import ModelInfo, OmGear


def round_fp16(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    return a.astype(np.float16).astype(a.dtype)


def round_bf16(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Round to the nearest bfloat16 (ties to even), keeping the float32 container; NaN stays NaN."""
    f = np.ascontiguousarray(a, dtype=np.float32)
    bits = f.view(np.uint32)
    rounded = (
        (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    ).view(np.float32)
    out = np.where(np.isnan(f), f, rounded)
    return out.astype(a.dtype, copy=False)


_ROUNDING = {"fp32": None, "fp16": round_fp16, "bf16": round_bf16}

#: ONNX's TensorProto.BFLOAT16
_BFLOAT16 = 16


class OnnxRunner:
    """The compute of one loaded model: its ONNX graph in an onnxruntime InferenceSession."""

    def __init__(self, onnx_bytes: bytes, info: ModelInfo, threads: int):
        import onnxruntime as ort  # the heavy import happens at the first model load, not at import acl

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        try:
            self.session = ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for bad graphs
            raise Fail(
                C.ACL_ERROR_GE_LOAD_MODEL, f"onnxruntime cannot load the model's graph: {exc}"
            ) from None
        data_inputs = info.inputs[: info.n_data]
        self.input_names = [d.name for d in data_inputs]
        self.input_casts = [d.graph_np if d.graph_np != d.np else None for d in data_inputs]
        #: per data input, the static AIPP in front of it (its images converted for the graph), or None
        self.input_aipp = [d.aipp for d in data_inputs]
        self.output_names = [d.onnx_name for d in info.outputs]
        self.output_np = [d.np for d in info.outputs]
        self.graph_np_out = [d.graph_np for d in info.outputs]
        self.rounding = _ROUNDING[info.precision]
        self.input_bf16 = [d.graph_dtype == C.ACL_BF16 for d in data_inputs]
        self.output_bf16 = [d.graph_dtype == C.ACL_BF16 for d in info.outputs]
        self.ort = ort if any(self.input_bf16) or any(self.output_bf16) else None

    def run(self, arrays: Sequence[npt.NDArray[Any]], gear: OmGear) -> list[npt.NDArray[Any]]:
        """Outputs in OM order and dtypes; Fail(507011) if the graph fails or disagrees with the gear."""
        feeds = {
            name: (a if cast is None else a.astype(cast) if aipp is None else _aipp.convert(aipp, a, cast))
            for name, a, cast, aipp in zip(self.input_names, arrays, self.input_casts, self.input_aipp)
        }
        try:
            results = (
                self.session.run(self.output_names, feeds) if self.ort is None else self._bound(feeds, gear)
            )
        except Exception as exc:  # onnxruntime's own exception types
            raise Fail(
                C.ACL_ERROR_RT_MODEL_EXECUTE, f"the model failed at gear {gear.label}: {exc}"
            ) from None
        outputs = []
        for n, (out, want) in enumerate(zip(results, self.output_np)):
            out = np.asarray(out)
            if self.output_bf16[n] and want != np.uint16:  # bf16 words to another OM type (--output_type)
                out = (out.astype(np.uint32) << 16).view(np.float32)
            if out.shape != gear.output_dims[n]:
                raise Fail(
                    C.ACL_ERROR_RT_MODEL_EXECUTE,
                    f"output {self.output_names[n]} came out {list(out.shape)} at gear {gear.label}, but the OM "
                    f"was built for {list(gear.output_dims[n])} (data-dependent output shapes are not supported)",
                )
            if self.rounding is not None and out.dtype.kind == "f" and out.dtype.itemsize > 2:
                out = self.rounding(out)
            if out.dtype != want:
                out = out.astype(want)
            outputs.append(out)
        return outputs

    def _bound(self, feeds: dict[str, npt.NDArray[Any]], gear: OmGear) -> list[npt.NDArray[Any]]:
        """Run with IO binding: bf16 tensors as OrtValues of type BFLOAT16 over their uint16 words, every output
        into an array of the gear's dims (bf16 ones as their words)."""
        ort = self.ort
        assert ort is not None
        binding = self.session.io_binding()
        for (name, array), bf16 in zip(feeds.items(), self.input_bf16):
            array = np.ascontiguousarray(array)
            if bf16:
                binding.bind_ortvalue_input(
                    name, ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array, _BFLOAT16)
                )
            else:
                binding.bind_cpu_input(name, array)
        results = []
        for n, name in enumerate(self.output_names):
            if self.output_bf16[n]:
                out = np.empty(gear.output_dims[n], np.uint16)
                value = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(out, _BFLOAT16)
            else:
                out = np.empty(gear.output_dims[n], self.graph_np_out[n])
                value = ort.OrtValue.ortvalue_from_numpy(out)
            binding.bind_ortvalue_output(name, value)
            results.append(out)
        self.session.run_with_iobinding(binding)
        return results
