"""`gpulint.apply(model, plan)`: apply a plan to an eager model with selective activation checkpointing (SAC).

A plan lists the forward activations that backward needs, each addressed by (module path, aten op, call index
among that module's forward calls of the op in one training step; see address.py) and marked ``save`` or
``recompute``. ``apply`` wraps every *layer* that holds a ``recompute`` decision in non-reentrant
``torch.utils.checkpoint.checkpoint`` with a policy that MUST_SAVEs the planned saves, MUST_RECOMPUTEs the
planned recomputes and recomputes everything else (autograd never needed it kept).

Why layers and not the decision's own module: checkpoint always keeps a region's inputs, so a region must
contain both the producer and the consumers of a dropped activation. The layer is the shallowest module under a
container (``transformer.h.0`` for ``transformer.h.0.mlp.c_fc``).

**Applying a plan never fails a training run.** A decision that does not match the model is left out, with one
warning that names it (`AppliedPlan.left_out` lists them all with the reason):
- it names a module the model lacks, or has no eager address, or lies outside every layer (nothing to wrap);
- its op does not happen where it says (another model, or another program than the planned one);
- it would keep a tensor that the layer then writes in place (a router's ``topk`` divided with ``/=``): torch
  refuses such a cached tensor in the backward, so it is recomputed instead.
A layer's recompute leaves its buffers as the forward left them: BatchNorm in train mode updates its running
statistics when it runs, and the recompute runs it again, so the buffers are put back once the recompute is done.
In the first training step a layer runs fully recomputed (plain checkpointing: exact, and no more memory than the
plan) while its ops are counted and checked; from the next step on it uses the plan. Random ops recompute
with the RNG state preserved (``preserve_rng_state=True``), so masks and gradients equal the unplanned step's.

Counting restarts with each training step: a layer entered after a backward went through it starts a new step.
A later forward that misses planned ops of a checkpointed layer (it branched on tensor values another way) warns
once that the plan's figures do not hold for it. A plan with ``shapes`` (one per batch shape, see shapes.py)
switches decisions by the shapes of each forward's inputs.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

from gpulint.planner import planfile
from gpulint.planner.address import Address, ModuleStack, OpCounter, decision_address, layer_of
from gpulint.planner.errors import PlanMismatchError
from gpulint.planner.shapes import call_signature

_STATE_ATTR = "_gpulint_applied_plan"


@dataclass(frozen=True)
class Applied:
    """A plan decision with its eager address."""

    decision: planfile.Decision
    address: Address

    @property
    def id(self) -> str:
        return self.decision.id

    @property
    def action(self) -> str:
        return self.decision.action


@dataclass(frozen=True)
class LeftOut:
    """A decision `apply` did not apply, and why."""

    decision: planfile.Decision
    reason: str

    def describe(self) -> str:
        return f"{self.decision.describe()} ({self.reason})"


@dataclass(frozen=True)
class Known:
    """What the planner already knows of the model's eager step (from running it on fake tensors): every address
    of its forward and the addresses whose outputs are later written in place. With it, `apply` needs no first
    checking call per layer."""

    addresses: frozenset[Address]
    mutated: frozenset[Address]


def applicable(decisions: list[planfile.Decision]) -> list[Applied]:
    """The decisions that carry an eager address (a decision written without a call index has none)."""
    out = []
    for decision in decisions:
        address = decision_address(decision.module, decision.op, decision.call_index)
        if address is not None:
            out.append(Applied(decision, address))
    return out


def plan_regions(model: nn.Module, decisions: list[Applied]) -> tuple[list[str], list[Applied]]:
    """The layers to checkpoint (those holding a recompute decision) and the recompute decisions in no layer."""
    regions: set[str] = set()
    outside: list[Applied] = []
    for decision in decisions:
        if decision.action != "recompute":
            continue
        layer = layer_of(model, decision.address.module)
        if layer is None:
            outside.append(decision)
        else:
            regions.add(layer)
    return sorted(regions), outside


@dataclass
class _Plan:
    """The decisions of one input signature (the plan's top level, or one bucket of a bucketed plan)."""

    decisions: list[Applied]
    by_region: dict[str, list[Applied]]
    policy: dict[Address, CheckpointPolicy] = field(default_factory=dict)
    validated: set[str] = field(default_factory=set)  # regions whose decisions were checked
    expected: dict[str, set[Address]] = field(default_factory=dict)  # region -> planned addresses its check met
    checking: dict[str, _Checking] = field(default_factory=dict)  # regions checked in this (their first) step


@dataclass
class AppliedPlan:
    """What `apply` installed on a model; `remove()` restores the model."""

    model: nn.Module
    regions: list[str]  # layer paths wrapped in selective checkpointing
    left_out: list[LeftOut] = field(default_factory=list)  # decisions not applied, with the reason
    _plans: dict[Any, _Plan] = field(default_factory=dict)  # input signature (None: the top level) -> its plan
    _key: Any = None  # the signature in use
    _stack: ModuleStack | None = None
    _counter: OpCounter = field(default_factory=OpCounter)
    _new_step: bool = True  # a backward ran since the last layer call: counting starts again
    _hits: set[Address] = field(default_factory=set)  # planned addresses met since the step started
    _ran: set[str] = field(default_factory=set)  # layers run with the plan's policy since the step started
    _warned: set[str] = field(default_factory=set)
    _originals: dict[str, Callable[..., Any]] = field(default_factory=dict)
    _restore_cache: list[tuple[Any, bool]] = field(default_factory=list)  # configs whose use_cache apply turned off

    @property
    def decisions(self) -> list[Applied]:
        """The decisions in use (those of the current input signature)."""
        return self._plans[self._key].decisions

    @property
    def validated(self) -> bool:
        """Every checkpointed layer of the decisions in use was checked against the running model (a layer's check
        spans its first step and is settled when the next step starts, or now, when this is asked)."""
        self._settle_checks()
        plan = self._plans[self._key]
        return set(plan.by_region) <= plan.validated

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

    # --- called by the wrapped forwards ---------------------------------------------------------------------------

    def _select(self, sig: Any) -> None:
        """Use the decisions planned for input signature `sig`, else the plan's top level (its largest shape)."""
        if sig not in self._plans:
            self._warn_once("shape", f"gpulint: inputs of shapes {list(sig)} were not planned; using the largest "
                                     "shape's plan")
            sig = None
        self._key = sig

    def _enter_region(self) -> None:
        if self._new_step:
            self._new_step = False
            self._counter = OpCounter()
            self._hits, self._ran = set(), set()
            self._settle_checks()

    def _settle_checks(self) -> None:
        """Settle the decisions of the layers checked during the step that just ended (all their calls ran)."""
        for plan in self._plans.values():
            for region, checking in list(plan.checking.items()):
                self._left_out(_checked(plan, region, checking.seen, checking.mutated), "run")
            plan.checking.clear()

    def _mark_step_end(self, _grad: Any) -> None:
        """The backward reached a checkpointed layer's output: the step's forward is over."""
        if not self._new_step:
            self._new_step = True
            self._check_paths()

    def _check_paths(self) -> None:
        """Warn (once) when the forward did not run planned ops that the layers' checked first step ran: the model
        branched on tensor values, and the plan's figures do not hold for this step."""
        plan = self._plans[self._key]
        missing = {a for region in self._ran for a in plan.expected.get(region, ())} - self._hits
        if missing:
            first = min(missing, key=lambda a: (a.module, a.op, a.call_index))
            self._warn_once("path", f"gpulint: this forward took another path than the one planned "
                                    f"({first.describe()} did not run; {len(missing)} planned op(s) missed): the plan's "
                                    "peak and time do not hold for it")

    def _left_out(self, items: list[LeftOut], when: str) -> None:
        """Record decisions left out; warn with the first of them (once at `apply`, once when the layers run)."""
        fresh = [item for item in items if item not in self.left_out]
        if not fresh:
            return
        self.left_out.extend(fresh)
        self._warn_once(f"left out at {when}",
                        f"gpulint: left out {len(fresh)} plan decision(s) that do not match this model (first: "
                        f"{fresh[0].describe()}; applied_plan(model).left_out lists all); the plan's figures assume "
                        "them: re-run `gpulint plan` to re-predict")

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, stacklevel=3)

    # --- the checkpoint policies --------------------------------------------------------------------------------

    def _policy_fn(self, ctx, op, *args, **kwargs) -> CheckpointPolicy:
        address = self._counter.address(self._stack.current, op)
        plan = self._plans[self._key]
        policy = plan.policy.get(address)
        if policy is not None:
            self._hits.add(address)
        if op._schema.is_mutable:
            # Never cache an in-place op (dropout's div_): its caller goes on using the argument it mutated, not
            # the op's return value, so a cached result would be ignored by the recompute. Recomputing it is
            # exact (RNG state preserved) and cheap (elementwise).
            return CheckpointPolicy.PREFER_RECOMPUTE
        return policy or CheckpointPolicy.PREFER_RECOMPUTE


class _Checking:
    """The policy of a layer's first call: recompute everything (plain checkpointing) while counting the layer's
    ops, and noting which op's output a later in-place op writes."""

    def __init__(self, state: AppliedPlan) -> None:
        self.state = state
        self.seen: set[Address] = set()
        self.mutated: set[Address] = set()
        self.made_by: dict[StorageWeakRef, Address] = {}

    def __call__(self, ctx, op, *args, **kwargs) -> CheckpointPolicy:
        address = self.state._counter.address(self.state._stack.current, op)
        self.seen.add(address)
        outputs = [t for t in _flat_tensors(ctx.op_output)]
        if op._schema.is_mutable:
            for tensor in outputs:
                maker = self.made_by.get(StorageWeakRef(tensor.untyped_storage()))
                if maker is not None:
                    self.mutated.add(maker)
        else:
            for tensor in outputs:
                self.made_by.setdefault(StorageWeakRef(tensor.untyped_storage()), address)
        return CheckpointPolicy.PREFER_RECOMPUTE


def _flat_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _flat_tensors(item)]
    return []


def _policy_of(decisions: list[Applied]) -> dict[Address, CheckpointPolicy]:
    # SAC decides per op, not per output: an op with one output planned saved (layer norm's mean) keeps all.
    policy: dict[Address, CheckpointPolicy] = {}
    for decision in decisions:
        if decision.action == "save":
            policy[decision.address] = CheckpointPolicy.MUST_SAVE
        else:
            policy.setdefault(decision.address, CheckpointPolicy.MUST_RECOMPUTE)
    return policy


def _checked(plan: _Plan, region: str, seen: set[Address], mutated: set[Address]) -> list[LeftOut]:
    """Settle a region's decisions against what its first call ran: the missing and the mutated are left out."""
    left_out = []
    kept = []
    for decision in plan.by_region.get(region, []):
        if decision.address not in seen:
            left_out.append(LeftOut(decision.decision, "its op does not happen there"))
        elif decision.action == "save" and decision.address in mutated:
            left_out.append(LeftOut(decision.decision, "the layer writes its output in place later: recomputed"))
        else:
            kept.append(decision)
    plan.by_region[region] = kept
    plan.policy = _policy_of([d for decisions in plan.by_region.values() for d in decisions])
    plan.validated.add(region)
    plan.expected[region] = {d.address for d in kept}
    return left_out


def apply(model: nn.Module, plan: str | Path | Mapping[str, Any] | planfile.Plan, *,
          known: Known | None = None) -> nn.Module:
    """Install the plan's selective activation checkpointing on `model` (in place) and return `model`.

    `plan` is a path to a ``gpulint-plan.json``, its loaded dict, or a `planfile.Plan`. A plan file that cannot be
    read raises PlanFileError (one line). Decisions that do not match the model are left out with a warning (see
    the module docstring); nothing else about the model can make it fail. `known` (the planner's record of the
    model's eager step) settles the decisions at once instead of on each layer's first call.
    Undo with ``gpulint.planner.eager_apply.remove(model)``.
    """
    if not isinstance(model, nn.Module):
        raise PlanMismatchError(f"gpulint.apply expects an nn.Module, got {type(model).__name__}")
    if _STATE_ATTR in model.__dict__:
        raise PlanMismatchError("a gpulint plan is already applied to this model; remove(model) first")
    plan = planfile.coerce(plan)
    state = AppliedPlan(model, regions=[])
    signatures = {None: plan.eager_decisions()}
    signatures.update({tuple(tuple(s) for s in shape.signature): shape.decisions for shape in plan.shapes})
    modules = dict(model.named_modules())
    left_out: list[LeftOut] = []
    regions: set[str] = set()
    for sig, decisions in signatures.items():
        usable = []
        for decision in decisions:
            address = decision_address(decision.module, decision.op, decision.call_index)
            if address is None:
                if decision.action == "recompute":
                    left_out.append(LeftOut(decision, "no eager address"))
            elif address.module not in modules:
                left_out.append(LeftOut(decision, f"the model has no module '{address.module}'"))
            else:
                usable.append(Applied(decision, address))
        wrapped, outside = plan_regions(model, usable)
        left_out += [LeftOut(d.decision, "outside every layer: stays saved in eager mode") for d in outside]
        by_region: dict[str, list[Applied]] = {}
        for decision in usable:
            layer = layer_of(model, decision.address.module)
            if layer in wrapped:
                by_region.setdefault(layer, []).append(decision)
        state._plans[sig] = _Plan(usable, by_region, _policy_of([d for ds in by_region.values() for d in ds]))
        regions.update(wrapped)
    state.regions = sorted(regions)
    if known is not None:
        for entry in state._plans.values():
            for region in list(entry.by_region):
                left_out += _checked(entry, region, set(known.addresses), set(known.mutated))
    state._stack = ModuleStack(model)
    if state.regions:
        state._restore_cache = disable_kv_cache(model)
        if state._restore_cache:
            warnings.warn("gpulint: turned off the model's KV cache (use_cache=False) for checkpointing", stacklevel=2)
    for path in state.regions:
        _wrap_region(state, path)
    _wrap_root(state)
    model.__dict__[_STATE_ATTR] = state
    state._left_out(left_out, "apply")
    return model


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


def _checkpointed_forward(state: AppliedPlan, path: str, inner: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    if not torch.is_grad_enabled():
        return inner(*args, **kwargs)
    state._enter_region()
    plan = state._plans[state._key]
    kwargs = _without_kv_cache(kwargs)
    if path in plan.by_region and path not in plan.validated:
        # The layer's first step: every call of it runs fully recomputed while its ops are counted; its decisions
        # are settled when the next step starts (a layer may run several times in one step).
        policy = plan.checking.setdefault(path, _Checking(state))
    else:
        policy = state._policy_fn
    context_fn = functools.partial(create_selective_checkpoint_contexts, policy)
    layer = functools.partial(_run_layer, state.model.get_submodule(path), inner)
    out = checkpoint(layer, *args, use_reentrant=False, context_fn=context_fn, preserve_rng_state=True, **kwargs)
    if not isinstance(policy, _Checking):
        state._ran.add(path)
    first = next((t for t in _flat_tensors(out) if t.requires_grad), None)
    if first is not None:
        first.register_hook(state._mark_step_end)  # the backward reaching this layer ends the step
    return out


def _run_layer(module: nn.Module, inner: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A checkpointed layer's forward. Run again by the backward (the recompute), it puts the layer's buffers back
    as they were: BatchNorm's running statistics must count each step once, as without the plan."""
    if torch._C._current_graph_task_id() == -1:  # the forward
        return inner(*args, **kwargs)
    buffers = [b for b in module.buffers() if b is not None]
    with torch.no_grad(), _disable_current_modes():  # outside the checkpoint's own dispatch mode: not recomputed ops
        kept = [b.clone() for b in buffers]
    try:
        return inner(*args, **kwargs)
    finally:
        with torch.no_grad(), _disable_current_modes():
            for buffer, value in zip(buffers, kept):
                buffer.copy_(value)


def _planned_forward(state: AppliedPlan, inner: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    if len(state._plans) > 1 and torch.is_grad_enabled():
        state._select(call_signature(args, kwargs))
    return inner(*args, **kwargs)


def _wrap_region(state: AppliedPlan, path: str) -> None:
    module = state.model.get_submodule(path)
    _set_forward(state, path, module, functools.partial(_checkpointed_forward, state, path, module.forward))


def _wrap_root(state: AppliedPlan) -> None:
    _set_forward(state, "", state.model, functools.partial(_planned_forward, state, state.model.forward))
