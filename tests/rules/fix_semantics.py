"""What the fix-semantics tests share: running a rule's example program, a tiny model, and the local variables a
`train` function leaves behind."""

from __future__ import annotations

import sys
from typing import Any, Callable

import torch


def execute(source: str, namespace: dict) -> None:
    """Run an example program: executing the rule's own examples is what these tests are for."""
    exec(compile(source, "example.py", "exec"), namespace)  # noqa: S102


class TinyModel(torch.nn.Module):
    def __init__(self, with_unused: bool = False) -> None:
        super().__init__()
        self.a = torch.nn.Linear(4, 3)
        self.b = torch.nn.Linear(3, 1)
        if with_unused:
            # A layer that had a gradient once (an earlier step reached it) and that the loss no longer reaches.
            self.unused = torch.nn.Linear(2, 2)
            for p in self.unused.parameters():
                p.grad = torch.ones_like(p)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x))).pow(2).mean()


def train_locals(train: Callable[..., Any], *args: Any) -> dict:
    """Call an example's `train(*args)` and return the local variables it had when it returned."""
    captured: dict = {}

    def on_event(frame, event, arg):
        if event == "return" and frame.f_code.co_name == "train" and frame.f_code.co_filename == "example.py":
            captured.update(frame.f_locals)

    sys.setprofile(on_event)
    try:
        train(*args)
    finally:
        sys.setprofile(None)
    return captured
