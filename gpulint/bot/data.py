"""Read findings and plans as untrusted JSON data (the comment workflow gets them from a PR's artifact).

The bot never imports the linter or the planner: it reads what they wrote, checks the shape and the size, and keeps
only the fields it uses. Anything malformed is one clear line naming the file and the field. Plans are read through
`gpulint.planner.planfile`, the plan file's torch-free home (the one module of the planner the bot imports).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from gpulint.cli import UsageError
from gpulint.planner import planfile

MAX_FILE_BYTES = 32 * 1024 * 1024  # an artifact larger than this is refused, not parsed
MAX_FINDINGS = 20_000
MAX_TEXT = 4_000  # longest message kept from one finding (for display; fix contents are never cut)
SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}


class BotInputError(UsageError):
    """A findings or plan file that is missing, too large or not in the documented format."""


@dataclass(frozen=True)
class Edit:
    line: int
    column: int
    end_line: int
    end_column: int
    content: str


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    message: str
    severity: str
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    url: str = ""
    fix_applicability: str | None = None
    edits: tuple[Edit, ...] = ()

    @property
    def rank(self) -> int:
        return SEVERITY_RANK.get(self.severity, len(SEVERITY_RANK))


@dataclass(frozen=True)
class Decision:
    id: str
    op: str
    bytes: int
    module: str
    path: str | None
    line: int | None


@dataclass(frozen=True)
class Figures:
    peak_bytes: float
    step_time_s: float
    recompute_time_s: float | None = None


@dataclass(frozen=True)
class SweepPoint:
    budget_bytes: float
    peak_bytes: float
    step_time_s: float
    feasible: bool


@dataclass
class Plan:
    model: str
    hardware: str
    dtype: str
    budget_bytes: float | None  # None: no budget, the plan went to the lowest reachable peak
    baseline: Figures
    planned: Figures
    feasible: bool
    recomputed: list[Decision]
    saved_count: int
    timeline_baseline: list[float] = field(default_factory=list)
    timeline_planned: list[float] = field(default_factory=list)
    measured: dict | None = None
    sweep: list[SweepPoint] = field(default_factory=list)
    lowest_peak_bytes: float | None = None


def _read_json(path: str | Path, what: str):
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise BotInputError(f"{p}: cannot read {what} ({exc.strerror or exc})") from None
    if size > MAX_FILE_BYTES:
        raise BotInputError(f"{p}: {what} is {size} bytes, over the {MAX_FILE_BYTES} byte limit")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BotInputError(f"{p}: {what} is not valid JSON ({exc})") from None


def _field(obj: dict, key: str, kind, where: str, *, optional: bool = False, default=None):
    if not isinstance(obj, dict):
        raise BotInputError(f"{where}: expected an object")
    if key not in obj or obj[key] is None:
        if optional:
            return default
        raise BotInputError(f"{where}.{key}: missing")
    value = obj[key]
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise BotInputError(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}, got {type(value).__name__}")
    return value


def _edit(raw: dict, where: str) -> Edit:
    return Edit(
        line=_field(raw, "line", int, where),
        column=_field(raw, "column", int, where),
        end_line=_field(raw, "end_line", int, where),
        end_column=_field(raw, "end_column", int, where),
        content=_field(raw, "content", str, where),
    )


def _finding(raw: dict, where: str) -> Finding:
    line = _field(raw, "line", int, where)
    column = _field(raw, "column", int, where, optional=True, default=1)
    if line < 1:
        raise BotInputError(f"{where}.line: must be >= 1")
    fix = _field(raw, "fix", dict, where, optional=True)
    edits: tuple[Edit, ...] = ()
    applicability = None
    if fix is not None:
        applicability = _field(fix, "applicability", str, f"{where}.fix")
        edit_list = _field(fix, "edits", list, f"{where}.fix")
        edits = tuple(_edit(e, f"{where}.fix.edits[{i}]") for i, e in enumerate(edit_list[:50]))
    return Finding(
        code=_field(raw, "code", str, where)[:32],
        name=_field(raw, "name", str, where, optional=True, default="")[:200],
        message=_field(raw, "message", str, where)[:MAX_TEXT],
        severity=_field(raw, "severity", str, where, optional=True, default="warning"),
        path=_field(raw, "path", str, where),
        line=line,
        column=column,
        end_line=max(line, _field(raw, "end_line", int, where, optional=True, default=line)),
        end_column=_field(raw, "end_column", int, where, optional=True, default=column),
        url=_field(raw, "url", str, where, optional=True, default=""),
        fix_applicability=applicability,
        edits=edits,
    )


def load_findings(path: str | Path) -> list[Finding]:
    """The list `gpulint check --format json` prints, sorted by severity then location."""
    raw = _read_json(path, "findings")
    if not isinstance(raw, list):
        raise BotInputError(f"{path}: findings must be a JSON list of findings")
    if len(raw) > MAX_FINDINGS:
        raise BotInputError(f"{path}: {len(raw)} findings, over the limit of {MAX_FINDINGS}")
    findings = [_finding(item, f"{path}: findings[{i}]") for i, item in enumerate(raw)]
    return sorted(findings, key=lambda f: (f.rank, f.path, f.line, f.column, f.code))


def load_plan(path: str | Path) -> Plan:
    """The plan `gpulint plan --format json` writes, read through the plan file's own module (its one reader)."""
    try:
        raw = planfile.load(path, complete=True, max_bytes=MAX_FILE_BYTES)
    except planfile.PlanFileError as exc:
        raise BotInputError(str(exc)) from None
    recomputed = [
        Decision(id=d.id, op=d.op, bytes=d.bytes, module=d.module, path=d.source.path if d.source else None,
                 line=d.source.line if d.source else None)
        for d in raw.recomputed()
    ]
    measured = None
    if raw.measured is not None:
        measured = {"peak_bytes": raw.measured.peak_bytes, "step_time_s": raw.measured.step_time_s,
                    "device": raw.measured.device}
    return Plan(
        model=raw.model,
        hardware=raw.hardware,
        dtype=raw.dtype,
        budget_bytes=raw.budget_bytes,
        lowest_peak_bytes=raw.lowest_peak_bytes,
        baseline=Figures(raw.baseline.peak_bytes, raw.baseline.step_time_s, raw.baseline.recompute_time_s),
        planned=Figures(raw.planned.peak_bytes, raw.planned.step_time_s, raw.planned.recompute_time_s),
        feasible=raw.feasible,
        recomputed=recomputed,
        saved_count=len(raw.decisions) - len(recomputed),
        timeline_baseline=[float(b) for _, b in raw.timeline.baseline],
        timeline_planned=[float(b) for _, b in raw.timeline.planned],
        measured=measured,
        sweep=[SweepPoint(p.budget_bytes, p.peak_bytes, p.step_time_s, p.feasible) for p in raw.sweep],
    )
