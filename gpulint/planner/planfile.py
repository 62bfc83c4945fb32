"""The plan file: its one home. Dataclasses for `gpulint.plan/1`, read with `load`/`from_dict`, written with `dump`.

Everyone who reads or writes a plan goes through this module: the planner writes it, `gpulint.apply` and the compile
backend read its decisions, the patcher writes it beside the training script, and the bot renders it. It imports
neither torch nor any other part of gpulint but the error types and units.py, so the bot may import it.

The JSON format is backward compatible within `gpulint.plan/1`: fields were only ever added, every added field is
optional, and a reader ignores fields it does not know. A plan written by an older gpulint loads here; a plan
written here loads in an older reader (which ignores the new fields).

    plan = load("gpulint-plan.json")                    # or from_dict(mapping); errors name the file and field
    plan.decisions[0].action                            # "save" | "recompute"
    text = dump(plan)                                   # JSON text; save(plan, path) writes it atomically

Byte counts are ints; times are seconds. A plan carries two forms of one decision set:
- the compiled form (`decisions`, `planned`): node names of the traced joint graph, applied by
  `gpulint.planner.compile` or `gpulint_backend`;
- the eager form (`eager`): the same decisions addressed by (module, op, call index), or its own (`eager.decisions`)
  when eager mode needs other ones, applied by `gpulint.apply`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulint import units
from gpulint.planner.errors import PlanFileError

SCHEMA = "gpulint.plan/1"
ACTIONS = ("save", "recompute")
MAX_FILE_BYTES = 64 * 1024 * 1024  # a plan file larger than this is refused, not parsed (untrusted artifacts)
MAX_TIMELINE_POINTS = 5_000
MAX_SWEEP_POINTS = 1_000


@dataclass(frozen=True)
class Source:
    """The user's source line an activation comes from (paths relative to where `gpulint plan` ran)."""

    path: str
    line: int

    @classmethod
    def of(cls, where: tuple[str, int] | None) -> Source | None:
        """A traced (file, line), its path made relative to the working folder when it lies below it."""
        import os

        if not where:
            return None
        path, line = where
        try:
            relative = os.path.relpath(path)
            path = path if relative.startswith("..") else relative
        except ValueError:  # another drive (Windows)
            pass
        return cls(path=path, line=int(line))


@dataclass
class Decision:
    """One saved activation of the plain step, kept (`save`) or recomputed in the backward (`recompute`).

    `id` is the compiled form's address (the FX node name in the traced joint graph). (`module`, `op`,
    `call_index`) is the eager form's: the innermost module running the op, the aten op, and its index among that
    module's calls of that op in one training step. `call_index` None: the decision has no eager address.
    """

    id: str
    op: str
    bytes: int
    action: str
    module: str = ""
    call_index: int | None = None
    source: Source | None = None

    def describe(self) -> str:
        """How messages name it: `aten.mm.default call 3 in module 'h.0.fc'` (id when it has no eager address)."""
        if self.call_index is None:
            return f"{self.op} ({self.id})"
        return f"{self.op} call {self.call_index} in module '{self.module or '<root>'}'"


@dataclass
class Excluded:
    """A forward op the plan never recomputes, and why (collective, data-dependent output, in-place on an input)."""

    id: str
    op: str
    reason: str
    module: str = ""
    call_index: int | None = None
    source: Source | None = None


@dataclass
class Figures:
    peak_bytes: int
    step_time_s: float
    recompute_time_s: float = 0.0


@dataclass
class Measured:
    """A form's real step, run with and without the plan on `device` (`gpulint plan --measure`).

    `predicted_peak_bytes` is the prediction for that device (its allocator rounding), the figure to compare with
    `peak_bytes`. `error` says why the form could not be measured (the other figures are then 0).
    """

    peak_bytes: int
    step_time_s: float
    device: str
    predicted_peak_bytes: int = 0
    baseline_peak_bytes: int | None = None
    baseline_predicted_peak_bytes: int | None = None
    baseline_step_time_s: float | None = None
    loss: float | None = None
    baseline_loss: float | None = None
    error: str | None = None


@dataclass
class EagerForm:
    """The eager step under `gpulint.apply(model, plan)`: its figures, and its own decisions when it has them."""

    peak_bytes: int
    step_time_s: float
    recompute_time_s: float = 0.0
    layers: list[str] = field(default_factory=list)  # the layers wrapped in selective checkpointing
    fits_budget: bool = True
    decisions: list[Decision] | None = None  # None: eager mode applies the plan's own decisions
    planned_for_bytes: int | None = None  # the budget its own decisions were planned for
    unapplied: list[str] = field(default_factory=list)  # decisions eager mode leaves out, as `Decision.describe()`
    measured: Measured | None = None
    error: str | None = None  # why the eager form could not be planned (its figures are then 0)


@dataclass
class ShapePlan:
    """The plan for one batch shape of a bucketed batch factory (see shapes.py)."""

    signature: list[list[int]]
    feasible: bool
    baseline: Figures
    planned: Figures
    decisions: list[Decision]


@dataclass
class SweepPoint:
    budget_bytes: int
    peak_bytes: int
    step_time_s: float
    recompute_time_s: float = 0.0
    feasible: bool = True


@dataclass
class ValueRead:
    """Where the step reads tensor values (graph breaks for torch.compile)."""

    op: str
    path: str
    line: int


@dataclass
class Timeline:
    """Live bytes over the step, sampled as [position, bytes] pairs (each sample keeps its bucket's maximum)."""

    baseline: list[list[int]] = field(default_factory=list)
    planned: list[list[int]] = field(default_factory=list)


@dataclass
class Stats:
    ops: int = 0
    trace_seconds: float = 0.0
    plan_seconds: float = 0.0
    greedy_steps: int = 0


@dataclass
class Blocker:
    """What keeps the step from being captured as one CUDA graph (launch.py): `kind` is "sync" (the host reads a
    device value), "dynamic-shape", "cpu-op" (host tensors the step updates) or "rng" (a generator of its own)."""

    kind: str
    reason: str
    path: str = ""
    line: int = 0


@dataclass
class Padding:
    """The share of the step's work spent on pad positions, from the config's length distribution."""

    padded_length: int
    mean_length: float
    share: float


@dataclass
class Launch:
    """The step's launch profile on the plan's hardware (launch.py), and what pricing findings needs from the trace.

    `host_time_s` is the host's dispatch time (kernels x overhead per kernel), `device_time_s` the kernels' roofline
    time with no overhead; `step_time_s` overlaps them on a GPU (the host runs ahead of the device) and adds them on
    a CPU (the host runs the kernels). `launch_share` is the part of the step the device spends waiting on launches.
    Every `*_source` says where its figure came from.
    """

    kind: str  # the hardware's kind: "cuda" | "cpu"
    kernels: int
    small_kernels: int  # kernels whose roofline time is below the overhead of launching them
    device_time_s: float
    overhead_per_kernel_s: float
    overhead_source: str
    host_time_s: float
    step_time_s: float
    launch_share: float
    launch_bound: bool
    graph_step_time_s: float = 0.0  # the step replayed as one CUDA graph (0: not a CUDA target)
    graph_saving_s: float = 0.0
    graph_source: str = ""
    blockers: list[Blocker] = field(default_factory=list)
    parameter_tensors: int = 0
    parameter_bytes: int = 0
    op_overhead_s: float = 0.0  # a tensor op called from Python with no module or autograd (loops, optimizers)
    op_source: str = ""
    foreach_op_s: float = 0.0  # one foreach op over all the parameter tensors
    optimizer: str = ""
    optimizer_ops: int = 0  # ops its step dispatches (the foreach form: torch's default), among `kernels`
    optimizer_host_s: float = 0.0  # the host's time dispatching them, in `host_time_s`
    optimizer_loop_host_s: float = 0.0  # the same step's for-loop form (foreach=False)
    sync_overhead_s: float = 0.0
    sync_source: str = ""
    batch_bytes: int = 0
    h2d_bandwidth: float | None = None
    h2d_source: str = ""
    h2d_time_s: float = 0.0
    collectives: int = 0
    collective_bytes: int = 0
    collective_time_s: float = 0.0
    interconnect_bandwidth: float | None = None
    interconnect_source: str = ""
    memory_bandwidth: float = 0.0
    padding: Padding | None = None


@dataclass
class Plan:
    """A whole plan. `baseline` is today's step, `planned` the compiled form under the plan, `eager` the eager form.

    Only `decisions` is needed to apply a plan; the figures are needed to report one (`load(..., complete=True)`).
    """

    decisions: list[Decision]
    model: str = ""
    hardware: str = ""
    dtype: str = "fp32"
    budget_bytes: int | None = None  # None: no budget was given; the plan went to the lowest reachable peak
    budget_unit: str | None = None  # the unit the budget was written in (`GB`, `MiB`): reports show peaks in it
    feasible: bool = True
    baseline: Figures | None = None
    planned: Figures | None = None
    floor_bytes: int = 0  # parameters, gradients, optimizer state and batch: no plan goes below
    lowest_peak_bytes: int | None = None
    excluded: list[Excluded] = field(default_factory=list)
    timeline: Timeline = field(default_factory=Timeline)
    stats: Stats = field(default_factory=Stats)
    eager: EagerForm | None = None
    measured: Measured | None = None
    data_dependent: list[ValueRead] = field(default_factory=list)
    shapes: list[ShapePlan] = field(default_factory=list)
    largest_signature: list[list[int]] | None = None
    sweep: list[SweepPoint] = field(default_factory=list)
    launch: Launch | None = None

    def eager_decisions(self) -> list[Decision]:
        """What `gpulint.apply` applies: the eager form's own decisions when it has them, else the plan's."""
        if self.eager is not None and self.eager.decisions is not None:
            return self.eager.decisions
        return self.decisions

    def saved_ids(self) -> set[str]:
        """The node names the compiled form saves."""
        return {d.id for d in self.decisions if d.action == "save"}

    def recomputed(self) -> list[Decision]:
        """The compiled form's recomputed activations, largest first."""
        return sorted((d for d in self.decisions if d.action == "recompute"), key=lambda d: -d.bytes)


# --- reading ------------------------------------------------------------------------------------------------------


class _Reader:
    """Typed access to one JSON object; every error names the file and the field (`plan.decisions[3].action`)."""

    def __init__(self, raw: Any, where: str) -> None:
        if not isinstance(raw, Mapping):
            raise PlanFileError(f"{where}: expected an object, got {_kind(raw)}")
        self.raw = raw
        self.where = where

    def get(self, key: str, kind: Any, default: Any = ..., *, convert: Callable[[Any], Any] | None = None) -> Any:
        value = self.raw.get(key)
        if value is None:
            if default is ...:
                raise PlanFileError(f"{self.where}.{key}: missing")
            return default
        if not _is(value, kind):
            raise PlanFileError(f"{self.where}.{key}: expected {_name(kind)}, got {_kind(value)}")
        return convert(value) if convert is not None else value

    def child(self, key: str) -> _Reader | None:
        value = self.raw.get(key)
        return None if value is None else _Reader(value, f"{self.where}.{key}")

    def items(self, key: str, limit: int | None = None) -> list[tuple[Any, str]]:
        values = self.get(key, list, [])
        if limit is not None and len(values) > limit:
            raise PlanFileError(f"{self.where}.{key}: {len(values)} entries, over the limit of {limit}")
        return [(value, f"{self.where}.{key}[{i}]") for i, value in enumerate(values)]


def _is(value: Any, kind: Any) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is bool:
        return isinstance(value, bool)
    return isinstance(value, kind)


def _name(kind: Any) -> str:
    return {float: "a number", int: "an integer", bool: "true or false", str: "a string", list: "a list",
            dict: "an object"}.get(kind, getattr(kind, "__name__", str(kind)))


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _count(value: float) -> int:
    """Byte counts are integers; a writer that printed 2.4e10 meant 24000000000."""
    return round(value)


def _source(raw: Any, where: str) -> Source | None:
    if raw is None:
        return None
    r = _Reader(raw, where)
    return Source(path=r.get("path", str), line=r.get("line", int))


def _decision(raw: Any, where: str, index: int) -> Decision:
    r = _Reader(raw, where)
    action = r.get("action", str)
    if action not in ACTIONS:
        raise PlanFileError(f"{where}.action: expected 'save' or 'recompute', got {action!r:.40}")
    call_index = r.get("call_index", int, None)
    if call_index is not None and call_index < 0:
        raise PlanFileError(f"{where}.call_index: must be >= 0, got {call_index}")
    return Decision(
        id=str(r.get("id", (str, int), index)),
        op=r.get("op", str),
        bytes=r.get("bytes", float, 0, convert=_count),
        action=action,
        module=r.get("module", str, ""),
        call_index=call_index,
        source=_source(r.raw.get("source"), f"{where}.source"),
    )


def _figures(r: _Reader | None) -> Figures | None:
    if r is None:
        return None
    return Figures(peak_bytes=r.get("peak_bytes", float, convert=_count), step_time_s=r.get("step_time_s", float),
                   recompute_time_s=r.get("recompute_time_s", float, 0.0))


def _measured(r: _Reader | None) -> Measured | None:
    if r is None:
        return None
    optional_count = {"convert": _count}
    return Measured(
        peak_bytes=r.get("peak_bytes", float, convert=_count),
        step_time_s=r.get("step_time_s", float),
        device=r.get("device", str, ""),
        predicted_peak_bytes=r.get("predicted_peak_bytes", float, 0, **optional_count),
        baseline_peak_bytes=r.get("baseline_peak_bytes", float, None, **optional_count),
        baseline_predicted_peak_bytes=r.get("baseline_predicted_peak_bytes", float, None, **optional_count),
        baseline_step_time_s=r.get("baseline_step_time_s", float, None),
        loss=r.get("loss", float, None),
        baseline_loss=r.get("baseline_loss", float, None),
        error=r.get("error", str, None),
    )


def _series(raw: Any, where: str, limit: int = MAX_TIMELINE_POINTS) -> list[list[int]]:
    """[position, bytes] pairs; plain numbers (bytes at positions 0, 1, ...) are accepted too."""
    if not isinstance(raw, list):
        raise PlanFileError(f"{where}: expected a list, got {_kind(raw)}")
    if len(raw) > limit:
        raise PlanFileError(f"{where}: {len(raw)} points, over the limit of {limit}")
    out = []
    for i, point in enumerate(raw):
        position, value = point if isinstance(point, list) and len(point) == 2 else (i, point)
        if not (_is(position, float) and _is(value, float)):
            raise PlanFileError(f"{where}[{i}]: expected bytes or a [position, bytes] pair, got {point!r:.40}")
        out.append([_count(position), _count(value)])
    return out


def _eager(r: _Reader | None) -> EagerForm | None:
    if r is None:
        return None
    decisions = None
    if r.raw.get("decisions") is not None:
        decisions = [_decision(d, w, i) for i, (d, w) in enumerate(r.items("decisions"))]
    return EagerForm(
        peak_bytes=r.get("peak_bytes", float, 0, convert=_count),
        step_time_s=r.get("step_time_s", float, 0.0),
        recompute_time_s=r.get("recompute_time_s", float, 0.0),
        layers=[_checked(x, str, w) for x, w in r.items("layers")],
        fits_budget=r.get("fits_budget", bool, True),
        decisions=decisions,
        planned_for_bytes=r.get("planned_for_bytes", float, None, convert=_count),
        unapplied=[_checked(x, str, w) for x, w in r.items("unapplied")],
        measured=_measured(r.child("measured")),
        error=r.get("error", str, None),
    )


def _checked(value: Any, kind: Any, where: str) -> Any:
    if not _is(value, kind):
        raise PlanFileError(f"{where}: expected {_name(kind)}, got {_kind(value)}")
    return value


def _signature(raw: Any, where: str) -> list[list[int]]:
    if not isinstance(raw, list) or not all(isinstance(s, list) and all(_is(d, int) for d in s) for s in raw):
        raise PlanFileError(f"{where}: expected a list of shapes (lists of integers)")
    return [list(s) for s in raw]


def _shape(raw: Any, where: str) -> ShapePlan:
    r = _Reader(raw, where)
    return ShapePlan(
        signature=_signature(r.raw.get("signature"), f"{where}.signature"),
        feasible=r.get("feasible", bool, True),
        baseline=_figures(r.child("baseline")) or Figures(0, 0.0),
        planned=_figures(r.child("planned")) or Figures(0, 0.0),
        decisions=[_decision(d, w, i) for i, (d, w) in enumerate(r.items("decisions"))],
    )


def from_dict(raw: Any, where: str = "plan", *, complete: bool = False) -> Plan:
    """A plan from its JSON object. `complete`: also require the fields a report needs (model, hardware, dtype,
    baseline, planned, feasible); without it, only `schema` and `decisions` (enough to apply a plan)."""
    r = _Reader(raw, where)
    schema = r.get("schema", str)
    if schema != SCHEMA:
        raise PlanFileError(f"{where}.schema: expected {SCHEMA!r}, got {schema!r:.60}")
    if not isinstance(r.raw.get("decisions"), list):
        raise PlanFileError(f"{where}.decisions: expected a list, got {_kind(r.raw.get('decisions'))}")

    def needed(default: Any) -> Any:
        return ... if complete else default  # `...`: _Reader.get raises "missing"

    if complete:
        for key in ("baseline", "planned"):
            r.get(key, dict)
    timeline, stats = r.child("timeline"), r.child("stats")
    largest = r.raw.get("largest_signature")
    return Plan(
        decisions=[_decision(d, w, i) for i, (d, w) in enumerate(r.items("decisions"))],
        model=r.get("model", str, needed("")),
        hardware=r.get("hardware", str, needed("")),
        dtype=r.get("dtype", str, needed("fp32")),
        budget_bytes=r.get("budget_bytes", float, None, convert=_count),
        budget_unit=_unit(r.get("budget_unit", str, None), f"{where}.budget_unit"),
        feasible=r.get("feasible", bool, needed(True)),
        baseline=_figures(r.child("baseline")),
        planned=_figures(r.child("planned")),
        floor_bytes=r.get("floor_bytes", float, 0, convert=_count),
        lowest_peak_bytes=r.get("lowest_peak_bytes", float, None, convert=_count),
        excluded=[_excluded(e, w) for e, w in r.items("excluded")],
        timeline=Timeline(
            baseline=_series(timeline.raw.get("baseline", []), f"{timeline.where}.baseline") if timeline else [],
            planned=_series(timeline.raw.get("planned", []), f"{timeline.where}.planned") if timeline else [],
        ),
        stats=Stats(
            ops=stats.get("ops", int, 0), trace_seconds=stats.get("trace_seconds", float, 0.0),
            plan_seconds=stats.get("plan_seconds", float, 0.0), greedy_steps=stats.get("greedy_steps", int, 0),
        ) if stats else Stats(),
        eager=_eager(r.child("eager")),
        measured=_measured(r.child("measured")),
        data_dependent=[_value_read(v, w) for v, w in r.items("data_dependent")],
        shapes=[_shape(s, w) for s, w in r.items("shapes")],
        largest_signature=None if largest is None else _signature(largest, f"{where}.largest_signature"),
        sweep=[_sweep_point(s, w) for s, w in r.items("sweep", limit=MAX_SWEEP_POINTS)],
        launch=launch_from_dict(r.raw.get("launch"), f"{where}.launch"),
    )


MAX_BLOCKERS = 1_000


def launch_from_dict(raw: Any, where: str = "plan.launch") -> Launch | None:
    """A plan's launch profile from its JSON object (None when the plan has none)."""
    if raw is None:
        return None
    r = _Reader(raw, where)
    padding = r.child("padding")

    def time(key: str) -> float:
        value = r.get(key, float, 0.0)
        if value < 0:
            raise PlanFileError(f"{where}.{key}: must be >= 0, got {value}")
        return value

    def rate(key: str) -> float | None:
        value = r.get(key, float, None)
        if value is not None and value <= 0:
            raise PlanFileError(f"{where}.{key}: must be positive, got {value}")
        return value

    return Launch(
        kind=r.get("kind", str), kernels=r.get("kernels", int), small_kernels=r.get("small_kernels", int, 0),
        device_time_s=time("device_time_s"), overhead_per_kernel_s=time("overhead_per_kernel_s"),
        overhead_source=r.get("overhead_source", str, ""), host_time_s=time("host_time_s"),
        step_time_s=time("step_time_s"), launch_share=time("launch_share"),
        launch_bound=r.get("launch_bound", bool, False), graph_step_time_s=time("graph_step_time_s"),
        graph_saving_s=time("graph_saving_s"), graph_source=r.get("graph_source", str, ""),
        blockers=[_blocker(b, w) for b, w in r.items("blockers", limit=MAX_BLOCKERS)],
        parameter_tensors=r.get("parameter_tensors", int, 0), parameter_bytes=r.get("parameter_bytes", int, 0),
        op_overhead_s=time("op_overhead_s"), op_source=r.get("op_source", str, ""),
        foreach_op_s=time("foreach_op_s"),
        optimizer=r.get("optimizer", str, ""), optimizer_ops=r.get("optimizer_ops", int, 0),
        optimizer_host_s=time("optimizer_host_s"), optimizer_loop_host_s=time("optimizer_loop_host_s"),
        sync_overhead_s=time("sync_overhead_s"), sync_source=r.get("sync_source", str, ""),
        batch_bytes=r.get("batch_bytes", int, 0), h2d_bandwidth=rate("h2d_bandwidth"),
        h2d_source=r.get("h2d_source", str, ""), h2d_time_s=time("h2d_time_s"),
        collectives=r.get("collectives", int, 0), collective_bytes=r.get("collective_bytes", int, 0),
        collective_time_s=time("collective_time_s"), interconnect_bandwidth=rate("interconnect_bandwidth"),
        interconnect_source=r.get("interconnect_source", str, ""), memory_bandwidth=time("memory_bandwidth"),
        padding=None if padding is None else Padding(
            padded_length=padding.get("padded_length", int), mean_length=padding.get("mean_length", float),
            share=padding.get("share", float)),
    )


def _blocker(raw: Any, where: str) -> Blocker:
    r = _Reader(raw, where)
    return Blocker(kind=r.get("kind", str), reason=r.get("reason", str), path=r.get("path", str, ""),
                   line=r.get("line", int, 0))


def _unit(unit: str | None, where: str) -> str | None:
    if unit is not None and unit not in units.UNITS:
        raise PlanFileError(f"{where}: expected one of {', '.join(units.UNITS)}, got {unit!r:.20}")
    return unit


def _excluded(raw: Any, where: str) -> Excluded:
    r = _Reader(raw, where)
    return Excluded(id=str(r.get("id", (str, int))), op=r.get("op", str), reason=r.get("reason", str),
                    module=r.get("module", str, ""), call_index=r.get("call_index", int, None),
                    source=_source(r.raw.get("source"), f"{where}.source"))


def _value_read(raw: Any, where: str) -> ValueRead:
    r = _Reader(raw, where)
    return ValueRead(op=r.get("op", str), path=r.get("path", str, ""), line=r.get("line", int, 0))


def _sweep_point(raw: Any, where: str) -> SweepPoint:
    r = _Reader(raw, where)
    return SweepPoint(
        budget_bytes=r.get("budget_bytes", float, convert=_count), peak_bytes=r.get("peak_bytes", float, convert=_count),
        step_time_s=r.get("step_time_s", float), recompute_time_s=r.get("recompute_time_s", float, 0.0),
        feasible=r.get("feasible", bool, True),
    )


def loads(text: str, where: str = "plan", *, complete: bool = False) -> Plan:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanFileError(f"{where}: not valid JSON ({exc})") from None
    return from_dict(raw, "plan" if where == "plan" else f"{where}: plan", complete=complete)


def load(path: str | Path, *, complete: bool = False, max_bytes: int = MAX_FILE_BYTES) -> Plan:
    """Read a plan file; one-line errors name the file and the field. See `from_dict` for `complete`."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        raise PlanFileError(f"{p}: plan file not found") from None
    except OSError as exc:
        raise PlanFileError(f"{p}: cannot read the plan ({exc.strerror or exc})") from None
    if size > max_bytes:
        raise PlanFileError(f"{p}: the plan is {size} bytes, over the {max_bytes} byte limit")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanFileError(f"{p}: cannot read the plan ({exc})") from None
    return loads(text, str(p), complete=complete)


def coerce(plan: Plan | Mapping[str, Any] | str | Path, *, complete: bool = False) -> Plan:
    """A Plan from what callers pass around: a Plan, its JSON object, or the path of a plan file."""
    if isinstance(plan, Plan):
        return plan
    if isinstance(plan, (str, Path)):
        return load(plan, complete=complete)
    return from_dict(plan, complete=complete)


# --- writing ------------------------------------------------------------------------------------------------------


def to_dict(plan: Plan) -> dict[str, Any]:
    """The JSON object of a plan, in the field order of the format; optional fields that are empty are left out."""
    out: dict[str, Any] = {
        "schema": SCHEMA,
        "model": plan.model,
        "hardware": plan.hardware,
        "dtype": plan.dtype,
        "budget_bytes": plan.budget_bytes,
        "feasible": plan.feasible,
        "floor_bytes": plan.floor_bytes,
        "lowest_peak_bytes": plan.lowest_peak_bytes,
        "baseline": _plain(plan.baseline),
        "planned": _plain(plan.planned),
        "decisions": [_decision_dict(d) for d in plan.decisions],
        "excluded": [_decision_dict(e) for e in plan.excluded],
        "timeline": {"baseline": plan.timeline.baseline, "planned": plan.timeline.planned},
        "stats": _plain(plan.stats),
    }
    if plan.eager is not None:
        eager = _plain(plan.eager)
        if plan.eager.decisions is not None:
            eager["decisions"] = [_decision_dict(d) for d in plan.eager.decisions]
        out["eager"] = eager
    optional = {
        "budget_unit": plan.budget_unit,
        "measured": _plain(plan.measured),
        "data_dependent": [_plain(v) for v in plan.data_dependent],
        "shapes": [{**_plain(s), "decisions": [_decision_dict(d) for d in s.decisions]} for s in plan.shapes],
        "largest_signature": plan.largest_signature,
        "sweep": [_plain(s) for s in plan.sweep],
        "launch": _plain(plan.launch),
    }
    out.update({key: value for key, value in optional.items() if value})
    return out


def _decision_dict(decision: Decision | Excluded) -> dict[str, Any]:
    out = _plain(decision)
    out.setdefault("source", None)  # written even when unknown: readers of older plans expect the key
    return out


def _plain(value: Any) -> Any:
    """A dataclass as a JSON object, leaving out fields that are None (optional and unknown)."""
    if value is None:
        return None
    out = {}
    for name in value.__dataclass_fields__:
        item = getattr(value, name)
        if item is None:
            continue
        if hasattr(item, "__dataclass_fields__"):
            item = _plain(item)
        elif isinstance(item, list):
            item = [_plain(x) if hasattr(x, "__dataclass_fields__") else x for x in item]
        out[name] = item
    return out


def dump(plan: Plan) -> str:
    return json.dumps(to_dict(plan), indent=2) + "\n"


def save(plan: Plan, path: str | Path) -> None:
    """Write the plan file atomically (a temporary file renamed over `path`): never half-written."""
    from gpulint.fileio import atomic_write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, dump(plan))
