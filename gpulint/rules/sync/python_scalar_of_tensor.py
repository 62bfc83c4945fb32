"""GPL402 python-scalar-of-tensor."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.rules.examples import training_script
from gpulint.rules.sync.helpers import SyncRule, known_false_positives


class PythonScalarOfTensor(SyncRule):
    code = "GPL402"
    name = "python-scalar-of-tensor"
    message = "`{func}(tensor)` converts a device tensor to a Python value every step: a blocking device-to-host copy"
    triggers = ("float(", "int(", "bool(", "math.")
    docs = RuleDocs(
        what_it_does="Flags `float(t)`, `int(t)`, `bool(t)` and `math.*(t)` (`math.isfinite(loss)`) on a tensor in "
        "code that runs every step and is not gated.",
        why_slow="Converting a tensor to a Python number calls `.item()` under the hood: a device-to-host copy that "
        "waits for the GPU to finish everything queued before it, so the CPU stops running ahead of the GPU.",
        example="for x, y in loader:\n    loss = F.cross_entropy(model(x), y)\n    loss.backward()\n"
        "    optimizer.step()\n    if not math.isfinite(loss):\n        raise RuntimeError(\"diverged\")",
        use_instead="Keep the check on the device (`torch.isfinite(loss)` accumulated, read every N steps), or read "
        "the value only under a logging gate.",
        fix_safety="No fix: keeping the value on the device changes its type (tensor instead of float) for every later "
        "use.",
        false_positives=known_false_positives("Values gpulint cannot see are host values (a function's return value that is a Python float "
        "but named like `loss`): move the conversion or add `# noqa: GPL402`. `total += float(loss)` is reported by "
        "GPL2xx instead."),
    )
    valid = (
        training_script("lr = float(optimizer.param_groups[0][\"lr\"])"),
        training_script("n = int(x.shape[0])"),
        training_script("if step % 10 == 0:\n    print(float(loss))"),
        training_script("lr = optimizer.param_groups[0][\"lr\"]\nok = math.isfinite(lr)", header="import math"),
    )
    invalid = (
        Invalid(training_script("loss_f = float(loss)")),
        Invalid(training_script("ok = math.isfinite(loss)", header="import math")),
        Invalid(training_script("correct = int((model(x).argmax(1) == y).sum())")),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not node.args or node.args[0].keyword is not None:
            return
        if isinstance(func, cst.Name) and func.value in ("float", "int", "bool"):
            if len(node.args) != 1:
                return
            label = func.value
        else:
            resolved = self.context.resolve(func) or ""
            if not resolved.startswith("math."):
                return
            label = resolved
        if not self.tensors.is_tensor(node.args[0].value) or self.in_accumulator() or self.in_per_tensor_loop():
            return
        self.report(node, self.message.format(func=label))
