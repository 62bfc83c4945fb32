"""The training script the rules' VALID and INVALID examples are written in.

`training_script(body)` is a complete script that defines `train(model, loader, optimizer, device)` and puts `body` in
its step loop, after `loss.backward()` and before `optimizer.step()`. Harnesses run these scripts as they are: the
fix-semantics tests (tests/rules/test_fix_semantics_*.py) on CPU tensors, and `bench/sync_debug_check.py` on a GPU
under PyTorch's sync debug mode. Both call `train` with a classifier, a loader of `(x, y)` batches and an optimizer.
"""

from __future__ import annotations

_SCRIPT = """import torch
import torch.nn.functional as F{header}


def train(model, loader, optimizer, device):
    total = 0.0
    for step, (x, y) in enumerate(loader):
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        out = model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
{body}
        optimizer.step()
        optimizer.zero_grad()
    return total
"""


def training_script(body: str, header: str = "") -> str:
    """The training script with `body` in its step loop, and `header` (imports, module-level names) after its
    imports."""
    indented = "\n".join("        " + line if line else "" for line in body.splitlines())
    return _SCRIPT.format(body=indented, header="\n" + header.rstrip("\n") if header else "")


_LIGHTNING_MODULE = """import torch
import lightning as L


class Classifier(L.LightningModule):
    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
{body}
        return loss
"""


def lightning_module(body: str) -> str:
    """A LightningModule whose `training_step` computes `loss` from `batch`, then runs `body`."""
    return _LIGHTNING_MODULE.format(body="\n".join("        " + line for line in body.splitlines()))
