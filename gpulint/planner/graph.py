"""The planner's graph IR: the joint forward+backward graph of one training step, as plain data.

Built once from the FX joint graph that `trace.py` captures. Everything downstream (memory simulation, cost
model, planner, reports) reads only this IR; the compile backend maps node names back to the FX graph.

Memory is keyed by storage: a view or a getitem refers to its base's storage and costs nothing; a storage
is created by exactly one node (`creates`). Parameters, buffers and the batch are *static*: alive all step.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

from gpulint.planner.cost import Work

# Node kinds, in the order a step runs them.
PARAM, INPUT, TANGENT, FWD, BWD = "param", "input", "tangent", "fwd", "bwd"

# Ops whose CPU kernel returns a 0-d loss that keeps the whole elementwise buffer it reduced alive (its storage is
# the size of the first input), for reductions other than "none". Measured on torch 2.13 CPU; on CUDA the result's
# storage is its own size as far as is known (no GPU has checked it yet). tests/planner/test_trace_models.py probes
# these kernels, so the list fails loudly when torch changes.
CPU_INPUT_SIZED_RESULTS = frozenset({
    "aten.mse_loss.default", "aten.smooth_l1_loss.default", "aten.binary_cross_entropy.default",
    "aten.soft_margin_loss.default",
})


@dataclass
class OpNode:
    index: int
    name: str  # the FX node name in the joint graph (stable id used by plans and the backend)
    op: str  # "aten.mm.default", "getitem", "placeholder"
    kind: str  # PARAM | INPUT | TANGENT | FWD | BWD
    inputs: list[int]  # indices of the nodes whose values this node reads
    storages: list[int]  # storage ids its value refers to (all elements for a tuple value)
    creates: list[int]  # storage ids this node allocates (subset of `storages`)
    is_tensor: bool  # a single tensor value (only those can be saved for backward)
    nbytes: int  # bytes of the storages it creates (0 for views)
    work: Work = field(default_factory=Work)  # what its kernel does: the cost model's input (none for views)
    dtype: str = "fp32"
    module: str = ""  # module path from the forward, e.g. "h.0.attn"
    source: tuple[str, int] | None = None  # (file, line) of the user code that produced it
    call_index: int = 0  # index among forward calls of the same (module, op)
    excluded: str | None = None  # why it is never recomputed (RNG, collective, mutation, data-dependent)


@dataclass
class JointGraph:
    nodes: list[OpNode]
    storage_bytes: list[int]  # raw bytes per storage id
    fwd_outputs: list[int]  # node indices returned by the forward: the new values of mutated buffers, then the loss
    grad_outputs: list[int]  # node indices returned by the backward (gradients)
    param_bytes: int = 0
    input_bytes: int = 0
    optimizer_state_bytes: int = 0  # per-parameter state (momentum, Adam moments), resident all step
    optimizer_state_sizes: list[int] = field(default_factory=list)  # one entry per state tensor
    optimizer_host_bytes: int = 0  # Adam's per-parameter `step` counters: host tensors, device memory on CPU only
    host_storages: set[int] = field(default_factory=set)  # host memory on a GPU (saved generator states)
    cpu_storage_bytes: dict[int, int] = field(default_factory=dict)  # where a CPU kernel keeps more (see above)
    dtype: str = "fp32"
    model: str = ""
    by_name: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_name = {n.name: n.index for n in self.nodes}

    @property
    def static_storages(self) -> set[int]:
        """Storages alive all step: parameters, buffers, the batch (computed once: nodes do not change)."""
        cached = getattr(self, "_static", None)
        if cached is None:
            cached = self._static = {s for n in self.nodes if n.kind in (PARAM, INPUT) for s in n.storages}
        return cached

    def default_saved(self) -> set[int]:
        """What a plain (non-recomputing) partition saves: every forward tensor a backward node reads."""
        saved: set[int] = set()
        for n in self.nodes:
            if n.kind != BWD:
                continue
            for i in n.inputs:
                src = self.nodes[i]
                if src.kind == FWD:
                    saved.update(self.saveable_ancestors(i))
        return self.alias_closure(saved)

    def alias_closure(self, saved: set[int]) -> set[int]:
        """`saved` plus every forward tensor that shares a storage with a saved one. Keeping a storage alive
        makes all its views free to save, so the backward never recomputes e.g. `tanh` while `detach(tanh)`
        is saved. Planners decide per storage; this turns their choice into node names."""
        by_storage = self._tensors_by_storage()
        out = set(saved)
        for i in saved:
            n = self.nodes[i]
            if n.kind == FWD and n.is_tensor and n.storages:
                out.update(by_storage.get(n.storages[0], ()))
        return out

    def _tensors_by_storage(self) -> dict[int, list[int]]:
        cached = getattr(self, "_by_storage", None)
        if cached is None:
            static = self.static_storages
            cached = {}
            for n in self.nodes:
                if n.kind == FWD and n.is_tensor and n.storages and n.storages[0] not in static:
                    cached.setdefault(n.storages[0], []).append(n.index)
            self._by_storage = cached
        return cached

    def saveable_ancestors(self, index: int) -> list[int]:
        """`index` itself if it is a tensor; for a tuple value (never saved), the saveable nodes it reads."""
        n = self.nodes[index]
        if n.is_tensor:
            return [index]
        out: list[int] = []
        for i in n.inputs:
            if self.nodes[i].kind == FWD:
                out.extend(self.saveable_ancestors(i))
        return out


def _val_tensors(val: Any) -> list[Any]:
    import torch

    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (list, tuple)):
        return [t for v in val for t in _val_tensors(v)]
    return []


def _op_name(node: Any) -> str:
    from gpulint.planner import rng

    if node.op == "placeholder":
        return "placeholder"
    if node.target is operator.getitem:
        return "getitem"
    if node.target is rng.rng_state:
        return "rng_state"
    return str(rng.wrapped_op(node))


def excluded_reason(node: Any) -> str | None:
    """Why an FX node must never be recomputed, or None when recomputing it is safe."""
    import torch

    from gpulint.planner import rng

    if node.target is rng.rng_state:
        return rng.STATE_REASON
    if node.target is rng.run_random:
        return None  # recomputed by replaying its saved generator state
    target = node.target
    if node.op != "call_function" or target is operator.getitem:
        return None
    if not isinstance(target, torch._ops.OpOverload):
        return "not an aten op (higher-order or Python call)"
    namespace = target.namespace
    if namespace in ("_c10d_functional", "c10d_functional", "c10d", "_dtensor"):
        return "collective communication"
    tags = set(target.tags)
    if torch.Tag.nondeterministic_seeded in tags and rng.draws(node):
        return "random op with its own generator or no tensor input (its draws cannot be replayed)"
    if _integer_gather(node):
        return None  # a gather by saved integer indices: its output shape is the indices', recomputing it is exact
    if torch.Tag.data_dependent_output in tags or torch.Tag.dynamic_output_shape in tags:
        return "data-dependent output"
    if target._schema.is_mutable:
        return "mutates an input in place"
    return None


def _integer_gather(node: Any) -> bool:
    """`x[idx]` with integer index tensors (`aten.index.Tensor`): tagged as having a value-dependent shape because a
    boolean mask would, but with integer indices the shape is known and the result depends only on saved inputs."""
    import torch

    if node.target is not torch.ops.aten.index.Tensor or len(node.args) < 2:
        return False
    indices = [i for i in node.args[1] if i is not None]
    values = [i.meta.get("val") if isinstance(i, torch.fx.Node) else i for i in indices]
    return bool(values) and all(isinstance(v, torch.Tensor) and not v.is_floating_point()
                                and v.dtype not in (torch.bool, torch.uint8) for v in values)


STATE_UPDATE = "updates a buffer the step writes back (BatchNorm's running statistics): recomputing it would read "\
    "the buffer after the step wrote it"


def _exclude_state_updates(graph: JointGraph) -> None:
    """Never recompute an op whose output is a buffer's new value (aot_autograd's forward returns the new values of
    the inputs it mutates before the loss, and the step writes them back into the buffers): a recompute in the
    backward would read the buffer already written, which torch refuses (its version moved), and would compute its
    update again."""
    nodes = graph.nodes
    for index in graph.fwd_outputs[:-1]:
        node = nodes[index]
        maker = nodes[node.inputs[0]] if node.op == "getitem" and node.inputs else node
        if maker.kind != FWD:
            continue
        maker.excluded = STATE_UPDATE
        for other in nodes[maker.index + 1:]:
            if other.op == "getitem" and other.inputs == [maker.index]:
                other.excluded = STATE_UPDATE


def cpu_storage_bytes(nodes: list[OpNode], storage_bytes: list[int]) -> dict[int, int]:
    """The storages a CPU kernel makes larger than their tensor: the 0-d losses of CPU_INPUT_SIZED_RESULTS."""
    out = {}
    for node in nodes:
        if node.op in CPU_INPUT_SIZED_RESULTS and node.creates and node.inputs:
            source = nodes[node.inputs[0]]
            size = max((storage_bytes[s] for s in source.storages), default=0)
            out[node.creates[0]] = max(storage_bytes[node.creates[0]], size)
    return out


def build_graph(joint: Any, num_fwd_outputs: int, primal_kinds: list[str]) -> JointGraph:
    """Turn the captured FX joint graph into the IR. `primal_kinds[i]` is PARAM or INPUT for primal i."""
    import torch
    from torch.multiprocessing.reductions import StorageWeakRef

    from gpulint.planner import cost

    storage_ids: dict[Any, int] = {}
    storage_bytes: list[int] = []
    index_of: dict[Any, int] = {}
    nodes: list[OpNode] = []
    fwd_outputs: list[int] = []
    grad_outputs: list[int] = []
    primal_i = 0
    calls: dict[tuple[str, str], int] = {}
    for fx_node in joint.graph.nodes:
        if fx_node.op == "output":
            outs = list(fx_node.args[0])
            fwd_outputs = [index_of[o] for o in outs[:num_fwd_outputs] if o in index_of]
            grad_outputs = [index_of[o] for o in outs[num_fwd_outputs:] if o is not None and o in index_of]
            continue
        val = fx_node.meta.get("val")
        if fx_node.op == "get_attr" and val is None:  # a constant tensor lifted into the graph
            val = getattr(joint, str(fx_node.target), None)
        tensors = _val_tensors(val)
        refs: list[int] = []
        for t in tensors:
            key = StorageWeakRef(t.untyped_storage())
            if key not in storage_ids:
                storage_ids[key] = len(storage_bytes)
                storage_bytes.append(int(t.untyped_storage().nbytes()))
            if storage_ids[key] not in refs:
                refs.append(storage_ids[key])
        inputs = [index_of[a] for a in fx_node.all_input_nodes if a in index_of]
        inherited = {s for i in inputs for s in nodes[i].storages}
        creates = [s for s in refs if s not in inherited]
        if fx_node.op == "get_attr":
            kind = INPUT  # a constant: alive all step, like the batch
        elif fx_node.op == "placeholder":
            if fx_node.name.startswith("tangents"):
                kind = TANGENT
            else:
                kind = primal_kinds[primal_i] if primal_i < len(primal_kinds) else INPUT
                primal_i += 1
        else:
            tag = fx_node.meta.get("partitioner_tag")
            kind = BWD if tag == "is_backward" else FWD
        custom = fx_node.meta.get("custom") or {}
        module = custom.get("gpulint_module", "")
        source = custom.get("gpulint_src")
        op = _op_name(fx_node)
        node = OpNode(
            index=len(nodes),
            name=fx_node.name,
            op=op,
            kind=kind,
            inputs=inputs,
            storages=refs,
            creates=creates,
            is_tensor=isinstance(val, torch.Tensor),
            nbytes=sum(storage_bytes[s] for s in creates),
            dtype=cost.dtype_name(tensors[0].dtype) if tensors else "fp32",
            module=module,
            source=tuple(source) if source else None,
            excluded=excluded_reason(fx_node) if kind == FWD else None,
        )
        if kind == FWD and op == "getitem" and inputs and nodes[inputs[0]].excluded:
            node.excluded = nodes[inputs[0]].excluded  # an element of an unsafe multi-output op is saved instead
        if kind in (FWD, BWD) and fx_node.op == "call_function":
            node.work = cost.fx_work(fx_node, creates_storage=bool(creates))
        if kind == FWD:
            key = (module, op)
            node.call_index = calls.get(key, 0)
            calls[key] = node.call_index + 1
        index_of[fx_node] = node.index
        nodes.append(node)
    graph = JointGraph(nodes=nodes, storage_bytes=storage_bytes, fwd_outputs=fwd_outputs, grad_outputs=grad_outputs)
    _exclude_state_updates(graph)
    graph.host_storages = {s for n in nodes if n.op == "rng_state" for s in n.creates}
    graph.cpu_storage_bytes = cpu_storage_bytes(nodes, storage_bytes)
    static = graph.static_storages
    graph.param_bytes = sum(storage_bytes[s] for n in nodes if n.kind == PARAM for s in n.creates if s in static)
    graph.input_bytes = sum(storage_bytes[s] for n in nodes if n.kind == INPUT for s in n.creates if s in static)
    return graph
