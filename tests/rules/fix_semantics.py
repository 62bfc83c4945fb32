"""What the fix-semantics tests share: running a rule's example program, tiny models and batches, and the local
variables a `train` function leaves behind."""

from __future__ import annotations

import sys
from typing import Any, Callable

import torch


def execute(source: str, namespace: dict) -> None:
    """Run an example program: executing the rule's own examples is what these tests are for."""
    exec(compile(source, "example.py", "exec"), namespace)  # noqa: S102


class TinyModel(torch.nn.Module):
    """A model whose forward returns a scalar loss (for module-level example code: `model(batch).backward()`)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(4, 3)
        self.b = torch.nn.Linear(3, 1)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x))).pow(2).mean()


class TinyClassifier(torch.nn.Module):
    """A model whose forward returns logits over 3 classes: what `train(model, loader, optimizer, device)` of an
    example script (gpulint.rules.examples.training_script) expects."""

    def __init__(self, with_unused: bool = False) -> None:
        super().__init__()
        self.a = torch.nn.Linear(4, 3)
        self.b = torch.nn.Linear(3, 3)
        if with_unused:
            # A layer that had a gradient once (an earlier step reached it) and that the loss no longer reaches.
            self.unused = torch.nn.Linear(2, 2)
            for p in self.unused.parameters():
                p.grad = torch.ones_like(p)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def batches(count: int = 3) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`(x, y)` batches for a TinyClassifier: 5 samples of 4 features, labels in 0..2."""
    return [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(count)]


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
