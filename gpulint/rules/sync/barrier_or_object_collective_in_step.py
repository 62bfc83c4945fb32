"""GPL421 barrier-or-object-collective-in-step."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.names import dotted_name, last_name, name_parts
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.rules.examples import training_script
from gpulint.rules.sync.helpers import SyncRule, known_false_positives

_BLOCKING_DIST = frozenset(
    {
        "barrier", "monitored_barrier", "all_gather_object", "broadcast_object_list", "gather_object",
        "scatter_object_list",
    }
)


# Function-name parts of moving weights or optimizer state between processes or memories (`_broadcast_to_vllm`,
# `sync_weights`, `offload_states`): a barrier there completes the transfer and is required.
_WEIGHT_TRANSFER_PARTS = frozenset({"weight", "weights", "broadcast", "offload", "reload", "vllm"})
_BARRIERS = frozenset({"barrier", "monitored_barrier", "wait_for_everyone"})


class BarrierOrObjectCollectiveInStep(SyncRule):
    code = "GPL421"
    name = "barrier-or-object-collective-in-step"
    message = "`{name}()` in the training step stalls every rank on the host until all ranks arrive, every step"
    triggers = ("barrier", "_object", "wait_for_everyone")
    docs = RuleDocs(
        what_it_does="Flags `dist.barrier()`, `monitored_barrier()`, `accelerator.wait_for_everyone()` and object "
        "collectives (`all_gather_object`, `broadcast_object_list`, `gather_object`, `scatter_object_list`) in code "
        "that runs every training step, ungated.",
        why_slow="A barrier blocks the host until every rank reaches it, so the CPU stops queueing work and every rank "
        "runs at the pace of the slowest one. Object collectives pickle Python objects, copy them to the device, "
        "run the collective, copy back and unpickle: several host-device syncs per call.",
        example="for x, y in loader:\n    loss = F.cross_entropy(model(x), y)\n    loss.backward()\n"
        "    optimizer.step()\n    dist.barrier()",
        use_instead="Synchronise ranks only where it is needed (before saving a checkpoint, at epoch end); exchange "
        "tensors with tensor collectives instead of Python objects.",
        fix_safety="No fix: whether ranks must agree every step is a property of the algorithm.",
        false_positives=known_false_positives("Code that must agree on a Python object every step (a dynamic schedule): gate it or add "
        "`# noqa: GPL421`. A barrier in a function that moves weights or optimizer state (`_broadcast_to_vllm`, "
        "`sync_weights`, `offload_states`) is not flagged: it completes the transfer."),
    )
    valid = (
        training_script("if step % 1000 == 0:\n    dist.barrier()", header="import torch.distributed as dist"),
        ("import torch\nimport torch.distributed as dist\n\n\ndef broadcast_weights(model, engines):\n"
         "    for name, p in model.named_parameters():\n        dist.broadcast(p.data, 0)\n    dist.barrier()\n\n\n"
         "def train(model, loader, optimizer, engines):\n    for x in loader:\n        model(x).sum().backward()\n"
         "        optimizer.step()\n        broadcast_weights(model, engines)\n"),
        ("import torch\nimport torch.distributed as dist\n\n\ndef train(model, loader, optimizer, device):\n"
        "    for x, y in loader:\n        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n"
        "    dist.barrier()\n"),
    )
    invalid = (
        Invalid(training_script("dist.barrier()", header="import torch.distributed as dist")),
        Invalid(training_script("stats = [None, None]\ndist.all_gather_object(stats, {\"step\": step})",
                         header="import torch.distributed as dist")),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        method = last_name(func)
        if method in _BARRIERS and self._in_weight_transfer():
            return
        if method == "wait_for_everyone" and isinstance(func, cst.Attribute):
            self.report(node, self.message.format(name="accelerator.wait_for_everyone"))
            return
        if method not in _BLOCKING_DIST:
            return
        resolved = self.context.resolve(func) or ""
        if resolved.startswith("torch.distributed.") or (dotted_name(func) or "").startswith("dist."):
            self.report(node, self.message.format(name=resolved or method))

    def _in_weight_transfer(self) -> bool:
        function = self.context.enclosing_function()
        return function is not None and bool(name_parts(function.name.value) & _WEIGHT_TRANSFER_PARTS)
