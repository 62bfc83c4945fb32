"""`gpulint calibrate`: measure this machine and write a hardware profile the planner's step times come from.

    gpulint calibrate                          # this CPU -> gpulint-hardware.yaml
    gpulint calibrate --device cuda --out h.yaml
    gpulint plan gpulint.yaml --hardware gpulint-hardware.yaml --measure

Micro-benchmarks, each timed best of several runs at the current thread count (torch.get_num_threads()):
- matmul FLOP/s by the matmul's smallest dimension, per dtype: a matmul with an inner dimension of 16 runs far
  below one of 1024, so the profile keeps the curve (smallest dimension -> FLOP/s it reached) and the cost model
  reads an op's rate off it; the same for batched matmuls (attention's) and for 3x3 convolutions by channels;
- memory bandwidth: a large elementwise op (bytes read and written per second);
- element rates: random numbers drawn (dropout's mask) and a transcendental function (exp) per second, which cost
  more than the bytes they move;
- overhead per op: a training step of a model too small to do any work, divided by the ops it runs, compiled
  (`launch_overhead_s`: the FX graphs gpulint compiles run op by op) and eager (`eager_overhead_s`: Python modules
  and autograd recording on top); and what selective checkpointing adds to each op it sees, in the forward and
  again in the recompute (`checkpoint_overhead_s`: its policy runs in a Python dispatch mode);
- what the launch profile prices beyond kernels: a tensor op called from Python with no module or autograd
  (`op_overhead_s`: per-tensor loops and optimizer steps run those), on a CPU a foreach op's cost per tensor
  (`foreach_tensor_overhead_s`: CPU foreach ops loop over their tensors), a host-device round trip
  (`sync_overhead_s`: `.item()` of a ready value) and, on a GPU, a pinned host-to-device copy (`h2d_bandwidth`) and a kernel of a replayed CUDA graph
  (`graph_kernel_overhead_s`).

The shipped profiles (gpulint/planner/hardware/) hold vendors' dense peak figures; a calibrated one holds what
this machine did, so a prediction can be checked against `--measure` on the same machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DTYPES = ("fp32", "bf16", "fp16")
DEFAULT_OUT = "gpulint-hardware.yaml"
_SLOW = 0.1  # seconds: a single call slower than this ends a curve (larger sizes run no faster)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="what to measure (default: cpu)")
    parser.add_argument("--out", metavar="FILE", default=DEFAULT_OUT,
                        help=f"the profile to write (default: {DEFAULT_OUT}); pass it to `gpulint plan --hardware`")
    parser.add_argument("--name", help="the profile's name (default: calibrated-<device>)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats (a rough profile)")


def run(args: argparse.Namespace) -> int:
    from gpulint.fileio import atomic_write
    from gpulint.planner.errors import PlanError

    try:
        import torch
    except ImportError:
        raise PlanError("gpulint calibrate needs torch: pip install 'gpulint[plan]'") from None
    if args.device == "cuda" and not torch.cuda.is_available():
        raise PlanError("--device cuda: this torch has no CUDA device")
    profile = calibrate(args.device, quick=args.quick, name=args.name)
    text = to_yaml(profile, command=" ".join(["gpulint calibrate", *sys.argv[2:]]))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, text)
    flops = ", ".join(f"{dtype} {profile['flops'][dtype] / 1e9:.1f}" for dtype in DTYPES)
    print(f"gpulint calibrate: {profile['name']} ({profile['threads']} threads): matmul peak GFLOP/s {flops}; "
          f"memory {profile['memory_bandwidth'] / 1e9:.1f} GB/s; launch {profile['launch_overhead_s'] * 1e6:.1f} us; "
          f"wrote {out}")
    return 0


def calibrate(device: str = "cpu", *, quick: bool = False, name: str | None = None) -> dict[str, Any]:
    """Measure and return a profile (the fields of a hardware YAML, with the matmul curve per dtype)."""
    import torch

    sizes = (16, 64, 256) if quick else (8, 16, 32, 64, 128, 256, 512, 1024)
    curves: dict[str, list[list[float]]] = {}
    batched: dict[str, list[list[float]]] = {}
    conv: dict[str, list[list[float]]] = {}
    for dtype in DTYPES:
        torch_dtype = getattr(torch, {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[dtype])
        curves[dtype] = _matmul_curve(device, torch_dtype, sizes, quick) or curves.get("fp32", [])
        batched[dtype] = _batched_curve(device, torch_dtype, sizes[:6], quick) or batched.get("fp32", [])
        conv[dtype] = _conv_curve(device, torch_dtype, quick) or conv.get("fp32", [])
    return {
        "name": name or f"calibrated-{device}",
        "kind": "cuda" if device == "cuda" else "cpu",
        "threads": torch.get_num_threads(),
        "flops": {dtype: max((rate for _flops, rate in curves[dtype]), default=1e9) for dtype in DTYPES},
        "matmul": curves,
        "batched_matmul": batched,
        "conv": conv,
        "memory_bandwidth": _bandwidth(device, quick),
        "element_rates": _element_rates(device, quick),
        "memory_capacity": _capacity(device),
        **_overheads(device, quick),
        **_launch_figures(device, quick),
        "allocation_rounding": 512 if device == "cuda" else 1,
    }


def _best_seconds(run: Callable[[], Any], device: str, repeats: int, calls: int = 1) -> float:
    """The best of `repeats` timings of `calls` calls, per call."""
    import torch

    run()  # warm up (allocations, kernel choice)
    best = math.inf
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            run()
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def _matmul_curve(device: str, dtype: Any, sizes: tuple[int, ...], quick: bool) -> list[list[float]]:
    """[[smallest dimension n, FLOP/s]] for (m x n) @ (n x m) and (m x m) @ (m x n) matmuls with m = 1024 (4096 on
    a GPU): activations times a weight, a narrow one either way; the slower of the two shapes."""
    import torch

    m = 4096 if device == "cuda" else 1024
    curve = []
    for n in sizes:
        rates = []
        for left, right in (((m, n), (n, m)), ((m, m), (m, n))):
            try:
                a = torch.randn(*left, device=device).to(dtype)
                b = torch.randn(*right, device=device).to(dtype)
            except RuntimeError:
                return []
            flops = 2.0 * left[0] * left[1] * right[1]
            try:
                seconds = _best_seconds(lambda a=a, b=b: torch.mm(a, b), device, 3 if quick else 5,
                                        max(1, int(2e8 // flops)))
            except RuntimeError:  # a dtype this device has no matmul kernel for
                return []
            rates.append(flops / seconds)
        curve.append([n, min(rates)])
        if 2.0 * m * m * n / curve[-1][1] > _SLOW:
            break  # a dtype this device runs slowly (fp16 on most CPUs): its rate has stopped changing
    return curve


def _batched_curve(device: str, dtype: Any, sizes: tuple[int, ...], quick: bool) -> list[list[float]]:
    """[[smallest dimension n, FLOP/s]] for batches of 32 (256 x n) @ (n x 256) matmuls: attention's scores over
    heads of width n."""
    import torch

    t = 256
    curve = []
    for n in sizes:
        try:
            a = torch.randn(32, t, n, device=device).to(dtype)
            b = torch.randn(32, n, t, device=device).to(dtype)
            flops = 2.0 * 32 * t * n * t
            seconds = _best_seconds(lambda a=a, b=b: torch.bmm(a, b), device, 3 if quick else 5,
                                    max(1, int(2e8 // flops)))
        except RuntimeError:
            return []
        curve.append([n, flops / seconds])
        if seconds > _SLOW:
            break
    return curve


def _conv_curve(device: str, dtype: Any, quick: bool) -> list[list[float]]:
    """[[channels c, FLOP/s]] for 3x3 convolutions of c channels to c over a batch of 16 32x32 images."""
    import torch
    from torch.nn import functional as F

    curve = []
    for c in ((16, 64) if quick else (8, 16, 32, 64, 128, 256)):
        try:
            x = torch.randn(16, c, 32, 32, device=device).to(dtype)
            w = torch.randn(c, c, 3, 3, device=device).to(dtype)
            flops = 2.0 * 16 * c * 32 * 32 * c * 9
            seconds = _best_seconds(lambda x=x, w=w: F.conv2d(x, w, padding=1), device, 3 if quick else 5,
                                    max(1, int(2e8 // flops)))
        except RuntimeError:
            return []
        curve.append([c, flops / seconds])
        if seconds > _SLOW:
            break
    return curve


def _element_rates(device: str, quick: bool) -> dict[str, float]:
    """Elements per second of drawing random numbers (bernoulli with dropout's usual keep probability, 0.9) and of a
    transcendental function (exp), on half a million elements (an activation's size)."""
    import torch

    n = 2**19 * (16 if device == "cuda" else 1)
    x = torch.rand(n, device=device)
    out = torch.empty_like(x)
    repeats = 3 if quick else 7
    random = _best_seconds(lambda: out.bernoulli_(0.9), device, repeats)
    transcendental = _best_seconds(lambda: torch.exp(x, out=out), device, repeats)
    return {"random": n / random, "transcendental": n / transcendental}


def _bandwidth(device: str, quick: bool) -> float:
    """Bytes read and written per second by a large elementwise op."""
    import torch

    n = (8 if quick else 32) * 2**20 // 4 * (8 if device == "cuda" else 1)
    a = torch.rand(n, device=device)
    out = torch.empty_like(a)
    seconds = _best_seconds(lambda: torch.add(a, 1.0, out=out), device, 3 if quick else 7)
    return 2 * a.numel() * a.element_size() / seconds


def _overheads(device: str, quick: bool) -> dict[str, float]:
    """Seconds per op of a training step that does no work (16 layers of 16 features on one sample), compiled (the
    planner's compile backend, FX graphs run op by op) and eager: each step's best time over the ops it runs that
    the cost model charges (views are free)."""
    import torch

    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    from gpulint.planner.backend import compile_step
    from gpulint.planner.eager_trace import trace_eager
    from gpulint.planner.graph import FWD
    from gpulint.planner.step import make_step_fn
    from gpulint.planner.trace import trace_step

    def build() -> Any:
        return torch.nn.Sequential(*(layer for _ in range(16) for layer in (torch.nn.Linear(16, 16), torch.nn.Tanh())))

    def batch() -> Any:
        return torch.ones(1, 16)

    repeats = 5 if quick else 20
    model = build().to(device)
    x = batch().to(device)
    compiled = compile_step(make_step_fn(model, None), None)
    state = {**dict(model.named_parameters()), **dict(model.named_buffers())}

    def compiled_step() -> None:
        compiled(state, x).backward()

    def eager_step() -> None:
        model(x).sum().backward()

    def policy(_ctx: Any, _op: Any, *_args: Any, **_kwargs: Any) -> Any:
        return CheckpointPolicy.PREFER_RECOMPUTE

    def checkpointed_step() -> None:  # as gpulint.apply runs a layer: non-reentrant, a policy on every op
        checkpoint(model, x, use_reentrant=False,
                   context_fn=lambda: create_selective_checkpoint_contexts(policy)).sum().backward()

    compiled_ops = sum(1 for n in trace_step(build, batch, optimizer="none").graph.nodes if n.work.bytes_moved)
    eager_graph = trace_eager(build, batch, optimizer="none").graph
    eager_ops = sum(1 for n in eager_graph.nodes if n.work.bytes_moved)
    forward_ops = sum(1 for n in eager_graph.nodes if n.kind == FWD and n.op != "getitem")
    forward_work = sum(1 for n in eager_graph.nodes if n.kind == FWD and n.work.bytes_moved)
    eager = _best_seconds(eager_step, device, repeats) / eager_ops
    extra = _best_seconds(checkpointed_step, device, repeats) - eager * (eager_ops + forward_work)  # + the recompute
    return {"launch_overhead_s": _best_seconds(compiled_step, device, repeats) / compiled_ops,
            "eager_overhead_s": eager, "checkpoint_overhead_s": max(0.0, extra / (2 * forward_ops))}


def _launch_figures(device: str, quick: bool) -> dict[str, Any]:
    """A host-device round trip; on a GPU, a pinned host-to-device copy's bandwidth and the time per kernel of a
    replayed CUDA graph of tiny kernels (what a captured step pays instead of a launch)."""
    import torch

    repeats = 5 if quick else 20
    ready = torch.ones(1, device=device)
    tensors = [torch.ones(1, device=device) for _ in range(64)]
    with torch.no_grad():
        op = _best_seconds(lambda: ready.mul(2), device, repeats, calls=100)  # allocates, as most ops do
        foreach = _best_seconds(lambda: torch._foreach_add_(tensors, 1), device, repeats, calls=10)
    out: dict[str, Any] = {"op_overhead_s": op,
                           "sync_overhead_s": _best_seconds(ready.item, device, repeats, calls=100),
                           "sync_source": "measured by gpulint calibrate: `.item()` of a ready tensor"}
    if device != "cuda":
        return {**out, "foreach_tensor_overhead_s": foreach / len(tensors)}
    host = torch.empty((16 if quick else 64) * 2**20, dtype=torch.uint8).pin_memory()
    target = torch.empty_like(host, device=device)
    seconds = _best_seconds(lambda: target.copy_(host, non_blocking=True), device, 3 if quick else 7)
    kernels = 64
    x = torch.zeros(1, device=device)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm up on a side stream, as capture wants
            x.add_(1)
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        for _ in range(kernels):
            x.add_(1)
    replay = _best_seconds(graph.replay, device, repeats)
    return {**out, "h2d_bandwidth": host.numel() / seconds,
            "h2d_source": "measured by gpulint calibrate: a pinned host-to-device copy",
            "graph_kernel_overhead_s": replay / kernels,
            "graph_source": "measured by gpulint calibrate: a replayed CUDA graph of 64 one-element kernels"}


def _capacity(device: str) -> int:
    import torch

    if device == "cuda":
        return int(torch.cuda.get_device_properties(0).total_memory)
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 16 * 2**30


def to_yaml(profile: dict[str, Any], command: str = "gpulint calibrate") -> str:
    """The profile as a hardware YAML (the shape gpulint/planner/hardware/*.yaml have, plus the matmul curve)."""
    lines = [
        f"# Measured by `{command}` on {datetime.date.today().isoformat()}, {profile['threads']} threads.",
        "# matmul: a matmul's smallest dimension -> the FLOP/s it reached (the cost model reads an op's rate off it);",
        "# batched_matmul, conv: the same for batched matmuls and for convolutions (by channels);",
        "# element_rates: elements per second.",
        f"name: {profile['name']}",
        f"kind: {profile['kind']}",
        f"threads: {profile['threads']}",
        "flops:",
        *(f"  {dtype}: {profile['flops'][dtype]:.4g}" for dtype in DTYPES),
        "matmul:",
        *(f"  {dtype}: [{', '.join(f'[{f:.4g}, {r:.4g}]' for f, r in profile['matmul'][dtype])}]" for dtype in DTYPES),
        "batched_matmul:",
        *(f"  {dtype}: [{', '.join(f'[{f:.4g}, {r:.4g}]' for f, r in profile['batched_matmul'][dtype])}]"
          for dtype in DTYPES),
        "conv:",
        *(f"  {dtype}: [{', '.join(f'[{f:.4g}, {r:.4g}]' for f, r in profile['conv'][dtype])}]" for dtype in DTYPES),
        f"memory_bandwidth: {profile['memory_bandwidth']:.4g}",
        "element_rates:",
        *(f"  {kind}: {rate:.4g}" for kind, rate in profile["element_rates"].items()),
        f"memory_capacity: {profile['memory_capacity']}",
        f"launch_overhead_s: {profile['launch_overhead_s']:.4g}",
        f"eager_overhead_s: {profile['eager_overhead_s']:.4g}",
        f"checkpoint_overhead_s: {profile['checkpoint_overhead_s']:.4g}",
        *(f"{key}: {profile[key]:.4g}" for key in ("op_overhead_s", "foreach_tensor_overhead_s", "sync_overhead_s",
                                                   "graph_kernel_overhead_s", "h2d_bandwidth") if key in profile),
        *(f"{key}: {json.dumps(profile[key])}" for key in ("sync_source", "graph_source", "h2d_source")
          if key in profile),
        f"allocation_rounding: {profile['allocation_rounding']}",
    ]
    return "\n".join(lines) + "\n"
