"""The planner: trace a training step with fake tensors, simulate its memory, plan recomputation under an
absolute budget, and apply the plan.

    gpulint.apply(model, plan)                -> eager: selective activation checkpointing, installed in place
    gpulint.planner.compile(model, plan)      -> step(batch) -> loss, with exactly the planned saved set
    gpulint.planner.gpulint_backend(plan)     -> a torch.compile backend doing the same

Importing this package imports nothing (the linter and the bot must run without torch); each name loads on first use.
How the modules stand on each other: docs/planner.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["apply", "compile", "gpulint_backend"]


def __getattr__(name: str) -> Any:
    if name in ("compile", "gpulint_backend"):
        from gpulint.planner import backend

        return getattr(backend, name)
    if name == "apply":
        from gpulint.planner.eager_apply import apply

        return apply
    raise AttributeError(f"module 'gpulint.planner' has no attribute {name!r}")
