"""Predict the eager step that `gpulint.apply(model, plan)` runs, on the planner's graph of that model.

Eager selective checkpointing costs what the compiled plan does not: a checkpointed layer keeps its inputs, an op's
outputs are kept or dropped together, and a layer's dropped activations are recomputed all at once. `predict`
simulates that step.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from torch import nn

from gpulint.planner import planfile
from gpulint.planner.address import graph_addresses, layer_of
from gpulint.planner.eager_apply import applicable, plan_regions

def _hold_unreached_cache(graph: Any, simulation: Any, region_of: dict[int, str], reached: dict[str, int],
                          must_save_nodes: set[int]) -> None:
    """Add to the timeline what the SAC cache keeps beyond the simulator's last use.

    A layer's cache holds each saved op output until the recompute reaches that op; the recompute stops early
    (after the last op it recomputes; measured), so a saved output past that point (typically the
    layer's own output, which the next layer keeps as its input) stays cached until the layer's backward ends.
    """
    nodes = graph.nodes
    order = simulation.schedule.fw + simulation.schedule.bw
    fw_len = len(simulation.schedule.fw)
    last_read: dict[int, int] = {}  # storage -> last position any op reads it
    layer_end: dict[str, int] = {}  # layer -> last backward position that reads one of its values
    for pos, index in enumerate(order):
        for j in nodes[index].inputs:
            for storage in nodes[j].storages:
                last_read[storage] = pos
            if pos >= fw_len and j in region_of:
                layer_end[region_of[j]] = pos
    sizes = graph.storage_bytes
    for layer, end in reached.items():
        for index in sorted(i for i, r in region_of.items() if r == layer and i > end and i in must_save_nodes):
            for storage in nodes[index].creates:
                start = last_read.get(storage, len(order)) + 1
                stop = layer_end.get(layer, -1) + 1
                if start < stop:
                    simulation.timeline[start:stop] += sizes[storage]
    simulation.peak_position = int(simulation.timeline.argmax())
    simulation.peak = int(simulation.timeline[simulation.peak_position])


# --- predicting the eager step -----------------------------------------------------------------------------------


@dataclass
class EagerPrediction:
    peak_bytes: int
    step_time_s: float
    recompute_time_s: float
    saved: set[int]  # graph nodes the eager step keeps for backward
    simulation: Any  # gpulint.planner.simulate.Simulation


def predict(graph: Any, plan: planfile.Plan, model: nn.Module, times: list[float] | None = None,
            rounding: int = 1) -> EagerPrediction:
    """Simulate the step `apply(model, plan)` runs, on the planner's graph of that model.

    Eager selective checkpointing differs from the compiled plan in three ways, all simulated here:
    - a checkpointed layer keeps its inputs (checkpoint saves them), and layers without a recompute decision
      save what autograd saves;
    - the policy keeps or drops an op's outputs together (a layer norm's out, mean and rstd), and a saved
      view keeps the op that made its storage;
    - the first backward use of anything a layer dropped recomputes all of that layer's dropped activations at
      once (they stay alive until their own backward use), not each one just before it is needed.
    """
    from gpulint.planner.graph import BWD, FWD
    from gpulint.planner.simulate import Schedule, schedule, simulate, step_time

    decisions = applicable(plan.eager_decisions())
    regions, _ = plan_regions(model, decisions)
    checkpointed = set(regions)
    nodes = graph.nodes
    region_of: dict[int, str] = {}
    for node in nodes:
        if node.kind == FWD:
            layer = layer_of(model, node.module)
            if layer in checkpointed:
                region_of[node.index] = layer
    must_save = {d.address for d in decisions if d.action == "save"}

    default = sorted(graph.default_saved())
    saved: set[int] = set()
    for index, address in zip(default, graph_addresses(graph, default)):
        if index not in region_of or address in must_save:
            saved.add(index)
    for node in nodes:  # checkpoint keeps each layer's inputs
        layer = region_of.get(node.index)
        if layer is None:
            continue
        for j in node.inputs:
            if nodes[j].kind == FWD and region_of.get(j) != layer and nodes[j].is_tensor:
                saved.add(j)

    planned = schedule(graph, saved)
    # The recompute re-runs a layer's forward from its start up to the op that packs its last saved tensor
    # (checkpoint's early stop), so ops the backward never reads are recomputed too and live briefly.
    read_by_backward = {j for node in nodes if node.kind == BWD for j in node.inputs}
    members: dict[str, list[int]] = defaultdict(list)
    for index in sorted(region_of):
        members[region_of[index]].append(index)
    recomputed = set(planned.recomputed)
    by_layer: dict[str, list[int]] = {}
    for layer, indices in members.items():
        if not any(i in planned.recomputed for i in indices):
            continue
        packs = [i for i in indices if i in read_by_backward or any(j in read_by_backward for j in nodes[i].inputs)]
        end = max(packs + [i for i in indices if i in planned.recomputed])
        by_layer[layer] = [i for i in indices if i <= end and i not in planned.saved]
        recomputed.update(by_layer[layer])
    backward: list[int] = []
    done: set[str] = set()
    for index in planned.bw:
        layer = region_of.get(index) if index in recomputed else None
        if layer is None:
            backward.append(index)
        elif layer not in done:
            done.add(layer)
            backward.extend(by_layer[layer])
    eager_schedule = Schedule(fw=planned.fw, bw=backward, saved=planned.saved, recomputed=recomputed)
    simulation = simulate(graph, saved, rounding, sched=eager_schedule)
    reached = {layer: max(prefix) for layer, prefix in by_layer.items() if prefix}
    _hold_unreached_cache(graph, simulation, region_of, reached, must_save_nodes=saved - recomputed)
    total, recompute = step_time(graph, eager_schedule, times) if times is not None else (0.0, 0.0)
    return EagerPrediction(simulation.peak, total, recompute, saved, simulation)
