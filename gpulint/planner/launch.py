"""The step's launch profile: how much of a training step is kernel work and how much is launching kernels, from
the trace, without a GPU and without a profiler.

    launch = launch_profile(graph, hw, optimizer="adamw", batch_bytes=..., data_dependent=..., shapes=...)
    launch.launch_bound, launch.graph_saving_s, launch.blockers

The model, stated plainly (every figure it prints is a model estimate):
- Kernels: every op of the traced step that moves memory or does FLOPs (views launch nothing), plus the ops of the
  optimizer's step (its default foreach form), counted by running the optimizer once on small tensors
  (`optimizer_ops`); those are plain tensor ops called from Python, at the profile's `op_overhead_s` each.
- Each kernel's device time is its roofline time (cost.py) with no overhead; the host spends the profile's eager
  overhead per kernel dispatching it (`eager_overhead_s`, measured by `gpulint calibrate`; the shipped GPU profiles
  have none, so their `launch_overhead_s` stands in, and the report says which it was).
- On a GPU the host runs ahead of the device, so the step takes the longer of the two: max(host, device). On a CPU
  the host runs the kernels itself: host + device. The launch share is the part of the step the device is not
  running kernels: (step - device) / step. A step is launch-bound when that share is LAUNCH_BOUND_SHARE or more.
- Replayed as one CUDA graph, the step pays one launch and `graph_kernel_overhead_s` per kernel instead of the
  host's dispatch: device + kernels x graph overhead + one launch. The saving is the difference.
- The batch's host-to-device copy takes batch bytes / `h2d_bandwidth` (the profile states the figure's source);
  a blocking copy holds the step that long, a pinned non_blocking copy prefetched on a side stream hides it behind
  the step's compute up to the compute's length.
- A collective holds the step for twice its bytes over `interconnect_bandwidth` (a ring all-reduce sends and
  receives each byte about twice); a blocking one adds that to the step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpulint.planner import planfile
from gpulint.planner.cost import kernel_time
from gpulint.planner.graph import BWD, FWD, PARAM, JointGraph
from gpulint.planner.hardware import Hardware

LAUNCH_BOUND_SHARE = 0.25  # a quarter of the step or more spent waiting on launches
# multi_tensor_apply launches one kernel per chunk of tensors; with four tensor lists (Adam's params, grads and two
# moments) a chunk holds at most 36 tensors (ATen's depth_to_max_tensors).
FOREACH_TENSORS_PER_KERNEL = 36
COLLECTIVE = "collective communication"
DYNAMIC_OPS = ("nonzero", "masked_select", "unique", "_unique", "masked_scatter", "repeat_interleave", "index.Tensor")


def launch_profile(graph: JointGraph, hw: Hardware, *, optimizer: str = "adamw", batch_bytes: int | None = None,
                   data_dependent: Iterable[planfile.ValueRead] = (), shapes: int = 1) -> planfile.Launch:
    """The launch profile of the step traced as `graph` on `hw` (see the module docstring)."""
    overhead, overhead_source = dispatch_overhead(hw)
    op, op_source = op_overhead(hw)
    times = [kernel_time(n.work, n.dtype, hw) for n in graph.nodes if _launches(n)]
    params = [n for n in graph.nodes if n.kind == PARAM]
    param_bytes = sum(graph.storage_bytes[s] for n in params for s in n.creates)
    ops = optimizer_ops(optimizer) if params else OptimizerOps()
    optimizer_host = ops.host_seconds(len(params), hw)
    kernels = len(times) + ops.dispatches(len(params))
    device = sum(times) + param_bytes * ops.bytes_per_param_byte / hw.memory_bandwidth
    host = len(times) * overhead + optimizer_host
    gpu = hw.kind == "cuda"
    step = max(host, device) if gpu else host + device
    share = (step - device) / step if step > 0 else 0.0
    graph_step = device + kernels * hw.graph_kernel_overhead_s + hw.launch_overhead_s if gpu else 0.0
    collectives = [n for n in graph.nodes if n.kind == FWD and n.excluded == COLLECTIVE]
    collective_bytes = sum(n.work.bytes_moved for n in collectives) // 2  # read and written: the payload once
    batch = graph.input_bytes if batch_bytes is None else batch_bytes
    return planfile.Launch(
        kind=hw.kind, kernels=kernels, small_kernels=sum(1 for t in times if t < overhead),
        device_time_s=device, overhead_per_kernel_s=overhead, overhead_source=overhead_source, host_time_s=host,
        step_time_s=step, launch_share=share, launch_bound=share >= LAUNCH_BOUND_SHARE,
        graph_step_time_s=graph_step, graph_saving_s=max(0.0, step - graph_step) if gpu else 0.0,
        graph_source=hw.graph_source if gpu else "",
        blockers=blockers(graph, optimizer, data_dependent, shapes) if gpu else [],
        parameter_tensors=len(params), parameter_bytes=param_bytes, op_overhead_s=op, op_source=op_source,
        foreach_op_s=foreach_op_seconds(len(params), hw),
        optimizer=optimizer, optimizer_ops=ops.dispatches(len(params)), optimizer_host_s=optimizer_host,
        optimizer_loop_host_s=ops.host_seconds(len(params), hw, foreach=False),
        sync_overhead_s=hw.sync_overhead_s, sync_source=hw.sync_source,
        batch_bytes=batch, h2d_bandwidth=hw.h2d_bandwidth, h2d_source=hw.h2d_source,
        h2d_time_s=batch / hw.h2d_bandwidth if hw.h2d_bandwidth else 0.0,
        collectives=len(collectives), collective_bytes=collective_bytes,
        collective_time_s=2 * collective_bytes / hw.interconnect_bandwidth if hw.interconnect_bandwidth else 0.0,
        interconnect_bandwidth=hw.interconnect_bandwidth, interconnect_source=hw.interconnect_source,
        memory_bandwidth=hw.memory_bandwidth,
    )


def dispatch_overhead(hw: Hardware) -> tuple[float, str]:
    """Seconds the host spends per kernel of an eager step, and where the figure comes from."""
    if hw.eager_overhead_s is not None:
        return hw.eager_overhead_s, f"eager_overhead_s of {hw.name}, measured by gpulint calibrate"
    return hw.launch_overhead_s, (f"launch_overhead_s of {hw.name} (no eager overhead measured: run "
                                  f"`gpulint calibrate` on the training machine for one)")


def _launches(node: Any) -> bool:
    return node.kind in (FWD, BWD) and bool(node.work.bytes_moved or node.work.flops)


def blockers(graph: JointGraph, optimizer: str, data_dependent: Iterable[planfile.ValueRead],
             shapes: int) -> list[planfile.Blocker]:
    """What keeps this step from being captured as one CUDA graph, as far as the trace shows."""
    out: list[planfile.Blocker] = []
    for read in data_dependent:
        dynamic = any(name in read.op for name in DYNAMIC_OPS)
        out.append(planfile.Blocker(
            "dynamic-shape" if dynamic else "sync",
            f"`{read.op}`: its output's shape depends on tensor values" if dynamic else
            f"`{read.op}`: the host reads a tensor value (a sync; capture forbids it)", read.path, read.line))
    seen = {(b.path, b.line) for b in out}
    for node in graph.nodes:
        if node.kind != FWD or not node.excluded:
            continue
        path, line = node.source or ("", 0)
        if (path, line) in seen:
            continue
        if node.excluded == "data-dependent output":
            kind, reason = "dynamic-shape", f"`{node.op}`: its output's shape depends on tensor values"
        elif node.excluded.startswith("random op with its own generator"):
            kind, reason = "rng", f"`{node.op}` draws from a generator of its own, outside the graph's"
        else:
            continue
        seen.add((path, line))
        out.append(planfile.Blocker(kind, reason, str(path), int(line)))
    if shapes > 1:
        out.append(planfile.Blocker("dynamic-shape", f"the batch comes in {shapes} shapes: a graph is captured per "
                                                     "shape (or pad the batches to a few lengths)"))
    if optimizer in ("adam", "adamw"):
        out.append(planfile.Blocker("cpu-op", "Adam keeps its step counters in host tensors: build it with "
                                              "`capturable=True` to capture the optimizer step too"))
    return out


@dataclass(frozen=True)
class OptimizerOps:
    """The ops a torch optimizer dispatches per step, counted by running it (`optimizer_ops`): its for-loop form
    (foreach=False) and its foreach form, each as fixed + per parameter tensor (host reads of Adam's step counters
    are per tensor in both), the foreach form's multi-tensor ops, and the bytes its step moves per parameter byte."""

    loop_fixed: int = 0
    loop_per_tensor: int = 0
    foreach_fixed: int = 0
    foreach_per_tensor: int = 0
    foreach_ops: int = 0
    bytes_per_param_byte: float = 0.0

    def host_seconds(self, tensors: int, hw: Hardware, foreach: bool = True) -> float:
        """The host's time dispatching one step over `tensors` parameter tensors: every op at `op_overhead`; a
        foreach op launches a kernel per FOREACH_TENSORS_PER_KERNEL tensors on a GPU and, on a CPU, loops over its
        tensors in C++ (`foreach_tensor_overhead_s` each)."""
        op, _source = op_overhead(hw)
        if not foreach:
            return (self.loop_fixed + self.loop_per_tensor * tensors) * op
        return ((self.foreach_fixed + self.foreach_per_tensor * tensors) * op
                + self.foreach_ops * foreach_op_seconds(tensors, hw))

    def dispatches(self, tensors: int) -> int:
        """Ops the foreach form dispatches for `tensors` parameter tensors."""
        return self.foreach_fixed + self.foreach_per_tensor * tensors + self.foreach_ops


def foreach_op_seconds(tensors: int, hw: Hardware) -> float:
    """The host's time for one foreach op over `tensors` tensors: on a GPU a launch per FOREACH_TENSORS_PER_KERNEL
    tensors; on a CPU a loop over them in C++ (`foreach_tensor_overhead_s` each, else `op_overhead_s`)."""
    op, _source = op_overhead(hw)
    if hw.kind == "cuda":
        return op * max(1, math.ceil(tensors / FOREACH_TENSORS_PER_KERNEL))
    return max(1, tensors) * (hw.foreach_tensor_overhead_s or op)


def op_overhead(hw: Hardware) -> tuple[float, str]:
    """Seconds per tensor op called from Python with no module or autograd (optimizer steps, per-tensor loops)."""
    if hw.op_overhead_s is not None:
        return hw.op_overhead_s, f"op_overhead_s of {hw.name}, measured by gpulint calibrate"
    return hw.launch_overhead_s, f"launch_overhead_s of {hw.name}"


_OPTIMIZER_OPS: dict[str, OptimizerOps] = {}


def optimizer_ops(optimizer: str) -> OptimizerOps:
    """The ops of torch's `optimizer` (a config name), counted once by running it on small CPU tensors under a
    dispatch mode (views and the profiler's markers left out)."""
    if optimizer not in _OPTIMIZER_OPS:
        _OPTIMIZER_OPS[optimizer] = _count_optimizer(optimizer)
    return _OPTIMIZER_OPS[optimizer]


def _count_optimizer(optimizer: str) -> OptimizerOps:
    if optimizer == "none":
        return OptimizerOps()
    loop1, loop_bytes = _run_optimizer(optimizer, tensors=1, foreach=False)
    loop2, _ = _run_optimizer(optimizer, tensors=2, foreach=False)
    each1, _ = _run_optimizer(optimizer, tensors=1, foreach=True)
    each2, _ = _run_optimizer(optimizer, tensors=2, foreach=True)
    multi = sum(1 for name in each1 if name.startswith("aten._foreach_"))
    single1, single2 = len(each1) - multi, len(each2) - multi
    return OptimizerOps(
        loop_fixed=2 * len(loop1) - len(loop2), loop_per_tensor=len(loop2) - len(loop1),
        foreach_fixed=2 * single1 - single2, foreach_per_tensor=single2 - single1, foreach_ops=multi,
        bytes_per_param_byte=loop_bytes / (_PARAMETER_ELEMENTS * 4),
    )


_PARAMETER_ELEMENTS = 1024


def _run_optimizer(optimizer: str, tensors: int, foreach: bool) -> tuple[list[str], int]:
    """The ops of the second step of `optimizer` (the first makes its state), and the bytes they move."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from gpulint.planner.cost import op_work
    from gpulint.planner.eager_trace import _is_view

    params = [torch.nn.Parameter(torch.ones(_PARAMETER_ELEMENTS)) for _ in range(tensors)]
    kind, options = {"sgd": (torch.optim.SGD, {}), "sgd-momentum": (torch.optim.SGD, {"momentum": 0.9}),
                     "adam": (torch.optim.Adam, {}), "adamw": (torch.optim.AdamW, {})}[optimizer]
    opt = kind(params, lr=1e-3, foreach=foreach, **options)
    names: list[str] = []
    moved = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.namespace != "profiler" and not _is_view(func):
                names.append(str(func))
                moved[0] += op_work(func, args, kwargs or {}, out).bytes_moved
            return out

    for p in params:
        p.grad = torch.ones_like(p)
    opt.step()
    with Count():
        opt.step()
    return names, moved[0]


def padding_share(padded_length: int, mean_length: float) -> planfile.Padding:
    """The share of the step's work spent on pad positions: every token-wise op (the linear layers, norms and
    activations) scales with the padded length, so 1 - mean / padded of it is padding. Attention's score matmuls
    scale with its square and waste more: this share is the lower estimate."""
    share = max(0.0, 1.0 - mean_length / padded_length) if padded_length > 0 else 0.0
    return planfile.Padding(padded_length=padded_length, mean_length=mean_length, share=share)
