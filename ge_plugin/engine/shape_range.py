"""Shape-range OMs: what pyACL reports for them, and why ge-plugin refuses them with the flags to rebuild.

ATC builds a dynamic-shape model from ``--input_shape`` ranges (``x:1~8,3,224~448,224~448``) or ``-1`` dims
without a gear flag. pyACL describes it with -1 dims, no ``ascend_mbatch_shape_data`` input and sizes of 0
(``get_input_size_by_index``), and runs it only with ``acl.mdl.set_dataset_tensor_desc`` per input, its
output sizes known after each execute. Nothing could be allocated once at start-up, which is what the engine
is built on; a gear OM of the same model serves the same requests, so the refusal says how to build one.
"""

from __future__ import annotations

from ge_plugin import device


def refusal(model: device.OmModel, where: str) -> str:
    """Why ``model`` (mode "range") is not served, and the ATC flags that rebuild it as a gear model."""
    dynamic = [info for info in model.inputs if info.dynamic]
    shapes = ";".join(f"{info.name}:{','.join(map(str, info.dims))}" for info in model.inputs)
    positions = {d for info in dynamic for d in info.dynamic}
    if positions == {0}:
        flags = '--dynamic_batch_size="1,2,4,8" (the batch sizes to compile)'
    elif positions == {2, 3} and all(len(info.dims) == 4 for info in dynamic):
        flags = '--dynamic_image_size="224,224;448,448" (the height,width pairs to compile)'
    else:
        count = sum(len(info.dynamic) for info in dynamic)
        example = ";".join(",".join([str(v)] * count) for v in (16, 32))
        flags = (
            f'--input_format=ND --dynamic_dims="{example}" (per gear, one value for each of the {count} -1 '
            "dims, in --input_shape order)"
        )
    named = ", ".join(f"{info.name} {list(info.dims)}" for info in dynamic)
    return (
        f"{where}: the OM is a shape-range (dynamic-shape) model: {named} with no gears, as ATC builds it from "
        f"--input_shape ranges (such as 1~8) or -1 without a gear flag. ge-plugin serves gear models, whose "
        f"buffers are allocated once at start-up; rebuild the OM with --input_shape={shapes} and {flags}"
    )
