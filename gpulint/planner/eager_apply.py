"""`gpulint.apply(model, plan)`: apply a plan to an eager model with selective activation checkpointing (SAC).

A plan lists the forward activations that backward needs, each addressed by (module path, aten op, call index
among that module's forward calls of the op; see address.py) and marked ``save`` or ``recompute``. ``apply``
wraps every *layer* that holds a ``recompute`` decision in non-reentrant ``torch.utils.checkpoint.checkpoint``
with a policy that MUST_SAVEs the planned saves, MUST_RECOMPUTEs the planned recomputes and recomputes
everything else (autograd never needed it kept).

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
inputs.
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
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import (
    SAC_IGNORED_OPS,
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

from gpulint.planner import planfile
from gpulint.planner.address import Address, ModuleStack, OpCounter, decision_address, layer_of
from gpulint.planner.errors import PlanMismatchError
from gpulint.planner.shapes import call_signature

_STATE_ATTR = "_gpulint_applied_plan"

# Plan ops with no one-to-one eager counterpart, never matched against the eager forward: `getitem` (an FX tuple
# projection, not an op) and CPU dropout (traced as one native_dropout; eager CPU runs bernoulli_, div_, mul).
_UNMATCHED_OPS = {"getitem", "aten.native_dropout.default"}


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


def applicable(decisions: list[planfile.Decision]) -> list[Applied]:
    """The decisions that carry an eager address (a decision written without a call index has none)."""
    out = []
    for decision in decisions:
        address = decision_address(decision.module, decision.op, decision.call_index)
        if address is not None:
            out.append(Applied(decision, address))
    return out

class _ValidationMode(TorchDispatchMode):
    """Records the address of every op of one forward pass, to check the plan against the model."""

    def __init__(self, stack: ModuleStack) -> None:
        super().__init__()
        self.stack = stack
        self.counter = OpCounter()
        self.seen: set[Address] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func not in SAC_IGNORED_OPS:
            self.seen.add(self.counter.address(self.stack.current, func))
        return out


@dataclass
class AppliedPlan:
    """What `apply` installed on a model; `remove()` restores the model."""

    model: nn.Module
    decisions: list[Applied]
    regions: list[str]  # layer paths wrapped in selective checkpointing
    unapplied: list[Applied]  # recompute decisions outside any layer: kept saved
    validated: bool = False  # the decisions in use were all found in a forward
    _stack: ModuleStack | None = None
    _policy: dict[Address, CheckpointPolicy] = field(default_factory=dict)
    # input signature (None: the plan's top level) -> (decisions, policy); see gpulint/planner/shapes.py
    _shapes: dict[Any, tuple[list[Applied], dict[Address, CheckpointPolicy]]] = field(default_factory=dict)
    _validated: set[Any] = field(default_factory=set)
    _key: Any = None  # the signature whose decisions are in use
    _warned_unplanned_shape: bool = False
    _counter: OpCounter = field(default_factory=OpCounter)
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
        self._counter = OpCounter()
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
        address = self._counter.address(self._stack.current, op)
        if address in self._policy:
            self._hits.add(address)
        if op._schema.is_mutable:
            # Never cache an in-place op (dropout's div_): its caller goes on using the argument it mutated, not
            # the op's return value, so a cached result would be ignored by the recompute and the mask left
            # unscaled. Recomputing it is exact (RNG state preserved) and cheap (elementwise).
            return CheckpointPolicy.PREFER_RECOMPUTE
        return self._policy.get(address, CheckpointPolicy.PREFER_RECOMPUTE)


def plan_regions(model: nn.Module, decisions: list[Applied]) -> tuple[list[str], list[Applied]]:
    """The layers to checkpoint (those holding a recompute decision) and the recompute decisions in no layer."""
    regions: set[str] = set()
    unapplied: list[Applied] = []
    for decision in decisions:
        if decision.action != "recompute":
            continue
        layer = layer_of(model, decision.address.module)
        if layer is None:
            unapplied.append(decision)
        else:
            regions.add(layer)
    return sorted(regions), unapplied


def apply(model: nn.Module, plan: str | Path | Mapping[str, Any] | planfile.Plan) -> nn.Module:
    """Install the plan's selective activation checkpointing on `model` (in place) and return `model`.

    `plan` is a path to a ``gpulint-plan.json``, its loaded dict, or a `planfile.Plan`. Raises PlanMismatchError
    when the plan names modules the model lacks, and on the first forward when an addressed op does not happen.
    Undo with ``gpulint.planner.eager_apply.remove(model)``.
    """
    if not isinstance(model, nn.Module):
        raise PlanMismatchError(f"gpulint.apply expects an nn.Module, got {type(model).__name__}")
    if _STATE_ATTR in model.__dict__:
        raise PlanMismatchError("a gpulint plan is already applied to this model; remove(model) first")
    if any(getattr(module, "gradient_checkpointing", False) is True for module in model.modules()):
        raise PlanMismatchError(
            "the model has transformers' gradient checkpointing enabled; disable it (it would checkpoint twice)"
        )
    plan = planfile.coerce(plan)
    decisions = applicable(plan.eager_decisions())
    by_shape = {tuple(tuple(s) for s in shape.signature): applicable(shape.decisions) for shape in plan.shapes}
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
    state._stack = ModuleStack(model)
    if state.regions:
        state._restore_cache = disable_kv_cache(model)
        if state._restore_cache:
            warnings.warn("gpulint: turned off the model's KV cache (use_cache=False) for checkpointing", stacklevel=2)
    for path in state.regions:
        _wrap_region(state, path)
    _wrap_root(state)
    model.__dict__[_STATE_ATTR] = state
    return model


def _policy_of(decisions: list[Applied]) -> dict[Address, CheckpointPolicy]:
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

