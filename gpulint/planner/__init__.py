"""The planner: trace a training step with fake tensors, simulate its memory, plan recomputation under an
absolute budget, and apply the plan.

    gpulint.planner.compile(model, plan)      -> step(batch) -> loss, with exactly the planned saved set
    gpulint.planner.gpulint_backend(plan)     -> a torch.compile backend doing the same

Importing this package does not import torch (the linter must run without it); torch loads on first use.
"""

from __future__ import annotations

from gpulint.planner.backend import compile, gpulint_backend

__all__ = ["compile", "gpulint_backend"]
