"""Measure the real step (forward + backward) with and without a plan: peak bytes and step time, in both forms.

`measure_step` runs the compiled form (the planner's partitioner saves exactly the plan), `measure_eager` the eager
form (`gpulint.apply`); both measure through `peak_and_best_time`, so their figures compare.

CPU: a TorchDispatchMode tracks every storage an op returns with a weak reference and sums the live ones
after each op; parameters, buffers, the batch and optimizer state are registered before the step. This
counts exactly what the simulator counts (storages handed between ops; a kernel's private scratch is not
seen). CUDA: `torch.cuda.max_memory_allocated` after `reset_peak_memory_stats`.

The measured window is forward + backward of the second step (the first one creates the optimizer state).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Measured:
    peak_bytes: int
    step_time_s: float
    device: str
    loss: float


class LiveStorageTracker:
    """Sum of live storage bytes after every op; `peak` is the maximum seen."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self
        self.storages: dict[Any, int] = {}
        self.live = 0
        self.peak = 0

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                tracker.register(out)
                tracker.sample()
                return out

        self.mode = Mode()

    def register(self, value: Any) -> None:
        import torch
        import torch.utils._pytree as pytree
        from torch.multiprocessing.reductions import StorageWeakRef

        for t in pytree.tree_leaves(value):
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                storage = t.untyped_storage()
                ref = StorageWeakRef(storage)
                if ref not in self.storages:
                    self.storages[ref] = storage.nbytes()
                    self.live += storage.nbytes()

    def sample(self) -> None:
        dead = [ref for ref in self.storages if ref.expired()]
        for ref in dead:
            self.live -= self.storages.pop(ref)
        self.peak = max(self.peak, self.live)

    def __enter__(self) -> LiveStorageTracker:  # noqa: PYI034 - no typing.Self on Python 3.10
        self.sample()
        self.mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.mode.__exit__(*exc)


def make_optimizer(name: str, params: list[Any]) -> Any:
    import torch

    if name == "none" or not params:
        return None
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-4)
    return torch.optim.AdamW(params, lr=1e-4)


def measure_step(
    build_model: Callable[[], Any],
    make_batch: Callable[[], Any],
    plan: Any,
    *,
    loss_fn: Any = None,
    optimizer: str = "adamw",
    dtype: str = "fp32",
    device: str | None = None,
    repeats: int = 3,
    clock: Callable[[], float] | None = None,
    seed: int = 0,
    partition_fn: Callable[..., Any] | None = None,
) -> Measured:
    """Run forward+backward for real under `plan` (None: no recompute) and measure peak bytes and time."""
    import torch
    import torch.utils._pytree as pytree

    from gpulint.planner.backend import compile_step
    from gpulint.planner.step import cast_batch, cast_module, make_step_fn, torch_dtype

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(seed)
    model = build_model()
    cast_module(model, torch_dtype(dtype))
    model.to(device)
    batch = pytree.tree_map(
        lambda x: x.to(device) if isinstance(x, torch.Tensor) else x, cast_batch(make_batch(), torch_dtype(dtype))
    )
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(optimizer, params)
    if partition_fn is None:
        compiled = compile_step(make_step_fn(model, loss_fn), plan)
    else:  # another partitioner (the benchmarks measure torch's own the same way)
        from torch._dynamo.backends.debugging import boxed_nop
        from torch._functorch.aot_autograd import aot_function

        compiled = aot_function(make_step_fn(model, loss_fn), fw_compiler=boxed_nop, bw_compiler=boxed_nop,
                                partition_fn=partition_fn)

    def state() -> dict[str, Any]:
        return {**dict(model.named_parameters()), **dict(model.named_buffers())}

    def train_step() -> Any:
        loss = compiled(state(), batch)
        loss.backward()
        return loss

    def finish_step() -> None:
        if opt is not None:
            opt.step()
            opt.zero_grad(set_to_none=True)
        else:
            model.zero_grad(set_to_none=True)

    def tracked() -> list[Any]:
        return [list(state().values()), batch, opt.state if opt is not None else None]

    # The first step compiles and lets the optimizer create its state.
    peak, best, loss = peak_and_best_time(train_step, finish_step, tracked, device, repeats, clock)
    value = float(loss.detach().float())
    return Measured(peak_bytes=peak, step_time_s=best, device=device, loss=value)


def peak_and_best_time(
    step: Callable[[], Any], finish: Callable[[], None], tracked: Callable[[], list[Any]], device: str, repeats: int,
    clock: Callable[[], float] | None = None,
) -> tuple[int, float, Any]:
    """Measure a training step the same way for every path (compiled, eager, unplanned).

    One warm-up `step()` + `finish()` (the optimizer creates its state), then the peak bytes of the next step (CUDA:
    `max_memory_allocated`; CPU: a live-storage tracker that also counts what `tracked()` holds: parameters, batch,
    optimizer state), then the best wall time of `repeats` more steps. `finish()` (optimizer step, zero_grad) runs
    after every step and is not timed. Returns (peak bytes, best seconds, what the measured step returned).
    `clock` is what times a step (default `time.perf_counter`: wall time); on a shared CPU, a single-threaded step
    timed by `time.process_time` does not count the time other processes took the core.
    """
    import torch

    cuda = device.startswith("cuda")
    step()
    finish()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        value = step()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    else:
        tracker = LiveStorageTracker()
        tracker.register(tracked())
        with tracker:
            value = step()
        peak = tracker.peak
    finish()
    clock = clock or time.perf_counter
    times = []
    for _ in range(max(1, repeats)):
        if cuda:
            torch.cuda.synchronize()
        start = clock()
        step()
        if cuda:
            torch.cuda.synchronize()
        times.append(clock() - start)
        finish()
    return int(peak), min(times), value


def measure_eager(build_model: Callable[[], Any], make_batch: Callable[[], Any], plan: Any, *,
                  loss_fn: Any = None, optimizer: str = "adamw", dtype: str = "fp32",
                  device: str | None = None, repeats: int = 3,
                  clock: Callable[[], float] | None = None) -> Measured:
    """Run the real eager step with `gpulint.apply(model, plan)` (None: unplanned): peak bytes and best step time.

    Measured like the compiled step: the second step's forward and backward, with parameters, batch and optimizer
    state counted (CPU: live-storage tracker; CUDA: max_memory_allocated).
    """
    import warnings

    import torch
    import torch.utils._pytree as pytree

    from gpulint.planner.eager_apply import apply
    from gpulint.planner.step import as_step, cast_batch, cast_module, torch_dtype

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model = build_model().train()
    cast_module(model, torch_dtype(dtype))
    model.to(device)
    if plan is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # outside-layer decisions and KV cache: reported by apply() elsewhere
            apply(model, plan)
    batch = pytree.tree_map(
        lambda x: x.to(device) if isinstance(x, torch.Tensor) else x, cast_batch(make_batch(), torch_dtype(dtype))
    )
    user_step = as_step(loss_fn)
    opt = make_optimizer(optimizer, [p for p in model.parameters() if p.requires_grad])

    def step() -> Any:
        loss = user_step(model, batch)  # like the traced step, keeps nothing but the loss through backward
        loss.backward()
        return loss

    def finish() -> None:
        if opt is not None:
            opt.step()
        model.zero_grad(set_to_none=True)

    def tracked() -> list[Any]:
        return [list(model.parameters()), list(model.buffers()), batch, opt.state if opt else None]

    # The warm-up step also validates the plan against the model.
    peak, best, loss = peak_and_best_time(step, finish, tracked, device, repeats, clock)
    return Measured(peak_bytes=peak, step_time_s=best, device=device, loss=float(loss.detach().float()))
