"""The eager step under selective checkpointing, simulated on the eager program (eager_trace.py).

`EagerSimulator(program).simulate(saved)` is what `gpulint.apply` does to the recorded eager step when it keeps
`saved` (a subset of what autograd saves today, by node) and recomputes the rest:

- a layer is checkpointed when it holds a value autograd saves that the plan drops; layers hold the only
  decisions eager mode can apply (a value outside every layer stays saved);
- an op's outputs are kept or dropped together (the checkpoint policy decides per op), and a value the layer later
  writes in place is never kept in a checkpointed layer (torch would refuse it in the backward): it is recomputed;
- a checkpointed layer keeps its inputs (checkpoint holds them) and its kept values;
- at the first backward use of anything the layer saved, the layer's forward runs again from its start up to its
  last saved value (checkpoint's early stop), every op but the kept ones; what autograd saves of it lives until its
  own backward use, the rest dies at once;
- every other op runs as recorded, forward and backward (eager mode runs every op, used or not), and a value lives
  at least as long as the step's Python code held it today (`EagerProgram.held_until`).

The planner's greedy search runs on this simulation; the plan it picks is then run on fake tensors
(eager_trace.run_step), whose tracked peak is the figure reported.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from gpulint.planner import planfile
from gpulint.planner.address import layer_of
from gpulint.planner.graph import BWD, FWD
from gpulint.planner.simulate import Schedule, Simulation, simulate


class EagerSimulator:
    def __init__(self, program: Any, rounding: int = 1) -> None:
        graph = program.graph
        self.program = program
        self.graph = graph
        self.rounding = rounding
        nodes = graph.nodes
        self.fw = [n.index for n in nodes if n.kind == FWD]
        self.bw = [n.index for n in nodes if n.kind == BWD]
        position = {i: k for k, i in enumerate(self.fw)}
        self.hold = {i: position[j] for i, j in program.held_until.items() if j in position}
        self.baseline = graph.default_saved()
        layers: dict[int, str] = {}
        for i in self.fw:
            layer = layer_of(program.model, nodes[i].module)
            if layer is not None:
                layers[i] = layer
        self.layer = layers
        self.members: dict[str, list[int]] = defaultdict(list)
        for i in self.fw:
            if i in layers:
                self.members[layers[i]].append(i)
        # The outputs of one op (its getitems) are kept together: each node's whole group.
        self.group: dict[int, tuple[int, ...]] = {}
        children: dict[int, list[int]] = defaultdict(list)
        for n in nodes:
            if n.kind == FWD and n.op == "getitem" and n.inputs:
                children[n.inputs[0]].append(n.index)
        for parent, kids in children.items():
            for kid in kids:
                self.group[kid] = (parent, *kids)
        by_storage: dict[int, list[int]] = defaultdict(list)
        for i in self.baseline:
            for s in nodes[i].storages[:1]:
                by_storage[s].append(i)
        self.tied = {i: set(self.group.get(i, (i,)))
                     | set(by_storage[nodes[i].storages[0]] if nodes[i].storages else ())
                     for i in self.baseline}
        # Values a checkpointed layer cannot keep: an op's outputs are kept together, so one written in place later
        # makes them all unkeepable.
        written = {i for i in self.fw if any(s in program.mutated for s in nodes[i].storages)}
        self.mutated = {j for i in written for j in self.group.get(i, (i,))} | written
        # Droppable: saved inside a layer by ops of that layer only, with everything tied to it (a layer's output
        # that the next layer's first op saves stays saved whatever this layer does).
        self.droppable = set()
        for i in self.baseline:
            packers = {m for j in self.tied[i] for m in program.packed_by.get(j, ())}
            if i in layers and packers and all(layer_of(program.model, m) == layers[i] for m in packers):
                self.droppable.add(i)
        # Per layer: where its recompute starts (the first backward op unpacking a value its ops saved), and where
        # it stops (its last value saved by its own ops: checkpoint's early stop).
        self.first_use: dict[str, int] = {}
        for i in self.bw:
            for u in nodes[i].inputs:
                if u in self.droppable and layers[u] not in self.first_use:
                    self.first_use[layers[u]] = i
        packed_inside = {i for i in self.baseline if i in layers
                         and any(layer_of(program.model, m) == layers[i] for m in program.packed_by.get(i, ()))}
        self.end = {layer: max((i for i in members if i in packed_inside), default=-1)
                    for layer, members in self.members.items()}
        # Ops (not tuple indexing) per layer, and up to its early stop: what the checkpoint policy sees.
        self.ops = {layer: sum(1 for i in members if nodes[i].op != "getitem")
                    for layer, members in self.members.items()}
        self.ops_to_end = {layer: sum(1 for i in members if nodes[i].op != "getitem" and i <= self.end[layer])
                           for layer, members in self.members.items()}
        self.inputs: dict[str, set[int]] = defaultdict(set)
        for layer, members in self.members.items():
            inside = set(members)
            for i in members:
                for u in nodes[i].inputs:
                    if nodes[u].kind == FWD and u not in inside:
                        self.inputs[layer].add(u)

    def candidate(self, index: int) -> bool:
        """A value the plan may drop: autograd saves it inside a layer, and only ops of that layer save it
        (a layer's output saved by the next layer's first op stays saved whatever this layer does)."""
        return index in self.droppable

    def kept(self, saved: set[int]) -> tuple[set[int], set[str]]:
        """What the plan keeps of what autograd saves, and the layers it checkpoints.

        A value is kept only with everything tied to it: the other outputs of its op (the policy keeps or drops an
        op's outputs together) and the other values on its storage (a kept view holds the whole storage). So
        dropping one of them drops them all."""
        dropped = {i for i in self.baseline - saved if i in self.droppable}
        regions = {self.layer[i] for i in dropped}
        # A checkpointed layer never keeps a value it writes in place later: torch would refuse it in the backward.
        dropped |= {i for i in self.baseline if i in self.mutated and self.layer.get(i) in regions}
        for i in list(dropped):
            dropped.update(j for j in self.tied.get(i, ()) if j in self.baseline)
        return self.baseline - dropped, regions

    def simulate(self, saved: set[int]) -> Simulation:
        kept, regions = self.kept(saved)
        held = set(kept)
        for layer in regions:
            held |= self.inputs[layer]
        recompute: dict[int, list[int]] = {}  # backward node -> the layer recompute that runs just before it
        recomputed: set[int] = set()
        checkpointed = 0  # ops that go through the checkpoint policy: the layer's forward, then its recompute
        for layer in regions:
            checkpointed += self.ops[layer]
            start = self.first_use.get(layer)
            if start is None:
                continue
            again = [i for i in self.members[layer] if i <= self.end[layer] and i not in kept]
            recompute.setdefault(start, []).extend(again)
            recomputed.update(again)
            checkpointed += self.ops_to_end[layer]
        bw: list[int] = []
        for i in self.bw:
            bw.extend(sorted(recompute.get(i, ())))
            bw.append(i)
        sched = Schedule(fw=self.fw, bw=bw, saved=kept, recomputed=recomputed, checkpointed_ops=checkpointed)
        return simulate(self.graph, held, self.rounding, sched=sched, hold=self.hold)

    def decisions(self, saved: set[int]) -> list[planfile.Decision]:
        """The plan's eager decisions: one per op whose outputs autograd saves inside a layer, kept or recomputed."""
        kept, _regions = self.kept(saved)
        nodes = self.graph.nodes
        out: dict[tuple[str, int, str], planfile.Decision] = {}
        for i in sorted(self.baseline):
            if i not in self.droppable:
                continue
            maker = nodes[self.group.get(i, (i,))[0]]
            key = (maker.module, maker.call_index, maker.op)
            keep = i in kept
            if key in out:
                out[key].bytes += self.graph.storage_bytes[nodes[i].storages[0]]
                continue
            out[key] = planfile.Decision(
                id=maker.name, op=maker.op, bytes=self.graph.storage_bytes[nodes[i].storages[0]],
                action="save" if keep else "recompute", module=maker.module, call_index=maker.call_index,
                source=planfile.Source.of(maker.source),
            )
        return list(out.values())
