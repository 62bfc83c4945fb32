"""What a pull request does to memory: the base's plan against the head's, and the `gpulint/memory` gate.

Both plans are untrusted data read by gpulint/bot/data.py (schema, sizes and ranges checked there). The delta
compares:

- the figures: peak memory and step time of today's step (PyTorch's default saved set) and of the step with the
  plan, base then head, and each plan's verdict against its budget;
- the activations (every decision of a plan, saved or recomputed): matched by their eager address (module, op,
  call index; and rank, for an op with several outputs), which stays put when layers are added elsewhere, and named
  as new, grown, shrunk or gone, with their source line. Activations on lines the pull request changed come first,
  then the largest changes;
- the layers behind the change: each activation's module cut after its first numbered part (`h.4.fc` counts for
  `h.4`, the way ModuleList and Sequential name their children), so an added layer is named as one contributor.

The gate fails when the head's peak with the plan is over its budget, or when today's peak grew by more than the
threshold (`memory-threshold`, "2%" by default): the growth a PR adds to the step, whether or not a plan hides it.

The delta is kept as JSON, schema `gpulint.delta/1` (`Delta.to_dict`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from gpulint import units
from gpulint.bot.data import Decision, Plan
from gpulint.bot.diff import PullDiff
from gpulint.errors import UsageError

SCHEMA = "gpulint.delta/1"
CHECK_NAME = "gpulint/memory"
DEFAULT_THRESHOLD_PERCENT = 2.0
DEFAULT_THRESHOLD = f"{DEFAULT_THRESHOLD_PERCENT:g}%"
MAX_THRESHOLD_PERCENT = 1000.0
STATUSES = ("new", "grown", "shrunk", "gone")


def parse_threshold(text: str) -> float:
    """"2%" -> 2.0: how much today's peak may grow before the gate fails."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*%\s*", str(text))
    if not m or float(m.group(1)) > MAX_THRESHOLD_PERCENT:
        raise UsageError(f"--memory-threshold: expected a percentage from 0% to {MAX_THRESHOLD_PERCENT:g}%, "
                         f"such as 2%, got {str(text)[:40]!r}")
    return float(m.group(1))


def percent(before: float, after: float) -> float | None:
    return (after - before) / before * 100 if before else None


@dataclass(frozen=True)
class ActivationChange:
    module: str
    op: str
    call_index: int | None
    status: str  # one of STATUSES
    base_bytes: int
    head_bytes: int
    path: str | None  # the head's source line; the base's for an activation that is gone
    line: int | None
    on_changed_line: bool = False

    @property
    def change_bytes(self) -> int:
        return self.head_bytes - self.base_bytes

    @property
    def layer(self) -> str:
        return layer_of(self.module)


@dataclass(frozen=True)
class Contributor:
    """A layer (or module) and the net change of its activations' bytes."""

    layer: str
    change_bytes: int
    counts: dict[str, int]  # status -> activations


@dataclass(frozen=True)
class Gate:
    conclusion: str  # "success" | "failure"
    reason: str  # one line: why it passed or failed
    threshold_percent: float

    @property
    def passed(self) -> bool:
        return self.conclusion == "success"


@dataclass
class Delta:
    base: Plan
    head: Plan
    activations: list[ActivationChange]
    unchanged: int
    gate: Gate
    contributors: list[Contributor] = field(default_factory=list)

    @property
    def peak_change_bytes(self) -> float:
        return self.head.baseline.peak_bytes - self.base.baseline.peak_bytes

    @property
    def budget_lost(self) -> bool:
        """Fitted its budget at the base, does not at the head."""
        return bool(self.head.budget_bytes) and self.base.feasible and not self.head.feasible

    def to_dict(self) -> dict:
        def side(p: Plan) -> dict:
            return {
                "model": p.model, "hardware": p.hardware, "dtype": p.dtype, "budget_bytes": _int(p.budget_bytes),
                "feasible": p.feasible,
                "peak_bytes": _int(p.baseline.peak_bytes), "step_time_s": p.baseline.step_time_s,
                "planned_peak_bytes": _int(p.planned.peak_bytes), "planned_step_time_s": p.planned.step_time_s,
            }

        b, h = self.base, self.head
        return {
            "schema": SCHEMA,
            "base": side(b),
            "head": side(h),
            "change": {
                "peak_bytes": _int(h.baseline.peak_bytes - b.baseline.peak_bytes),
                "peak_percent": percent(b.baseline.peak_bytes, h.baseline.peak_bytes),
                "step_time_s": h.baseline.step_time_s - b.baseline.step_time_s,
                "step_time_percent": percent(b.baseline.step_time_s, h.baseline.step_time_s),
                "planned_peak_bytes": _int(h.planned.peak_bytes - b.planned.peak_bytes),
                "planned_peak_percent": percent(b.planned.peak_bytes, h.planned.peak_bytes),
                "planned_step_time_s": h.planned.step_time_s - b.planned.step_time_s,
                "planned_step_time_percent": percent(b.planned.step_time_s, h.planned.step_time_s),
                "budget_lost": self.budget_lost,
            },
            "contributors": [
                {"layer": c.layer, "change_bytes": c.change_bytes, "activations": dict(c.counts)}
                for c in self.contributors
            ],
            "activations": [
                {
                    "module": a.module, "op": a.op, "call_index": a.call_index, "status": a.status,
                    "base_bytes": a.base_bytes, "head_bytes": a.head_bytes, "change_bytes": a.change_bytes,
                    "source": {"path": a.path, "line": a.line} if a.path else None,
                    "on_changed_line": a.on_changed_line,
                }
                for a in self.activations
            ],
            "unchanged_activations": self.unchanged,
            "gate": {"name": CHECK_NAME, "conclusion": self.gate.conclusion, "reason": self.gate.reason,
                     "threshold_percent": self.gate.threshold_percent},
        }


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def layer_of(module: str) -> str:
    """`h.4.fc` -> `h.4`; `encoder.layers.10.attn` -> `encoder.layers.10`; a module without a numbered part is
    its own layer (`lm_head`); the root module is `<root>`."""
    parts = module.split(".") if module else []
    for i, part in enumerate(parts):
        if part.isdigit():
            return ".".join(parts[: i + 1])
    return module or "<root>"


def _keyed(decisions: list[Decision]) -> dict[tuple, Decision]:
    """Each activation under its eager address and its rank among the decisions sharing it, in file order (the
    planner's own order): an op with several outputs (layer norm's result, mean and rstd) saves several, and a
    decision without a call index is told apart from its module's other calls of its op the same way."""
    seen: dict[tuple, int] = defaultdict(int)
    out = {}
    for d in decisions:
        address = (d.module, d.op, d.call_index)
        out[(*address, seen[address])] = d
        seen[address] += 1
    return out


def _changed(diff: PullDiff | None, path: str | None, line: int | None) -> bool:
    if diff is None or not path or not line:
        return False
    fd = diff.files.get(path)
    return fd is not None and line in fd.added


def compare_activations(base: Plan, head: Plan, diff: PullDiff | None = None) -> tuple[list[ActivationChange], int]:
    """(the activations that changed, changed lines first then the largest change; how many did not)."""
    before, after = _keyed(base.activations), _keyed(head.activations)
    changes, unchanged = [], 0
    for key in [*after, *(k for k in before if k not in after)]:
        b, h = before.get(key), after.get(key)
        base_bytes, head_bytes = (b.bytes if b else 0), (h.bytes if h else 0)
        if b and h and base_bytes == head_bytes:
            unchanged += 1
            continue
        status = "new" if b is None else "gone" if h is None else "grown" if head_bytes > base_bytes else "shrunk"
        where = h or b
        changes.append(ActivationChange(
            module=where.module, op=where.op, call_index=where.call_index, status=status,
            base_bytes=base_bytes, head_bytes=head_bytes, path=where.path, line=where.line,
            on_changed_line=h is not None and _changed(diff, h.path, h.line),
        ))
    changes.sort(key=lambda a: (not a.on_changed_line, -abs(a.change_bytes)))
    return changes, unchanged


def contributors(changes: list[ActivationChange]) -> list[Contributor]:
    """The layers whose activations changed, the largest net change first."""
    total: dict[str, int] = defaultdict(int)
    counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(STATUSES, 0))
    for a in changes:
        total[a.layer] += a.change_bytes
        counts[a.layer][a.status] += 1
    ordered = sorted(total, key=lambda layer: -abs(total[layer]))
    return [Contributor(layer, total[layer], {s: n for s, n in counts[layer].items() if n}) for layer in ordered]


def memory_gate(head: Plan, base: Plan | None, threshold_percent: float) -> Gate:
    """Fails when the head's peak with the plan is over its budget, or today's peak grew past the threshold."""
    unit = units.display_unit(head.budget_unit, head.budget_bytes, head.baseline.peak_bytes)  # as the head's report

    def human_bytes(n: float) -> str:
        return units.format_bytes(n, unit)

    def fail(reason: str) -> Gate:
        return Gate("failure", reason, threshold_percent)

    if head.budget_bytes and not head.feasible:
        lowest = head.lowest_peak_bytes or head.planned.peak_bytes
        was = ""
        if base is not None and base.budget_bytes:
            was = "; the base fitted" if base.feasible else "; the base did not fit either"
        return fail(f"peak memory {human_bytes(lowest)} even with the plan, over the "
                    f"{human_bytes(head.budget_bytes)} budget{was}")
    if base is not None:
        before, after = base.baseline.peak_bytes, head.baseline.peak_bytes
        grew = percent(before, after)
        if grew is not None and grew > threshold_percent:
            return fail(f"peak memory grew {grew:.1f}% ({human_bytes(before)} → {human_bytes(after)}), over the "
                        f"{threshold_percent:g}% threshold")
        change = f" ({grew:+.1f}%)" if grew is not None else ""
        within = f"within the {threshold_percent:g}% threshold"
    else:
        after, change, within = head.baseline.peak_bytes, "", "no base plan to compare with"
    budget = f", and fits the {human_bytes(head.budget_bytes)} budget with the plan" if head.budget_bytes else ""
    start = f"peak memory {human_bytes(base.baseline.peak_bytes)} → " if base is not None else "peak memory "
    return Gate("success", f"{start}{human_bytes(after)}{change}, {within}{budget}", threshold_percent)


def compare(base: Plan, head: Plan, threshold_percent: float, diff: PullDiff | None = None) -> Delta:
    changes, unchanged = compare_activations(base, head, diff)
    return Delta(base, head, changes, unchanged, memory_gate(head, base, threshold_percent), contributors(changes))
