"""What eager autograd saves for backward, by eager address: the activations a plan decides about.

`saved_activations(model, step)` runs `step()` once (forward and loss) and lists each tensor autograd keeps for the
backward, addressed as plan decisions are (address.py). Tests use it to write plans by hand; the planner uses it
to check a plan's addresses against what eager mode really saves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import SAC_IGNORED_OPS

from gpulint.planner.address import Address, ModuleStack, OpCounter

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
