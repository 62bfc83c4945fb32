"""Read findings and plans as untrusted JSON data (the comment workflow gets them from a PR's artifact).

The bot never imports the linter or the planner: it reads what they wrote, checks the shape and the size, and keeps
only the fields it uses. Anything malformed is one clear line naming the file and the field.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpulint import units
from gpulint.errors import UsageError
from gpulint.linter.finding import CONFIDENCE_LEVELS, rule_url
from gpulint.planner import planfile

MAX_FILE_BYTES = 32 * 1024 * 1024  # an artifact larger than this is refused, not parsed
MAX_FINDINGS = 20_000
MAX_TEXT = 4_000  # longest message kept from one finding (for display; fix contents are never cut)
MAX_NAME = 200  # rule names, chain frame names, model and hardware names
MAX_PATH = 1_000
MAX_LINE = 10_000_000  # line and column numbers
MAX_CHAIN = 16  # frames kept of one finding's call chain (the first and the last half)
MAX_TIMELINE_POINTS = 5_000
MAX_BYTES = 2**60  # about 1.15 EB: a plan's byte counts above this are not a real device's
MAX_SECONDS = 1e7  # about 116 days for one training step
PLAN_SCHEMA = planfile.SCHEMA  # one home for the schema string; planfile imports no torch
SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
_RULE_CODE = re.compile(r"^GPL\d{3}$")
_RULE_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


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
class Frame:
    """One step of the call chain that makes a finding run every step: where, and what (`step()`, `loop over ...`)."""

    path: str
    line: int
    name: str


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
    fix_applicability: str | None = None
    edits: tuple[Edit, ...] = ()
    confidence: str = "certain"
    chain: tuple[Frame, ...] = ()
    chain_elided: int = 0  # frames left out of the middle of a chain longer than MAX_CHAIN

    @property
    def rank(self) -> int:
        return SEVERITY_RANK.get(self.severity, len(SEVERITY_RANK))

    @property
    def url(self) -> str:
        """The rule's documentation, as gpulint writes it; never a URL taken from the findings file."""
        if _RULE_CODE.match(self.code) and _RULE_NAME.match(self.name):
            return rule_url(self.code, self.name)
        return ""


@dataclass(frozen=True)
class Decision:
    """One saved activation of the plain step (the plan keeps it or recomputes it)."""

    id: str
    op: str
    bytes: int
    module: str
    path: str | None
    line: int | None
    action: str = "recompute"
    call_index: int | None = None  # with `module` and `op`, the address that stays put when other layers change


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


@dataclass(frozen=True)
class EagerFigures:
    """The eager form (`gpulint.apply`): its predicted step, whether it holds the budget, and why it could not be
    planned (`error`; its figures are then 0)."""

    peak_bytes: float
    step_time_s: float
    recompute_time_s: float
    fits_budget: bool
    layers: int  # layers wrapped in selective checkpointing
    error: str | None = None
    measured: dict | None = None


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
    activations: list[Decision] = field(default_factory=list)  # every decision, saved or recomputed, in file order
    timeline_baseline: list[float] = field(default_factory=list)
    timeline_planned: list[float] = field(default_factory=list)
    measured: dict | None = None
    sweep: list[SweepPoint] = field(default_factory=list)
    lowest_peak_bytes: float | None = None
    launch: planfile.Launch | None = None  # the step's launch profile: prices the findings
    budget_unit: str | None = None  # the unit the budget was written in: the report shows peaks in it
    eager: EagerFigures | None = None


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
    except RecursionError:
        raise BotInputError(f"{p}: {what} is nested too deeply to be gpulint's JSON") from None
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, and integers of over 4,300 digits
        raise BotInputError(f"{p}: {what} is not valid JSON ({_one_line(exc)})") from None
    except OSError as exc:
        raise BotInputError(f"{p}: cannot read {what} ({exc.strerror or exc})") from None


def _one_line(value: object, limit: int = 200) -> str:
    return " ".join(str(value).split())[:limit]


def _shown(value: object) -> str:
    """A value for an error message: short, one line, printable whatever it is."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**40:
        return f"an integer of {len(str(abs(value)))} digits"
    return _one_line(repr(value), 40)


def _kind_name(kind) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return {float: "a number", int: "an integer", str: "a string", bool: "true or false", list: "a list",
            dict: "an object"}.get(kind, getattr(kind, "__name__", str(kind)))


def _field(obj: dict, key: str, kind, where: str, *, optional: bool = False, default=None,
           lo: float | None = None, hi: float | None = None):
    """obj[key] checked for its type (and its range, for numbers); one line naming the field when it is wrong."""
    if not isinstance(obj, dict):
        raise BotInputError(f"{where}: expected an object")
    if key not in obj or obj[key] is None:
        if optional:
            return default
        raise BotInputError(f"{where}.{key}: missing")
    value = obj[key]
    name = f"{where}.{key}"
    if kind is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise BotInputError(f"{name}: expected a number, got {type(value).__name__}")
        try:
            value = float(value)
        except OverflowError:
            raise BotInputError(f"{name}: {_shown(obj[key])} is out of range") from None
        if not math.isfinite(value):
            raise BotInputError(f"{name}: expected a finite number, got {value}")
    elif kind is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise BotInputError(f"{name}: expected an integer, got {type(value).__name__}")
    elif not isinstance(value, kind):
        raise BotInputError(f"{name}: expected {_kind_name(kind)}, got {type(value).__name__}")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise BotInputError(f"{name}: not valid text (a lone surrogate at character {exc.start})") from None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        bounds = f"{lo:g} to {hi:g}" if lo is not None and hi is not None else f"at least {lo:g}" if lo is not None \
            else f"at most {hi:g}"
        raise BotInputError(f"{name}: {_shown(obj[key])} is out of range ({bounds})")
    return value


def _text(obj: dict, key: str, where: str, limit: int, **kw) -> str:
    value = _field(obj, key, str, where, **kw)
    return value[:limit] if isinstance(value, str) else value


def workspace_root(flag: str | None, env) -> str:
    """Where the findings' absolute paths are relative to: the flag, else GITHUB_WORKSPACE, else the current folder."""
    return flag or env.get("GITHUB_WORKSPACE") or os.getcwd()


def normalise_path(path: str, root: str | None) -> str:
    """A finding's path as the pull request names it: relative to the workspace root, `/`-separated, without `./`.
    Absolute paths under `root` become relative; others stay absolute (and match no file of the PR)."""
    p = path.replace("\\", "/")
    if root:
        base = root.replace("\\", "/").rstrip("/") + "/"
        drive = re.match(r"^[A-Za-z]:/", base)
        if p.startswith(base) or (drive and p.lower().startswith(base.lower())):
            p = p[len(base):]
    absolute = p.startswith("/") or bool(re.match(r"^[A-Za-z]:/", p))
    parts = [part for part in p.split("/") if part not in ("", ".")]
    return ("/" if p.startswith("/") else "") + "/".join(parts) if absolute else "/".join(parts)


def _edit(raw: dict, where: str) -> Edit:
    return Edit(
        line=_field(raw, "line", int, where, lo=1, hi=MAX_LINE),
        column=_field(raw, "column", int, where, lo=0, hi=MAX_LINE),
        end_line=_field(raw, "end_line", int, where, lo=1, hi=MAX_LINE),
        end_column=_field(raw, "end_column", int, where, lo=0, hi=MAX_LINE),
        content=_field(raw, "content", str, where),
    )


def _frame(raw: dict, where: str, root: str | None) -> Frame:
    path = _field(raw, "path", str, where)
    if len(path) > MAX_PATH:
        raise BotInputError(f"{where}.path: longer than {MAX_PATH} characters")
    return Frame(
        path=normalise_path(path, root),
        line=_field(raw, "line", int, where, lo=1, hi=MAX_LINE),
        name=_text(raw, "name", where, MAX_NAME),
    )


def _chain(raw: dict, where: str, root: str | None) -> tuple[tuple[Frame, ...], int]:
    frames = _field(raw, "chain", list, where, optional=True, default=[])
    elided = 0
    if len(frames) > MAX_CHAIN:  # the entry point and the function holding the finding matter most
        elided = len(frames) - MAX_CHAIN
        frames = frames[: MAX_CHAIN // 2] + frames[-(MAX_CHAIN // 2):]
    kept = tuple(_frame(f, f"{where}.chain[{i if i < MAX_CHAIN // 2 else i + elided}]", root)
                 for i, f in enumerate(frames))
    return kept, elided


def _finding(raw: dict, where: str, root: str | None) -> Finding:
    line = _field(raw, "line", int, where, lo=1, hi=MAX_LINE)
    column = _field(raw, "column", int, where, optional=True, default=1, lo=0, hi=MAX_LINE)
    fix = _field(raw, "fix", dict, where, optional=True)
    edits: tuple[Edit, ...] = ()
    applicability = None
    if fix is not None:
        applicability = _text(fix, "applicability", f"{where}.fix", 16)
        edit_list = _field(fix, "edits", list, f"{where}.fix")
        edits = tuple(_edit(e, f"{where}.fix.edits[{i}]") for i, e in enumerate(edit_list[:50]))
    path = _field(raw, "path", str, where)
    if len(path) > MAX_PATH:
        raise BotInputError(f"{where}.path: longer than {MAX_PATH} characters")
    confidence = _field(raw, "confidence", str, where, optional=True, default="certain")
    if confidence not in CONFIDENCE_LEVELS:
        raise BotInputError(f"{where}.confidence: expected 'certain', 'likely' or 'possible', got {_shown(confidence)}")
    _field(raw, "url", str, where, optional=True)  # checked for shape only: links come from the rule's code
    chain, elided = _chain(raw, where, root)
    return Finding(
        code=_text(raw, "code", where, 32),
        name=_text(raw, "name", where, MAX_NAME, optional=True, default=""),
        message=_text(raw, "message", where, MAX_TEXT),
        severity=_text(raw, "severity", where, 16, optional=True, default="warning"),
        path=normalise_path(path, root),
        line=line,
        column=column,
        end_line=max(line, _field(raw, "end_line", int, where, optional=True, default=line, lo=1, hi=MAX_LINE)),
        end_column=_field(raw, "end_column", int, where, optional=True, default=column, lo=0, hi=MAX_LINE),
        fix_applicability=applicability,
        edits=edits,
        confidence=confidence,
        chain=chain,
        chain_elided=elided,
    )


def load_findings(path: str | Path, root: str | None = None) -> list[Finding]:
    """The list `gpulint check --format json` prints, sorted by severity then location; paths made relative to
    `root` (the workspace) where they are absolute."""
    raw = _read_json(path, "findings")
    if not isinstance(raw, list):
        raise BotInputError(f"{path}: findings must be a JSON list of findings")
    if len(raw) > MAX_FINDINGS:
        raise BotInputError(f"{path}: {len(raw)} findings, over the limit of {MAX_FINDINGS}")
    findings = [_finding(item, f"{path}: findings[{i}]", root) for i, item in enumerate(raw)]
    return sorted(findings, key=lambda f: (f.rank, f.path, f.line, f.column, f.code))


def _figures(raw: dict, where: str) -> Figures:
    return Figures(
        peak_bytes=_bytes(raw, "peak_bytes", where),
        step_time_s=_seconds(raw, "step_time_s", where),
        recompute_time_s=_seconds(raw, "recompute_time_s", where, optional=True),
    )


def _bytes(raw: dict, key: str, where: str, **kw) -> float:
    return _field(raw, key, float, where, lo=0, hi=MAX_BYTES, **kw)


def _seconds(raw: dict, key: str, where: str, **kw) -> float:
    return _field(raw, key, float, where, lo=0, hi=MAX_SECONDS, **kw)


def _series(values, where: str) -> list[float]:
    if not isinstance(values, list) or len(values) > MAX_TIMELINE_POINTS:
        raise BotInputError(f"{where}: expected a list of at most {MAX_TIMELINE_POINTS} numbers of bytes")
    out = []
    for i, v in enumerate(values):
        if isinstance(v, list) and len(v) == 2:  # [x, bytes] pairs are accepted too
            v = v[1]
        out.append(_bytes({f"[{i}]": v}, f"[{i}]", where))
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


def _measured(raw: dict, where: str) -> dict | None:
    """A form's measured step (None when not measured, or when it could not run: the report shows predictions)."""
    measured = _field(raw, "measured", dict, where, optional=True)
    if measured is None or _text(measured, "error", f"{where}.measured", MAX_TEXT, optional=True):
        return None
    return {
        "peak_bytes": _bytes(measured, "peak_bytes", f"{where}.measured"),
        "step_time_s": _seconds(measured, "step_time_s", f"{where}.measured"),
        "device": _text(measured, "device", f"{where}.measured", MAX_NAME, optional=True, default=""),
    }


def _unit(raw: dict, where: str) -> str | None:
    unit = _field(raw, "budget_unit", str, where, optional=True)
    if unit is not None and unit not in units.UNITS:
        raise BotInputError(f"{where}.budget_unit: expected one of {', '.join(units.UNITS)}, got {_shown(unit)}")
    return unit


def _eager(raw: dict, where: str) -> EagerFigures | None:
    eager = _field(raw, "eager", dict, where, optional=True)
    if eager is None:
        return None
    w = f"{where}.eager"
    layers = _field(eager, "layers", list, w, optional=True, default=[])
    return EagerFigures(
        peak_bytes=_bytes(eager, "peak_bytes", w, optional=True, default=0.0),
        step_time_s=_seconds(eager, "step_time_s", w, optional=True, default=0.0),
        recompute_time_s=_seconds(eager, "recompute_time_s", w, optional=True, default=0.0),
        fits_budget=_field(eager, "fits_budget", bool, w, optional=True, default=True),
        layers=len(layers),
        error=_one_line(_text(eager, "error", w, MAX_TEXT, optional=True), MAX_TEXT) if eager.get("error") else None,
        measured=_measured(eager, w),
    )


def _decision_id(d: dict, where: str) -> str:
    value = _field(d, "id", (str, int), where)
    if isinstance(value, int):
        return str(_field(d, "id", int, where, lo=0, hi=MAX_BYTES))
    return value[:MAX_NAME]


def load_plan(path: str | Path) -> Plan:
    raw = _read_json(path, "plan")
    where = f"{path}: plan"
    schema = _field(raw, "schema", str, where)
    if schema != PLAN_SCHEMA:
        raise BotInputError(f"{where}.schema: expected {PLAN_SCHEMA!r}, got {schema!r}")
    decisions = _field(raw, "decisions", list, where)
    activations = []
    for i, d in enumerate(decisions):
        w = f"{where}.decisions[{i}]"
        action = _field(d, "action", str, w)
        if action not in ("save", "recompute"):
            raise BotInputError(f"{w}.action: expected 'save' or 'recompute', got {_shown(action)}")
        source = _field(d, "source", dict, w, optional=True, default={})
        activations.append(
            Decision(
                id=_decision_id(d, w),
                op=_text(d, "op", w, MAX_NAME),
                bytes=_field(d, "bytes", int, w, lo=0, hi=MAX_BYTES),
                module=_text(d, "module", w, MAX_NAME, optional=True, default=""),
                path=_text(source, "path", f"{w}.source", MAX_PATH, optional=True),
                line=_field(source, "line", int, f"{w}.source", optional=True, lo=1, hi=MAX_LINE),
                action=action,
                call_index=_field(d, "call_index", int, w, optional=True, lo=0, hi=MAX_LINE),
            )
        )
    recomputed = [d for d in activations if d.action == "recompute"]
    recomputed.sort(key=lambda d: -d.bytes)
    base_tl, plan_tl = _timeline(raw.get("timeline"), f"{where}.timeline")
    measured = _measured(raw, where)
    sweep = []
    for i, s in enumerate(_field(raw, "sweep", list, where, optional=True, default=[])[:1000]):
        w = f"{where}.sweep[{i}]"
        sweep.append(
            SweepPoint(
                budget_bytes=_bytes(s, "budget_bytes", w),
                peak_bytes=_bytes(s, "peak_bytes", w),
                step_time_s=_seconds(s, "step_time_s", w),
                feasible=_field(s, "feasible", bool, w, optional=True, default=True),
            )
        )
    try:
        launch = planfile.launch_from_dict(raw.get("launch"), f"{where}.launch")
    except planfile.PlanFileError as exc:
        raise BotInputError(str(exc)) from None
    return Plan(
        launch=launch,
        model=_text(raw, "model", where, MAX_NAME),
        hardware=_text(raw, "hardware", where, MAX_NAME),
        dtype=_text(raw, "dtype", where, 32),
        budget_bytes=_bytes(raw, "budget_bytes", where, optional=True),
        budget_unit=_unit(raw, where),
        eager=_eager(raw, where),
        lowest_peak_bytes=_bytes(raw, "lowest_peak_bytes", where, optional=True),
        baseline=_figures(_field(raw, "baseline", dict, where), f"{where}.baseline"),
        planned=_figures(_field(raw, "planned", dict, where), f"{where}.planned"),
        feasible=_field(raw, "feasible", bool, where),
        recomputed=recomputed,
        saved_count=len(decisions) - len(recomputed),
        activations=activations,
        timeline_baseline=base_tl,
        timeline_planned=plan_tl,
        measured=measured,
        sweep=sweep,
    )
