"""Cost model: a roofline per op, the largest of what its work needs from the device, plus a launch:

    max(FLOPs / FLOP/s, bytes moved / memory bandwidth, elements / element rate) + launch overhead

- FLOPs come from torch's FlopCounter formulas (matmuls, convs, SDPA). The FLOP/s is the profile's peak or, in a
  profile `gpulint calibrate` measured, the rate this machine reached on the same kind of kernel (matmul, batched
  matmul, convolution) with the same smallest dimension (a matmul with an inner dimension of 16, as attention's
  heads have, runs far below one of 1024; a convolution over 16 channels far below a matmul).
- Every op that writes memory moves bytes (its inputs read, its outputs written), so memory-bound ops are never
  free; views, getitems and other aliases launch no kernel and cost nothing.
- Random ops (dropout's mask) and transcendental ones (exp, softmax, GELU, tanh...) do more per element than
  moving it; a calibrated profile measures their element rates. The shipped GPU profiles leave them out.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from gpulint.planner.hardware import Hardware

_DTYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}

# Ops whose elements each cost a transcendental function (forward and backward), by the op's base name.
TRANSCENDENTAL = frozenset({
    "exp", "exp2", "expm1", "log", "log1p", "log2", "tanh", "sigmoid", "gelu", "silu", "erf", "erfinv", "softmax",
    "_softmax", "_safe_softmax", "log_softmax", "_log_softmax", "softplus", "mish", "elu", "sin", "cos", "rsqrt",
    "sqrt", "pow", "tanh_backward", "sigmoid_backward", "gelu_backward", "silu_backward", "_softmax_backward_data",
    "_log_softmax_backward_data", "softplus_backward", "elu_backward", "mish_backward",
})
_BATCHED_MATMUL = frozenset({"bmm", "baddbmm"})


@dataclass(frozen=True)
class Work:
    """What one op does: the cost model's input."""

    flops: float = 0.0
    bytes_moved: int = 0  # bytes read + written (0 for views)
    elements: int = 0  # elements written
    special: str = ""  # "random" | "transcendental" | "" (see the module docstring)
    kernel: str = ""  # "matmul" | "batched_matmul" | "conv" | "" (another op with FLOPs: the peak)
    min_dim: int = 0  # the kernel's smallest dimension (a matmul's M, K or N; a convolution's channels)


def dtype_name(dtype: Any) -> str:
    return _DTYPE_NAMES.get(str(dtype).removeprefix("torch."), "fp32")


def _tensor_bytes(x: Any) -> int:
    import torch

    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_tensor_bytes(v) for v in x)
    return 0


def _elements(x: Any) -> int:
    import torch

    if isinstance(x, torch.Tensor):
        return x.numel()
    if isinstance(x, (list, tuple)):
        return sum(_elements(v) for v in x)
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


def special_kind(func: Any) -> str:
    """"random" for an op drawing random numbers (its tag), "transcendental" for one of TRANSCENDENTAL, else ""."""
    import torch

    if isinstance(func, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in func.tags:
        return "random"
    parts = str(func).split(".")
    name = parts[1] if len(parts) > 1 else parts[0]  # aten.<name>.<overload>
    return "transcendental" if name in TRANSCENDENTAL or name.rstrip("_") in TRANSCENDENTAL else ""


def fx_work(fx_node: Any, creates_storage: bool) -> Work:
    """The work of one FX call_function node, from its fake input/output values (views and getitems: none)."""
    import torch

    from gpulint.planner import rng

    if fx_node.target is operator.getitem or not creates_storage:
        return Work()
    if fx_node.target is rng.rng_state:
        return Work(bytes_moved=_tensor_bytes(fx_node.meta.get("val")))  # a copy of the generator state
    args = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in fx_node.args]
    if fx_node.target is rng.run_random:
        args = args[2:]  # (state, op, *the op's arguments)
    kwargs = {k: (v.meta.get("val") if isinstance(v, torch.fx.Node) else v) for k, v in fx_node.kwargs.items()}
    return op_work(rng.wrapped_op(fx_node), args, kwargs, fx_node.meta.get("val"))


def op_work(func: Any, args: Any, kwargs: dict[str, Any], out: Any) -> Work:
    """The work of one op call from its (fake or real) tensors: what the roofline charges."""
    from torch.utils.flop_counter import flop_registry

    moved = _tensor_bytes(out) + sum(_tensor_bytes(a) for a in args) + sum(_tensor_bytes(v) for v in kwargs.values())
    name = str(func)
    elements = _elements(out)
    special = special_kind(func)
    if "scaled_dot_product" in name and "attention" in name:
        q, k = args[0], args[1]
        return Work(_sdpa_flops(q, k, backward="backward" in name), moved, elements, kernel="batched_matmul",
                    min_dim=int(min(q.shape[-1], q.shape[-2], k.shape[-2])))
    flops = 0.0
    counter = flop_registry.get(getattr(func, "overloadpacket", None))
    if counter is not None:
        try:
            flops = float(counter(*args, **kwargs, out_val=out))
        except Exception:  # noqa: BLE001 - a formula that does not take these arguments: the bytes only
            flops = 0.0
    parts = name.split(".")
    kernel, min_dim = _kernel(parts[1] if len(parts) > 1 else "", args) if flops else ("", 0)
    return Work(flops, moved, elements, special, kernel, min_dim)


def _kernel(base: str, args: Any) -> tuple[str, int]:
    """The kind of FLOP kernel an op runs and its smallest dimension: a (batched) matmul's smallest of M, K and N, a
    convolution's smaller channel count; ("", 0) for the rest (charged at the peak)."""
    tensors = [a for a in args if hasattr(a, "shape")]
    if base in ("mm", "addmm", "bmm", "baddbmm", "matmul"):
        matrices = [t for t in tensors if len(t.shape) >= 2]
        if len(matrices) >= 2:
            a, b = matrices[-2], matrices[-1]
            return ("batched_matmul" if base in _BATCHED_MATMUL else "matmul",
                    int(min(a.shape[-2], a.shape[-1], b.shape[-1])))
    if base in ("convolution", "convolution_backward", "conv2d", "conv1d", "conv3d"):
        weight = args[2] if base == "convolution_backward" else args[1]
        if hasattr(weight, "shape") and len(weight.shape) >= 3:
            return "conv", int(min(weight.shape[0], weight.shape[1]))
    return "", 0


def op_time(work: Work, dtype: str, hw: Hardware, eager: bool = False) -> float:
    """Seconds one op takes on `hw`; 0 for views (no work). `eager`: an op of an eager step, which pays the eager
    overhead per op (Python modules, autograd recording) where the profile measured one."""
    if not work.flops and not work.bytes_moved:
        return 0.0
    overhead = hw.eager_overhead_s if eager and hw.eager_overhead_s is not None else hw.launch_overhead_s
    return kernel_time(work, dtype, hw) + overhead


def kernel_time(work: Work, dtype: str, hw: Hardware) -> float:
    """Seconds the device spends on one op's kernel: its roofline time, with no launch overhead (0 for views)."""
    seconds = work.bytes_moved / hw.memory_bandwidth
    if work.flops:
        seconds = max(seconds, work.flops / hw.flops_rate(work.kernel, work.min_dim, dtype))
    rate = hw.element_rates.get(work.special) if work.special else None
    if rate:
        seconds = max(seconds, work.elements / rate)
    return seconds


def node_times(graph: Any, hw: Hardware, eager: bool = False) -> list[float]:
    """Seconds of each node of `graph` on `hw` (`eager`: the graph of an eager step, eager_trace.py)."""
    return [op_time(n.work, n.dtype, hw, eager) for n in graph.nodes]
