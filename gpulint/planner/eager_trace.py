"""The eager form's program: run the user's step eagerly on fake tensors and record it, op by op, as the planner's IR.

The compiled form is traced through aot_autograd (trace.py): functionalized ops, torch.compile's branches. Eager mode
runs another program: in-place ops (`bernoulli_`, `div_`), its own decompositions (`native_batch_norm`, CPU
dropout's `bernoulli_`/`div_`/`mul`), the branches libraries take when they are not compiled, and the user's own
`torch.utils.checkpoint` regions. `trace_eager` runs that program itself, forward and backward, on fake tensors
(no memory), and records:

- every op it dispatches, with the module running it, its eager address (counted exactly as `gpulint.apply`
  counts them at run time), its user source line, the storages it reads, makes and writes, and its roofline cost;
- which tensors autograd saves for the backward (saved-tensor hooks), and which storages are written in place
  after they were made (a checkpoint policy must never cache those: torch would refuse them in the backward);
- the live bytes after every op (weak references on storages, as `measure.py` counts a real step), so today's peak
  is known exactly;
- how long Python itself holds each value (`held_until`): a value the simulator frees after its last use may stay
  alive in a local variable until its function returns.

A step that reads tensor values is run once for real to record them, then replayed (as trace.py does); libraries
that branch on fake tensors (transformers) are shown real ones, so they take their eager branches. An op whose
fake kernel refuses inputs its real CPU kernel takes (grouped_mm's meta function wants bf16) runs for real on zeros
of the same shapes, and its output is made fake again.

`run_step(program, plan)` runs the same fake step again under `gpulint.apply(model, plan)` and returns its tracked
peak: the eager form's figure, checked by running it rather than by a model of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import SAC_IGNORED_OPS
from torch.utils.weak import WeakIdKeyDictionary

from gpulint.planner import cost
from gpulint.planner.address import Address, ModuleStack, OpCounter
from gpulint.planner.errors import PlanError
from gpulint.planner.graph import BWD, CPU_INPUT_SIZED_RESULTS, FWD, INPUT, PARAM, JointGraph, OpNode
from gpulint.planner.step import as_step


@dataclass
class EagerProgram:
    """The eager step as the planner's IR, with what eager mode adds to it (see the module docstring)."""

    graph: JointGraph
    model: nn.Module  # built on fake tensors: its module tree decides the layers eager mode can checkpoint
    batch: Any
    step: Any  # the step.UserStep it ran
    fake_mode: Any
    saved: set[int]  # nodes whose values autograd saved for the backward today
    mutated: set[int]  # storages written in place after the op that made them
    addresses: dict[int, Address]  # forward op node -> its eager address, counted as gpulint.apply counts
    packed_by: dict[int, set[str]]  # saved node -> the modules whose ops saved it (checkpointing them frees it)
    held_until: dict[int, int]  # forward node -> the forward node after which Python let go of its value
    peak_bytes: int  # today's peak (parameters, batch, optimizer state, activations, gradients), as tracked
    seconds: float = 0.0
    data_dependent: list[dict[str, Any]] = field(default_factory=list)
    extra_static_bytes: int = 0  # optimizer state: resident all step, absent from the fake run
    _simulators: dict[int, Any] = field(default_factory=dict)

    def simulator(self, rounding: int = 1) -> Any:
        """The eager step under selective checkpointing, simulated (eager_sim.py); one per allocator rounding."""
        from gpulint.planner.eager_sim import EagerSimulator

        if rounding not in self._simulators:
            self._simulators[rounding] = EagerSimulator(self, rounding)
        return self._simulators[rounding]


def trace_eager(build_model: Callable[[], Any], make_batch: Callable[[], Any], *, loss_fn: Any = None,
                optimizer: str = "adamw", dtype: str = "fp32", name: str = "", device: str = "cpu") -> EagerProgram:
    """Run the step as eager mode runs it, on fake tensors, and record it (see the module docstring).

    `device="cuda"` records the CUDA program (its kernels: fused dropout, flash attention); only where torch has
    CUDA (trace.trace_step says why)."""
    import torch

    if device != "cpu" and not (device.startswith("cuda") and torch.cuda.is_available()):
        raise PlanError(f"cannot record the eager step on {device!r} here: this torch has no CUDA")
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

    from gpulint.planner import trace

    start = time.perf_counter()
    step = as_step(loss_fn)
    try:
        program = _record(build_model, make_batch, step, optimizer, dtype, name, device, values=None)
    except (DataDependentOutputException, DynamicOutputShapeException):
        # The values come from running the step for real, as little of it as the reads need: up to its first read
        # (often of the inputs, before any layer ran), else the forward, else forward and backward.
        for attempt in ({"first_only": True}, {}, {"backward": True}):
            values = trace.record_value_reads(build_model, make_batch, step, dtype, compiling=False, **attempt)
            try:
                program = _record(build_model, make_batch, step, optimizer, dtype, name, device, values=values)
                break
            except trace._NotRecorded:
                if attempt.get("backward"):
                    raise
    program.seconds = time.perf_counter() - start
    return program


def _record(build_model: Callable[[], Any], make_batch: Callable[[], Any], step: Any, optimizer: str, dtype: str,
            name: str, device: str, *, values: Any) -> EagerProgram:
    from gpulint.planner import trace

    fake_mode = trace._replay_fake_mode(values)
    model, batch = trace.build_fake(build_model, make_batch, dtype, fake_mode, device)
    model.train()
    recorder = _Recorder(model)
    stamp = trace._SourceStamp(model)
    recorder.stamp = stamp
    static = [*model.parameters(), *model.buffers(), *_tensors(batch)]
    with fake_mode:
        recorder.add_static(model, batch)
        if values is not None:
            fake_mode.position = 0
            fake_mode.in_forward = True
        try:
            with _as_real_tensors(), stamp.active(), recorder, \
                    torch.autograd.graph.saved_tensors_hooks(recorder.pack, recorder.unpack):
                stamp.phase = "forward"
                loss = step(model, batch)
                recorder.begin_backward()
                stamp.phase = "backward"
                if values is not None:
                    fake_mode.in_forward = False
                loss.backward()
        except PlanError:
            raise
        except (torch._subclasses.fake_tensor.DataDependentOutputException,
                torch._subclasses.fake_tensor.DynamicOutputShapeException):
            if values is not None:
                raise PlanError(f"the step reads tensor values{stamp.where()} in a way gpulint cannot replay "
                                "in eager mode") from None
            raise
        except Exception as exc:  # noqa: BLE001 - user code may raise anything; reported as one line
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise PlanError(f"the eager step could not be run on fake tensors{stamp.where()}: "
                            f"{type(exc).__name__}: {text}") from None
        trained = [p for p in model.parameters() if p.grad is not None]
        graph = recorder.graph(trained, loss, optimizer, dtype, name or type(model).__name__)
        for p in model.parameters():
            p.grad = None
    recorder.stack.remove()
    del static
    program = EagerProgram(
        graph=graph, model=model, batch=batch, step=step, fake_mode=fake_mode, saved=recorder.saved_nodes,
        mutated=recorder.mutated, addresses=recorder.addresses, packed_by=recorder.packed_by,
        held_until=recorder.held_until(),
        peak_bytes=recorder.peak + graph.optimizer_state_bytes + graph.optimizer_host_bytes,
        extra_static_bytes=graph.optimizer_state_bytes + graph.optimizer_host_bytes,
    )
    if values is not None:
        program.data_dependent = stamp.data_dependent()
    return program


@contextmanager
def _as_real_tensors() -> Iterator[None]:
    """Libraries that take other branches for fake tensors take their eager ones: transformers asks
    `is_fake_tensor(x)` (through `is_tracing`) and, for fake tensors, skips the value checks eager mode makes (an
    all-ones attention mask needs no mask). The values those branches read are replayed from one real run."""
    import sys

    module = sys.modules.get("transformers.utils.import_utils")
    original = getattr(module, "is_fake_tensor", None)
    patched = [m for m in list(sys.modules.values()) if m is not None and m.__name__.startswith("transformers")
               and original is not None and getattr(m, "is_fake_tensor", None) is original]
    for m in patched:
        m.is_fake_tensor = _never_fake
    try:
        yield
    finally:
        for m in patched:
            m.is_fake_tensor = original


def _never_fake(_value: Any) -> bool:
    return False


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    import torch.utils._pytree as pytree

    for leaf in pytree.tree_leaves(value):
        if isinstance(leaf, torch.Tensor):
            yield leaf


class _Recorder(TorchDispatchMode):
    """Records every op of the eager step as IR nodes; see the module docstring."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.stack = ModuleStack(model)
        self.counter = OpCounter()
        self.stamp: Any = None
        self.nodes: list[OpNode] = []
        self.storage_bytes: list[int] = []
        self.storage_ids: dict[StorageWeakRef, int] = {}
        self.live: dict[StorageWeakRef, int] = {}  # storages alive now -> their bytes
        self.live_bytes = 0
        self.peak = 0
        self.death: dict[int, int] = {}  # storage -> the node after which it was found dead
        self.producer = WeakIdKeyDictionary()  # tensor object -> the node whose value it is
        self.writer: dict[int, int] = {}  # storage -> the node that last wrote it
        self.creator: dict[int, int] = {}
        self.mutated: set[int] = set()
        self.saved_nodes: set[int] = set()
        self.packed_by: dict[int, set[str]] = {}
        self.addresses: dict[int, Address] = {}
        self.kind = FWD

    # --- what the step holds before it starts ----------------------------------------------------------------

    def add_static(self, model: nn.Module, batch: Any) -> None:
        params = {id(p) for p in model.parameters()}
        seen: set[int] = set()
        for tensor in [*model.parameters(), *model.buffers(), *_tensors(batch)]:
            if id(tensor) in seen:
                continue
            seen.add(id(tensor))
            kind = PARAM if id(tensor) in params else INPUT
            self._add(kind, "placeholder", [tensor], [], None)

    # --- the step ---------------------------------------------------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = _dispatch(func, args, kwargs)
        self._sample()
        inputs = list(_tensors((args, kwargs)))
        outputs = [t for t in _tensors(out)]
        address = None
        if self.kind == FWD and func not in SAC_IGNORED_OPS:
            address = self.counter.address(self.stack.current, func)
        if outputs:  # an op returning no tensor (`x.device`, a value read) holds no memory: no node, only its count
            self._add(self.kind, func, outputs, inputs, address, args=args, kwargs=kwargs, out=out)
        return out

    def _sample(self) -> None:
        """Drop the storages that died since the last op (the live count falls before the next op allocates)."""
        dead = [ref for ref in self.live if ref.expired()]
        for ref in dead:
            self.live_bytes -= self.live.pop(ref)
            self.death[self.storage_ids[ref]] = len(self.nodes) - 1

    def _storage(self, tensor: torch.Tensor, func: Any, inputs: list[torch.Tensor]) -> tuple[int, bool]:
        """The storage id of a tensor's storage, and whether this op made it."""
        ref = StorageWeakRef(tensor.untyped_storage())
        if ref in self.storage_ids and ref in self.live:
            return self.storage_ids[ref], False
        nbytes = tensor.untyped_storage().nbytes()
        if str(func) in CPU_INPUT_SIZED_RESULTS and inputs:  # what the CPU kernel really keeps (graph.py)
            nbytes = max(nbytes, inputs[0].untyped_storage().nbytes())
        sid = len(self.storage_bytes)
        self.storage_bytes.append(nbytes)
        self.storage_ids[ref] = sid
        self.live[ref] = nbytes
        self.live_bytes += nbytes
        self.peak = max(self.peak, self.live_bytes)
        return sid, True

    def _add(self, kind: str, func: Any, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
             address: Address | None, *, args: Any = (), kwargs: Any = None, out: Any = None) -> None:
        reads: list[int] = []
        for tensor in inputs:
            # The tensor's own producer, and the op that wrote its storage in place after it (if any).
            producer, writer = self.producer.get(tensor), self._writer_of(tensor)
            for source in (producer, writer if producer is None or (writer or -1) > producer else None):
                if source is not None and source not in reads:
                    reads.append(source)
        storages, creates = [], []
        for tensor in outputs:
            sid, made = self._storage(tensor, func, inputs)
            if sid not in storages:
                storages.append(sid)
            if made:
                creates.append(sid)
        op = "placeholder" if func == "placeholder" else str(func)
        index = len(self.nodes)
        node = OpNode(
            index=index, name=f"{kind}{index}", op=op, kind=kind, inputs=reads, storages=storages, creates=creates,
            is_tensor=len(outputs) == 1, nbytes=sum(self.storage_bytes[s] for s in creates),
            dtype=cost.dtype_name(outputs[0].dtype) if outputs else "fp32",
            module=self.stack.current if kind == FWD else "",
            source=self.stamp.last_source if (kind == FWD and self.stamp is not None) else None,
            call_index=address.call_index if address is not None else 0,
        )
        if func != "placeholder" and (creates or self._written(func, args, kwargs)):  # views do no work
            node.work = cost.op_work(func, args, kwargs or {}, out)
        self.nodes.append(node)
        if address is not None:
            self.addresses[index] = address
        for sid in creates:
            self.creator[sid] = index
        written = self._written(func, args, kwargs)
        for sid in written:
            if self.kind == FWD and sid in self.creator and self.creator[sid] != index:
                self.mutated.add(sid)
        for sid in storages:
            if sid in creates or sid in written:
                self.writer[sid] = index
        if len(outputs) == 1:
            self.producer[outputs[0]] = index
        else:  # one node per output, as the compiled form's getitems: decisions are per storage
            for position, tensor in enumerate(outputs):
                sid, _made = self._storage(tensor, func, inputs)
                child = OpNode(index=len(self.nodes), name=f"{kind}{len(self.nodes)}", op="getitem", kind=kind,
                               inputs=[index], storages=[sid], creates=[], is_tensor=True, nbytes=0,
                               dtype=cost.dtype_name(tensor.dtype), module=node.module, source=node.source,
                               call_index=node.call_index)
                self.nodes.append(child)
                self.producer[tensor] = child.index

    def _writer_of(self, tensor: torch.Tensor) -> int | None:
        ref = StorageWeakRef(tensor.untyped_storage())
        sid = self.storage_ids.get(ref) if ref in self.live else None
        return None if sid is None else self.writer.get(sid)

    def _written(self, func: Any, args: Any, kwargs: Any) -> set[int]:
        """Storages an in-place or out= op writes (its schema says which arguments it mutates)."""
        if func == "placeholder" or not func._schema.is_mutable:
            return set()
        out = set()
        for position, argument in enumerate(func._schema.arguments):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            value = args[position] if position < len(args) else (kwargs or {}).get(argument.name)
            for tensor in _tensors(value):
                ref = StorageWeakRef(tensor.untyped_storage())
                if ref in self.storage_ids:
                    out.add(self.storage_ids[ref])
        return out

    def begin_backward(self) -> None:
        self.kind = BWD
        self.forward_end = len(self.nodes) - 1

    # --- saved tensors ------------------------------------------------------------------------------------------

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        source = self.producer.get(tensor)
        if source is None:
            source = self._writer_of(tensor)
        if source is not None and self.nodes[source].kind == FWD:
            self.saved_nodes.add(source)
            # The op saving it is the one dispatching now: it runs in the innermost module.
            self.packed_by.setdefault(source, set()).add(self.stack.current)
        return tensor

    @staticmethod
    def unpack(tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    # --- the graph ----------------------------------------------------------------------------------------------

    def held_until(self) -> dict[int, int]:
        """Forward node -> the forward node after which Python let go of its value, for values autograd did not
        save (a saved value's death tells only when autograd let go). A value alive into the backward that autograd
        did not save was held to the end of the forward (a returned output the step dropped)."""
        forward_end = getattr(self, "forward_end", len(self.nodes) - 1)
        saved_storages = {s for i in self.saved_nodes for s in self.nodes[i].storages}
        out = {}
        for node in self.nodes:
            if node.kind != FWD or not node.creates:
                continue
            sid = node.creates[0]
            if sid in saved_storages:
                continue
            died = self.death.get(sid, len(self.nodes))
            out[node.index] = min(died, forward_end)
        return out

    def graph(self, trained: list[torch.Tensor], loss: torch.Tensor, optimizer: str, dtype: str,
              name: str) -> JointGraph:
        """The IR. `trained`: the parameters that got a gradient; the optimizer keeps state for those only (a
        parameter that reentrant checkpointing cut off from the loss gets none)."""
        from gpulint.planner.trace import optimizer_state_sizes

        grad_outputs = []
        for param in trained:
            source = self.producer.get(param.grad)
            if source is None:
                source = self._writer_of(param.grad)
            if source is not None:
                grad_outputs.append(source)
        loss_node = self.producer.get(loss)
        graph = JointGraph(nodes=self.nodes, storage_bytes=self.storage_bytes,
                           fwd_outputs=[loss_node] if loss_node is not None else [], grad_outputs=grad_outputs)
        static = graph.static_storages
        graph.param_bytes = sum(self.storage_bytes[s] for n in self.nodes if n.kind == PARAM for s in n.creates)
        graph.input_bytes = sum(self.storage_bytes[s] for n in self.nodes if n.kind == INPUT for s in n.creates
                                if s in static)
        param_sizes = [param.untyped_storage().nbytes() for param in trained]
        graph.optimizer_state_sizes = optimizer_state_sizes(param_sizes, optimizer)
        graph.optimizer_state_bytes = sum(graph.optimizer_state_sizes)
        graph.optimizer_host_bytes = 4 * len(param_sizes) if optimizer in ("adam", "adamw") else 0
        graph.dtype = dtype
        graph.model = name
        return graph


def _rounded(nbytes: int, rounding: int) -> int:
    return nbytes if rounding <= 1 else -(-nbytes // rounding) * rounding


def _dispatch(func: Any, args: Any, kwargs: Any) -> Any:
    """Run an op on fake tensors; when its fake kernel refuses inputs the real CPU kernel takes (grouped_mm's meta
    function wants bf16) or it has none, run the real kernel on zeros and make the result fake. An op the real
    kernel refuses too is the step's own error."""
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

    try:
        return func(*args, **kwargs)
    except (DataDependentOutputException, DynamicOutputShapeException):
        raise
    except (NotImplementedError, RuntimeError) as exc:
        try:
            return _run_for_real(func, args, kwargs)
        except Exception:  # noqa: BLE001 - the real kernel refuses too: the fake kernel's error is the one to see
            raise exc from None


def _run_for_real(func: Any, args: Any, kwargs: Any) -> Any:
    """Run one op on zeros of its fake inputs' shapes with the real CPU kernel, and return its outputs made fake."""
    import torch.utils._pytree as pytree
    from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

    fake_mode = next((t.fake_mode for t in _tensors((args, kwargs)) if isinstance(t, FakeTensor)), None)
    if fake_mode is None:
        raise PlanError(f"{func}: its fake kernel failed and it has no fake input to run it for real")

    def real(t: Any) -> Any:
        if isinstance(t, torch.Tensor):
            if not t.numel():
                return torch.empty(t.shape, dtype=t.dtype, device=t.device)
            return torch.zeros(t.shape, dtype=t.dtype, device=t.device).as_strided(t.shape, t.stride())
        return t

    with unset_fake_temporarily():
        real_args, real_kwargs = pytree.tree_map(real, (args, kwargs))
        out = func(*real_args, **real_kwargs)
    return pytree.tree_map_only(torch.Tensor, lambda t: fake_mode.from_tensor(t), out)


# --- the eager step under a plan, run on fake tensors -----------------------------------------------------------


def known(program: EagerProgram) -> Any:
    """What `gpulint.apply` would learn on each layer's first call, from the record: every forward address, and the
    addresses whose outputs are later written in place."""
    from gpulint.planner.eager_apply import Known

    creator = {s: n.index for n in program.graph.nodes for s in n.creates}
    mutated = {program.addresses[creator[s]] for s in program.mutated if creator.get(s) in program.addresses}
    return Known(frozenset(program.addresses.values()), frozenset(mutated))


def run_step(program: EagerProgram, plan: Any, rounding: int = 1) -> Any:
    """Run the program's fake step under `gpulint.apply(model, plan)` (None: as it is) and return the applied plan's
    state and the tracked peak: `(AppliedPlan | None, peak bytes)`. The plan is settled against the program's own
    record first (`known`), so this one run already uses the plan's steady-state policy. `rounding` > 1 counts
    each storage as a GPU allocator would (rounded up to its block; the optimizer's step counters on the host)."""
    from gpulint.planner import eager_apply

    model, batch, fake_mode = program.model, program.batch, program.fake_mode
    state = None
    if plan is not None:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eager_apply.apply(model, plan, known=known(program))
        state = eager_apply.applied_plan(model)
    tracker = _PeakTracker(rounding)
    stack = ModuleStack(model)
    try:
        with fake_mode:
            if hasattr(fake_mode, "position"):  # a step that reads values: replayed, and again for recomputes
                fake_mode.position, fake_mode.answered, fake_mode.again = 0, {}, {}
                fake_mode.context = lambda: stack.current
            tracker.register([*model.parameters(), *model.buffers(), *_tensors(batch)])
            with _as_real_tensors(), tracker:
                torch.manual_seed(0)
                loss = program.step(model, batch)
                loss.backward()
                del loss
            for p in model.parameters():
                p.grad = None
    finally:
        stack.remove()
        if plan is not None:
            eager_apply.remove(model)
    graph = program.graph
    optimizer = sum(_rounded(b, rounding) for b in graph.optimizer_state_sizes)
    host = graph.optimizer_host_bytes if rounding <= 1 else 0
    return state, tracker.peak + optimizer + host


class _PeakTracker(TorchDispatchMode):
    """Live storage bytes after every op, and their peak (measure.py's LiveStorageTracker on fake tensors)."""

    def __init__(self, rounding: int = 1) -> None:
        super().__init__()
        self.rounding = rounding
        self.live: dict[StorageWeakRef, int] = {}
        self.bytes = 0
        self.peak = 0

    def register(self, tensors: list[torch.Tensor], func: Any = None, inputs: list[torch.Tensor] | None = None) -> None:
        for tensor in tensors:
            ref = StorageWeakRef(tensor.untyped_storage())
            if ref not in self.live:
                nbytes = tensor.untyped_storage().nbytes()
                if func is not None and str(func) in CPU_INPUT_SIZED_RESULTS and inputs and self.rounding <= 1:
                    nbytes = max(nbytes, inputs[0].untyped_storage().nbytes())
                self.live[ref] = _rounded(nbytes, self.rounding)
                self.bytes += nbytes
        self.peak = max(self.peak, self.bytes)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = _dispatch(func, args, kwargs)
        for ref in [ref for ref in self.live if ref.expired()]:
            self.bytes -= self.live.pop(ref)
        self.register(list(_tensors(out)), func, list(_tensors((args, kwargs))))
        return out


# --- what eager autograd saves, by address (to write plans by hand in tests) -------------------------------------


@dataclass(frozen=True)
class SavedActivation:
    address: Address
    op: str  # full overload name as eager ran it
    output: int  # which of the op's outputs (layer norm returns out, mean, rstd)
    bytes: int


class _ProducerMode(TorchDispatchMode):
    """Maps each output storage of the forward to the address of the op that made it."""

    def __init__(self, stack: ModuleStack) -> None:
        super().__init__()
        self.stack = stack
        self.counter = OpCounter()
        self.producer: dict[int, tuple[Address, str, int]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in SAC_IGNORED_OPS:
            return out
        address = self.counter.address(self.stack.current, func)
        if not _is_view(func):
            # A storage's producer is its last writer: dropout's mask is made by empty_like, bernoulli_, div_;
            # the plan's functional graph names the final div. A freed storage reused later gets a new producer.
            for output, tensor in enumerate(_tensors(out)):
                self.producer[tensor.untyped_storage().data_ptr()] = (address, str(func), output)
        return out


def _is_view(func) -> bool:
    return any(a.alias_info is not None and not a.alias_info.is_write for a in func._schema.returns)


def saved_activations(model: nn.Module, step: Callable[[], torch.Tensor]) -> list[SavedActivation]:
    """Run `step()` (forward + loss, no backward) once and list the activations eager autograd saves for backward.

    Each is addressed like a plan decision; parameters and inputs (no producing op) are left out. Used to write
    plans by hand in tests and to check a plan's addresses against what eager mode really saves.
    """
    stack = ModuleStack(model)
    saved: dict[int, SavedActivation] = {}
    mode = _ProducerMode(stack)

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        ptr = tensor.untyped_storage().data_ptr()
        if ptr in mode.producer and ptr not in saved:
            address, op, output = mode.producer[ptr]
            saved[ptr] = SavedActivation(address, op, output, tensor.untyped_storage().nbytes())
        return tensor

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), mode:
            step()
    finally:
        stack.remove()
    return list(saved.values())
