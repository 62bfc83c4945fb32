"""Trace one training step (forward, loss, backward) once, with fake tensors, into the planner's graph IR.

`aot_function` over `torch.func.functional_call` on FakeTensorMode CPU tensors, with a partition_fn that
captures the joint forward+backward graph and stops there. No real parameter or activation memory is
allocated: the model itself is built under the fake mode. A TorchFunctionMode and module hooks stamp each FX
node with the module path and user source line it came from (node.meta["custom"]).

A step that reads tensor values (`if loss > 0:`, `.item()`, where torch.compile would break its graph) or runs
ops whose output shape depends on values (`x[mask]`, `nonzero`) runs its forward once for real to record the
values and shapes, and the fake trace replays them (see `trace_step`).

Never trace on fake `cuda` tensors with a CPU-only torch build: autograd aborts the process. A GPU target is
modelled through the hardware profile instead (see cost.py and hardware.py).
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from gpulint.planner import rng
from gpulint.planner.errors import PlanError
from gpulint.planner.graph import INPUT, PARAM, JointGraph, build_graph
from gpulint.planner.step import cast_batch, cast_module, make_step_fn, torch_dtype

_GPULINT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Captured(Exception):
    """Raised from the partition_fn once the joint graph is captured: nothing after it needs to run."""


@dataclass
class Traced:
    graph: JointGraph
    joint: Any  # torch.fx.GraphModule of the joint forward+backward graph
    num_fwd_outputs: int
    seconds: float
    # Where the step reads tensor values (`if x.sum() > 0`, `.item()`) or runs an op whose output shape depends on
    # them (`x[mask]`, `nonzero`): torch.compile breaks its graph there. Non-empty only when the fake trace needed
    # values and was repeated with the values and shapes one real run gave; the graph then holds the branch and
    # the sizes of that run. Each entry: {"op", "path", "line"} (an op only the backward runs: "<aten op> in the
    # backward", with the line of the forward op it differentiates).
    data_dependent: list[dict[str, Any]] = field(default_factory=list)


def optimizer_state_sizes(param_sizes: list[int], optimizer: str) -> list[int]:
    """Bytes of each persistent optimizer state tensor (same dtype and shape as its parameter)."""
    per_param = {"none": 0, "sgd": 0, "sgd-momentum": 1, "adam": 2, "adamw": 2}[optimizer]
    return [size for size in param_sizes for _ in range(per_param)]


class _SourceStamp:
    """Stamps FX nodes with the module path (from module hooks) and the user's source line (from a
    TorchFunctionMode that sees every torch call with the user's frame still on the stack)."""

    def __init__(self, model: Any) -> None:
        self.names = {id(m): name for name, m in model.named_modules()}
        self.stack: list[str] = []
        self.last_source: tuple[str, int] | None = None
        self.phase = ""  # "forward" while the traced step's forward and loss run, then "backward"
        self.value_reads: list[tuple[str, tuple[str, int] | None]] = []  # (what, user source) in call order

    @contextmanager
    def active(self) -> Iterator[None]:
        import torch
        from torch.fx import traceback as fx_traceback
        from torch.overrides import TorchFunctionMode

        stamp = self
        torch_dir = os.path.dirname(torch.__file__)

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                frame = sys._getframe(1)
                skipped: list[str] = []  # names of the library frames between the user's line and this call
                while frame is not None and (
                    frame.f_code.co_filename.startswith(torch_dir)
                    or frame.f_code.co_filename.startswith(_GPULINT_DIR)
                    or frame.f_code.co_filename.startswith("<")
                ):
                    skipped.append(frame.f_code.co_name)
                    frame = frame.f_back
                source = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else None
                stamp.last_source = source or stamp.last_source
                what = _value_read(func, args, kwargs or {}, skipped)
                if what is not None and (what, source) not in stamp.value_reads:
                    stamp.value_reads.append((what, source))
                meta = fx_traceback.get_current_meta()
                old = meta.get("custom")
                meta["custom"] = {"gpulint_module": stamp.stack[-1] if stamp.stack else "", "gpulint_src": source}
                try:
                    return func(*args, **(kwargs or {}))
                finally:
                    if old is None:
                        meta.pop("custom", None)
                    else:
                        meta["custom"] = old

        def pre(module: Any, _args: Any) -> None:
            stamp.stack.append(self.names.get(id(module), stamp.stack[-1] if stamp.stack else ""))

        def post(_module: Any, _args: Any, _out: Any) -> None:
            if stamp.stack:
                stamp.stack.pop()

        hooks = [
            torch.nn.modules.module.register_module_forward_pre_hook(pre),
            torch.nn.modules.module.register_module_forward_hook(post),
        ]
        try:
            with Mode():
                yield
        finally:
            for h in hooks:
                h.remove()

    def where(self) -> str:
        if self.phase == "backward":
            return " in the backward"
        if self.last_source is None:
            return ""
        return f" at {_relative(self.last_source[0])}:{self.last_source[1]}"

    def data_dependent(self) -> list[dict[str, Any]]:
        return [{"op": what, "path": _relative(src[0]) if src else "", "line": src[1] if src else 0}
                for what, src in self.value_reads]


def _relative(path: str) -> str:
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


# Tensor methods and torch functions whose result depends on tensor values, not only shapes: torch.compile
# breaks its graph at each (or gives it an unbacked size). Names as the report prints them.
_VALUE_READS = {
    "item": "Tensor.item()", "tolist": "Tensor.tolist()", "__bool__": "bool(tensor), e.g. `if tensor:`",
    "__int__": "int(tensor)", "__float__": "float(tensor)", "__index__": "tensor as an index",
    "nonzero": "nonzero", "argwhere": "argwhere", "masked_select": "masked_select", "unique": "unique",
    "unique_consecutive": "unique_consecutive", "bincount": "bincount",
}


def _value_read(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], callers: list[str]) -> str | None:
    """What a torch call reads from tensor values, or None (boolean-mask indexing counts as a read).

    `callers` are the library functions between the user's line and the call: traced tensors turn `bool(t)`
    (an `if t:`) into a call of `t.item()` from their own `__bool__`.
    """
    import torch

    name = getattr(func, "__name__", "")
    if name == "item":
        name = next((caller for caller in callers if caller in _VALUE_READS and caller != "item"), name)
    if name == "__getitem__" and len(args) > 1:
        index = args[1] if isinstance(args[1], tuple) else (args[1],)
        if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in index):
            return "boolean-mask indexing"
        return None
    if name == "where" and len(args) == 1:
        return "torch.where(condition)"
    if name == "repeat_interleave":  # tensor repeats without output_size: the output length is their sum
        repeats = args[1] if len(args) > 1 else kwargs.get("repeats", args[0] if args else None)
        if isinstance(repeats, torch.Tensor) and kwargs.get("output_size") is None:
            return "repeat_interleave(tensor repeats)"
        return None
    return _VALUE_READS.get(name)



def _build_on_meta(build_model: Callable[[], Any], device: str) -> Any:
    """Build on the meta device (initialisers do nothing there), then give every parameter and buffer a fake
    tensor of the same shape, dtype and sharing (tied weights stay tied). Values are not needed to trace."""
    import torch
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes(), torch.device("meta"):
        model = build_model()
    replaced: dict[int, Any] = {}
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is not None:
                if id(p) not in replaced:
                    replaced[id(p)] = torch.nn.Parameter(
                        torch.empty(p.shape, dtype=p.dtype, device=device), requires_grad=p.requires_grad
                    )
                module._parameters[name] = replaced[id(p)]
        for name, b in list(module._buffers.items()):
            if b is not None:
                if id(b) not in replaced:
                    replaced[id(b)] = torch.zeros(b.shape, dtype=b.dtype, device=device)
                module._buffers[name] = replaced[id(b)]
    return model


def build_fake_model(build_model: Callable[[], Any], device: str = "cpu") -> Any:
    """Call the user's model factory inside an active FakeTensorMode: no real memory is allocated.

    Some initialisers read tensor values (ViT's trunc_normal_ calls `.item()`), which fake tensors cannot
    answer; such a model is built on meta and then faked. Every other failure is the factory's: one line.
    """
    import torch
    from torch._subclasses.fake_tensor import DataDependentOutputException

    try:
        try:
            model = build_model()
        except DataDependentOutputException:
            model = _build_on_meta(build_model, device)
    except Exception as exc:  # noqa: BLE001 - user code may raise anything; reported as one line
        raise PlanError(f"plan.model: the factory raised {type(exc).__name__}: {exc}") from None
    if not isinstance(model, torch.nn.Module):
        raise PlanError(f"plan.model: the factory returned {type(model).__name__}, not a torch.nn.Module")
    return model


def build_fake(
    build_model: Callable[[], Any], make_batch: Callable[[], Any], dtype: str, fake_mode: Any, device: str = "cpu"
) -> tuple[Any, Any]:
    """Call the user's factories under the fake mode (no real memory) and cast to the planned dtype."""
    import torch

    with fake_mode, torch.device(device):
        model = build_fake_model(build_model, device)
        cast_module(model, torch_dtype(dtype))
        try:
            batch = _make_fake_batch(make_batch, fake_mode)
        except Exception as exc:  # noqa: BLE001 - user code may raise anything; reported as one line
            raise PlanError(f"plan.batch: the factory raised {type(exc).__name__}: {exc}") from None
        batch = cast_batch(batch, torch_dtype(dtype))
    return model, batch


def _make_fake_batch(make_batch: Callable[[], Any], fake_mode: Any) -> Any:
    """The batch, made under the fake mode; a factory that reads tensor values (lengths drawn with `.item()`, a
    model built to make the batch) is run for real and its tensors faked: the batch alone takes real memory."""
    import torch
    from torch._subclasses.fake_tensor import DataDependentOutputException, unset_fake_temporarily
    from torch.utils._pytree import tree_map

    try:
        return make_batch()
    except DataDependentOutputException:
        with unset_fake_temporarily():
            real = make_batch()
        return tree_map(lambda x: fake_mode.from_tensor(x) if isinstance(x, torch.Tensor) else x, real)


class _ReadsValues(Exception):
    """The fake trace needed a tensor's value (or a value-dependent shape); carries the one-line description
    and whether the backward needed it (then the real run must record the backward too)."""

    def __init__(self, message: str, in_backward: bool = False) -> None:
        super().__init__(message)
        self.in_backward = in_backward


class _ReplayError(PlanError):
    """The fake trace did not repeat the ops recorded in the real run (one line, naming the source line)."""


class _NotRecorded(_ReplayError):
    """The trace met a value-dependent op beyond those recorded (the forward-only run did not see the backward)."""


def trace_step(
    build_model: Callable[[], Any],
    make_batch: Callable[[], Any],
    *,
    loss_fn: Any = None,
    optimizer: str = "adamw",
    dtype: str = "fp32",
    name: str = "",
    device: str = "cpu",
    progress: Callable[[str], None] | None = None,
) -> Traced:
    """Trace forward+loss+backward of the model the factories build; return the IR and the FX joint graph.

    The trace runs on fake tensors (no memory). Fake tensors alone cannot trace a step that reads tensor values
    (`if x.sum() > 0:`, `.item()`) or runs an op whose output shape depends on them (`x[mask]`, `nonzero`,
    `masked_select`, `unique`, `repeat_interleave` with tensor repeats): where torch.compile breaks its graph
    or needs unbacked sizes. The step's forward and loss then run once for real (no grad, on CPU), recording
    each value read and each such op's output shapes, and the fake trace is repeated replaying them in order:
    a masked op stays a node of the joint graph, with its recorded output size and its gradient path (its
    backward is traced as usual; if the backward itself has such an op, the real run is repeated with the
    backward recorded too). The graph then holds the branch and the sizes this batch gives, and the budget is
    planned for the whole step. `Traced.data_dependent` lists these places with their source lines. A step
    that does not repeat them when traced (other shapes, another order) fails with one line.

    `device="cuda"` traces fake CUDA tensors (the CUDA kernels' names, e.g. flash attention) and is only
    allowed where torch has CUDA: on a CPU-only build it would abort the process, so it is refused here.
    """
    import torch

    if device != "cpu" and not (device.startswith("cuda") and torch.cuda.is_available()):
        raise PlanError(f"cannot trace on {device!r} here: this torch has no CUDA (trace on cpu and pick a hardware profile)")
    start = time.perf_counter()

    def retrace(backward: bool) -> Traced:
        values = record_value_reads(build_model, make_batch, loss_fn, dtype, backward=backward)
        return _trace(build_model, make_batch, loss_fn, optimizer, dtype, name, device, values=values)

    try:
        traced = _trace(build_model, make_batch, loss_fn, optimizer, dtype, name, device, values=None)
    except _ReadsValues as reason:
        if progress is not None:
            what = "the whole step" if reason.in_backward else "the forward"
            progress(f"{reason}; running {what} once on cpu to read the values, then tracing again...")
        try:
            traced = retrace(backward=reason.in_backward)
        except _NotRecorded:
            if reason.in_backward:
                raise
            if progress is not None:
                progress("the backward has a data-dependent op too; running the whole step once on cpu...")
            traced = retrace(backward=True)
    traced.seconds = time.perf_counter() - start
    return traced


def _replayed(func: Any) -> bool:
    """Ops a plain FakeTensorMode cannot answer: they read values, or their output shape depends on values."""
    import torch

    return torch.Tag.data_dependent_output in func.tags or torch.Tag.dynamic_output_shape in func.tags


@dataclass(frozen=True)
class _TensorMeta:
    """What the replay needs of a recorded output tensor (its values are never needed)."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: Any


@dataclass
class _Recorded:
    """One replayed op as it ran for real: the op, the shapes of its tensor inputs (the trace must give the same),
    the user's source line it ran for, and its output (a Python value for a read, `_TensorMeta` in place of each
    tensor for a value-dependent shape)."""

    func: Any
    inputs: list[tuple[int, ...]]
    output: Any
    source: tuple[str, int] | None = None


def _input_shapes(args: Any, kwargs: Any) -> list[tuple[int, ...]]:
    import torch
    import torch.utils._pytree as pytree

    return [tuple(x.shape) for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]


def record_value_reads(build_model: Callable[[], Any], make_batch: Callable[[], Any],
                       loss_fn: Any, dtype: str, *, backward: bool = False, compiling: bool = True,
                       first_only: bool = False) -> list[_Recorded]:
    """Run the step's forward and loss once for real (no grad; with `backward`, the backward too) and return each
    value it read and each value-dependent output shape, in order: what `_replay_fake_mode` answers with.
    `first_only`: stop the real run at its first read (a read of the inputs, early in the forward, costs no more)."""
    import torch
    import torch.utils._pytree as pytree
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.values: list[_Recorded] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if _replayed(func):
                output = pytree.tree_map_only(
                    torch.Tensor, lambda t: _TensorMeta(tuple(t.shape), tuple(t.stride()), t.dtype), out)
                source = stamp.last_source if stamp.phase != "backward" else None  # the backward has no line
                self.values.append(_Recorded(func, _input_shapes(args, kwargs), output, source))
                if first_only:
                    raise _Enough
            return out

    model, batch = build_real(build_model, make_batch, dtype)
    state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    recorder = Record()
    stamp = _SourceStamp(model)  # the user's line of each read: the trace must ask for it from the same line
    torch.manual_seed(0)
    try:
        with torch.set_grad_enabled(backward), stamp.active(), recorder:
            loss = make_step_fn(model, loss_fn, compiling=compiling)(state, batch)
            if backward:
                stamp.phase = "backward"
                loss.backward()
    except _Enough:
        pass
    except PlanError:
        raise
    except Exception as exc:  # noqa: BLE001 - user code may raise anything; reported as one line
        raise PlanError(f"the step failed when run for real to read its values: {type(exc).__name__}: {exc}") from None
    return recorder.values


class _Enough(Exception):
    """Stops a real run that has read what was asked of it."""


_NOT_DETERMINISTIC = "it is not deterministic enough to plan (the same shapes and branches on every run)"


def _replay_fake_mode(values: list[_Recorded] | None) -> Any:
    """A FakeTensorMode that answers value reads and value-dependent shapes with `values` in order (None: an
    ordinary FakeTensorMode). A value-dependent op's output is a fresh fake tensor of the recorded shape, so the
    op stays in the graph with its inputs (and the gradient path through it)."""
    import torch
    import torch.utils._pytree as pytree
    from torch._subclasses.fake_tensor import FakeTensorMode

    if values is None:
        return FakeTensorMode()

    class ReplayFakeMode(FakeTensorMode):
        def __init__(self) -> None:
            super().__init__()
            self.position = 0
            # (module, op, input shapes) -> the answers given, for a recompute to ask again (eager_trace.run_step)
            self.answered: dict[tuple[str, Any, str], list[_Recorded]] = {}
            self.again: dict[tuple[str, Any, str], int] = {}
            self.context: Callable[[], str] = lambda: ""  # the module running (set where a recompute may ask)
            self.in_forward = False  # set by `_trace` while the step's forward and loss run
            self.backward_ops: list[tuple[str, tuple[str, int] | None]] = []  # replayed in the backward: (op, source)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not _replayed(func):
                return super().__torch_dispatch__(func, types, args, kwargs)
            source = _current_source()
            where = f" at {_relative(source[0])}:{source[1]}" if source else ""
            shapes = _input_shapes(args, kwargs)
            # The real run may read values the trace never reads (CPU one_hot checks its indices with two
            # `.item()` calls that the traced decomposition does not make): records from other lines are skipped.
            found = next((k for k in range(self.position, len(values)) if values[k].func == func
                          and values[k].inputs == shapes and (source is None or values[k].source in (source, None))),
                         None)
            key = (self.context(), func, str(shapes))
            if found is not None:
                recorded = values[found]
                self.position = found + 1
                self.answered.setdefault(key, []).append(recorded)
            elif key in self.answered:
                # A checkpointed layer's recompute runs the module's ops again, in order, on the same inputs: the
                # same answers, in the same order.
                answers = self.answered[key]
                recorded = answers[self.again.get(key, 0) % len(answers)]
                self.again[key] = self.again.get(key, 0) + 1
            elif self.position >= len(values):
                raise _NotRecorded(f"the step ran a data-dependent op ({func}){where} when traced that it did not "
                                   f"run for real: {_NOT_DETERMINISTIC}")
            else:
                recorded = values[self.position]
                raise _ReplayError(
                    f"the step's data-dependent ops differ between the real run and the trace{where} ({func} on "
                    f"inputs of shapes {shapes}, recorded: {recorded.func} on {recorded.inputs}): {_NOT_DETERMINISTIC}")
            if not self.in_forward and (str(func), source) not in self.backward_ops:
                self.backward_ops.append((str(func), source))
            device = next((x.device for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)),
                          torch.device("cpu"))
            empty = super().__torch_dispatch__
            return pytree.tree_map_only(_TensorMeta, lambda m: empty(
                torch.ops.aten.empty_strided.default, types, (m.shape, m.stride), {"dtype": m.dtype, "device": device},
            ), recorded.output)

    return ReplayFakeMode()


def _current_source() -> tuple[str, int] | None:
    """The user's source line of the op being traced: `_SourceStamp` puts it in the FX node meta, and the
    backward of an op inherits its forward's meta."""
    from torch.fx import traceback as fx_traceback

    custom = fx_traceback.get_current_meta().get("custom") or {}
    return custom.get("gpulint_src")


def _trace(build_model: Callable[[], Any], make_batch: Callable[[], Any], loss_fn: Any,
           optimizer: str, dtype: str, name: str, device: str, *, values: list[_Recorded] | None) -> Traced:
    import torch
    import torch.utils._pytree as pytree
    from torch._dynamo.backends.debugging import boxed_nop
    from torch._functorch.aot_autograd import aot_function
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
    )
    from torch.fx import traceback as fx_traceback

    fake_mode = _replay_fake_mode(values)
    model, batch = build_fake(build_model, make_batch, dtype, fake_mode, device)
    state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    captured: dict[str, Any] = {}

    def capture(joint: Any, _inputs: Any, *, num_fwd_outputs: int, **_kw: Any) -> Any:
        rng.rewrite_random_ops(joint)  # as the compile backend does before it partitions: the same graph
        captured["joint"], captured["num_fwd_outputs"] = joint, num_fwd_outputs
        raise _Captured

    stamp = _SourceStamp(model)
    step = make_step_fn(model, loss_fn)

    def stamped_step(state: dict[str, Any], batch: Any) -> Any:
        stamp.value_reads.clear()
        if values is not None:
            fake_mode.position = 0  # aot_function runs the step twice (metadata, then the trace): replay each time
            fake_mode.backward_ops.clear()
            fake_mode.in_forward = True
        stamp.phase = "forward"
        with stamp.active():
            loss = step(state, batch)
        stamp.phase = "backward"  # only once the forward returned: an error in it keeps its line
        if values is not None:
            fake_mode.in_forward = False
        return loss

    compiled = aot_function(stamped_step, fw_compiler=boxed_nop, bw_compiler=boxed_nop, partition_fn=capture)
    try:
        with fake_mode, fx_traceback.preserve_node_meta(), warnings.catch_warnings():
            # aot_autograd traces the backward in anomaly mode, which warns with a stack before any error
            warnings.filterwarnings("ignore", message="Error detected in", category=UserWarning)
            compiled(state, batch)
    except _Captured:
        pass
    except PlanError:
        raise
    except DataDependentOutputException as exc:
        if values is not None:  # an op reads values that the real run did not dispatch: nothing to replay
            raise PlanError(f"the step reads tensor values ({exc.func}){stamp.where()} in a way gpulint cannot "
                            "replay") from None
        raise _ReadsValues(f"the step reads tensor values ({_describe_read(stamp, exc.func)}){stamp.where()}",
                           stamp.phase == "backward") from None
    except DynamicOutputShapeException as exc:
        if values is not None:  # e.g. an op that FakeTensor refuses without declaring it (a tag) to be one
            raise PlanError(f"the step has a data-dependent op ({exc.func}){stamp.where()}: its output shape "
                            "depends on tensor values, which gpulint cannot plan") from None
        raise _ReadsValues(f"the step has an op whose output shape depends on tensor values "
                           f"({_describe_read(stamp, exc.func)}){stamp.where()}", stamp.phase == "backward") from None
    except Exception as exc:  # noqa: BLE001 - user code may raise anything; reported as one line
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        if "data-dependent" in text.lower() or "data dependent" in text.lower():
            raise PlanError(f"the step has a data-dependent op{stamp.where()}: {text}") from None
        raise PlanError(f"the step could not be traced{stamp.where()}: {type(exc).__name__}: {text}") from None
    if "joint" not in captured:
        raise PlanError("the step has no backward: no parameter requires grad")
    leaves = pytree.tree_leaves((state, batch))
    params = {id(p) for p in model.parameters()} | {id(b) for b in model.buffers()}
    kinds = [PARAM if id(x) in params else INPUT for x in leaves if isinstance(x, torch.Tensor)]
    try:
        graph = build_graph(captured["joint"], captured["num_fwd_outputs"], kinds)
    except Exception as exc:  # noqa: BLE001 - a graph construct the memory model does not know yet: one line
        raise PlanError(f"the traced step could not be modelled ({type(exc).__name__}: {exc}); "
                        "please report it with the model") from None
    param_sizes = [p.untyped_storage().nbytes() for p in model.parameters() if p.requires_grad]
    graph.optimizer_state_sizes = optimizer_state_sizes(param_sizes, optimizer)
    graph.optimizer_state_bytes = sum(graph.optimizer_state_sizes)
    graph.optimizer_host_bytes = 4 * len(param_sizes) if optimizer in ("adam", "adamw") else 0
    graph.dtype = dtype
    graph.model = name or type(model).__name__
    reads = []
    if values is not None:
        stamp.value_reads += [(f"{op} in the backward", src or _last_source(captured["joint"], op))
                              for op, src in fake_mode.backward_ops]
        reads = stamp.data_dependent()
    return Traced(graph, captured["joint"], captured["num_fwd_outputs"], 0.0, reads)


def _last_source(joint: Any, op: str) -> tuple[str, int] | None:
    """The source line of the last `op` node in the joint graph: the backward comes last, and its nodes carry
    the source line of the forward op they differentiate."""
    sources = [(node.meta.get("custom") or {}).get("gpulint_src") for node in joint.graph.nodes
               if node.op == "call_function" and str(node.target) == op]
    return next((src for src in reversed(sources) if src), None)


def _describe_read(stamp: _SourceStamp, func: Any) -> str:
    """The user-level read that failed (the last one the stamp saw), else the aten op."""
    return stamp.value_reads[-1][0] if stamp.value_reads and stamp.phase != "backward" else str(func)


def build_real(build_model: Callable[[], Any], make_batch: Callable[[], Any], dtype: str) -> tuple[Any, Any]:
    """The user's model and batch as real CPU tensors in the planned dtype (to read the values a step reads)."""
    import torch

    torch.manual_seed(0)
    try:
        model = build_model()
    except Exception as exc:  # noqa: BLE001 - user code may raise anything; reported as one line
        raise PlanError(f"plan.model: the factory raised {type(exc).__name__}: {exc}") from None
    if not isinstance(model, torch.nn.Module):
        raise PlanError(f"plan.model: the factory returned {type(model).__name__}, not a torch.nn.Module")
    cast_module(model, torch_dtype(dtype))
    try:
        batch = make_batch()
    except Exception as exc:  # noqa: BLE001 - user code may raise anything; reported as one line
        raise PlanError(f"plan.batch: the factory raised {type(exc).__name__}: {exc}") from None
    return model, cast_batch(batch, torch_dtype(dtype))
