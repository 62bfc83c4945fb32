"""Eager addresses: how a plan names an op in a model's eager forward, and how a running model is counted.

An address is (module path, op, call index): the innermost module running the op, the aten op in its functional
spelling (`op_key`), and its index among that module's calls of that op in one training step. The planner writes
addresses into plan decisions; `gpulint.apply` counts the ops of the running model the same way (`ModuleStack`,
`OpCounter`) to find them. Layers (`layer_of`) are the regions eager mode can checkpoint.

Importing this module does not import torch.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from gpulint.planner.errors import PlanFileError

_OP_NAME = re.compile(r"^(?:(?P<ns>[A-Za-z_][A-Za-z0-9_]*)\.)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\.(?P<overload>[A-Za-z0-9_]+))?$")

# In-place overloads whose functional twin has another overload name.
_FUNCTIONAL_OVERLOADS = {"aten.bernoulli.float": "aten.bernoulli.p"}


@functools.lru_cache(maxsize=4096)
def op_key(op: Any) -> str:
    """An aten op's name as the plan's functionalized graph spells it, whether eager ran it in place or not.

    The plan's graph is functionalized (``aten.div.Scalar``, ``aten.relu.default``) while eager may run the
    in-place forms (``aten.div_.Scalar``, ``aten.relu_.default``); both are keyed by the functional name.
    """
    text = str(op)
    match = _OP_NAME.match(text)
    if match is None:
        raise PlanFileError(f"malformed op name {text!r} in plan (expected like 'aten.mm.default')")
    name = match["name"]
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    key = f"{match['ns'] or 'aten'}.{name}.{match['overload'] or 'default'}"
    return _FUNCTIONAL_OVERLOADS.get(key, key)


@dataclass(frozen=True)
class Address:
    """Where an activation is produced: the innermost module running the op, the op, and its call index there."""

    module: str
    op: str  # op_key() form
    call_index: int

    def describe(self) -> str:
        return f"{self.op} call {self.call_index} in module '{self.module or '<root>'}'"


def decision_address(module: str, op: str, call_index: int | None) -> Address | None:
    """The address of a plan decision, or None when it has none (a tuple element, or no call index written)."""
    if call_index is None or op == "getitem":
        return None
    return Address(module, op_key(op), call_index)


def layer_of(model: Any, module_path: str) -> str | None:
    """The shallowest ancestor-or-self of `module_path` whose parent is a container (a layer), or None.

    Eager mode checkpoints layers, not single modules: checkpoint always keeps a region's inputs, so a region must
    hold both the producer and the consumers of a dropped activation (`transformer.h.0` for `transformer.h.0.mlp`).
    """
    from torch import nn

    if not module_path:
        return None
    containers = (nn.ModuleList, nn.ModuleDict, nn.Sequential)
    parts = module_path.split(".")
    parent = model
    for depth, name in enumerate(parts):
        child = parent._modules.get(name)
        if child is None:
            return None
        if isinstance(parent, containers) and len(parent._modules) > 1:
            return ".".join(parts[: depth + 1])
        parent = child
    return None


def graph_addresses(graph: Any, indices: list[int]) -> list[Address | None]:
    """The eager addresses of saved nodes of a planner JointGraph, for writing plan decisions.

    A saved view or tuple element (FX ``view``/``getitem`` of an addmm or a layer norm) is addressed by the
    forward op that allocated its storage: that is the op eager mode runs and the checkpoint policy can keep,
    and keeping it costs nothing more (the view's bytes are its base's). A view of a parameter or an input
    (``t`` of a weight) keeps its own address. A node with no aten op (a getitem of a parameter) has None.
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
        addresses.append(decision_address(node.module, node.op, node.call_index))
    return addresses


class ModuleStack:
    """The path of the innermost module running, kept by forward pre/post hooks on every submodule."""

    def __init__(self, model: Any) -> None:
        self.paths: list[str] = [""]
        self.handles = []
        for path, module in model.named_modules():
            if not path:
                continue
            self.handles.append(module.register_forward_pre_hook(functools.partial(self._enter, path)))
            # always_call: checkpoint's early stop raises inside a recompute; the stack must still unwind.
            self.handles.append(module.register_forward_hook(functools.partial(self._exit, path), always_call=True))

    def _enter(self, path: str, module: Any, args: Any) -> None:
        self.paths.append(path)

    def _exit(self, path: str, module: Any, args: Any, output: Any) -> None:
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


class OpCounter:
    """Call index of each (module, op) within one training step."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = defaultdict(int)

    def next(self, module: str, op: str) -> int:
        index = self.counts[(module, op)]
        self.counts[(module, op)] = index + 1
        return index

    def address(self, module: str, op: Any) -> Address:
        key = op_key(op)
        return Address(module, key, self.next(module, key))
