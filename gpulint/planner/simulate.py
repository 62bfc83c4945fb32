"""Memory simulation of one training step for a given saved set: the exact schedule the backend executes.

    schedule(graph, saved) -> Schedule     which nodes run in the forward graph, which in the backward graph
                                           (recomputed forward nodes placed just before their first use)
    simulate(graph, saved, rounding) -> Simulation   live bytes after every op, the peak and where it is

The forward graph runs every forward node needed for the loss or a saved value, in traced order. The backward
graph runs the backward nodes in traced (autograd) order; a forward node that the backward needs but that is
not saved is recomputed right before its first use (depth first, its own unsaved inputs first).

Liveness is keyed by storage: a value is alive from the op that makes it until its last reader ran (FX
frees each value after its last use; aot_autograd frees saved tensors after their last use in the
backward); a storage is freed when no live value refers to it. Per-node facts are computed once per graph and
the timeline is a prefix sum over storage lifetimes: the planner simulates thousands of saved sets. Static memory
(parameters, buffers, the batch, optimizer state) is alive all step; gradients are backward outputs and stay alive to the end. For CUDA
targets every storage is rounded up to the allocator's 512-byte block.

`simulate` is public API: the eager simulation (gpulint/planner/eager_sim.py) builds its own schedule and calls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpulint.planner.graph import FWD, INPUT, PARAM, TANGENT, JointGraph

KEEP = 1 << 62  # "last use" of values that are alive until the end of the step


@dataclass
class Schedule:
    fw: list[int]  # node indices run by the forward graph, in order
    bw: list[int]  # node indices run by the backward graph, in order (recomputed forward nodes included)
    saved: set[int]  # the saved set actually used (unused entries dropped, excluded ops the backward needs added)
    recomputed: set[int]  # forward nodes the backward recomputes
    checkpointed_ops: int = 0  # eager form: ops run under selective checkpointing (forward and recompute)


@dataclass
class Simulation:
    schedule: Schedule
    peak: int  # bytes
    peak_position: int  # index into `timeline` (positions 0..len(fw)-1 are the forward)
    static_bytes: int  # parameters, buffers, batch and optimizer state
    timeline: np.ndarray  # live bytes right after each op allocated its output (before frees)
    storage_spans: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    # ^ for each forward storage: (last forward position that needs it, first backward position, bytes)

    @property
    def fw_len(self) -> int:
        return len(self.schedule.fw)


def schedule(graph: JointGraph, saved: set[int]) -> Schedule:
    inputs, _sources, is_fwd, _tangents, kinds, descending = _structure(graph)
    nodes = graph.nodes
    effective: set[int] = set()
    recomputed: set[int] = set()
    needed_bw: set[int] = set()
    stack = list(graph.grad_outputs)
    seen: set[int] = set()
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        kind = kinds[i]
        if kind in (PARAM, INPUT, TANGENT):
            continue
        if kind == FWD:
            if i in saved or nodes[i].excluded:
                # A node that is unsafe to recompute is saved whenever the backward needs it.
                if not nodes[i].is_tensor:
                    raise ValueError(f"{nodes[i].name} ({nodes[i].op}) cannot be recomputed and is not a single tensor")
                effective.add(i)
                continue
            recomputed.add(i)
        else:
            needed_bw.add(i)
        stack.extend(inputs[i])
    # Forward: everything the loss and the saved values depend on, in traced order.
    fw_needed: set[int] = set()
    stack = [i for i in graph.fwd_outputs if is_fwd[i]] + sorted(effective)
    while stack:
        i = stack.pop()
        if i in fw_needed or not is_fwd[i]:
            continue
        fw_needed.add(i)
        stack.extend(inputs[i])
    fw = sorted(fw_needed)
    # Backward: traced order, each recomputed node emitted just before its first consumer (its own recomputed
    # inputs first, in traced order: an iterative post-order).
    bw: list[int] = []
    emitted: set[int] = set()
    for root in sorted(needed_bw):
        pending: list[tuple[int, bool]] = [(root, False)]
        while pending:
            i, expanded = pending.pop()
            if i in emitted:
                continue
            if expanded:
                emitted.add(i)
                bw.append(i)
                continue
            pending.append((i, True))
            pending.extend((j, False) for j in descending[i] if j in recomputed and j not in emitted)
    return Schedule(fw=fw, bw=bw, saved=effective, recomputed=recomputed)


def _structure(graph: JointGraph) -> tuple:
    """Per-node facts every simulation of a graph reads, computed once per graph: its inputs (also in descending
    order), the storages it refers to that are not static with the input it has each from (-1: it creates it), and
    its kind."""
    cached = getattr(graph, "_structure", None)
    if cached is None:
        static = graph.static_storages
        nodes = graph.nodes
        sources = []
        for n in nodes:
            pairs = []
            for s in n.storages:
                if s in static:
                    continue
                source = -1 if s in n.creates else next((u for u in n.inputs if s in nodes[u].storages), -1)
                pairs.append((s, source))
            sources.append(tuple(pairs))
        cached = (
            [tuple(n.inputs) for n in nodes],
            sources,
            [n.kind == FWD for n in nodes],
            [n.index for n in nodes if n.kind == TANGENT],
            [n.kind for n in nodes],
            [tuple(sorted(n.inputs, reverse=True)) for n in nodes],
        )
        graph._structure = cached
    return cached


def device_sizes(graph: JointGraph, rounding: int = 1) -> list[int]:
    """Device bytes of each storage. `rounding` 1 is a CPU host: exact sizes, with what CPU kernels really keep
    (graph.CPU_INPUT_SIZED_RESULTS). Above 1 it is a GPU: each storage rounded up to the allocator's block, and
    host storages (saved generator states) take none."""
    if rounding <= 1:
        if not graph.cpu_storage_bytes:
            return graph.storage_bytes
        return [graph.cpu_storage_bytes.get(s, b) for s, b in enumerate(graph.storage_bytes)]
    host = graph.host_storages
    return [0 if s in host else -(-b // rounding) * rounding for s, b in enumerate(graph.storage_bytes)]


def static_bytes(graph: JointGraph, rounding: int = 1) -> int:
    def rnd(b: int) -> int:
        return b if rounding <= 1 else -(-b // rounding) * rounding

    static = sum(rnd(graph.storage_bytes[s]) for s in graph.static_storages)
    host = graph.optimizer_host_bytes if rounding <= 1 else 0  # on CUDA the step counters stay on the host
    return static + sum(rnd(b) for b in graph.optimizer_state_sizes) + host


def simulate(graph: JointGraph, saved: set[int], rounding: int = 1, sched: Schedule | None = None,
             hold: dict[int, int] | None = None) -> Simulation:
    """Simulate the step that saves `saved` (node indices); return live bytes after each op and the peak.

    `sched` replaces the backend's schedule of `saved` (eager_sim.py passes one where selective checkpointing
    recomputes a whole layer at once). `hold` keeps a forward node's value alive at least until a forward position
    (eager mode: a Python variable holds it past its last use).

    A value is (node, phase): phase 1 for a forward node recomputed in the backward. A value refers to storages by
    key (storage, phase of the value that allocated it). A key lives from the position that allocates it to the last
    use of the last value referring to it, so the timeline is a prefix sum of +size at allocation and -size after
    death.
    """
    sched = sched or schedule(graph, saved)
    inputs, sources, is_fwd, tangents, _kinds, _descending = _structure(graph)
    sizes = device_sizes(graph, rounding)
    recomputed = sched.recomputed
    fw_len = len(sched.fw)
    order = [(i, 0) for i in sched.fw] + [(i, 1 if i in recomputed else 0) for i in sched.bw]
    length = len(order)

    # Last use of every value: the position of its last reader (KEEP for the step's outputs).
    last_use: dict[tuple[int, int], int] = {}
    for pos in range(length):
        i = order[pos][0]
        if pos < fw_len:
            for u in inputs[i]:
                last_use[(u, 0)] = pos
        else:
            for u in inputs[i]:
                last_use[(u, 1) if u in recomputed else (u, 0)] = pos
    for i in graph.fwd_outputs[:-1]:  # buffers' new values: written back into the buffers as the forward returns
        last_use[(i, 0)] = max(last_use.get((i, 0), 0), fw_len - 1)
    for i in graph.fwd_outputs[-1:]:  # the loss
        last_use[(i, 0)] = KEEP
    for i in graph.grad_outputs:
        last_use[(i, 0)] = KEEP
    for t in tangents:  # `loss.backward()` holds its seed gradient until the backward returns
        last_use[(t, 0)] = KEEP
    for i, position in (hold or {}).items():
        last_use[(i, 0)] = max(last_use.get((i, 0), position), position)

    # Keys: where each is allocated and until when some value refers to it. A storage a node does not create is
    # the storage of one of its inputs (`sources`): the key that input's value holds for it.
    alloc: dict[tuple[int, int], int] = {}
    death: dict[tuple[int, int], int] = {}
    key_of: dict[tuple[int, int, int], tuple[int, int]] = {}  # (node, phase, storage) -> key
    spans: dict[int, list[int]] = {}

    for pos in range(length + len(tangents)):
        # autograd hands the backward its seed gradient(s) just before the backward's first op
        if pos < fw_len:
            i, phase, at = order[pos][0], order[pos][1], pos
        elif pos < fw_len + len(tangents):
            i, phase, at = tangents[pos - fw_len], 0, fw_len
        else:
            i, phase = order[pos - len(tangents)]
            at = pos - len(tangents)
        backward = at >= fw_len
        end = last_use.get((i, phase), at)  # a value nobody reads dies right after it is made
        for s, u in sources[i]:
            if u < 0:
                key = (s, phase)
            else:
                key = key_of.get((u, 1 if backward and u in recomputed else 0, s), (s, phase))
            key_of[(i, phase, s)] = key
            if key not in alloc:
                alloc[key] = at
                death[key] = end
            elif end > death[key]:
                death[key] = end
            if phase == 0 and is_fwd[i] and key[1] == 0:
                span = spans.setdefault(s, [at, -1, sizes[s]])
                if not backward:
                    span[0] = at
        if pos < fw_len or pos >= fw_len + len(tangents):
            for u in inputs[i]:
                if not is_fwd[u] or (backward and u in recomputed):
                    continue
                for s, _source in sources[u]:
                    span = spans.get(s)
                    if span is None or key_of.get((u, 0, s), (s, 1))[1] != 0:
                        continue
                    if not backward:
                        span[0] = max(span[0], at)
                    elif span[1] < 0:
                        span[1] = at

    deltas = np.zeros(length + 2, dtype=np.int64)
    for key, start in alloc.items():
        size = sizes[key[0]]
        deltas[start] += size
        end = death[key]
        if end < length:
            deltas[end + 1] -= size
    base = static_bytes(graph, rounding)
    timeline = base + np.cumsum(deltas[: length + 1])
    peak_position = int(np.argmax(timeline))
    return Simulation(
        schedule=sched,
        peak=int(timeline[peak_position]),
        peak_position=peak_position,
        static_bytes=base,
        timeline=timeline,
        storage_spans={s: (a, b, c) for s, (a, b, c) in spans.items()},
    )


def step_time(graph: JointGraph, sched: Schedule, times: list[float],
              checkpoint_overhead_s: float = 0.0) -> tuple[float, float]:
    """(predicted step time, of which recomputation) in seconds, from per-node times; in the eager form, each op run
    under selective checkpointing also costs `checkpoint_overhead_s` (its policy's Python dispatch mode)."""
    extra = sched.checkpointed_ops * checkpoint_overhead_s
    recompute = sum(times[i] for i in sched.recomputed) + extra
    total = sum(times[i] for i in sched.fw) + sum(times[i] for i in sched.bw) + extra
    return total, recompute
