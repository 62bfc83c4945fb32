"""Apply a gpulint plan to an eager model with selective activation checkpointing (SAC).

A plan (schema ``gpulint.plan/1``) lists the forward activations that backward needs, each addressed by
(module path, aten op, call index among that module's forward calls of the op) and marked ``save`` or
``recompute``. ``apply(model, plan)`` wraps every *layer* that holds a ``recompute`` decision in non-reentrant
``torch.utils.checkpoint.checkpoint`` with a policy that MUST_SAVEs the planned saves, MUST_RECOMPUTEs the
planned recomputes and recomputes everything else (autograd never needed it kept).

Why layers and not the decision's own module: checkpoint always keeps a region's inputs, so a region must
contain both the producer and the consumers of a dropped activation. The layer is the shallowest module under a
container (``transformer.h.0`` for ``transformer.h.0.mlp.c_fc``); a decision outside any layer cannot be applied
in eager mode, stays saved, and ``apply`` warns (``AppliedPlan.unapplied`` lists them).

Random ops (dropout) recompute with the RNG state preserved (``preserve_rng_state=True``), so their masks and
the gradients equal the unplanned step's. In-place ops are never cached (CPU dropout's ``div_``): the caller
keeps using the tensor it mutated, so they are recomputed, which is exact for the same reason.

The first forward after ``apply`` checks that every decision's address happens in the model's forward; a model
the plan was not made for raises ``PlanMismatchError`` (one line). A later forward that misses planned ops of
checkpointed layers (it branched on tensor values another way) warns once that the plan's figures do not hold.
A plan with ``shapes`` (one per batch shape, see shapes.py) switches decisions by the shapes of each forward's
inputs. ``predict`` simulates the eager step
on the planner's graph, with the costs that are eager's own (kept layer inputs, whole-layer recompute).
"""

from __future__ import annotations

import functools
import json
import re
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import (
    SAC_IGNORED_OPS,
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

from gpulint.planner.errors import PlanError
from gpulint.planner.shapes import call_signature, shape_plans

PLAN_SCHEMA = "gpulint.plan/1"
_STATE_ATTR = "_gpulint_applied_plan"
_CONTAINERS = (nn.ModuleList, nn.ModuleDict, nn.Sequential)
_OP_NAME = re.compile(r"^(?:(?P<ns>[A-Za-z_][A-Za-z0-9_]*)\.)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\.(?P<overload>[A-Za-z0-9_]+))?$")


class PlanMismatchError(PlanError, ValueError):
    """The plan does not fit this model (changed architecture, other model) or is malformed. One line."""


# --- addressing ------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def op_key(op: Any) -> str:
    """An aten op's name as the plan's functionalized graph spells it, whether eager ran it in place or not.

    The plan's graph is functionalized (``aten.div.Scalar``, ``aten.relu.default``) while eager may run the
    in-place forms (``aten.div_.Scalar``, ``aten.relu_.default``); both are keyed by the functional name.
    """
    text = str(op)
    match = _OP_NAME.match(text)
    if match is None:
        raise PlanMismatchError(f"malformed op name {text!r} in plan (expected like 'aten.mm.default')")
    name = match["name"]
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    key = f"{match['ns'] or 'aten'}.{name}.{match['overload'] or 'default'}"
    return _FUNCTIONAL_OVERLOADS.get(key, key)


# In-place overloads whose functional twin has another overload name.
_FUNCTIONAL_OVERLOADS = {"aten.bernoulli.float": "aten.bernoulli.p"}

# Plan ops with no one-to-one eager counterpart, never matched against the eager forward: `getitem` (an FX tuple
# projection, not an op) and CPU dropout (traced as one native_dropout; eager CPU runs bernoulli_, div_, mul).
_UNMATCHED_OPS = {"getitem", "aten.native_dropout.default"}


@dataclass(frozen=True)
class Address:
    """Where an activation is produced: the innermost module running the op, the op, and its call index there."""

    module: str
    op: str  # op_key() form
    call_index: int

    def describe(self) -> str:
        return f"{self.op} call {self.call_index} in module '{self.module or '<root>'}'"


@dataclass(frozen=True)
class Decision:
    id: str
    address: Address
    action: str  # "save" | "recompute"
    bytes: int


def load_plan(plan: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """Read a plan file (or take a dict) and check its schema; errors name the file and field."""
    where = "plan"
    if isinstance(plan, (str, Path)):
        where = str(plan)
        try:
            plan = json.loads(Path(plan).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise PlanMismatchError(f"{where}: plan file not found") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise PlanMismatchError(f"{where}: not a readable JSON plan ({exc})") from None
    if not isinstance(plan, Mapping):
        raise PlanMismatchError(f"{where}: a plan is a JSON object, got {type(plan).__name__}")
    if plan.get("schema") != PLAN_SCHEMA:
        raise PlanMismatchError(f"{where}: schema is {plan.get('schema')!r}, expected {PLAN_SCHEMA!r}")
    if not isinstance(plan.get("decisions"), list):
        raise PlanMismatchError(f"{where}: field 'decisions' must be a list")
    return dict(plan)


def eager_decisions(plan: Mapping[str, Any]) -> list[Decision]:
    """The decisions eager mode applies: `plan["eager"]["decisions"]` when the planner found that the compiled
    plan would exceed the budget in eager mode (see add_figures), else the plan's own."""
    override = plan.get("eager", {}).get("decisions") if isinstance(plan.get("eager"), Mapping) else None
    return parse_decisions({"decisions": override} if override is not None else plan)


def parse_decisions(plan: Mapping[str, Any]) -> list[Decision]:
    decisions = []
    for i, raw in enumerate(plan["decisions"]):
        label = f"decisions[{i}]"
        if not isinstance(raw, Mapping):
            raise PlanMismatchError(f"plan field {label} must be an object")
        missing = [k for k in ("op", "action", "module", "call_index") if k not in raw]
        if missing:
            raise PlanMismatchError(f"plan field {label} lacks {', '.join(missing)}")
        action = raw["action"]
        if isinstance(raw.get("eager"), Mapping):
            # The planner's own address of the op eager mode runs (a saved view or getitem -> its storage's maker).
            raw, label = {**raw, **raw["eager"]}, f"{label}.eager"
        if action not in ("save", "recompute"):
            raise PlanMismatchError(f"plan field decisions[{i}].action is {action!r}, expected 'save' or 'recompute'")
        if not isinstance(raw["call_index"], int) or raw["call_index"] < 0:
            raise PlanMismatchError(f"plan field {label}.call_index must be a non-negative integer")
        if not isinstance(raw["module"], str):
            raise PlanMismatchError(f"plan field {label}.module must be a string (module path, '' for the root)")
        op = raw["op"] if raw["op"] == "getitem" else op_key(raw["op"])
        address = Address(raw["module"], op, raw["call_index"])
        decisions.append(Decision(str(raw.get("id", i)), address, raw["action"], int(raw.get("bytes", 0))))
    return decisions


def plan_addresses(graph: Any, indices: list[int]) -> list[dict[str, Any]]:
    """The eager addresses of saved nodes of a planner JointGraph, for writing plan decisions.

    A saved view or tuple element (FX ``view``/``getitem`` of an addmm or a layer norm) is addressed by the
    forward op that allocated its storage: that is the op eager mode runs and the checkpoint policy can keep,
    and keeping it costs nothing more (the view's bytes are its base's). A view of a parameter or an input
    (``t`` of a weight) keeps its own address.
    """
    creator: dict[int, int] = {}
    for node in graph.nodes:
        for storage in node.creates:
            creator.setdefault(storage, node.index)
    addresses = []
    for index in indices:
        node = graph.nodes[index]
        if not node.creates and node.storages:
            base = graph.nodes[creator.get(node.storages[0], index)]
            if base.kind == node.kind:
                node = base
        addresses.append({"module": node.module, "op": node.op, "call_index": node.call_index})
    return addresses


def layer_of(model: nn.Module, module_path: str) -> str | None:
    """The shallowest ancestor-or-self of `module_path` whose parent is a container (a layer), or None."""
    if not module_path:
        return None
    parts = module_path.split(".")
    parent: nn.Module = model
    for depth, name in enumerate(parts):
        child = parent._modules.get(name)
        if child is None:
            return None
        if isinstance(parent, _CONTAINERS) and len(parent._modules) > 1:
            return ".".join(parts[: depth + 1])
        parent = child
    return None


# --- runtime state ---------------------------------------------------------------------------------------------


class _ModuleStack:
    """The path of the innermost module running, kept by forward pre/post hooks on every submodule."""

    def __init__(self, model: nn.Module) -> None:
        self.paths: list[str] = [""]
        self.handles = []
        for path, module in model.named_modules():
            if not path:
                continue
            self.handles.append(module.register_forward_pre_hook(functools.partial(self._enter, path)))
            # always_call: checkpoint's early stop raises inside a recompute; the stack must still unwind.
            self.handles.append(
                module.register_forward_hook(functools.partial(self._exit, path), always_call=True)
            )

    def _enter(self, path: str, module: nn.Module, args: Any) -> None:
        self.paths.append(path)

    def _exit(self, path: str, module: nn.Module, args: Any, output: Any) -> None:
        while len(self.paths) > 1:
            if self.paths.pop() == path:
                break

    @property
    def current(self) -> str:
        return self.paths[-1]

    def reset(self) -> None:
        self.paths[:] = [""]

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


class _Counter:
    """Call index of each (module, op) within one forward pass."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = defaultdict(int)

    def next(self, module: str, op: str) -> int:
        index = self.counts[(module, op)]
        self.counts[(module, op)] = index + 1
        return index


class _ValidationMode(TorchDispatchMode):
    """Records the address of every op of one forward pass, to check the plan against the model."""

    def __init__(self, stack: _ModuleStack) -> None:
        super().__init__()
        self.stack = stack
        self.counter = _Counter()
        self.seen: set[Address] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func not in SAC_IGNORED_OPS:
            module, key = self.stack.current, op_key(func)
            self.seen.add(Address(module, key, self.counter.next(module, key)))
        return out


@dataclass
class AppliedPlan:
    """What `apply` installed on a model; `remove()` restores the model."""

    model: nn.Module
    decisions: list[Decision]
    regions: list[str]  # layer paths wrapped in selective checkpointing
    unapplied: list[Decision]  # recompute decisions outside any layer: kept saved
    validated: bool = False  # the decisions in use were all found in a forward
    _stack: _ModuleStack | None = None
    _policy: dict[Address, CheckpointPolicy] = field(default_factory=dict)
    # input signature (None: the plan's top level) -> (decisions, policy); see gpulint/planner/shapes.py
    _shapes: dict[Any, tuple[list[Decision], dict[Address, CheckpointPolicy]]] = field(default_factory=dict)
    _validated: set[Any] = field(default_factory=set)
    _key: Any = None  # the signature whose decisions are in use
    _warned_unplanned_shape: bool = False
    _counter: _Counter = field(default_factory=_Counter)
    # Planned addresses the checkpoint policy met in this forward, and those it met in the validated first one
    # (per input signature): a later forward that misses some took another path (a branch on tensor values).
    _hits: set[Address] = field(default_factory=set)
    _expected_hits: dict[Any, set[Address]] = field(default_factory=dict)
    _warned_path: bool = False
    _originals: dict[str, Callable[..., Any]] = field(default_factory=dict)
    _restore_cache: list[tuple[Any, bool]] = field(default_factory=list)  # configs whose use_cache apply turned off

    def remove(self) -> None:
        for path, forward in self._originals.items():
            module = self.model.get_submodule(path)
            if forward is None:
                del module.forward
            else:
                module.forward = forward
        if self._stack is not None:
            self._stack.remove()
        for config, value in self._restore_cache:
            config.use_cache = value
        self.model.__dict__.pop(_STATE_ATTR, None)

    # called by the wrapped root forward
    def _begin_forward(self) -> None:
        self._stack.reset()
        self._counter = _Counter()
        self._hits = set()

    def _select(self, sig: Any) -> None:
        """Use the decisions planned for input signature `sig`, else the plan's top level (its largest shape)."""
        if sig not in self._shapes:
            if not self._warned_unplanned_shape:
                warnings.warn(f"gpulint: inputs of shapes {list(sig)} were not planned; using the largest "
                              "shape's plan", stacklevel=4)
                self._warned_unplanned_shape = True
            sig = None
        self._key = sig
        self.decisions, self._policy = self._shapes[sig]
        self.validated = sig in self._validated

    def _check(self, seen: set[Address]) -> None:
        missing = [d for d in self.decisions if d.address not in seen and d.address.op not in _UNMATCHED_OPS]
        if missing:
            first = missing[0]
            raise PlanMismatchError(
                f"plan does not match this model: decision {first.id} ({first.address.describe()}) does not happen in "
                f"its forward ({len(missing)} of {len(self.decisions)} decisions missing); re-run `gpulint plan`"
            )
        self._validated.add(self._key)
        self._expected_hits[self._key] = set(self._hits)
        self.validated = True

    def _check_path(self) -> None:
        """Warn (once) when a forward did not run planned ops that the validated forward ran in checkpointed
        layers: the model branched on tensor values, and the plan's figures do not hold for this forward."""
        missing = self._expected_hits.get(self._key, set()) - self._hits
        if missing and not self._warned_path:
            first = min(missing, key=lambda a: (a.module, a.op, a.call_index))
            warnings.warn(
                f"gpulint: this forward took another path than the one planned ({first.describe()} did not run; "
                f"{len(missing)} planned op(s) missed): the plan's peak and time do not hold for it",
                stacklevel=4,
            )
            self._warned_path = True

    def _policy_fn(self, ctx, op, *args, **kwargs) -> CheckpointPolicy:
        module, key = self._stack.current, op_key(op)
        address = Address(module, key, self._counter.next(module, key))
        if address in self._policy:
            self._hits.add(address)
        if op._schema.is_mutable:
            # Never cache an in-place op (dropout's div_): its caller goes on using the argument it mutated, not
            # the op's return value, so a cached result would be ignored by the recompute and the mask left
            # unscaled. Recomputing it is exact (RNG state preserved) and cheap (elementwise).
            return CheckpointPolicy.PREFER_RECOMPUTE
        return self._policy.get(address, CheckpointPolicy.PREFER_RECOMPUTE)


def plan_regions(model: nn.Module, decisions: list[Decision]) -> tuple[list[str], list[Decision]]:
    """The layers to checkpoint (those holding a recompute decision) and the recompute decisions in no layer."""
    regions: set[str] = set()
    unapplied: list[Decision] = []
    for decision in decisions:
        if decision.action != "recompute":
            continue
        layer = layer_of(model, decision.address.module)
        if layer is None:
            unapplied.append(decision)
        else:
            regions.add(layer)
    return sorted(regions), unapplied


def apply(model: nn.Module, plan: str | Path | Mapping[str, Any]) -> nn.Module:
    """Install the plan's selective activation checkpointing on `model` (in place) and return `model`.

    `plan` is a path to a ``gpulint-plan.json`` or the loaded dict. Raises PlanMismatchError when the plan names
    modules the model lacks, and on the first forward when an addressed op does not happen.
    Undo with ``gpulint.planner.eager.remove(model)``.
    """
    if not isinstance(model, nn.Module):
        raise PlanMismatchError(f"gpulint.apply expects an nn.Module, got {type(model).__name__}")
    if _STATE_ATTR in model.__dict__:
        raise PlanMismatchError("a gpulint plan is already applied to this model; remove(model) first")
    if any(getattr(module, "gradient_checkpointing", False) is True for module in model.modules()):
        raise PlanMismatchError(
            "the model has transformers' gradient checkpointing enabled; disable it (it would checkpoint twice)"
        )
    plan = load_plan(plan)
    decisions = eager_decisions(plan)
    by_shape = {sig: parse_decisions({"decisions": raw}) for sig, raw in shape_plans(plan).items()}
    every = decisions + [d for shape_decisions in by_shape.values() for d in shape_decisions]
    modules = dict(model.named_modules())
    for decision in every:
        if decision.address.module not in modules:
            raise PlanMismatchError(
                f"plan does not match this model: decision {decision.id} names module "
                f"'{decision.address.module}', which the model does not have; re-run `gpulint plan`"
            )

    regions, unapplied = plan_regions(model, every)
    if unapplied:
        warnings.warn(
            f"gpulint: {len(unapplied)} recompute decision(s) lie outside any layer (first: "
            f"{unapplied[0].address.describe()}) and stay saved in eager mode; the compiled path applies them",
            stacklevel=2,
        )

    state = AppliedPlan(model, decisions, regions, unapplied)
    state._shapes = {None: (decisions, _policy_of(decisions))}
    state._shapes.update({sig: (d, _policy_of(d)) for sig, d in by_shape.items()})
    state._select(None)
    state._stack = _ModuleStack(model)
    if state.regions:
        state._restore_cache = disable_kv_cache(model)
        if state._restore_cache:
            warnings.warn("gpulint: turned off the model's KV cache (use_cache=False) for checkpointing", stacklevel=2)
    for path in state.regions:
        _wrap_region(state, path)
    _wrap_root(state)
    model.__dict__[_STATE_ATTR] = state
    return model


def _policy_of(decisions: list[Decision]) -> dict[Address, CheckpointPolicy]:
    # SAC decides per op, not per output: an op with one output planned saved (layer norm's mean) keeps all.
    policy: dict[Address, CheckpointPolicy] = {}
    for decision in decisions:
        if decision.action == "save":
            policy[decision.address] = CheckpointPolicy.MUST_SAVE
        else:
            policy.setdefault(decision.address, CheckpointPolicy.MUST_RECOMPUTE)
    return policy


def disable_kv_cache(model: nn.Module) -> list[tuple[Any, bool]]:
    """Turn off the KV cache of a transformers model and of its sub-models (T5's decoder has its own config).

    A training step needs no cache, and a cache updated inside a checkpointed layer is updated again by the
    recompute, which then runs other ops than the forward did (transformers turns it off for its own gradient
    checkpointing for the same reason). Trace the step for a plan with the cache off too, so the ops match.
    Returns (config, old value) pairs to restore.
    """
    changed = []
    for module in model.modules():
        config = getattr(module, "config", None)
        if getattr(config, "use_cache", None) is True and all(config is not c for c, _ in changed):
            config.use_cache = False
            changed.append((config, True))
    return changed


def _without_kv_cache(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A checkpointed layer's kwargs with any KV cache object dropped and `use_cache` off.

    The recompute would find the cache the forward filled and run other ops (transformers' own gradient
    checkpointing drops it the same way). Cache objects are recognised by a class named like `...Cache`.
    """
    cleaned = dict(kwargs)
    for name, value in kwargs.items():
        if value is not None and any(cls.__name__.endswith("Cache") for cls in type(value).__mro__):
            cleaned[name] = None
    if cleaned.get("use_cache") is True:
        cleaned["use_cache"] = False
    return cleaned


def remove(model: nn.Module) -> None:
    """Undo `apply`: the model runs exactly as before."""
    state = model.__dict__.get(_STATE_ATTR)
    if state is None:
        raise PlanMismatchError("no gpulint plan is applied to this model")
    state.remove()


def applied_plan(model: nn.Module) -> AppliedPlan | None:
    return model.__dict__.get(_STATE_ATTR)


def _set_forward(state: AppliedPlan, path: str, module: nn.Module, forward: Callable[..., Any]) -> None:
    # Remember an instance-level forward if one was set, else None (then deleting ours restores the class's).
    state._originals[path] = module.__dict__.get("forward")
    module.forward = forward


# The installed forwards are functools.partial objects over module-level functions, not closures: a deepcopy
# of the model (an EMA copy) then gets forwards bound to the copy's own modules and plan state.


def _checkpointed_forward(state: AppliedPlan, inner: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    if not torch.is_grad_enabled():
        return inner(*args, **kwargs)
    context_fn = functools.partial(create_selective_checkpoint_contexts, state._policy_fn)
    kwargs = _without_kv_cache(kwargs)
    return checkpoint(inner, *args, use_reentrant=False, context_fn=context_fn, preserve_rng_state=True, **kwargs)


def _planned_forward(state: AppliedPlan, inner: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    state._begin_forward()
    if len(state._shapes) > 1:
        state._select(call_signature(args, kwargs))
    if not torch.is_grad_enabled():
        return inner(*args, **kwargs)
    if state.validated:
        out = inner(*args, **kwargs)
        state._check_path()
        return out
    with _ValidationMode(state._stack) as mode:
        out = inner(*args, **kwargs)
    state._check(mode.seen)
    return out


def _wrap_region(state: AppliedPlan, path: str) -> None:
    module = state.model.get_submodule(path)
    _set_forward(state, path, module, functools.partial(_checkpointed_forward, state, module.forward))


def _wrap_root(state: AppliedPlan) -> None:
    _set_forward(state, "", state.model, functools.partial(_planned_forward, state, state.model.forward))


# --- what eager autograd saves ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SavedActivation:
    address: Address
    op: str  # full overload name as eager ran it
    output: int  # which of the op's outputs (layer norm returns out, mean, rstd)
    bytes: int


class _ProducerMode(TorchDispatchMode):
    """Maps each output storage of the forward to the address of the op that made it."""

    def __init__(self, stack: _ModuleStack) -> None:
        super().__init__()
        self.stack = stack
        self.counter = _Counter()
        self.producer: dict[int, tuple[Address, str, int]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in SAC_IGNORED_OPS:
            return out
        module, key = self.stack.current, op_key(func)
        address = Address(module, key, self.counter.next(module, key))
        if not _is_view(func):
            # A storage's producer is its last writer: dropout's mask is made by empty_like, bernoulli_, div_;
            # the plan's functional graph names the final div. A freed storage reused later gets a new producer.
            for output, tensor in enumerate(_tensors(out)):
                self.producer[tensor.untyped_storage().data_ptr()] = (address, str(func), output)
        return out


def _is_view(func) -> bool:
    return any(a.alias_info is not None and not a.alias_info.is_write for a in func._schema.returns)


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)


def saved_activations(model: nn.Module, step: Callable[[], torch.Tensor]) -> list[SavedActivation]:
    """Run `step()` (forward + loss, no backward) once and list the activations eager autograd saves for backward.

    Each is addressed like a plan decision; parameters and inputs (no producing op) are left out. Used to write
    plans by hand in tests and to check a plan's addresses against what eager mode really saves.
    """
    stack = _ModuleStack(model)
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


def predict(graph: Any, plan: Mapping[str, Any], model: nn.Module, times: list[float] | None = None,
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

    decisions = eager_decisions(load_plan(plan))
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
    for index, address in zip(default, plan_addresses(graph, default)):
        key = Address(address["module"], op_key(address["op"]) if address["op"] != "getitem" else "getitem",
                      address["call_index"])
        if index not in region_of or key in must_save:
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


# --- measuring the eager step (gpulint plan --measure, bench/apply_eager.py) -------------------------------------


@dataclass
class EagerMeasurement:
    peak_bytes: int
    step_time_s: float
    device: str


def measure(build_model: Callable[[], nn.Module], make_batch: Callable[[], Any], plan: Mapping[str, Any] | None, *,
            loss_fn: Callable[..., Any] | None = None, optimizer: str = "adamw", dtype: str = "fp32",
            device: str | None = None, repeats: int = 3) -> EagerMeasurement:
    """Run the real eager step with `gpulint.apply(model, plan)` (None: unplanned): peak bytes and best step time.

    Measured like the compiled step (gpulint/planner/measure.py): the second step's forward and backward, with
    parameters, batch and optimizer state counted (CPU: live-storage tracker; CUDA: max_memory_allocated).
    """
    import torch.utils._pytree as pytree

    from gpulint.planner.measure import make_optimizer, peak_and_best_time
    from gpulint.planner.trace import (
        cast_batch,
        cast_module,
        default_loss,
        split_batch,
        torch_dtype,
    )

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model = build_model().train()
    cast_module(model, torch_dtype(dtype))
    model.to(device)
    if plan is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # outside-layer decisions and KV cache: reported by apply() elsewhere
            apply(model, plan)
    batch = pytree.tree_map(
        lambda x: x.to(device) if isinstance(x, torch.Tensor) else x, cast_batch(make_batch(), torch_dtype(dtype))
    )
    args, kwargs = split_batch(batch)
    opt = make_optimizer(optimizer, [p for p in model.parameters() if p.requires_grad])

    def step() -> None:
        output = model(*args, **kwargs)
        loss = loss_fn(output, batch) if loss_fn is not None else default_loss(output)
        del output  # like the traced step, keep nothing but the loss through backward
        loss.backward()

    def finish() -> None:
        if opt is not None:
            opt.step()
        model.zero_grad(set_to_none=True)

    def tracked() -> list[Any]:
        return [list(model.parameters()), list(model.buffers()), batch, opt.state if opt else None]

    # The warm-up step also validates the plan against the model.
    peak, best, _ = peak_and_best_time(step, finish, tracked, device, repeats)
    return EagerMeasurement(peak, best, device)


def eager_fitting_plan(graph: Any, structure: nn.Module, budget: int, hardware: Any) -> dict[str, Any] | None:
    """The plan for the largest budget whose eager step peaks within `budget` (None: no plan does).

    Walks the planner's path (each step lowers the compiled peak) by bisection, predicting each step's eager peak.
    """
    from gpulint.planner.cost import node_times
    from gpulint.planner.greedy import GreedyPlanner
    from gpulint.planner.report import plan_dict

    planner = GreedyPlanner(graph, node_times(graph, hardware), hardware.allocation_rounding)
    full = planner.run(None)
    path = sorted(full.path, key=lambda step: -step.peak)
    plans: dict[int, dict[str, Any]] = {}

    def fits(position: int) -> bool:
        plan = plan_dict(graph, planner.for_budget(full, path[position].peak), hardware=hardware.name)
        plans[position] = {k: v for k, v in plan.items() if not k.startswith("_")}
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


def add_figures(plan: dict[str, Any], config: Any, measured: bool = False) -> None:
    """Add `plan["eager"]`: the predicted (and, with `measured`, the measured) eager step under this plan.

    Called by `gpulint plan` after planning; `plan["_graph"]` is the traced graph. The model's module tree is
    built under fake tensors (no memory) to find the layers apply() would checkpoint.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gpulint.planner.config import load_factory
    from gpulint.planner.cost import node_times
    from gpulint.planner.hardware import load_hardware
    from gpulint.planner.trace import build_fake_model

    graph = plan["_graph"]
    hardware = load_hardware(plan["hardware"])
    times = node_times(graph, hardware)
    build_model = load_factory(config.model, config.base_dir, "plan.model")
    with FakeTensorMode(), torch.device("cpu"):
        structure = build_fake_model(build_model)
    public = {k: v for k, v in plan.items() if not k.startswith("_")}
    figures: dict[str, Any] = {}
    predicted = predict(graph, public, structure, times, hardware.allocation_rounding)
    budget = plan.get("budget_bytes")
    if budget is not None and predicted.peak_bytes > budget:
        # Eager mode keeps layer inputs and recomputes whole layers: pick the plan whose eager step fits.
        fitting = eager_fitting_plan(graph, structure, budget, hardware)
        if fitting is not None:
            figures = {"decisions": fitting["decisions"], "planned_for_bytes": fitting["budget_bytes"]}
            public = {**public, "eager": figures}
            predicted = predict(graph, public, structure, times, hardware.allocation_rounding)
    figures.update({
        "peak_bytes": predicted.peak_bytes,
        "step_time_s": predicted.step_time_s,
        "recompute_time_s": predicted.recompute_time_s,
        "layers": plan_regions(structure, eager_decisions(public))[0],
        "fits_budget": budget is None or predicted.peak_bytes <= budget,
    })
    plan["eager"] = figures
    public["eager"] = figures
    if measured:
        make_batch = load_factory(config.batch, config.base_dir, "plan.batch")
        loss_fn = load_factory(config.loss, config.base_dir, "plan.loss") if config.loss else None
        result = measure(build_model, make_batch, public, loss_fn=loss_fn, optimizer=config.optimizer,
                         dtype=config.dtype)
        rounding = 512 if result.device.startswith("cuda") else 1  # the device measured, not the target
        figures["measured"] = {
            "peak_bytes": result.peak_bytes,
            "step_time_s": result.step_time_s,
            "device": result.device,
            "predicted_peak_bytes": predict(graph, public, structure, rounding=rounding).peak_bytes,
        }
    plan["eager"] = figures
