"""GPL503 zero-grad-set-to-none-false."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.names import last_name
from gpulint.linter.rule import Invalid, Replace, Rule, RuleDocs
from gpulint.project.configs import pin_version
from gpulint.rules.common import is_false, keyword_arg


def _zeroing_step(zero_grad: str) -> str:
    """A training script (as `training_script`'s, for the same harnesses) that zeroes the gradients with `zero_grad` at
    the start of each step."""
    return (
        "import torch\nimport torch.nn.functional as F\n\n\ndef train(model, loader, optimizer, device):\n"
        "    for step, (x, y) in enumerate(loader):\n"
        f"        {zero_grad}\n        loss = F.cross_entropy(model(x), y)\n        loss.backward()\n        optimizer.step()\n"
    )


def _wrapped_zeroing(default: str) -> str:
    """A training script zeroing the gradients through an optimizer wrapper whose `zero_grad` defaults to `default`."""
    wrapper = (
        "class NoisyOptimizer:\n    def __init__(self, optimizer):\n        self.original_optimizer = optimizer\n\n"
        f"    def zero_grad(self, set_to_none: bool = {default}):\n"
        "        self.original_optimizer.zero_grad(set_to_none)\n\n"
        "    def step(self):\n        self.original_optimizer.step()\n\n\n"
    )
    script = _zeroing_step("optimizer.zero_grad()")
    return script.replace("def train(", wrapper + "def train(").replace(
        "    for step,", "    optimizer = NoisyOptimizer(optimizer)\n    for step,")


class ZeroGradKeepsTensors(Rule):
    code = "GPL503"
    gpu_only = True  # kernel launches saved: none on the CPU
    name = "zero-grad-set-to-none-false"
    message = "`zero_grad(set_to_none=False)` launches a memset per gradient every step; the default frees them instead"
    message_pinned = (
        "under PyTorch {pin} (what this project's dependencies pin), `zero_grad()` defaults to `set_to_none=False`: "
        "a memset per gradient every step; pass `set_to_none=True`"
    )
    message_default = (
        "this `zero_grad` defaults to `set_to_none=False` and passes it on: each call without arguments launches a "
        "memset per gradient every step; default it to True, as torch's optimizers do"
    )
    triggers = ("zero_grad(",)
    fixable = True
    docs = RuleDocs(
        what_it_does="Flags `optimizer.zero_grad(set_to_none=False)` and `model.zero_grad(False)`, and an optimizer "
        "wrapper's `def zero_grad(self, set_to_none=False)` that passes its default on to the optimizer it wraps (a "
        "plain `wrapper.zero_grad()` in the training loop then zeroes every gradient). Where the project pins a "
        "PyTorch before 2.0 (`torch==1.13.1` in `requirements.txt`, `pytorch=1.10` in a conda `environment.yml`, "
        "`torchvision==0.9.1` in `setup.py`: the nearest dependency file above the file decides), a plain "
        "`zero_grad()` too: `set_to_none` defaulted to False until 2.0 (reported without a fix: the receiver may be a "
        "wrapper whose `zero_grad` takes no argument). Only in code that runs every step: a zeroing before the loop "
        "over the loader runs once per epoch.",
        why_slow="Kernel launch count and memory traffic: zeroing keeps every gradient allocated and launches one "
        "memset (or `zero_` kernel) per parameter tensor every step, then the backward pass reads the zeros back to "
        "accumulate into them. `set_to_none=True` (the default since PyTorch 2.0) launches nothing and lets backward "
        "write the first gradient directly.",
        example="optimizer.zero_grad(set_to_none=False)",
        use_instead="optimizer.zero_grad()  # set_to_none=True",
        fix_safety="Unsafe: after the fix, a parameter that gets no gradient in the next backward has `p.grad is None` "
        "instead of zeros, so optimizers skip it (no weight decay or momentum step for it that iteration), and code "
        "that reads or updates `p.grad` in place (`p.grad.add_(...)`) before backward fails.",
        false_positives="Code that accumulates into `p.grad` by hand before the backward pass needs the zeros: add "
        "`# noqa: GPL503`.",
    )
    valid = (
        _zeroing_step("optimizer.zero_grad(set_to_none=True)"),
        _zeroing_step("model.zero_grad()"),
        "import torch\n\ndef evaluate(model):\n    model.zero_grad(set_to_none=False)\n",
    )
    invalid = (
        Invalid(
            _zeroing_step("optimizer.zero_grad(set_to_none=False)"),
            fixed=_zeroing_step("optimizer.zero_grad(set_to_none=True)"),
        ),
        Invalid(_zeroing_step("model.zero_grad(False)"), fixed=_zeroing_step("model.zero_grad(True)")),
        Invalid(_wrapped_zeroing("False"), fixed=_wrapped_zeroing("True")),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if last_name(node.func) != "zero_grad" or not isinstance(node.func, cst.Attribute) or self.context.in_tests:
            return
        arg = keyword_arg(node, "set_to_none")
        if arg is None and node.args and node.args[0].keyword is None:
            arg = node.args[0]
        pin = self.context.facts.torch_pin
        if arg is None and not node.args and pin and pin_version(pin) < (2,):
            # No fix: the receiver may be a project's optimizer wrapper whose `zero_grad(self)` takes no argument
            # (StyleSpeech's `ScheduledOptim`), where `set_to_none=True` would raise a TypeError.
            self.report(node, self.message_pinned.format(pin=pin), when="per_step")
        elif arg is not None and is_false(arg.value):
            self.report(node, when="per_step", fix=[Replace(arg.value, "True")], unsafe_fix=True)
        elif arg is not None and isinstance(arg.value, cst.Name) and (default := self._false_default(arg.value.value)):
            self.report(node, self.message_default, when="per_step", fix=[Replace(default, "True")], unsafe_fix=True)

    def _false_default(self, name: str) -> cst.BaseExpression | None:
        """`def zero_grad(self, set_to_none=False)` around the call: the parameter's default, when it is False."""
        function = self.context.enclosing_function()
        if function is None or function.name.value != "zero_grad":
            return None
        for param in (*function.params.params, *function.params.kwonly_params):
            if param.name.value == name and param.default is not None and is_false(param.default):
                return param.default
        return None
