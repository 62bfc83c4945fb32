"""`gpulint plan` from end to end: trace the step, plan it under the budget, predict both forms, measure them.

    planned = make_plan(config, budget, hardware)       # trace + greedy plan -> Planned (the plan and its graph)
    add_eager_figures(planned, config)                 # the eager form under gpulint.apply
    add_measurement(planned, config)                   # --measure: the real compiled step with and without the plan

Everything here returns or fills a `planfile.Plan`; cli.py renders and writes it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpulint.planner import planfile
from gpulint.planner.address import graph_addresses
from gpulint.planner.errors import PlanError
from gpulint.planner.graph import FWD, JointGraph
from gpulint.planner.greedy import PlanResult

TIMELINE_POINTS = 200


@dataclass
class Planned:
    """A plan and what it was made from: the traced graph of the step (for --measure and the eager figures)."""

    plan: planfile.Plan
    graph: JointGraph


def progress(message: str) -> None:
    print(f"gpulint: {message}", file=sys.stderr, flush=True)


def floor_bytes(graph: JointGraph, rounding: int) -> int:
    """Parameters, buffers, batch, optimizer state and gradients: what no plan can remove."""
    from gpulint.planner.simulate import static_bytes

    sizes = graph.storage_bytes
    grads = {s for i in graph.grad_outputs for s in graph.nodes[i].storages}
    rnd = (lambda b: b) if rounding <= 1 else (lambda b: -(-b // rounding) * rounding)
    return static_bytes(graph, rounding) + sum(rnd(sizes[s]) for s in grads)


def _source(graph_node: Any) -> planfile.Source | None:
    import os

    if not graph_node.source:
        return None
    path, line = graph_node.source
    try:
        rel = os.path.relpath(path)
        path = path if rel.startswith("..") else rel
    except ValueError:
        pass
    return planfile.Source(path=path, line=int(line))


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
            call_index=None if address is None else address.call_index, source=_source(maker),
        ))
    excluded = [
        planfile.Excluded(id=n.name, op=n.op, reason=n.excluded, module=n.module, call_index=n.call_index,
                          source=_source(n))
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


def make_plan(config: Any, budget: int | None, hardware_name: str, sweep: int = 0,
              show_progress: bool = True) -> Planned:
    """Trace, plan and (optionally) sweep."""
    from gpulint.planner.config import format_bytes
    from gpulint.planner.cost import node_times
    from gpulint.planner.greedy import GreedyPlanner
    from gpulint.planner.hardware import load_hardware
    from gpulint.planner.trace import trace_step

    hw = load_hardware(hardware_name)
    say = progress if show_progress else None
    if say:
        say(f"tracing {config.model} ({config.dtype}, fake tensors)...")
    build_model, make_batch, step = user_step(config)
    traced = trace_step(build_model, make_batch, loss_fn=step, optimizer=config.optimizer, dtype=config.dtype,
                        name=config.model, progress=say)
    graph = traced.graph
    if say:
        say(f"traced {len(graph.nodes)} ops in {traced.seconds:.1f} s; planning for {hw.name}...")
    floor = floor_bytes(graph, hw.allocation_rounding)
    if budget is None:
        budget = hw.memory_capacity
    if budget < floor:
        raise PlanError(
            f"budget {format_bytes(budget)} is below the floor of {format_bytes(floor)} (parameters, gradients, "
            f"optimizer state and batch); no recomputation plan can reach it"
        )
    planner = GreedyPlanner(graph, node_times(graph, hw), hw.allocation_rounding, progress=show_progress)
    full = planner.run(None if sweep else budget)
    result = planner.for_budget(full, budget) if sweep else full
    plan = plan_from_result(graph, result, hardware=hw.name, trace_seconds=traced.seconds, floor=floor)
    plan.data_dependent = [planfile.ValueRead(**read) for read in traced.data_dependent]
    if sweep:
        top, bottom = full.baseline.peak, full.lowest_peak
        for k in range(sweep):
            b = int(bottom + (top - bottom) * k / max(1, sweep - 1))
            r = planner.for_budget(full, b)
            plan.sweep.append(planfile.SweepPoint(budget_bytes=b, peak_bytes=r.chosen.peak,
                                                  step_time_s=r.chosen.step_time_s,
                                                  recompute_time_s=r.chosen.recompute_time_s, feasible=r.feasible))
    return Planned(plan, graph)


def user_step(config: Any) -> tuple[Callable[[], Any], Callable[[], Any], Any]:
    """The model factory, batch factory and training step (a step.UserStep) a config names."""
    from gpulint.planner.config import load_factory
    from gpulint.planner.step import UserStep

    build_model = load_factory(config.model, config.base_dir, "plan.model")
    make_batch = load_factory(config.batch, config.base_dir, "plan.batch")
    loss_fn = load_factory(config.loss, config.base_dir, "plan.loss") if config.loss else None
    step_fn = load_factory(config.step, config.base_dir, "plan.step") if config.step else None
    return build_model, make_batch, UserStep(loss_fn=loss_fn, step_fn=step_fn, inputs=config.inputs)


def add_measurement(planned: Planned, config: Any, show_progress: bool = True) -> None:
    """Run the real compiled step with and without the plan; record measured and on-device predicted figures."""
    from gpulint.planner.measure import measure_step
    from gpulint.planner.simulate import simulate

    graph, plan = planned.graph, planned.plan
    build_model, make_batch, loss_fn = user_step(config)
    kwargs = {"loss_fn": loss_fn, "optimizer": config.optimizer, "dtype": config.dtype}
    if show_progress:
        progress("measuring today's step...")
    base = measure_step(build_model, make_batch, None, **kwargs)
    if show_progress:
        progress("measuring the planned step...")
    names = plan.saved_ids()
    measured = measure_step(build_model, make_batch, names, **kwargs)
    rounding = 512 if measured.device.startswith("cuda") else 1
    predicted = simulate(graph, graph.alias_closure({graph.by_name[n] for n in names}), rounding).peak
    predicted_base = simulate(graph, graph.default_saved(), rounding).peak
    plan.measured = planfile.Measured(
        peak_bytes=measured.peak_bytes, step_time_s=measured.step_time_s, device=measured.device,
        predicted_peak_bytes=predicted, baseline_peak_bytes=base.peak_bytes,
        baseline_predicted_peak_bytes=predicted_base, baseline_step_time_s=base.step_time_s,
        loss=measured.loss, baseline_loss=base.loss,
    )


# --- the eager form ----------------------------------------------------------------------------------------------


def eager_fitting_plan(graph: JointGraph, structure: Any, budget: int, hardware: Any) -> planfile.Plan | None:
    """The plan for the largest budget whose eager step peaks within `budget` (None: no plan does).

    Walks the planner's path (each step lowers the compiled peak) by bisection, predicting each step's eager peak.
    """
    from gpulint.planner.cost import node_times
    from gpulint.planner.eager_predict import predict
    from gpulint.planner.greedy import GreedyPlanner

    planner = GreedyPlanner(graph, node_times(graph, hardware), hardware.allocation_rounding)
    full = planner.run(None)
    path = sorted(full.path, key=lambda step: -step.peak)
    plans: dict[int, planfile.Plan] = {}

    def fits(position: int) -> bool:
        plans[position] = plan_from_result(graph, planner.for_budget(full, path[position].peak), hardware=hardware.name)
        return predict(graph, plans[position], structure, rounding=hardware.allocation_rounding).peak_bytes <= budget

    low, high = 0, len(path) - 1
    if not fits(high):
        return None
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    fits(low)
    return plans[low]


def add_eager_figures(planned: Planned, config: Any, measured: bool = False) -> None:
    """Fill `plan.eager`: the predicted (and, with `measured`, the measured) eager step under this plan.

    The model's module tree is built under fake tensors (no memory) to find the layers apply() would checkpoint.
    """
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gpulint.planner.eager_apply import applicable, plan_regions
    from gpulint.planner.cost import node_times
    from gpulint.planner.eager_predict import predict
    from gpulint.planner.hardware import load_hardware
    from gpulint.planner.measure import measure_eager
    from gpulint.planner.trace import build_fake_model

    graph, plan = planned.graph, planned.plan
    hardware = load_hardware(plan.hardware)
    times = node_times(graph, hardware)
    build_model, make_batch, loss_fn = user_step(config)
    with FakeTensorMode(), torch.device("cpu"):
        structure = build_fake_model(build_model)
    plan.eager = None
    predicted = predict(graph, plan, structure, times, hardware.allocation_rounding)
    budget = plan.budget_bytes
    own: tuple[list[planfile.Decision], int | None] | None = None
    if budget is not None and predicted.peak_bytes > budget:
        # Eager mode keeps layer inputs and recomputes whole layers: pick the plan whose eager step fits.
        fitting = eager_fitting_plan(graph, structure, budget, hardware)
        if fitting is not None:
            own = (fitting.decisions, fitting.budget_bytes)
            plan.eager = planfile.EagerForm(peak_bytes=0, step_time_s=0.0, decisions=own[0], planned_for_bytes=own[1])
            predicted = predict(graph, plan, structure, times, hardware.allocation_rounding)
    plan.eager = planfile.EagerForm(
        peak_bytes=predicted.peak_bytes,
        step_time_s=predicted.step_time_s,
        recompute_time_s=predicted.recompute_time_s,
        layers=plan_regions(structure, applicable(own[0] if own else plan.decisions))[0],
        fits_budget=budget is None or predicted.peak_bytes <= budget,
        decisions=own[0] if own else None,
        planned_for_bytes=own[1] if own else None,
    )
    if measured:
        result = measure_eager(build_model, make_batch, plan, loss_fn=loss_fn, optimizer=config.optimizer,
                               dtype=config.dtype)
        rounding = 512 if result.device.startswith("cuda") else 1  # the device measured, not the target
        plan.eager.measured = planfile.Measured(
            peak_bytes=result.peak_bytes, step_time_s=result.step_time_s, device=result.device,
            predicted_peak_bytes=predict(graph, plan, structure, rounding=rounding).peak_bytes,
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
        buckets.append((sig, plan))
    signatures = [sig for sig, _ in buckets]
    if len(set(signatures)) != len(signatures):
        raise PlanError("plan.batch: two yielded batches have the same shapes; yield one batch per shape bucket")
    largest_sig, combined = max(buckets, key=lambda item: size(item[0]))
    combined.shapes = [
        planfile.ShapePlan(signature=[list(shape) for shape in sig], feasible=plan.feasible, baseline=plan.baseline,
                           planned=plan.planned, decisions=plan.decisions)
        for sig, plan in buckets
    ]
    combined.largest_signature = [list(shape) for shape in largest_sig]
    combined.feasible = all(plan.feasible for _, plan in buckets)
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
