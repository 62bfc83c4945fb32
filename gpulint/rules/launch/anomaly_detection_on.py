"""GPL506 anomaly-detection-on."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.rule import Invalid, Replace, Rule, RuleDocs
from gpulint.rules.common import is_false, is_true, keyword_arg
from gpulint.rules.launch.helpers import under_any_if


class AnomalyDetectionOn(Rule):
    code = "GPL506"
    name = "anomaly-detection-on"
    message = "autograd anomaly detection is switched on unconditionally: it slows every backward pass and syncs"
    triggers = ("detect_anomaly",)
    fixable = True
    reports_anywhere = True  # a setting, wherever it is set
    docs = RuleDocs(
        what_it_does="Flags `torch.autograd.set_detect_anomaly(True)`, `torch.autograd.detect_anomaly()` and a "
        "`detect_anomaly=True` argument to a framework (Lightning's `Trainer`, torchtnt's `AutoUnit`) outside test "
        "files, unless they sit under an `if` (a debug flag), in a function the training program never calls, or at "
        "the top of a script that trains nothing beside the project's training scripts (an evaluation script).",
        why_slow="Anomaly mode records a Python stack trace for every autograd node in the forward pass and checks "
        "every backward output for NaN, which reads values back to the host: backward runs several times slower and "
        "synchronizes the device repeatedly.",
        example="torch.autograd.set_detect_anomaly(True)",
        use_instead="if args.detect_anomaly:\n    torch.autograd.set_detect_anomaly(True)",
        fix_safety="Unsafe, offered for `set_detect_anomaly(True)` and `detect_anomaly=True`: the fix turns it off "
        "(`False`). Values are unchanged, but a NaN in backward no longer raises with the forward trace that produced "
        "it.",
        false_positives="Debugging scripts that are never run for real training: add `# noqa: GPL506`.",
    )
    valid = (
        "import torch\n\nif args.debug:\n    torch.autograd.set_detect_anomaly(True)\n",
        "import torch\n\ntorch.autograd.set_detect_anomaly(False)\n",
        "import torch\n\ntorch.autograd.set_detect_anomaly(args.debug)\n",
        "def Trainer(**settings):\n    return settings\n\n\ntrainer = Trainer(max_epochs=3, detect_anomaly=args.debug)\n",
        # a debugging helper the training never calls
        "import torch\n\n\ndef debug_step(model, batch):\n    torch.autograd.set_detect_anomaly(True)\n"
        "    model(batch).sum().backward()\n\n\ndef train(model, loader, opt):\n    for batch in loader:\n"
        "        model(batch).sum().backward()\n        opt.step()\n\n\nif __name__ == \"__main__\":\n"
        "    train(model, loader, opt)\n",
    )
    invalid = (
        Invalid(
            "import torch\n\ntorch.autograd.set_detect_anomaly(True)\n",
            fixed="import torch\n\ntorch.autograd.set_detect_anomaly(False)\n",
        ),
        Invalid(
            "import torch\n\ndef train(model, loader, opt):\n    with torch.autograd.detect_anomaly():\n"
            "        for batch in loader:\n            model(batch).backward()\n            opt.step()\n"
        ),
        Invalid(
            "import torch\n\nif __name__ == \"__main__\":\n    torch.autograd.set_detect_anomaly(True)\n",
            fixed="import torch\n\nif __name__ == \"__main__\":\n    torch.autograd.set_detect_anomaly(False)\n",
        ),
        Invalid(
            "def Trainer(**settings):\n    return settings\n\n\ntrainer = Trainer(max_epochs=3, detect_anomaly=True)\n",
            fixed="def Trainer(**settings):\n    return settings\n\n\ntrainer = Trainer(max_epochs=3, detect_anomaly=False)\n",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.context.resolve(node.func) or ""
        if self.context.in_tests or under_any_if(self.context) or self.context.outside_the_program() \
                or self.context.in_a_script_that_never_trains():
            return
        if name == "torch.autograd.set_detect_anomaly":
            mode = keyword_arg(node, "mode") or (node.args[0] if node.args and node.args[0].keyword is None else None)
            if mode is not None and is_true(mode.value):
                self.report(node, when="always", fix=[Replace(mode.value, "False")], unsafe_fix=True)
        elif name in ("torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly"):
            check = keyword_arg(node, "check_nan")
            if check is None or not is_false(check.value):
                self.report(node, when="always")
        else:
            # `pl.Trainer(detect_anomaly=True)`, torchtnt's `AutoUnit(..., detect_anomaly=True)`: the framework runs
            # every training step in anomaly mode.
            flag = keyword_arg(node, "detect_anomaly")
            if flag is not None and is_true(flag.value):
                self.report(flag, when="always", fix=[Replace(flag.value, "False")], unsafe_fix=True)
