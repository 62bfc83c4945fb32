"""Cost model: a roofline per op, max(FLOPs / peak FLOP/s for its dtype, bytes moved / HBM bandwidth) + a launch.

FLOPs come from torch's FlopCounter formulas (matmuls, convs, SDPA). Ops the counter does not know (pointwise,
norms, softmax) count 0 FLOPs but still move bytes, so memory-bound ops are never free. Views, getitems and
other aliasing ops launch no kernel and cost nothing. CPU-only op names map to the CUDA kernels a GPU would run.
"""

from __future__ import annotations

import operator
from typing import Any

from gpulint.planner.hardware import Hardware

_DTYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def dtype_name(dtype: Any) -> str:
    return _DTYPE_NAMES.get(str(dtype).removeprefix("torch."), "fp32")


def _tensor_bytes(x: Any) -> int:
    import torch

    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_tensor_bytes(v) for v in x)
    return 0


def _sdpa_flops(q: Any, k: Any, backward: bool) -> float:
    """Attention matmuls: QK^T and PV, 2*B*H*Lq*Lk*D each; backward does 2x the forward's (4 matmuls)."""
    *batch, lq, d = q.shape
    lk = k.shape[-2]
    bh = 1
    for b in batch:
        bh *= b
    forward = 4.0 * bh * lq * lk * d
    return 2.0 * forward if backward else forward


def flops_and_bytes(fx_node: Any, creates_storage: bool) -> tuple[float, int]:
    """(FLOPs, bytes moved) of one FX call_function node, from its fake input/output values."""
    import torch

    from gpulint.planner import rng

    if fx_node.target is operator.getitem or not creates_storage:
        return 0.0, 0  # a view or alias: no kernel
    if fx_node.target is rng.rng_state:
        return 0.0, _tensor_bytes(fx_node.meta.get("val"))  # a copy of the generator state
    args = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in fx_node.args]
    if fx_node.target is rng.run_random:
        args = args[2:]  # (state, op, *the op's arguments)
    kwargs = {k: (v.meta.get("val") if isinstance(v, torch.fx.Node) else v) for k, v in fx_node.kwargs.items()}
    return op_flops_and_bytes(rng.wrapped_op(fx_node), args, kwargs, fx_node.meta.get("val"))


def op_flops_and_bytes(func: Any, args: Any, kwargs: dict[str, Any], out: Any) -> tuple[float, int]:
    """(FLOPs, bytes moved) of one op call from its (fake or real) tensors: what the roofline charges."""
    from torch.utils.flop_counter import flop_registry

    moved = _tensor_bytes(out) + sum(_tensor_bytes(a) for a in args) + sum(_tensor_bytes(v) for v in kwargs.values())
    name = str(func)
    if "scaled_dot_product" in name and "attention" in name:
        return _sdpa_flops(args[0], args[1], backward="backward" in name), moved
    counter = flop_registry.get(getattr(func, "overloadpacket", None))
    if counter is None:
        return 0.0, moved
    try:
        return float(counter(*args, **kwargs, out_val=out)), moved
    except Exception:  # noqa: BLE001 - a formula that does not accept these arguments: count the bytes only
        return 0.0, moved


def op_time(flops: float, bytes_moved: int, dtype: str, hw: Hardware) -> float:
    """Seconds one op takes on `hw`; 0 for views (no FLOPs, no bytes)."""
    if flops == 0.0 and bytes_moved == 0:
        return 0.0
    return max(flops / hw.flops[dtype], bytes_moved / hw.memory_bandwidth) + hw.launch_overhead_s


def node_times(graph: Any, hw: Hardware) -> list[float]:
    return [op_time(n.flops, n.bytes_moved, n.dtype, hw) for n in graph.nodes]
