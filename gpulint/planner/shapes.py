"""Dynamic shapes: a batch factory that yields several batches (sequence-length buckets) gets a plan per shape.

    def make_batch():                       # plan.batch in gpulint.yaml
        for seq_len in (128, 256, 512):
            yield {"input_ids": torch.randint(0, 50257, (8, seq_len))}

`plan_buckets` traces and plans every yielded batch under the same budget and returns one gpulint.plan/1 dict:
its top level is the plan of the largest bucket (so every reader of a plan sees a valid plan), and
`"shapes"` lists each bucket's input signature with its own decisions and figures. `gpulint.apply` then picks
the decisions whose signature matches each forward's inputs; an unplanned shape runs under the largest
bucket's plan (eager addresses do not depend on shapes; the budget is held for the largest shape).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable
from typing import Any

from gpulint.planner.errors import PlanError

Signature = tuple[tuple[int, ...], ...]


def is_bucketed(make_batch: Callable[[], Any]) -> bool:
    """A batch factory that is a generator function yields one batch per shape bucket."""
    return inspect.isgeneratorfunction(make_batch)


def bucket_factories(make_batch: Callable[[], Any]) -> list[Callable[[], Any]]:
    """One zero-argument factory per yielded batch. Counting runs the generator under fake tensors (no memory)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        try:
            count = sum(1 for _ in make_batch())
        except Exception as exc:  # noqa: BLE001 -- the user's factory: report it on one line
            raise PlanError(f"plan.batch: the generator raised {type(exc).__name__}: {exc}") from None
    if count == 0:
        raise PlanError("plan.batch: the generator yielded no batch")

    def nth(k: int) -> Callable[[], Any]:
        return lambda: next(itertools.islice(make_batch(), k, None))

    return [nth(k) for k in range(count)]


def signature(batch: Any) -> Signature:
    """The shapes of a batch's tensors, in the order the model receives them (positional, then keyword)."""
    from gpulint.planner.trace import split_batch

    args, kwargs = split_batch(batch)
    return call_signature(args, kwargs)


def call_signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Signature:
    import torch
    import torch.utils._pytree as pytree

    return tuple(tuple(int(d) for d in t.shape) for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor))


def _size(sig: Signature) -> int:
    total = 0
    for shape in sig:
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def plan_buckets(
    build_model: Callable[[], Any],
    make_batch: Callable[[], Any],
    *,
    budget: int | None,
    hardware: str,
    loss_fn: Callable[..., Any] | None = None,
    optimizer: str = "adamw",
    dtype: str = "fp32",
    name: str = "",
) -> dict[str, Any]:
    """Plan every bucket the generator `make_batch` yields under the same absolute `budget`."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gpulint.planner.cost import node_times
    from gpulint.planner.greedy import GreedyPlanner
    from gpulint.planner.hardware import load_hardware
    from gpulint.planner.report import plan_dict
    from gpulint.planner.trace import trace_step

    hw = load_hardware(hardware)
    buckets = []
    for factory in bucket_factories(make_batch):
        with FakeTensorMode():
            sig = signature(factory())
        traced = trace_step(build_model, factory, loss_fn=loss_fn, optimizer=optimizer, dtype=dtype, name=name)
        result = GreedyPlanner(traced.graph, node_times(traced.graph, hw), hw.allocation_rounding).run(budget)
        plan = plan_dict(traced.graph, result, hardware=hw.name, trace_seconds=traced.seconds)
        if traced.data_dependent:
            plan["data_dependent"] = traced.data_dependent
        buckets.append((sig, {k: v for k, v in plan.items() if not k.startswith("_")}))
    signatures = [sig for sig, _ in buckets]
    if len(set(signatures)) != len(signatures):
        raise PlanError("plan.batch: two yielded batches have the same shapes; yield one batch per shape bucket")
    largest_sig, largest = max(buckets, key=lambda item: _size(item[0]))
    combined = dict(largest)
    combined["shapes"] = [
        {
            "signature": [list(shape) for shape in sig],
            "feasible": plan["feasible"],
            "baseline": plan["baseline"],
            "planned": plan["planned"],
            "decisions": plan["decisions"],
        }
        for sig, plan in buckets
    ]
    combined["largest_signature"] = [list(shape) for shape in largest_sig]
    combined["feasible"] = all(plan["feasible"] for _, plan in buckets)
    return combined


def shape_plans(plan: dict[str, Any]) -> dict[Signature, list[dict[str, Any]]]:
    """Decisions per input signature of a bucketed plan ({} for a single-shape plan)."""
    shapes = plan.get("shapes")
    if not shapes:
        return {}
    if not isinstance(shapes, list):
        raise PlanError("plan field 'shapes' must be a list")
    out: dict[Signature, list[dict[str, Any]]] = {}
    for i, entry in enumerate(shapes):
        try:
            sig = tuple(tuple(int(d) for d in shape) for shape in entry["signature"])
            decisions = entry["decisions"]
        except (KeyError, TypeError, ValueError):
            raise PlanError(f"plan field shapes[{i}] needs 'signature' (list of shapes) and 'decisions'") from None
        if not isinstance(decisions, list):
            raise PlanError(f"plan field shapes[{i}].decisions must be a list")
        out[sig] = decisions
    return out


def plan_config(config: Any, budget: int | None, hardware: str, *, measure: bool = False, sweep: int = 0) -> dict:
    """`gpulint plan` for a config whose batch factory is a generator: one plan per yielded shape."""
    from gpulint.planner.config import load_factory

    if measure or sweep:
        raise PlanError("--measure and --sweep take one batch shape; the batch factory yields several")
    build_model = load_factory(config.model, config.base_dir, "plan.model")
    make_batch = load_factory(config.batch, config.base_dir, "plan.batch")
    loss_fn = load_factory(config.loss, config.base_dir, "plan.loss") if config.loss else None
    return plan_buckets(
        build_model, make_batch, budget=budget, hardware=hardware, loss_fn=loss_fn, optimizer=config.optimizer,
        dtype=config.dtype, name=config.model.rpartition(":")[0].rpartition("/")[2] or config.model,
    )


def config_is_bucketed(config: Any) -> bool:
    from gpulint.planner.config import load_factory

    return is_bucketed(load_factory(config.batch, config.base_dir, "plan.batch"))
