"""What a rule reports, before the engine turns it into a finding: `Report`, `When`, and the parts of a fix.

A leaf module (as Fixit keeps its types in `ftypes.py`): `rule.py`, which makes reports, and `context.py`, which
stores them, both import it and neither imports the other for it. It imports nothing from gpulint at run time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Union

import libcst as cst

if TYPE_CHECKING:
    from gpulint.linter.rule import Rule


# When a reported node is a real finding (see gpulint.project.facts.ExecState):
#   "per_step": it runs every training step and is not gated to every N steps (most GPL2xx-GPL5xx rules);
#   "training": in code the training program runs (setup included), not gated to every N steps (here or in a
#               caller) nor known to be cold (eval, no_grad, __init__, sampling): flags, loaders. Where the
#               project has no training entry point the model can see, anywhere not cold;
#   "repeated": in code that runs on every step, not gated: like "per_step" where the project has entry points (code
#               the program runs once, such as a setup that describes the parameters, is left out), and anywhere
#               not cold where it has none (per-tensor loops);
#   "always":   wherever it appears.
When = Literal["per_step", "training", "repeated", "always"]


@dataclass(frozen=True)
class Replace:
    """One part of a fix: replace `node` with a new node or with source text (an expression or a simple statement)."""

    node: cst.CSTNode
    new: Union[cst.CSTNode, str]


@dataclass(frozen=True)
class InsertBefore:
    """One part of a fix: insert a line of source text before statement `node` (same indentation)."""

    node: cst.CSTNode
    text: str


FixPart = Union[Replace, InsertBefore]


@dataclass
class Report:
    """A rule's raw report, before the engine resolves execution state, positions, suppressions and fixes."""

    rule: "Rule"
    node: cst.CSTNode
    message: str
    when: When
    ancestors: tuple[cst.CSTNode, ...]
    fix: tuple[FixPart, ...] = ()
    unsafe_fix: bool = False
