"""GPL201 item-accumulator."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.names import last_name
from gpulint.linter.rule import Invalid, Replace, RuleDocs
from gpulint.rules.examples import training_script
from gpulint.rules.metrics.helpers import (
    MetricRule,
    ScalarLocals,
    in_parameter_loop,
    same_target,
    scalar_read,
    scalar_reads_in,
)


class ItemAccumulator(MetricRule):
    code = "GPL201"
    name = "item-accumulator"
    message = "accumulating `{read}` on the host forces a device-to-host sync every step; accumulate the detached tensor and read it when you log"
    triggers = (".item(", "float(", "int(", ".numpy(")
    fixable = True
    docs = RuleDocs(
        what_it_does="Flags a running total built from host scalars read every step: `total += loss.item()`, "
        "`total += float(loss)`, `total = total + loss.item()`, or `v = loss.item()` then `total += v` (reported at the "
        "read), where the read is not gated to a logging interval.",
        why_slow="Each `.item()` / `float(tensor)` is a device-to-host copy that waits for every kernel queued before it, "
        "so the CPU can no longer run ahead of the GPU: one host-device round trip per step, usually only to print an "
        "average every N steps. Summing on the device costs one tiny add kernel and no wait.",
        example="total = 0.0\nfor x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n"
        "    optimizer.step()\n    total += loss.item()\n    if step % 100 == 0:\n        print(total / 100)",
        use_instead="`total += loss.detach()` (a device tensor) and read it once under the logging gate: "
        "`print(total.item() / 100)`.",
        fix_safety="Unsafe: `x.item()` / `float(x)` becomes `x.detach()`, so the total becomes a 0-d tensor. Values are "
        "the same (`float(total)` matches), but code that serialises the total (json), formats it with `%d`, compares "
        "it (`if total > best` then syncs) or expects an int from `int(x)` must read it with `.item()` where it is used.",
        false_positives="A tensor that is already on the CPU (gpulint follows `.cpu()`/`.tolist()` within a function); a "
        "loop that is not the training step but is called from it with a name gpulint cannot see is cold.",
    )
    valid = (
        training_script("total += loss.detach()\nif step % 100 == 0:\n    print(total.item() / 100)"),
        training_script("if step % 100 == 0:\n    total += loss.item()"),
        training_script("host = loss.detach().cpu()\ntotal += host.item()"),
        training_script("total += x.size(0)"),
        training_script("sqsum = 0.0\nfor p in model.parameters():\n    sqsum += (p.grad ** 2).sum().item()"),
        "import torch\n\ndef evaluate(model, loader, criterion):\n    total = 0.0\n    with torch.no_grad():\n"
        "        for x, y in loader:\n            total += criterion(model(x), y).item()\n    return total\n",
    )
    invalid = (
        Invalid(training_script("total += loss.item()"), fixed=training_script("total += loss.detach()")),
        Invalid(training_script("total += float(loss)"), fixed=training_script("total += loss.detach()")),
        Invalid(training_script("total = total + loss.item()"), fixed=training_script("total = total + loss.detach()")),
        Invalid(training_script("total += x.size(0) * loss.item()")),
        Invalid(training_script("step_loss = loss.detach().clone().item()\ntotal += step_loss")),
        Invalid(training_script("total += loss.detach().cpu().numpy()")),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self.scalar_locals = ScalarLocals(self)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign)):
            self._check(node.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if (
            len(node.targets) == 1
            and isinstance(value, cst.BinaryOperation)
            and isinstance(value.operator, cst.Add)
            and same_target(node.targets[0].target, value.left)
        ):
            self._check(value.right)
        self.scalar_locals.enter(node)

    def leave_Assign(self, node: cst.Assign) -> None:
        self.scalar_locals.leave(node)

    def visit_Call(self, node: cst.Call) -> None:
        self.scalar_locals.note(node)

    def _check(self, value: cst.BaseExpression) -> None:
        direct = scalar_read(self.context, value)
        reads = [direct] if direct is not None else scalar_reads_in(self.context, value)
        if not reads:
            self.scalar_locals.report_reads_in(value, self.message)
            return
        fix = []
        if direct is not None and last_name(direct.func) in ("item", "float", "int"):
            # `t.item()` / `float(t)` -> `t.detach()`; a `.cpu().numpy()` copy has no one-token replacement.
            tensor = direct.func.value if isinstance(direct.func, cst.Attribute) else direct.args[0].value
            fix = [Replace(direct, cst.Call(func=cst.Attribute(value=tensor, attr=cst.Name("detach"))))]
        if in_parameter_loop(self.context.ancestors):
            return
        read = self.context.module.code_for_node(reads[0])
        self.report(value, self.message.format(read=read), fix=fix, unsafe_fix=True)
