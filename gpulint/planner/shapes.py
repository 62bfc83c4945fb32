"""Dynamic shapes: a batch factory that yields several batches (sequence-length buckets) gets a plan per shape.

    def make_batch():                       # plan.batch in gpulint.yaml
        for seq_len in (128, 256, 512):
            yield {"input_ids": torch.randint(0, 50257, (8, seq_len))}

`planning.plan_buckets` traces and plans every yielded batch under the same budget and returns one plan: its top
level is the plan of the largest bucket (so every reader of a plan sees a valid plan), and `shapes` lists each
bucket's input signature with its own decisions and figures. `gpulint.apply` then picks
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
    from gpulint.planner.step import split_batch

    args, kwargs = split_batch(batch)
    return call_signature(args, kwargs)


def call_signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Signature:
    import torch
    import torch.utils._pytree as pytree

    return tuple(tuple(int(d) for d in t.shape) for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor))


def size(sig: Signature) -> int:
    """Elements in a batch of this signature (the largest bucket's plan is the top level)."""
    total = 0
    for shape in sig:
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def config_is_bucketed(config: Any) -> bool:
    from gpulint.planner.config import load_factory

    return is_bucketed(load_factory(config.batch, config.base_dir, "plan.batch"))
