"""GPL502 foreach-disabled."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.rule import Invalid, Replace, Rule, RuleDocs
from gpulint.rules.common import is_false, keyword_arg
from gpulint.rules.examples import training_script


def _without_arg(call: cst.Call, removed: cst.Arg) -> cst.Call:
    """`call` without the argument `removed`, keeping the commas and spacing of the others valid."""
    args = [arg for arg in call.args if arg is not removed]
    if args and call.args[-1] is removed:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


class ForeachDisabled(Rule):
    code = "GPL502"
    gpu_only = True  # kernel launches saved: none on the CPU
    name = "foreach-disabled"
    message = "`foreach=False` makes the optimizer (or clipping) launch kernels one tensor at a time"
    triggers = ("foreach=False", "foreach = False")
    fixable = True
    reports_anywhere = True  # a setting, wherever it is set
    docs = RuleDocs(
        what_it_does="Flags `foreach=False` passed to an optimizer, `clip_grad_norm_` or any other call that accepts "
        "it.",
        why_slow="Kernel launch count: the single-tensor path runs each elementwise step of the update (Adam: about "
        "ten ops) as its own launch for every parameter tensor. The default (`foreach=None`) picks the multi-tensor "
        "path on CUDA, which applies each op to every tensor in a few launches.",
        example="optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, foreach=False)",
        use_instead="optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)  # or fused=True on CUDA",
        fix_safety="Unsafe: the fix removes the argument. The multi-tensor path holds intermediate results for a whole "
        "group of tensors at once, so peak memory grows by up to about one copy of the parameters (the usual reason "
        "for `foreach=False`), and results can differ from the per-tensor path in the last bits.",
        false_positives="Memory-bound runs where `foreach=False` is set on purpose to cut the optimizer's peak: add "
        "`# noqa: GPL502`.",
    )
    valid = (
        "import torch\n\noptimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)\n",
        "import torch\n\noptimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, foreach=True)\n",
    )
    invalid = (
        Invalid(
            "import torch\n\noptimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, foreach=False)\n",
            fixed="import torch\n\noptimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)\n",
        ),
        Invalid(
            training_script("torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False)"),
            fixed=training_script("torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"),
        ),
        Invalid(
            "import torch\n\nopt = torch.optim.SGD(\n    model.parameters(),\n    foreach=False,\n    lr=0.1,\n)\n",
            fixed="import torch\n\nopt = torch.optim.SGD(\n    model.parameters(),\n    lr=0.1,\n)\n",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        arg = keyword_arg(node, "foreach")
        if arg is not None and is_false(arg.value) and not self.context.in_tests \
                and not self.context.outside_the_program():
            self.report(arg, when="always", fix=[Replace(node, _without_arg(node, arg))], unsafe_fix=True)
