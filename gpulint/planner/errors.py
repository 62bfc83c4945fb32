"""The planner's one error type: a user's mistake, printed by the CLI as one line with exit code 2."""

from __future__ import annotations

from gpulint.cli import UsageError


class PlanError(UsageError):
    """Bad config, factory, model step, budget or hardware name; the message names the field, op or source line."""
