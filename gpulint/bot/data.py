"""Read findings and plans as untrusted JSON data (the comment workflow gets them from a PR's artifact).

The bot never imports the linter or the planner: it reads what they wrote, checks the shape and the size, and keeps
only the fields it uses. Anything malformed is one clear line naming the file and the field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from gpulint.cli import UsageError

MAX_FILE_BYTES = 32 * 1024 * 1024  # an artifact larger than this is refused, not parsed
MAX_FINDINGS = 20_000
MAX_TEXT = 4_000  # longest message kept from one finding (for display; fix contents are never cut)
MAX_TIMELINE_POINTS = 5_000
PLAN_SCHEMA = "gpulint.plan/1"
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


def _figures(raw: dict, where: str) -> Figures:
    return Figures(
        peak_bytes=_field(raw, "peak_bytes", float, where),
        step_time_s=_field(raw, "step_time_s", float, where),
        recompute_time_s=_field(raw, "recompute_time_s", float, where, optional=True),
    )


def _series(values, where: str) -> list[float]:
    if not isinstance(values, list) or len(values) > MAX_TIMELINE_POINTS:
        raise BotInputError(f"{where}: expected a list of at most {MAX_TIMELINE_POINTS} numbers")
    out = []
    for v in values:
        if isinstance(v, (list, tuple)) and len(v) == 2:  # [x, bytes] pairs are accepted too
            v = v[1]
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            raise BotInputError(f"{where}: expected numbers (bytes), got {v!r:.40}")
        out.append(float(v))
    return out


def _timeline(raw, where: str) -> tuple[list[float], list[float]]:
    """Accepts {"baseline": [...], "planned": [...]} (bytes, or [x, bytes] pairs) or a list of
    {"baseline_bytes"/"baseline", "planned_bytes"/"planned"} samples."""
    if raw is None:
        return [], []
    if isinstance(raw, dict):
        return (
            _series(raw.get("baseline", []), f"{where}.baseline"),
            _series(raw.get("planned", []), f"{where}.planned"),
        )
    if isinstance(raw, list):
        base, planned = [], []
        for i, point in enumerate(raw[:MAX_TIMELINE_POINTS]):
            if not isinstance(point, dict):
                raise BotInputError(f"{where}[{i}]: expected an object")
            b = point.get("baseline_bytes", point.get("baseline"))
            p = point.get("planned_bytes", point.get("planned"))
            base += _series([b], f"{where}[{i}].baseline_bytes")
            planned += _series([p], f"{where}[{i}].planned_bytes")
        return base, planned
    raise BotInputError(f"{where}: expected an object or a list")


def load_plan(path: str | Path) -> Plan:
    raw = _read_json(path, "plan")
    where = f"{path}: plan"
    schema = _field(raw, "schema", str, where)
    if schema != PLAN_SCHEMA:
        raise BotInputError(f"{where}.schema: expected {PLAN_SCHEMA!r}, got {schema!r}")
    decisions = _field(raw, "decisions", list, where)
    recomputed = []
    for i, d in enumerate(decisions):
        w = f"{where}.decisions[{i}]"
        action = _field(d, "action", str, w)
        if action not in ("save", "recompute"):
            raise BotInputError(f"{w}.action: expected 'save' or 'recompute', got {action!r:.40}")
        if action != "recompute":
            continue
        source = _field(d, "source", dict, w, optional=True, default={})
        recomputed.append(
            Decision(
                id=str(_field(d, "id", (str, int), w)),
                op=_field(d, "op", str, w),
                bytes=_field(d, "bytes", int, w),
                module=_field(d, "module", str, w, optional=True, default=""),
                path=_field(source, "path", str, f"{w}.source", optional=True),
                line=_field(source, "line", int, f"{w}.source", optional=True),
            )
        )
    recomputed.sort(key=lambda d: -d.bytes)
    base_tl, plan_tl = _timeline(raw.get("timeline"), f"{where}.timeline")
    measured = _field(raw, "measured", dict, where, optional=True)
    if measured is not None:
        measured = {
            "peak_bytes": _field(measured, "peak_bytes", float, f"{where}.measured"),
            "step_time_s": _field(measured, "step_time_s", float, f"{where}.measured"),
            "device": _field(measured, "device", str, f"{where}.measured", optional=True, default=""),
        }
    sweep = []
    for i, s in enumerate(_field(raw, "sweep", list, where, optional=True, default=[])[:1000]):
        w = f"{where}.sweep[{i}]"
        sweep.append(
            SweepPoint(
                budget_bytes=_field(s, "budget_bytes", float, w),
                peak_bytes=_field(s, "peak_bytes", float, w),
                step_time_s=_field(s, "step_time_s", float, w),
                feasible=_field(s, "feasible", bool, w, optional=True, default=True),
            )
        )
    return Plan(
        model=_field(raw, "model", str, where),
        hardware=_field(raw, "hardware", str, where),
        dtype=_field(raw, "dtype", str, where),
        budget_bytes=_field(raw, "budget_bytes", float, where, optional=True),
        lowest_peak_bytes=_field(raw, "lowest_peak_bytes", float, where, optional=True),
        baseline=_figures(_field(raw, "baseline", dict, where), f"{where}.baseline"),
        planned=_figures(_field(raw, "planned", dict, where), f"{where}.planned"),
        feasible=_field(raw, "feasible", bool, where),
        recomputed=recomputed,
        saved_count=len(decisions) - len(recomputed),
        timeline_baseline=base_tl,
        timeline_planned=plan_tl,
        measured=measured,
        sweep=sweep,
    )
