"""Tiny models and factories shared by the planner tests (CPU, fp32, a few thousand parameters)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import model as example

TINY = example.GPTConfig(vocab_size=64, n_layer=2, n_head=2, d_model=32, seq_len=16, batch_size=2)


def tiny_gpt() -> nn.Module:
    return example.build_model(TINY)


def tiny_batch() -> dict[str, torch.Tensor]:
    return example.make_batch(TINY)


class MLP(nn.Module):
    """x[32, 8] -> Linear(8, 16, no bias) -> ReLU -> Linear(16, 4, no bias); loss = sum of the output."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16, bias=False)
        self.fc2 = nn.Linear(16, 4, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def mlp() -> nn.Module:
    return MLP()


def mlp_batch() -> torch.Tensor:
    return torch.randn(32, 8)


class DropoutMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 64)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(64, 64)
        self.fc3 = nn.Linear(64, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.tanh(self.fc2(self.drop(torch.relu(self.fc1(x))))))


def dropout_mlp() -> nn.Module:
    return DropoutMLP()


def dropout_batch() -> torch.Tensor:
    return torch.randn(64, 8)


class DataDependent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        return y[y > 0].sum()


def data_dependent() -> nn.Module:
    return DataDependent()


def vector_loss(output: torch.Tensor, batch: object) -> torch.Tensor:
    return output.sum(dim=0)


class Branchy(nn.Module):
    """Reads tensor values in forward (graph breaks for torch.compile): a branch on a sum, and `.item()`."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(32, 128), nn.Tanh(), nn.Linear(128, 32))
                                    for _ in range(3))
        self.head = nn.Linear(32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + layer(x)
        if x.sum() > 0:  # branch on a value
            x = torch.relu(x)
        scale = x.abs().mean().item()  # a host scalar
        return self.head(x / (1.0 + scale))


def branchy() -> nn.Module:
    return Branchy()


def branchy_batch() -> torch.Tensor:
    return torch.randn(256, 32, generator=torch.Generator().manual_seed(0))


class TruncNormalInit(MLP):
    """An initialiser that reads tensor values (trunc_normal_ calls `.item()`, as ViT's does): fake tensors
    cannot build it directly."""

    def __init__(self) -> None:
        super().__init__()
        nn.init.trunc_normal_(self.fc1.weight, std=0.02)


def trunc_normal_init() -> nn.Module:
    return TruncNormalInit()


class BranchBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(32, 128)
        self.out = nn.Linear(128, 32)

    def forward(self, x: torch.Tensor, positive: bool) -> torch.Tensor:
        h = self.fc(x)
        h = torch.tanh(h) if positive else torch.sigmoid(h)
        return x + self.out(h)


class BranchInLayers(nn.Module):
    """Every layer takes the branch that the sign of the batch's mean selects (read once, in the root)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(BranchBlock() for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positive = bool(x.mean() > 0)
        for layer in self.layers:
            x = layer(x, positive)
        return x.square().mean()


def branch_in_layers() -> nn.Module:
    return BranchInLayers()


def positive_batch() -> torch.Tensor:
    return torch.rand(256, 32, generator=torch.Generator().manual_seed(0)) + 0.5


class FailsWhenRun(MLP):
    """Traces (the trace says it is compiling) but raises when really run, as a model with a runtime bug does."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.compiler.is_compiling():
            raise RuntimeError("boom at run time")
        return super().forward(x)


def fails_when_run() -> nn.Module:
    return FailsWhenRun()


# --- ops whose output shape depends on values (planned by replaying the shapes one real run gives) ---------------


class _SelectedRows(nn.Module):
    """Five residual MLP layers around a selection of rows whose count depends on the batch's values (`select`),
    gradients flowing through the kept rows."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(32, 128), nn.Tanh(), nn.Linear(128, 32))
                                    for _ in range(5))

    def select(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.select(x, x + self.layers[0](x))
        for layer in self.layers[1:]:
            h = h + layer(h)
        return h.square().mean()


class MaskedRows(_SelectedRows):
    """Keeps the rows whose first feature is positive (`h[keep]`)."""

    def select(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        h = h[x[:, 0] > 0]  # boolean mask from the batch's values
        return h


def masked_rows() -> nn.Module:
    return MaskedRows()


class NonzeroRows(_SelectedRows):
    """Gathers the rows `torch.nonzero` finds (a value-dependent count)."""

    def select(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        rows = torch.nonzero(x[:, 1] > -0.5).squeeze(1)  # how many: known only from the values
        return h.index_select(0, rows)


def nonzero_rows() -> nn.Module:
    return NonzeroRows()


class _MaskedGrad(torch.autograd.Function):
    """Identity forward; the backward keeps the gradient only where the input is positive, through `nonzero`:
    a value-dependent shape that only the backward has."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        flat = grad.reshape(-1)
        keep = torch.nonzero(x.reshape(-1) > 0).squeeze(1)
        return torch.zeros_like(flat).index_add(0, keep, flat.index_select(0, keep)).reshape(grad.shape)


class MaskedBackward(MLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(_MaskedGrad.apply(self.fc1(x))))


def masked_backward() -> nn.Module:
    return MaskedBackward()


_calls = {"shifting_batch": 0}


def shifting_batch() -> torch.Tensor:
    """A different number of rows at every call, as a loader with ragged batches gives."""
    _calls["shifting_batch"] += 1
    return torch.randn(64 + _calls["shifting_batch"], 32, generator=torch.Generator().manual_seed(0))


class MaskedBothWays(MaskedRows):
    """A boolean mask in the forward and a `nonzero` that only the backward runs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(_MaskedGrad.apply(x + self.layers[0](x)))


def masked_both_ways() -> nn.Module:
    return MaskedBothWays()


class ValueShapeOp(nn.Module):
    """One op whose output shape depends on the batch's values, with the gradient flowing through its result."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.kind = kind

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.fc(x))
        if self.kind == "masked_select":
            h = torch.masked_select(h, x > 0)
        elif self.kind == "unique":
            values, inverse, counts = torch.unique((x * 3).round(), return_inverse=True, return_counts=True)
            h = h[:, :4] * (values.numel() + inverse.float().mean() + counts.float().max())
        elif self.kind == "repeat_interleave":
            h = h.repeat_interleave((x[:, 0] > 0).long() + 1, dim=0)
        elif self.kind == "where":
            h = h[torch.where(x[:, 0] > 0)]
        return h.square().sum()


def value_shape_batch() -> torch.Tensor:
    return torch.randn(16, 16, generator=torch.Generator().manual_seed(0))


TINY_DEEPER = example.GPTConfig(vocab_size=64, n_layer=3, n_head=2, d_model=32, seq_len=16, batch_size=2)


def tiny_gpt_deeper() -> nn.Module:
    """TINY with one more layer: the head of a pull request that adds a layer (tests of the plans' delta)."""
    return example.build_model(TINY_DEEPER)


def tiny_batch_deeper() -> dict[str, torch.Tensor]:
    return example.make_batch(TINY_DEEPER)
