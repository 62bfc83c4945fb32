"""Memory simulation of one training step for a given saved set: the exact schedule the backend executes.

    schedule(graph, saved) -> Schedule     which nodes run in the forward graph, which in the backward graph
                                           (recomputed forward nodes placed just before their first use)
    simulate(graph, saved, rounding) -> Simulation   live bytes after every op, the peak and where it is

The forward graph runs every forward node needed for the loss or a saved value, in traced order. The backward
graph runs the backward nodes in traced (autograd) order; a forward node that the backward needs but that is
not saved is recomputed right before its first use (depth first, its own unsaved inputs first).

Liveness is keyed by storage: a value is alive from the op that makes it until its last reader ran (FX
frees each value after its last use; aot_autograd frees saved tensors after their last use in the
backward); a storage is freed when no live value refers to it. Static memory (parameters, buffers, the batch,
optimizer state) is alive all step; gradients are backward outputs and stay alive to the end. For CUDA
targets every storage is rounded up to the allocator's 512-byte block.

`simulate` is public API: the eager prediction (gpulint/planner/eager_predict.py) adds its own costs on top of it.
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
        n = nodes[i]
        if n.kind in (PARAM, INPUT, TANGENT):
            continue
        if n.kind == FWD:
            if i in saved or n.excluded:
                # A node that is unsafe to recompute is saved whenever the backward needs it.
                if not n.is_tensor:
                    raise ValueError(f"{n.name} ({n.op}) cannot be recomputed and is not a single tensor")
                effective.add(i)
                continue
            recomputed.add(i)
        else:
            needed_bw.add(i)
        stack.extend(n.inputs)
    # Forward: everything the loss and the saved values depend on, in traced order.
    fw_needed: set[int] = set()
    stack = [i for i in graph.fwd_outputs if nodes[i].kind == FWD] + sorted(effective)
    while stack:
        i = stack.pop()
        if i in fw_needed or nodes[i].kind != FWD:
            continue
        fw_needed.add(i)
        stack.extend(nodes[i].inputs)
    fw = sorted(fw_needed)
    # Backward: traced order, each recomputed node emitted just before its first consumer.
    bw: list[int] = []
    emitted: set[int] = set()
    for i in sorted(needed_bw):
        _emit(nodes, i, recomputed, emitted, bw)
    return Schedule(fw=fw, bw=bw, saved=effective, recomputed=recomputed)


def _emit(nodes: list, root: int, recomputed: set[int], emitted: set[int], out: list[int]) -> None:
    """Append `root` after its not-yet-emitted recomputed inputs (iterative post-order, inputs in traced order)."""
    stack: list[tuple[int, bool]] = [(root, False)]
    while stack:
        i, expanded = stack.pop()
        if i in emitted:
            continue
        if expanded:
            emitted.add(i)
            out.append(i)
            continue
        stack.append((i, True))
        for j in sorted(nodes[i].inputs, reverse=True):
            if j in recomputed and j not in emitted:
                stack.append((j, False))


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
    (eager mode: a Python variable holds it past its last use)."""
    sched = sched or schedule(graph, saved)
    nodes = graph.nodes
    sizes = device_sizes(graph, rounding)
    fw_len = len(sched.fw)
    order = [(i, 0) for i in sched.fw] + [(i, 1 if i in sched.recomputed else 0) for i in sched.bw]

    def source(u: int, in_backward: bool) -> tuple[int, int]:
        return (u, 1) if in_backward and u in sched.recomputed else (u, 0)

    # Last use of every value: the position of its last reader (or KEEP for the step's outputs).
    last_use: dict[tuple[int, int], int] = {}
    for pos, (i, _phase) in enumerate(order):
        in_bw = pos >= fw_len
        for u in nodes[i].inputs:
            last_use[source(u, in_bw)] = pos
    for i in graph.fwd_outputs:
        last_use[(i, 0)] = KEEP
    for i in graph.grad_outputs:
        last_use[(i, 0)] = KEEP
    for n in nodes:
        if n.kind == TANGENT:  # `loss.backward()` holds its seed gradient until the backward returns
            last_use[(n.index, 0)] = KEEP
    for i, position in (hold or {}).items():
        last_use[(i, 0)] = max(last_use.get((i, 0), position), position)

    static = graph.static_storages
    live = static_bytes(graph, rounding)
    refcount: dict[tuple[int, int], int] = {}
    value_keys: dict[tuple[int, int], list[tuple[int, int]]] = {}
    deaths: dict[int, list[tuple[int, int]]] = {}
    timeline = np.zeros(len(order) + 1, dtype=np.int64)
    spans: dict[int, list[int]] = {}
    tangents = [n.index for n in nodes if n.kind == TANGENT]

    def define(value: tuple[int, int], pos: int) -> None:
        nonlocal live
        i, phase = value
        n = nodes[i]
        keys: list[tuple[int, int]] = []
        for s in n.storages:
            if s in static:
                continue
            if s in n.creates:
                key = (s, phase)
            else:
                key = next(
                    (k for u in n.inputs for k in value_keys.get(source(u, pos >= fw_len), ()) if k[0] == s),
                    (s, phase),
                )
            if key not in refcount or refcount[key] == 0:
                live += sizes[s]
                refcount[key] = 0
            refcount[key] += 1
            keys.append(key)
        value_keys[value] = keys
        end = last_use.get(value, pos)  # a value nobody reads dies right after it is made
        deaths.setdefault(end, []).append(value)

    def release(pos: int) -> None:
        nonlocal live
        for value in deaths.pop(pos, ()):
            for key in value_keys.pop(value, ()):
                refcount[key] -= 1
                if refcount[key] == 0:
                    live -= sizes[key[0]]

    for pos, value in enumerate(order):
        if pos == fw_len:
            for t in tangents:  # autograd hands the backward its seed gradient
                define((t, 0), pos)
        define(value, pos)
        timeline[pos] = live
        i, phase = value
        if phase == 0 and nodes[i].kind == FWD:
            for key in value_keys[value]:
                if key[1] == 0:
                    span = spans.setdefault(key[0], [pos, -1, sizes[key[0]]])
                    if pos < fw_len:
                        span[0] = pos
        in_bw = pos >= fw_len
        for u in nodes[i].inputs:
            val = source(u, in_bw)
            if val[1] == 0 and nodes[u].kind == FWD:
                for key in value_keys.get(val, ()):
                    if key[1] != 0 or key[0] not in spans:
                        continue
                    span = spans[key[0]]
                    if not in_bw:
                        span[0] = max(span[0], pos)
                    elif span[1] < 0:
                        span[1] = pos
        release(pos)
    timeline[len(order)] = live  # after the step: static memory, gradients and the loss
    peak_position = int(np.argmax(timeline))
    return Simulation(
        schedule=sched,
        peak=int(timeline[peak_position]),
        peak_position=peak_position,
        static_bytes=static_bytes(graph, rounding),
        timeline=timeline,
        storage_spans={s: (a, b, c) for s, (a, b, c) in spans.items()},
    )


def step_time(graph: JointGraph, sched: Schedule, times: list[float]) -> tuple[float, float]:
    """(predicted step time, of which recomputation) in seconds, from per-node times."""
    recompute = sum(times[i] for i in sched.recomputed)
    total = sum(times[i] for i in sched.fw) + sum(times[i] for i in sched.bw)
    return total, recompute
