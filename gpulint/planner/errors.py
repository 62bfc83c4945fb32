"""The planner's error types: a user's mistake, printed by the CLI as one line with exit code 2.

Torch-free and importing nothing of the planner, so that the plan file module (and the bot, through it) can use them.
"""

from __future__ import annotations

from gpulint.errors import UsageError


class PlanError(UsageError):
    """Bad config, factory, model step, budget or hardware name; the message names the field, op or source line."""


class PlanFileError(PlanError, ValueError):
    """A plan file that is missing, too large or not in the `gpulint.plan/1` format; names the file and the field."""


class PlanMismatchError(PlanError, ValueError):
    """The plan does not fit this model (changed architecture, other model). One line."""
