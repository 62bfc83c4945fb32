"""The absolute-budget planner: drop saved activations greedily by recompute time per byte of PEAK reduction.

Start from what a plain partition saves (every forward tensor the backward reads; decisions are per storage,
so a kept storage keeps all its views). While the simulated peak is above the budget, estimate for every
saved storage what the peak becomes without it (its bytes leave the timeline between its last forward use
and its first backward use; the forward chain that must be recomputed for it is added where the backward
needs it) and the time that chain costs. Estimates come from array slices of the current timeline, not from
re-simulating, so large graphs stay fast. The few candidates with the least estimated time per byte are
then simulated in full, and the one with the least real added time per byte of real peak reduction is kept
(a move that only lowers the number of ops at the peak is kept when nothing lowers the peak). When no drop
lowers the peak any more, saving a storage recomputed before the peak again while dropping another may.

Once the budget holds, the finish (`_finish`) improves the plan by local search under the budget, each search
capped at `effort` simulations (scaled down on big graphs): save again whatever still fits, biggest recompute
saving first (from the path's step and from the fastest plans simulated beside the path); then exchange one
dropped storage for one kept; then drop one kept storage and refill the room with several dropped ones.
The storages one multi-output op makes (layer norm's out, mean, rstd) are also moved together, as one unit.

Ops that are unsafe to recompute (graph.excluded_reason) are never dropped; the schedule saves them.
The path of accepted steps does not depend on the budget, so one run down to the floor serves a whole sweep.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpulint.planner.graph import FWD, JointGraph
from gpulint.planner.simulate import KEEP, Simulation, device_sizes, simulate, step_time


@dataclass
class Step:
    saved: frozenset[int]
    peak: int
    step_time_s: float
    recompute_time_s: float


@dataclass
class PlanResult:
    budget: int | None
    feasible: bool
    chosen: Step
    baseline: Step
    simulation: Simulation  # of the chosen plan
    baseline_simulation: Simulation
    lowest_peak: int  # the lowest peak the planner reached (the floor when infeasible)
    path: list[Step] = field(default_factory=list)  # every accepted step, baseline first
    plan_seconds: float = 0.0
    # Plans simulated beside the path and not dominated when found: (index of the path step tried from, step).
    explored: list[tuple[int, Step]] = field(default_factory=list)


def _chain(graph: JointGraph, roots: list[int], saved: set[int], recomputed: set[int]) -> tuple[list[int], list[int]]:
    """Forward nodes that must be newly recomputed to rebuild `roots`, and excluded ops that must become saved."""
    nodes = graph.nodes
    chain: list[int] = []
    forced: list[int] = []
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        n = nodes[i]
        if n.kind != FWD:
            continue
        if i not in roots and (i in saved or i in recomputed):
            continue
        if n.excluded:
            forced.append(i)
            continue
        chain.append(i)
        stack.extend(n.inputs)
    return chain, forced


class _Search:
    """The simulations one local search may spend (`planner.effort`), and the plans it has already judged (a
    search that restarts after a move meets the same saved sets again; those cost nothing)."""

    def __init__(self, planner: GreedyPlanner) -> None:
        self.planner = planner
        self.limit = planner.effort
        self.seen: dict[frozenset[int], Step] = {}

    def left(self) -> bool:
        return len(self.seen) < self.limit

    def step(self, saved: frozenset[int]) -> Step:
        if saved not in self.seen:
            self.seen[saved] = self.planner._step(set(saved))[0]
        return self.seen[saved]


class GreedyPlanner:
    """`simulator` replaces the compiled form's simulation (eager_sim.EagerSimulator: the eager step under
    selective checkpointing); its `candidate(node)` says which saved values a plan may drop."""

    def __init__(self, graph: JointGraph, times: list[float], rounding: int = 1,
                 on_step: Callable[[int, int], None] | None = None, simulator: Any = None,
                 checkpoint_overhead_s: float = 0.0) -> None:
        self.graph = graph
        self.simulator = simulator
        self.checkpoint_overhead_s = checkpoint_overhead_s
        self.times = times
        self.rounding = rounding
        self.on_step = on_step  # on_step(baseline peak, current peak) after each step of the descent
        self.sizes = device_sizes(graph, rounding)
        static = graph.static_storages
        fwd_out = set(graph.fwd_outputs)
        # Candidate groups: a storage made by a forward op, with every saved node that refers to it.
        self.storage_of = {
            n.index: n.storages[0]
            for n in graph.nodes
            if n.kind == FWD and n.is_tensor and n.storages and n.storages[0] not in static and n.index not in fwd_out
            and not n.excluded and (simulator is None or simulator.candidate(n.index))
        }
        # The node that allocates each storage: outputs of one multi-output op (layer norm's out, mean, rstd)
        # are recomputed together, so re-saving one of them alone rarely saves anything.
        self.creator = {s: n.index for n in graph.nodes for s in n.creates}
        # The decisions the planner makes: each storage the plain partition saves, with its saved nodes.
        self.groups: dict[int, list[int]] = {}
        for i in sorted(graph.default_saved()):
            if i in self.storage_of:
                self.groups.setdefault(self.storage_of[i], []).append(i)
        # Simulations a local search may spend: about the same work on any graph size (~2e5 node visits).
        self.effort = max(40, min(400, 60_000 // max(1, len(graph.nodes))))

    def _step(self, saved: set[int]) -> tuple[Step, Simulation]:
        if self.simulator is not None:
            sim = self.simulator.simulate(saved)
        else:
            sim = simulate(self.graph, self.graph.alias_closure(saved), self.rounding)
        total, recompute = step_time(self.graph, sim.schedule, self.times, self.checkpoint_overhead_s)
        return Step(frozenset(sim.schedule.saved), sim.peak, total, recompute), sim

    def _candidates(self, sim: Simulation) -> list[tuple[float, int, list[int]]]:
        """(score, estimated peak, nodes to drop), best first."""
        saved = sim.schedule.saved
        recomputed = sim.schedule.recomputed
        by_storage = self.graph._tensors_by_storage()
        groups: dict[int, list[int]] = {}
        for i in saved:
            s = self.storage_of.get(i)
            if s is not None and s not in groups:
                groups[s] = [j for j in by_storage.get(s, [i]) if j in self.storage_of]
        tl = sim.timeline
        peak = sim.peak
        prefix = np.maximum.accumulate(tl)
        suffix = np.maximum.accumulate(tl[::-1])[::-1]
        out: list[tuple[float, int, list[int]]] = []
        for s, members in groups.items():
            span = sim.storage_spans.get(s)
            if span is None or span[1] < 0:
                continue
            fw_last, bw_first, _ = span
            b = self.sizes[s]
            rest = set(saved) - set(members)
            chain, forced = _chain(self.graph, members, rest, recomputed)
            extra = sum(self.sizes[t] for c in chain for t in self.graph.nodes[c].creates if t != s)
            lo, hi = fw_last + 1, bw_first  # positions where the storage is no longer held
            est = max(int(prefix[fw_last]), int(suffix[bw_first]), int(tl[bw_first]) + extra)
            if hi > lo:
                est = max(est, int(tl[lo:hi].max()) - b)
            for f in forced:
                # A forced node made after the first backward use (dropout's mask, kept saved) holds from there on.
                held = tl[min(f, bw_first):bw_first + 1]
                est = max(est, int(held.max()) + self.sizes[self.graph.nodes[f].storages[0]])
            added = sum(self.times[c] for c in chain)
            if est < peak:
                score = added / (peak - est)
            else:
                score = float("inf")
            out.append((score, est, members))
        out.sort(key=lambda c: (c[0], c[1], -len(c[2])))
        return out

    def run(self, budget: int | None = None, max_tries: int | None = None, width: int | None = None) -> PlanResult:
        """Descend from the plain partition until the simulated peak holds `budget` (None: as low as it goes).

        Each step simulates the `max_tries` best candidates by estimate and keeps the one with the least added time
        per byte of peak gained. When several of them lower the peak, dropping the best `width` of them together is
        simulated too, and kept when their gains add up (see `_together`): one step then does the work of several
        (a 12-layer model has a dozen equal drops in a row). A run for a budget starts fast (3 tries, 3 together);
        when that descent stops above the budget, it is run again carefully (6 tries, one at a time), as a run to
        the lowest peak (no budget) always is: the fast descent can take a path that ends higher."""
        if max_tries is None:
            if budget is not None:
                fast = self.run(budget, max_tries=3, width=3)
                if fast.feasible:
                    return fast
            max_tries, width = 6, 1
        width = width or 1
        start = time.perf_counter()
        baseline, base_sim = self._step(self.graph.default_saved())
        current, sim = baseline, base_sim
        path = [baseline]
        explored: list[tuple[int, Step]] = []
        best, best_sim = baseline, base_sim
        swaps_left = 2 * self.effort
        while budget is None or current.peak > budget:
            count = int((sim.timeline == sim.peak).sum())
            tried: list[tuple] = []
            # The estimate ranks; a full simulation of the best few decides (estimates miss shared chains).
            candidates = self._candidates(sim)
            drops: list[set[int]] = []
            for n_tried, (_score, _est, members) in enumerate(candidates):
                if (n_tried >= max_tries and tried) or n_tried >= 24:
                    break  # the best few by estimate decide; more are tried only when none of those helps
                result = self._try_drop(sim, set(members), current, count)
                tried += result
                drops += [set(members)] * len(result)
            if len(tried) >= 2 and width >= 2:
                tried += self._together(sim, current, count, tried, drops, width)
            if not tried:
                tried = self._pair_moves(sim, current, count, candidates)
            if not tried and swaps_left > 0:
                tried, used = self._floor_swaps(sim, current, count, candidates, swaps_left)
                swaps_left -= used
            if not tried:
                break
            for _key, step, _sim in tried:
                self._remember(explored, len(path) - 1, step)
            _key, current, sim = min(tried, key=lambda t: t[0])
            path.append(current)
            if current.peak < best.peak or (current.peak == best.peak and current.step_time_s < best.step_time_s):
                best, best_sim = current, sim
            if self.on_step is not None:
                self.on_step(baseline.peak, current.peak)
        lowest = min(s.peak for s in path)
        if budget is not None and current.peak <= budget:
            chosen, chosen_sim = self._finish(current, [s for _k, s in explored], budget)
            feasible = True
        else:
            chosen, chosen_sim, feasible = best, best_sim, budget is None
        return PlanResult(
            budget=budget,
            feasible=feasible,
            chosen=chosen,
            baseline=baseline,
            simulation=chosen_sim,
            baseline_simulation=base_sim,
            lowest_peak=lowest,
            path=path,
            plan_seconds=time.perf_counter() - start,
            explored=explored,
        )

    @staticmethod
    def _remember(explored: list[tuple[int, Step]], tag: int, step: Step) -> None:
        """Keep a simulated plan for the finish unless one found as early is as low and as fast."""
        if not any(s.peak <= step.peak and s.step_time_s <= step.step_time_s for _k, s in explored):
            explored.append((tag, step))

    def _together(self, sim: Simulation, current: Step, count: int, tried: list[tuple], drops: list[set[int]],
                  width: int) -> list[tuple]:
        """The best `width` drops that each lowered the peak, simulated together: kept as a candidate when their gains
        add up (they lower the peak by at least 90% of the sum of what each did alone: independent drops, as in the
        layers of a deep model) at most a quarter dearer per byte than the best alone."""
        ranked = sorted(range(len(tried)), key=lambda k: tried[k][0])
        helping = [k for k in ranked if tried[k][0][0] == 0][:width]
        if len(helping) < 2:
            return []
        best = tried[helping[0]]
        together = self._try_drop(sim, set().union(*(drops[k] for k in helping)), current, count)
        alone = sum(current.peak - tried[k][1].peak for k in helping)
        if together and together[0][0][0] == 0 and current.peak - together[0][1].peak >= 0.9 * alone \
                and together[0][0][1] <= 1.25 * best[0][1] + 1e-15:
            _key, step, simulation = together[0]
            return [((-1, 0.0), step, simulation)]  # kept: it ranks before every single drop
        return []

    def _pair_moves(self, sim: Simulation, current: Step, count: int, candidates: list, top: int = 8) -> list[tuple]:
        """When no single drop lowers the peak (two storages hold it together), try pairs of the best few."""
        tried: list[tuple] = []
        for (_s1, _e1, a), (_s2, _e2, b) in itertools.combinations(candidates[:top], 2):
            tried += self._try_drop(sim, set(a) | set(b), current, count)
        return tried

    def _floor_swaps(self, sim: Simulation, current: Step, count: int, candidates: list, limit: int,
                     top: int = 8) -> tuple[list[tuple], int]:
        """When no drop lowers the peak any more, the recompute of something dropped earlier may be what holds it:
        try saving a dropped storage again (recomputed nearest before the peak first; one recomputed after the
        peak would only add to it) while dropping one of the best few candidates. Returns the moves that lower
        the peak and the simulations spent (<= `limit`)."""
        position = {i: sim.fw_len + k for k, i in enumerate(sim.schedule.bw) if i in sim.schedule.recomputed}
        distance: dict[tuple[int, ...], int] = {}
        for unit in self._units(self._dropped(current)):
            at = [position[self.creator[s]] for s in unit if position.get(self.creator.get(s), KEEP) <= sim.peak_position]
            if at:
                distance[unit] = sim.peak_position - max(at)
        back_units = sorted(distance, key=distance.get)
        drops = sorted(candidates, key=lambda c: c[1])[:top]
        tried: list[tuple] = []
        used = 0
        for unit in back_units:
            for _score, _est, members in drops:
                if used >= limit:
                    return tried, used
                used += 1
                tried += self._try_drop(sim, set(members), current, count, self._members(unit))
            if tried:
                break
        return tried, used

    def _try_drop(self, sim: Simulation, drop: set[int], current: Step, count: int,
                  back: frozenset[int] = frozenset()) -> list[tuple]:
        """Simulate dropping `drop` from the saved set (and saving `back` again): [(rank key, step, simulation)]
        when the peak falls (or is held at fewer points), ranked by added time per byte of peak gained; [] when
        it does not help."""
        trial, trial_sim = self._step((set(sim.schedule.saved) - drop) | back)
        trial_count = int((trial_sim.timeline == trial_sim.peak).sum())
        if (trial.peak, trial_count) >= (current.peak, count):
            return []
        gain = current.peak - trial.peak
        added = trial.step_time_s - current.step_time_s
        key = (0, added / gain) if gain > 0 else (1, added)
        return [(key, trial, trial_sim)]

    def _finish(self, start: Step, explored: list[Step], budget: int, extra_starts: int = 2) -> tuple[Step, Simulation]:
        """The plan for `budget` from the first path step under it: save again what fits, starting from that step
        and also from the fastest plans simulated beside the path that fit (the path's ratio rule can pay for many
        small drops where one bigger drop would have reached the budget for less); the fastest result then goes
        through the two exchange searches. Each search spends at most `effort` simulations."""
        fits = sorted((s for s in explored if s.peak <= budget), key=lambda s: (s.step_time_s, s.peak))
        best: Step | None = None
        for s in [start, *fits[:extra_starts]]:
            step = self._resave(s, budget, _Search(self))
            if best is None or (step.step_time_s, step.peak) < (best.step_time_s, best.peak):
                best = step
        best = self._swap(best, budget, _Search(self))
        best = self._drop_and_refill(best, budget, _Search(self))
        return self._step(set(best.saved))

    def _resave(self, current: Step, budget: int, search: _Search) -> Step:
        """Save again what the budget still has room for: each dropped storage (or the storages one multi-output
        op made) whose return keeps the simulated peak within `budget` and lowers the step time is put back,
        biggest recompute saving first. Greedy drops made against an earlier, higher peak are often no longer
        needed once the budget holds."""
        improved = True
        while improved and search.left():  # a return can make room for another: repeat until stable
            improved = False
            for unit in self._by_saving(self._units(self._dropped(current))):
                members = self._members(unit)
                if members <= current.saved or not search.left():
                    continue
                trial = search.step(current.saved | members)
                if trial.peak <= budget and trial.step_time_s < current.step_time_s:
                    current, improved = trial, True
        return current

    def _swap(self, current: Step, budget: int, search: _Search) -> Step:
        """Local search under the budget, one for one: keep a dropped storage (or an op's storages) in exchange
        for dropping a kept one of at least a quarter of its size, whenever that lowers the step time and the
        peak still fits."""
        improved = True
        while improved and search.left():
            improved = False
            dropped_storages = self._dropped(current)
            kept = self._units([s for s in self.groups if s not in set(dropped_storages)])
            kept.sort(key=lambda u: -self._unit_size(u))
            for d in self._by_saving(self._units(dropped_storages)):
                for k in kept:
                    if not search.left() or self._unit_size(k) < self._unit_size(d) // 4:
                        break
                    trial = search.step((current.saved | self._members(d)) - self._members(k, views=True))
                    if trial.peak <= budget and trial.step_time_s < current.step_time_s:
                        current, improved = trial, True
                        break
                if improved:
                    break
        return current

    def _drop_and_refill(self, current: Step, budget: int, search: _Search, refill: int = 8) -> Step:
        """Local search under the budget, one for many: drop a kept storage that is cheap to recompute for its
        size (a residual sum), then save again, in the room that made, the dropped storages that save the most
        recompute time per byte (several layer norms: a knapsack's greedy order); kept when the step gets
        faster. At most `refill` returns are tried per drop."""
        improved = True
        while improved and search.left():
            improved = False
            dropped_storages = self._dropped(current)
            dropped = self._units(dropped_storages, parts=False)
            dropped.sort(key=lambda u: (-self._per_byte(u), -len(u)))
            kept = self._units([s for s in self.groups if s not in set(dropped_storages)])
            for k in sorted(kept, key=self._per_byte):
                if not search.left():
                    break
                trial = search.step(current.saved - self._members(k, views=True))
                if trial.peak > budget:
                    continue
                for d in dropped[:refill]:
                    if not search.left():
                        break
                    if self._members(d) <= trial.saved:
                        continue
                    step = search.step(trial.saved | self._members(d))
                    if step.peak <= budget and step.step_time_s < trial.step_time_s:
                        trial = step
                if trial.step_time_s < current.step_time_s:
                    current, improved = trial, True
                    break
        return current

    def _units(self, storages: list[int], parts: bool = True) -> list[tuple[int, ...]]:
        """The storages one multi-output op made, together (recomputed as one), and each storage alone (with
        `parts` False, only those no other storage of `storages` shares an op with)."""
        by_creator: dict[int, list[int]] = {}
        for s in storages:
            by_creator.setdefault(self.creator.get(s, -1), []).append(s)
        whole = [tuple(g) for c, g in by_creator.items() if c >= 0 and len(g) > 1]
        alone = [(s,) for s in storages if parts or len(by_creator[self.creator.get(s, -1)]) == 1]
        return alone + whole

    def _members(self, unit: tuple[int, ...], views: bool = False) -> frozenset[int]:
        """The saved nodes of a unit's storages: those the plain partition saves, or with `views` every
        candidate node that refers to them (to drop a storage, drop all its views)."""
        if views:
            by_storage = self.graph._tensors_by_storage()
            return frozenset(j for s in unit for j in by_storage.get(s, ()) if j in self.storage_of)
        return frozenset(i for s in unit for i in self.groups[s])

    def _dropped(self, current: Step) -> list[int]:
        """The storages of the plain partition that `current` does not keep."""
        kept = {self.storage_of[i] for i in current.saved if i in self.storage_of}
        return [s for s in self.groups if s not in kept]

    def _unit_time(self, unit: tuple[int, ...]) -> float:
        """A rough recompute time a unit stands for: its storages' creators (ranks re-save candidates)."""
        return sum(self.times[c] for c in {self.creator.get(s, -1) for s in unit} if c >= 0)

    def _unit_size(self, unit: tuple[int, ...]) -> int:
        return sum(self.sizes[s] for s in unit)

    def _per_byte(self, unit: tuple[int, ...]) -> float:
        return self._unit_time(unit) / max(1, self._unit_size(unit))

    def _by_saving(self, units: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
        """Units to save again, biggest recompute saving first; an op's whole set of storages before its parts."""
        return sorted(units, key=lambda u: (-self._unit_time(u), -len(u)))

    def for_budget(self, full: PlanResult, budget: int) -> PlanResult:
        """The plan for `budget` taken from a run down to the floor (the path does not depend on the budget, and
        the finish sees only what a run stopping at `budget` would have explored, so both give the same plan)."""
        first = next((k for k, step in enumerate(full.path) if step.peak <= budget), None)
        if first is not None:
            explored = [s for tag, s in full.explored if tag < first]
            chosen, chosen_sim = self._finish(full.path[first], explored, budget)
        else:
            chosen = min(full.path, key=lambda s: (s.peak, s.step_time_s))
            chosen_sim = self._step(set(chosen.saved))[1]
        return PlanResult(
            budget=budget, feasible=first is not None, chosen=chosen, baseline=full.baseline,
            simulation=chosen_sim, baseline_simulation=full.baseline_simulation, lowest_peak=full.lowest_peak,
            path=full.path, plan_seconds=full.plan_seconds, explored=full.explored,
        )


def plan(graph: JointGraph, budget: int | None, hw: object) -> PlanResult:
    """Plan `graph` for `budget` bytes on hardware `hw` (a hardware.Hardware)."""
    from gpulint.planner.cost import node_times

    planner = GreedyPlanner(graph, node_times(graph, hw), hw.allocation_rounding)
    return planner.run(budget)
