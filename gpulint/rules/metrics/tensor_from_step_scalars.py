"""GPL206 tensor-from-step-scalars."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.rules.examples import training_script
from gpulint.rules.metrics.helpers import MetricRule, looks_like_tensor, scalar_read

_TENSOR_CONSTRUCTORS = frozenset({"torch.tensor", "torch.Tensor", "torch.FloatTensor", "torch.as_tensor", "torch.cuda.FloatTensor"})


class TensorFromScalars(MetricRule):
    code = "GPL206"
    name = "tensor-from-step-scalars"
    message = "`torch.tensor([...])` of tensors or values read from the device copies each one to the host and back; use `torch.stack`"
    triggers = ("tensor(", "Tensor(")
    docs = RuleDocs(
        what_it_does="Flags `torch.tensor([a, b])` in the training step when the elements are tensors or scalars just "
        "read from the device (`loss.item()`), e.g. to build a vector of metrics for an all_reduce or a log call.",
        why_slow="`torch.tensor` needs Python numbers: each tensor element is read with an implicit `.item()` (a "
        "host-device round trip that waits for the GPU), then the list is copied back to the device: 2 transfers "
        "and a full pipeline stall per element per step, where `torch.stack` is one kernel that never leaves the GPU.",
        example="stats = torch.tensor([loss.item(), acc.item()], device='cuda')\ndist.all_reduce(stats)",
        use_instead="`torch.stack([loss.detach(), acc.detach()])` (same device, no sync), then read it once when logging.",
        false_positives="Elements that are Python numbers (step counters, literals, `len(...)`) are not flagged; an "
        "element named like a loss whose value is in fact a Python float would be.",
    )
    valid = (
        training_script("stats = torch.stack([loss.detach(), out.sum().detach()])"),
        training_script("counts = torch.tensor([step, x.size(0)], device='cuda')"),
        "import torch\n\ndef setup(n):\n    return torch.tensor([0.5, n])\n",
    )
    invalid = (
        Invalid(training_script("stats = torch.tensor([loss.item(), x.size(0)], device='cuda')")),
        Invalid(training_script("stats = torch.tensor([loss, out.sum()])")),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not node.args or not isinstance(node.args[0].value, (cst.List, cst.Tuple)):
            return
        if self.context.resolve(node.func) not in _TENSOR_CONSTRUCTORS:
            return
        elements = node.args[0].value.elements  # type: ignore[union-attr]
        for element in elements:
            if not isinstance(element, cst.Element):
                continue
            value = element.value
            if scalar_read(self.context, value) is not None or looks_like_tensor(self.context, value):
                self.report(node)
                return
