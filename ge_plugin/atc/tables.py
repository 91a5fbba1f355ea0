"""ATC's own tables: framework codes, and the flags a spec sets or cannot serve.

The spec's validators check a spec against them and ``ge_plugin.atc`` checks ATC command lines against
them, so they live here, below both (the gear flags and their limits are gear facts: ``ge_plugin.gears``). The input ATC adds to every gear model is pyACL's
``ACL_DYNAMIC_TENSOR_NAME`` (ge_plugin.acl_constants).
"""

from __future__ import annotations

from ge_plugin.precision import PRECISIONS

#: ATC's own words for its one-dynamic-mode rule (E10009; its --dynamic_batch_size page says the flag "is
#: mutually exclusive with --dynamic_image_size, --input_shape_range, and --dynamic_dims")
GEAR_FLAGS_EXCLUSIVE = "--dynamic_batch_size, --dynamic_image_size, --input_shape_range, and --dynamic_dims are mutually exclusive"

#: ``--framework`` codes
ONNX_FRAMEWORK = 5
FRAMEWORKS = {0: "Caffe", 1: "MindSpore", 3: "TensorFlow", ONNX_FRAMEWORK: "ONNX"}

_PRECISION_FIELD = f"precision ({', '.join(PRECISIONS[:-1])} or {PRECISIONS[-1]})"
#: ATC flags the spec sets itself -> the spec field to use instead
CONTROLLED_ATC_FLAGS = {
    "model": "model.source",
    "framework": f"model.source (ge-plugin always compiles ONNX, --framework={ONNX_FRAMEWORK})",
    "output": "model.om (the output path is derived from it)",
    "mode": "nothing: ge-plugin runs ATC to build an .om (--mode=0)",
    "input_shape": "inputs[*].dims (and batching.gears for the batch dim)",
    "dynamic_batch_size": "batching.gears",
    "dynamic_dims": "dims_gears",
    "dynamic_image_size": "image_sizes",
    "input_shape_range": "batching.gears, image_sizes and dims_gears (shape-range models are not served)",
    "soc_version": "model.soc_version",
    "precision_mode": _PRECISION_FIELD,
    "precision_mode_v2": _PRECISION_FIELD,
}

#: names people try for tensor parallelism; ATC has neither
NOT_ATC_FLAGS = ("tp_size", "tensor_parallel_size")
#: ATC's distributed-build flags: their OMs are not loadable with aclmdlLoadFromFile
DISTRIBUTED_ATC_FLAGS = (
    "distributed_cluster_build",
    "enable_graph_parallel",
    "graph_parallel_option_path",
    "shard_model_dir",
    "model_relation_config",
)
_DISTRIBUTED_OM = (
    "CANN loads such an OM only through GE's Session::LoadGraph and RunGraph, not with aclmdlLoadFromFile "
    "(pyACL acl.mdl.load_from_file), the only way the ge backend loads an OM"
)
_DATA_PARALLEL = (
    "to use several NPUs, list them in placement.devices: one instance group per NPU, each serving whole "
    "requests (data parallel); docs/serving.md explains"
)
#: flag -> why a model that the ge backend serves cannot use it (the flag's name is not part of the text)
MULTI_DEVICE_ATC_FLAGS = {
    **dict.fromkeys(
        NOT_ATC_FLAGS,
        "ATC has no such flag, and no ATC flag makes an OM split requests across NPUs: an OM loaded with "
        "aclmdlLoadFromFile runs on the one device it is loaded on. ATC's tensor parallelism is a distributed "
        "build (--distributed_cluster_build=1 --enable_graph_parallel=1, with tensor_parallel_size in the "
        f"--graph_parallel_option_path file), and {_DISTRIBUTED_OM}; {_DATA_PARALLEL}",
    ),
    **dict.fromkeys(
        DISTRIBUTED_ATC_FLAGS,
        f"this flag builds an OM for distributed deployment over several NPUs, and {_DISTRIBUTED_OM}; "
        f"{_DATA_PARALLEL}",
    ),
}
