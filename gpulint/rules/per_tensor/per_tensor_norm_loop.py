"""GPL102 per-tensor-norm-loop."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.rule import Invalid, Replace, RuleDocs
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


class PerTensorNormLoop(PerTensorRule):
    code = "GPL102"
    name = "per-tensor-norm-loop"
    message = (
        "one norm/reduction kernel per parameter tensor; `torch._foreach_norm` computes them all in a few launches"
    )
    # What `is_model_tensor_iterable` accepts: `*param*`/`*grad*` names (`ema_param_list`), state dicts, buffers.
    triggers = PARAM_TRIGGERS
    requires = (REDUCTION_WORDS,)  # a reported loop computes a reduction: `.norm(`, `torch.sum(`, `grad_norm(`

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        return super().may_report_in(code, name, class_name) and has_loop(PARAM_LOOP, code)
    fixable = True
    docs = RuleDocs(
        what_it_does="Flags a loop or comprehension over `parameters()`, gradients or `state_dict()` values that "
        "computes a norm or other reduction per tensor without reading it on the host (the values are stacked or "
        "summed on the device).",
        why_slow="Kernel launch count: every `torch.norm(p.grad)` is a separate launch of a tiny kernel (plus the "
        "`pow`/`add` around it). With hundreds of parameter tensors the step spends milliseconds of CPU time issuing "
        "launches that each keep the GPU busy for microseconds. `torch._foreach_norm` does the same work in a handful "
        "of multi-tensor launches.",
        example="total = torch.norm(torch.stack([torch.norm(p.grad, 2) for p in params]), 2)",
        use_instead="total = torch.norm(torch.stack(torch._foreach_norm([p.grad for p in params], 2)), 2)\n"
        "# or, when clipping anyway: total = torch.nn.utils.clip_grad_norm_(params, max_norm)",
        fix_safety="Unsafe, offered only for `torch.stack([torch.norm(x, ord) for ...])` (or `x.norm(ord)`): "
        "`torch._foreach_norm` is a private API, accepts only numeric orders (not `'fro'`/`'nuc'`), and its results "
        "can differ from per-tensor `norm` in the last bits because the reduction order differs.",
        false_positives="Reductions that are not per-step (a one-off parameter summary in a helper nobody calls per "
        "step); loops under a logging gate in the same function are not flagged.",
    )
    valid = (
        training_script("grads = [p.grad for p in model.parameters() if p.grad is not None]\n"
                        "total = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"),
        training_script("if step % 50 == 0:\n    total = sum(p.grad.norm() ** 2 for p in model.parameters())"),
        "import torch\n\ndef init_weights(model):\n    for p in model.parameters():\n        p.data /= p.data.norm()\n",
    )
    invalid = (
        Invalid(
            training_script("total = torch.norm(torch.stack([torch.norm(p.grad, 2) for p in model.parameters()]), 2)"),
            fixed=training_script("total = torch.norm(torch.stack(torch._foreach_norm([p.grad for p in model.parameters()], 2)), 2)"),
        ),
        Invalid(
            training_script("norms = torch.stack([p.grad.detach().norm() for p in model.parameters() if p.grad is not None])"),
            fixed=training_script("norms = torch.stack(torch._foreach_norm([p.grad.detach() for p in model.parameters() if p.grad is not None]))"),
        ),
        Invalid(training_script("sq = 0.0\nfor p in model.parameters():\n    sq = sq + p.grad.pow(2).sum()")),
        Invalid(training_script("l2 = sum(p.pow(2).sum() for p in model.parameters())")),
    )

    def visit_For(self, node: cst.For) -> None:
        scan = scan_model_tensor_for(node, self.context)
        if scan is not None and scan.kind == "norm":
            self._report_ungated(node.iter)

    def _visit_comprehension(self, node: cst.CSTNode) -> None:
        scan = scan_model_tensor_comprehension(node, self.context)
        if scan is not None and scan.kind == "norm":
            fix = self._foreach_fix(node)
            self._report_ungated(node, fix=fix, unsafe_fix=True)

    visit_ListComp = visit_GeneratorExp = visit_SetComp = visit_DictComp = _visit_comprehension

    def _foreach_fix(self, node: cst.CSTNode) -> list[Replace]:
        """`torch.stack([torch.norm(x, o) for p in ps])` -> `torch.stack(torch._foreach_norm([x for p in ps], o))`."""
        parent = self.context.parent(2)  # ListComp <- Arg <- Call
        if not (
            self._torch_bound
            and isinstance(node, cst.ListComp)
            and isinstance(parent, cst.Call)
            and self.context.resolve(parent.func) == "torch.stack"
            and parent.args
            and parent.args[0].value is node
        ):
            return []
        element = node.elt
        if not isinstance(element, cst.Call) or any(a.star or (a.keyword and a.keyword.value not in ("p", "ord")) for a in element.args):
            return []
        if self.context.resolve(element.func) in ("torch.norm", "torch.linalg.vector_norm"):
            tensor, orders = element.args[0].value if element.args else None, element.args[1:]
        elif isinstance(element.func, cst.Attribute) and element.func.attr.value == "norm":
            tensor, orders = element.func.value, element.args
        else:
            return []
        if tensor is None or len(orders) > 1:
            return []
        args = [cst.Arg(node.with_changes(elt=tensor))]
        if orders:
            args.append(cst.Arg(orders[0].value))
        call = cst.Call(cst.Attribute(cst.Name("torch"), cst.Name("_foreach_norm")), args)
        return [Replace(node, call)]
