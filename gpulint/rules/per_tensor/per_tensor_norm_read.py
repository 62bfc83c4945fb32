"""GPL101 per-tensor-norm-read."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.rules.examples import training_script
from gpulint.rules.per_tensor.helpers import (
    PARAM_LOOP,
    PARAM_TRIGGERS,
    REDUCTION_WORDS,
    PerTensorRule,
    has_loop,
    scan_model_tensor_comprehension,
    scan_model_tensor_for,
)


class PerTensorNormRead(PerTensorRule):
    code = "GPL101"
    name = "per-tensor-norm-read"
    message = (
        "this loop computes a norm per parameter and reads each one on the host: one kernel and one device-to-host "
        "sync per tensor; use `torch._foreach_norm` + `torch.stack(...)` and read once"
    )
    # What `is_model_tensor_iterable` accepts: `*param*`/`*grad*` names (`ema_param_list`), state dicts, buffers.
    triggers = PARAM_TRIGGERS
    requires = (REDUCTION_WORDS,)  # a reported loop computes a reduction: `.norm(`, `torch.sum(`, `grad_norm(`

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        return super().may_report_in(code, name, class_name) and has_loop(PARAM_LOOP, code)
    docs = RuleDocs(
        what_it_does="Flags a loop or comprehension over `parameters()`, `named_parameters()`, gradients or "
        "`state_dict()` values that computes a norm or other reduction for each tensor and reads the result on the host "
        "(`.item()`, `float()`, `print`, a logger call, an `if` on it).",
        why_slow="Each `p.grad.norm()` is one or two small kernel launches, and each `.item()` (or `if norm > x`) is a "
        "device-to-host copy that waits for the GPU to drain its queue. A model with 300 parameter tensors pays 300 "
        "round trips per step: the CPU can no longer run ahead, so the GPU idles between every launch.",
        example="norms = []\nfor name, p in model.named_parameters():\n    if p.grad is not None:\n"
        "        norms.append(p.grad.norm(2).item())",
        use_instead="grads = [p.grad for p in model.parameters() if p.grad is not None]\n"
        "norms = torch.stack(torch._foreach_norm(grads, 2)).tolist()  # a few launches, one transfer\n"
        "# or, for the total norm: total = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)",
        fix_safety="No automatic fix: the loop usually mixes the read with other work (clipping, logging by name), "
        "which needs a hand-written rewrite.",
        false_positives="Loops under a logging gate (`if step % 100 == 0:`) in the same function are not flagged; a "
        "helper that is only ever called under a gate in another function or module is, since the rule cannot see "
        "its callers there: add `# noqa: GPL101` on the `for` line.",
    )
    valid = (
        training_script("grads = [p.grad for p in model.parameters() if p.grad is not None]\n"
                        "norms = torch.stack(torch._foreach_norm(grads)).tolist()"),
        training_script("if step % 100 == 0:\n    for name, p in model.named_parameters():\n"
                        "        writer.add_scalar(name, p.grad.norm().item(), step)"),
        "import torch\n\ndef evaluate(model):\n    for p in model.parameters():\n        print(p.norm().item())\n",
        "import torch\n\nmodel = build()\nn_params = sum(p.numel() for p in model.parameters())\n",
        "import torch\n\ndef report(model):\n    for name, p in model.named_parameters():\n        print(name, p.shape)\n",
    )
    invalid = (
        Invalid(
            "import torch\n\ndef clip_gradients(model, clip):\n    norms = []\n"
            "    for name, p in model.named_parameters():\n        if p.grad is not None:\n"
            "            param_norm = p.grad.data.norm(2)\n            norms.append(param_norm.item())\n"
            "            clip_coef = clip / (param_norm + 1e-6)\n            if clip_coef < 1:\n"
            "                p.grad.data.mul_(clip_coef)\n    return norms\n"
        ),
        Invalid(training_script("for name, p in model.named_parameters():\n"
                                "    writer.add_scalar(f\"grad/{name}\", p.grad.norm().item(), step)")),
        Invalid(training_script("norms = [p.grad.norm().item() for p in model.parameters()]")),
        Invalid(training_script("for g in grads:\n    if torch.isnan(g).any():\n        raise RuntimeError(\"nan\")")),
    )

    def visit_For(self, node: cst.For) -> None:
        scan = scan_model_tensor_for(node, self.context)
        if scan is not None and scan.kind == "norm-read":
            self._report_ungated(node.iter)

    def _visit_comprehension(self, node: cst.CSTNode) -> None:
        scan = scan_model_tensor_comprehension(node, self.context)
        if scan is not None and scan.kind == "norm-read":
            self._report_ungated(node)

    visit_ListComp = visit_GeneratorExp = visit_SetComp = visit_DictComp = _visit_comprehension
