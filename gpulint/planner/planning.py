"""`gpulint plan` from end to end: trace the step, plan it under the budget, predict both forms, measure them.

    planned = make_plan(config, budget, hardware)       # trace both forms, plan each -> Planned (the plan, what made it)
    add_measurement(planned, config)                   # --measure: both forms' real steps, with and without the plan

Everything here returns or fills a `planfile.Plan`; cli.py renders and writes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from gpulint.planner import planfile
from gpulint.planner.address import graph_addresses
from gpulint.planner.errors import PlanError
from gpulint.planner.graph import FWD, JointGraph
from gpulint.planner.greedy import PlanResult
from gpulint.progress import Phases
from gpulint.units import display_unit, format_bytes, written_unit

TIMELINE_POINTS = 200


@dataclass
class Planned:
    """A plan and the traced forms it was made from (for --measure)."""

    plan: planfile.Plan
    forms: Forms

    @property
    def graph(self) -> JointGraph:
        return self.forms.traced.graph

    @property
    def program(self) -> Any:
        return self.forms.program


def phase_count(sweep: int = 0, measure: bool = False) -> int:
    """How many phases `gpulint plan` shows: trace, record eager, plan compiled, plan eager, [sweep], [measure]."""
    return 4 + bool(sweep) + bool(measure)


def _descent(phases: Phases | None, goal: int) -> Callable[[int, int], None] | None:
    """A greedy planner's step callback that shows how far the peak has come down towards `goal`."""
    if phases is None:
        return None

    def on_step(baseline: int, peak: int) -> None:
        unit = display_unit(None, None, baseline)
        phases.update((baseline - peak) / max(1, baseline - goal),
                      f"peak {format_bytes(peak, unit)} of {format_bytes(baseline, unit)}, "
                      f"goal {format_bytes(goal, unit)}")

    return on_step


def floor_bytes(graph: JointGraph, rounding: int) -> int:
    """Parameters, buffers, batch, optimizer state and gradients: what no plan can remove."""
    from gpulint.planner.simulate import static_bytes

    sizes = graph.storage_bytes
    grads = {s for i in graph.grad_outputs for s in graph.nodes[i].storages}
    rnd = (lambda b: b) if rounding <= 1 else (lambda b: -(-b // rounding) * rounding)
    return static_bytes(graph, rounding) + sum(rnd(sizes[s]) for s in grads)


def _sample(timeline: Any, points: int = TIMELINE_POINTS) -> list[list[int]]:
    """[position, bytes] pairs; each bucket keeps its maximum so the peak survives the sampling."""
    n = len(timeline)
    step = max(1, -(-n // points))
    return [[i, int(timeline[i:i + step].max())] for i in range(0, n, step)]


def plan_from_result(graph: JointGraph, result: PlanResult, *, hardware: str, trace_seconds: float = 0.0,
                     floor: int = 0) -> planfile.Plan:
    """The plan file of a planner result: one decision per storage the plain step saves (kept or recomputed)."""
    nodes = graph.nodes
    chosen = result.chosen.saved
    static = graph.static_storages
    by_storage = graph._tensors_by_storage()
    creator = {st: n.index for n in nodes for st in n.creates}
    kept = {nodes[i].storages[0] for i in chosen if nodes[i].is_tensor and nodes[i].storages}
    seen: set[int] = set()
    makers: list[int] = []
    reps: list[int] = []
    for i in sorted(result.baseline.saved | chosen):
        n = nodes[i]
        if n.kind != FWD or not n.is_tensor or not n.storages or n.storages[0] in static:
            continue  # views of parameters or the batch cost nothing either way
        storage = n.storages[0]
        if storage in seen:
            continue
        seen.add(storage)
        rep = nodes[by_storage[storage][0]]  # the first tensor on this storage: the backend saves it (and views)
        if rep.excluded:
            continue  # listed under "excluded"
        reps.append(rep.index)
        makers.append(creator.get(storage, rep.index))  # eager address: the op that allocated the storage
    decisions = []
    for rep, maker_index in zip(reps, makers):
        maker = nodes[maker_index]
        storage = nodes[rep].storages[0]
        address = graph_addresses(graph, [maker_index])[0]
        decisions.append(planfile.Decision(
            id=nodes[rep].name, op=maker.op, bytes=int(graph.storage_bytes[storage]),
            action="save" if storage in kept else "recompute", module=maker.module,
            call_index=None if address is None else address.call_index, source=planfile.Source.of(maker.source),
        ))
    excluded = [
        planfile.Excluded(id=n.name, op=n.op, reason=n.excluded, module=n.module, call_index=n.call_index,
                          source=planfile.Source.of(n.source))
        for n in nodes if n.kind == FWD and n.excluded
    ]
    return planfile.Plan(
        decisions=decisions,
        model=graph.model,
        hardware=hardware,
        dtype=graph.dtype,
        budget_bytes=result.budget,
        feasible=result.feasible,
        floor_bytes=floor,
        lowest_peak_bytes=result.lowest_peak,
        baseline=planfile.Figures(result.baseline.peak, result.baseline.step_time_s),
        planned=planfile.Figures(result.chosen.peak, result.chosen.step_time_s, result.chosen.recompute_time_s),
        excluded=excluded,
        timeline=planfile.Timeline(baseline=_sample(result.baseline_simulation.timeline),
                                   planned=_sample(result.simulation.timeline)),
        stats=planfile.Stats(ops=len(nodes), trace_seconds=round(trace_seconds, 3),
                             plan_seconds=round(result.plan_seconds, 3), greedy_steps=len(result.path) - 1),
    )


@dataclass
class Forms:
    """Both forms of one training step, traced: what `plan_forms` plans and `add_measurement` runs."""

    build_model: Callable[[], Any]
    make_batch: Callable[[], Any]
    step: Any  # step.UserStep
    optimizer: str
    dtype: str
    traced: Any  # trace.Traced: the compiled form
    program: Any  # eager_trace.EagerProgram: the eager form (None when it cannot run: `eager_error` says why)
    eager_error: str | None = None


def trace_forms(build_model: Callable[[], Any], make_batch: Callable[[], Any], step: Any, *, optimizer: str = "adamw",
                dtype: str = "fp32", name: str = "", phases: Phases | None = None, device: str = "cpu") -> Forms:
    """Trace the compiled form (aot_autograd, fake tensors) and record the eager form (the step run eagerly on fake
    tensors). The eager form failing is no error: the compiled form is still planned, and the plan says why.
    `device="cuda"` traces both as the GPU runs them (where torch has CUDA: bench/gpu_validate.py)."""
    from gpulint.planner.eager_trace import trace_eager
    from gpulint.planner.trace import trace_step

    say = None
    if phases is not None:
        phases.start(f"tracing the compiled form of {name} ({dtype}, fake tensors)")
        say = partial(phases.update, None)  # what tracing says: the re-run of a data-dependent step
    traced = trace_step(build_model, make_batch, loss_fn=step, optimizer=optimizer, dtype=dtype, name=name,
                        progress=say, device=device)
    if phases is not None:
        phases.start(f"recording the eager step ({len(traced.graph.nodes):,} ops traced)")
    forms = Forms(build_model, make_batch, step, optimizer, dtype, traced, None)
    try:
        forms.program = trace_eager(build_model, make_batch, loss_fn=step, optimizer=optimizer, dtype=dtype,
                                    name=name, device=device)
    except PlanError as exc:
        forms.eager_error = str(exc)
    return forms


def make_plan(config: Any, budget: int | None, hardware_name: str, sweep: int = 0,
              phases: Phases | None = None) -> Planned:
    """`gpulint plan`: trace both forms of the config's step and plan each under the budget."""
    build_model, make_batch, step = user_step(config)
    forms = trace_forms(build_model, make_batch, step, optimizer=config.optimizer, dtype=config.dtype,
                        name=config.model, phases=phases)
    planned = plan_forms(forms, budget, hardware_name, sweep, phases)
    if getattr(config, "padding", None) is not None and planned.plan.launch is not None:
        from gpulint.planner.launch import padding_share

        planned.plan.launch.padding = padding_share(*config.padding)
    return planned


def plan_forms(forms: Forms, budget: int | None, hardware_name: str, sweep: int = 0,
               phases: Phases | None = None) -> Planned:
    """Plan both forms under the budget, and (optionally) sweep the compiled form.

    Today's step is the eager one, as the user runs it now (their own checkpointing included): both forms are
    planned for min(budget, today's peak), so no plan is worse than today.
    """
    from gpulint.planner.cost import node_times
    from gpulint.planner.greedy import GreedyPlanner
    from gpulint.planner.hardware import load_hardware

    hw = load_hardware(hardware_name)
    traced, program = forms.traced, forms.program
    graph = traced.graph
    floor = floor_bytes(graph, hw.allocation_rounding)
    if budget is None:
        budget = hw.memory_capacity
    if budget < floor:
        unit = written_unit(budget)
        raise PlanError(
            f"budget {format_bytes(budget, unit)} is below the floor of {format_bytes(floor, unit)} (parameters, "
            f"gradients, optimizer state and batch); no recomputation plan can reach it"
        )
    target = budget
    if program is not None:
        today, today_timeline = today_figures(program, hw)
        target = min(budget, today.peak_bytes)
    if phases is not None:
        phases.start(f"planning the compiled form for {hw.name}")
    goal = target if not sweep else floor
    planner = GreedyPlanner(graph, node_times(graph, hw), hw.allocation_rounding, on_step=_descent(phases, goal))
    full = planner.run(None if sweep else target)
    result = planner.for_budget(full, target) if sweep else full
    plan = plan_from_result(graph, result, hardware=hw.name, trace_seconds=traced.seconds, floor=floor)
    plan.budget_bytes = budget
    plan.feasible = result.chosen.peak <= budget
    if program is not None:
        plan.baseline, plan.timeline.baseline = today, today_timeline
        if phases is not None:
            phases.start("planning the eager form (gpulint.apply)")
        plan.eager = plan_eager(program, hw, budget, target, phases=phases)
        plan.stats.trace_seconds = round(traced.seconds + program.seconds, 3)
    else:
        if phases is not None:
            phases.skip()
        plan.eager = planfile.EagerForm(peak_bytes=0, step_time_s=0.0, fits_budget=False, error=forms.eager_error)
    # Where the compiled form's step reads values (graph breaks): eager mode reads them as it runs, with no harm.
    plan.data_dependent = [planfile.ValueRead(**read) for read in traced.data_dependent]
    plan.launch = step_launch(forms, hw, plan.data_dependent)
    if sweep:
        top, bottom = full.baseline.peak, full.lowest_peak
        if phases is not None:
            phases.start(f"sweeping {sweep} budgets")
        for k in range(sweep):
            if phases is not None:
                phases.update(k / sweep, f"budget {k + 1} of {sweep}")
            b = int(bottom + (top - bottom) * k / max(1, sweep - 1))
            r = planner.for_budget(full, b)
            plan.sweep.append(planfile.SweepPoint(budget_bytes=b, peak_bytes=r.chosen.peak,
                                                  step_time_s=r.chosen.step_time_s,
                                                  recompute_time_s=r.chosen.recompute_time_s, feasible=r.feasible))
    return Planned(plan, forms)


def step_launch(forms: Forms, hw: Any, data_dependent: list[planfile.ValueRead]) -> planfile.Launch:
    """The launch profile of today's step: the eager one as the user runs it, else the compiled form's."""
    from gpulint.planner.launch import launch_profile

    program = forms.program
    graph = program.graph if program is not None else forms.traced.graph
    batch = None
    if program is not None:
        from gpulint.planner.eager_trace import _tensors

        batch = sum(t.untyped_storage().nbytes() for t in _tensors(program.batch))
    return launch_profile(graph, hw, optimizer=forms.optimizer, batch_bytes=batch, data_dependent=data_dependent)


def today_figures(program: Any, hw: Any) -> tuple[planfile.Figures, list[list[int]]]:
    """Today's eager step on `hw`: its peak (tracked op by op on CPU; on a GPU, the simulation with each storage
    rounded to the allocator's block), its predicted time, and its memory over the step."""
    from gpulint.planner.cost import node_times
    from gpulint.planner.simulate import step_time

    simulator = program.simulator(hw.allocation_rounding)
    simulation = simulator.simulate(simulator.baseline)
    total, _recompute = step_time(program.graph, simulation.schedule, node_times(program.graph, hw, eager=True))
    peak = program.peak_bytes if hw.allocation_rounding <= 1 else simulation.peak
    return planfile.Figures(peak, total), _sample(simulation.timeline)


def plan_eager(program: Any, hw: Any, budget: int, target: int, attempts: int = 3,
               phases: Phases | None = None) -> planfile.EagerForm:
    """The eager form's own plan: greedy on the eager program's simulation, then the chosen plan run on fake tensors
    under `gpulint.apply`; its tracked peak is the figure. When the run peaks above the target (the simulation is a
    model), the plan is made again for a target lower by the difference, `attempts` times at most."""
    from gpulint.planner.cost import node_times
    from gpulint.planner.eager_trace import run_step
    from gpulint.planner.greedy import GreedyPlanner

    rounding = hw.allocation_rounding
    simulator = program.simulator(rounding)
    times = node_times(program.graph, hw, eager=True)
    planner = GreedyPlanner(program.graph, times, rounding, simulator=simulator,
                            checkpoint_overhead_s=hw.checkpoint_overhead_s)
    goal = target
    for attempt in range(attempts):
        planner.on_step = _descent(phases, goal)
        result = planner.run(goal)
        decisions = simulator.decisions(set(result.chosen.saved))
        form = planfile.EagerForm(peak_bytes=0, step_time_s=0.0, decisions=decisions)
        if phases is not None:
            phases.update(1.0, f"checking the plan on fake tensors under gpulint.apply (try {attempt + 1})")
        state, peak = run_step(program, planfile.Plan(decisions=[], eager=form), rounding)
        if peak <= target or not result.feasible:
            break
        goal -= max(1, peak - target)
    chosen = result.chosen
    if peak > program.peak_bytes:
        # The simulation missed what the run keeps: a plan that peaks above today is no plan. Apply nothing, so
        # the step stays as it is today.
        decisions = []
        form = planfile.EagerForm(peak_bytes=0, step_time_s=0.0, decisions=decisions)
        state, peak, chosen = None, program.peak_bytes, result.baseline
    if not any(d.action == "recompute" for d in decisions):
        state = None
    form.peak_bytes, form.step_time_s = peak, chosen.step_time_s
    form.recompute_time_s = chosen.recompute_time_s
    form.layers = list(state.regions) if state is not None else []
    form.unapplied = [item.describe() for item in state.left_out] if state is not None else []
    form.fits_budget = peak <= budget
    form.planned_for_bytes = goal
    return form


def user_step(config: Any) -> tuple[Callable[[], Any], Callable[[], Any], Any]:
    """The model factory, batch factory and training step (a step.UserStep) a config names."""
    from gpulint.planner.config import load_factory
    from gpulint.planner.step import UserStep

    build_model = load_factory(config.model, config.base_dir, "plan.model")
    make_batch = load_factory(config.batch, config.base_dir, "plan.batch")
    loss_fn = load_factory(config.loss, config.base_dir, "plan.loss") if config.loss else None
    step_fn = load_factory(config.step, config.base_dir, "plan.step") if config.step else None
    return build_model, make_batch, UserStep(loss_fn=loss_fn, step_fn=step_fn, inputs=config.inputs)


def add_measurement(planned: Planned, phases: Phases | None = None,
                    clock: Callable[[], float] | None = None) -> None:
    """`--measure`: run both forms' real steps with and without the plan, each on its own: a form that cannot run
    records why (`Measured.error`) and the other is still measured. `clock` times the steps (measure.py)."""
    plan = planned.plan
    if phases is not None:
        phases.start("measuring the real steps")
    if plan.data_dependent:
        plan.measured = _failed("the step reads tensor values: one static compiled graph cannot run it "
                                "(torch.compile breaks its graph there); apply the plan in eager mode")
    else:
        if phases is not None:
            phases.update(0.0, "the compiled step, without and with the plan")
        plan.measured = _measured_or_error(lambda: _measure_compiled(planned, clock))
    if planned.program is not None:
        if phases is not None:
            phases.update(0.5, "the eager step (gpulint.apply), without and with the plan")
        plan.eager.measured = _measured_or_error(lambda: _measure_eager(planned, clock))


def _failed(reason: str) -> planfile.Measured:
    return planfile.Measured(peak_bytes=0, step_time_s=0.0, device="", error=reason)


def _measured_or_error(run: Callable[[], planfile.Measured]) -> planfile.Measured:
    try:
        return run()
    except Exception as exc:  # noqa: BLE001 - user code may raise anything; recorded as one line, the rest goes on
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return _failed(f"{type(exc).__name__}: {text}")


def _measure_compiled(planned: Planned, clock: Callable[[], float] | None = None) -> planfile.Measured:
    from gpulint.planner.measure import measure_step
    from gpulint.planner.simulate import simulate

    graph, plan, forms = planned.graph, planned.plan, planned.forms
    kwargs = {"loss_fn": forms.step, "optimizer": forms.optimizer, "dtype": forms.dtype, "clock": clock}
    base = measure_step(forms.build_model, forms.make_batch, None, **kwargs)
    names = plan.saved_ids()
    measured = measure_step(forms.build_model, forms.make_batch, names, **kwargs)
    rounding = 512 if measured.device.startswith("cuda") else 1
    return planfile.Measured(
        peak_bytes=measured.peak_bytes, step_time_s=measured.step_time_s, device=measured.device,
        predicted_peak_bytes=simulate(graph, graph.alias_closure({graph.by_name[n] for n in names}), rounding).peak,
        baseline_peak_bytes=base.peak_bytes,
        baseline_predicted_peak_bytes=simulate(graph, graph.default_saved(), rounding).peak,
        baseline_step_time_s=base.step_time_s, loss=measured.loss, baseline_loss=base.loss,
    )


def _measure_eager(planned: Planned, clock: Callable[[], float] | None = None) -> planfile.Measured:
    from gpulint.planner.eager_trace import run_step
    from gpulint.planner.measure import measure_eager

    plan, program, forms = planned.plan, planned.program, planned.forms
    kwargs = {"loss_fn": forms.step, "optimizer": forms.optimizer, "dtype": forms.dtype, "clock": clock}
    base = measure_eager(forms.build_model, forms.make_batch, None, **kwargs)
    measured = measure_eager(forms.build_model, forms.make_batch, plan, **kwargs)
    rounding = 512 if measured.device.startswith("cuda") else 1  # the device measured, not the target
    return planfile.Measured(
        peak_bytes=measured.peak_bytes, step_time_s=measured.step_time_s, device=measured.device,
        predicted_peak_bytes=run_step(program, plan, rounding)[1], baseline_peak_bytes=base.peak_bytes,
        baseline_predicted_peak_bytes=run_step(program, None, rounding)[1], baseline_step_time_s=base.step_time_s,
        loss=measured.loss, baseline_loss=base.loss,
    )


# --- several batch shapes ----------------------------------------------------------------------------------------


def plan_buckets(build_model: Callable[[], Any], make_batch: Callable[[], Any], *, budget: int | None, hardware: str,
                 loss_fn: Callable[..., Any] | None = None, optimizer: str = "adamw", dtype: str = "fp32",
                 name: str = "") -> planfile.Plan:
    """Plan every bucket the generator `make_batch` yields under the same absolute `budget` (see shapes.py).

    The top level is the plan of the largest bucket (so every reader of a plan sees a valid plan), and `shapes`
    lists each bucket's input signature with its own decisions and figures.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gpulint.planner.cost import node_times
    from gpulint.planner.greedy import GreedyPlanner
    from gpulint.planner.hardware import load_hardware
    from gpulint.planner.shapes import bucket_factories, signature, size
    from gpulint.planner.trace import trace_step

    hw = load_hardware(hardware)
    buckets = []
    for factory in bucket_factories(make_batch):
        with FakeTensorMode():
            sig = signature(factory())
        traced = trace_step(build_model, factory, loss_fn=loss_fn, optimizer=optimizer, dtype=dtype, name=name)
        result = GreedyPlanner(traced.graph, node_times(traced.graph, hw), hw.allocation_rounding).run(budget)
        plan = plan_from_result(traced.graph, result, hardware=hw.name, trace_seconds=traced.seconds)
        plan.data_dependent = [planfile.ValueRead(**read) for read in traced.data_dependent]
        buckets.append((sig, plan, traced.graph))
    signatures = [sig for sig, _, _ in buckets]
    if len(set(signatures)) != len(signatures):
        raise PlanError("plan.batch: two yielded batches have the same shapes; yield one batch per shape bucket")
    largest_sig, combined, graph = max(buckets, key=lambda item: size(item[0]))
    from gpulint.planner.launch import launch_profile

    combined.launch = launch_profile(graph, hw, optimizer=optimizer, data_dependent=combined.data_dependent,
                                     shapes=len(buckets))
    combined.shapes = [
        planfile.ShapePlan(signature=[list(shape) for shape in sig], feasible=plan.feasible, baseline=plan.baseline,
                           planned=plan.planned, decisions=plan.decisions)
        for sig, plan, _ in buckets
    ]
    combined.largest_signature = [list(shape) for shape in largest_sig]
    combined.feasible = all(plan.feasible for _, plan, _ in buckets)
    return combined


def plan_config_buckets(config: Any, budget: int | None, hardware: str, *, measure: bool = False,
                        sweep: int = 0) -> planfile.Plan:
    """`gpulint plan` for a config whose batch factory is a generator: one plan per yielded shape."""
    if measure or sweep:
        raise PlanError("--measure and --sweep take one batch shape; the batch factory yields several")
    build_model, make_batch, loss_fn = user_step(config)
    return plan_buckets(
        build_model, make_batch, budget=budget, hardware=hardware, loss_fn=loss_fn, optimizer=config.optimizer,
        dtype=config.dtype, name=config.model.rpartition(":")[0].rpartition("/")[2] or config.model,
    )
