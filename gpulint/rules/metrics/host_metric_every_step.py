"""GPL207 host-metric-every-step."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.rules.common import off_by_default
from gpulint.rules.examples import training_script
from gpulint.rules.metrics.helpers import MetricRule, device_to_host_copy

_NUMPY_PREFIXES = ("numpy.", "np.", "sklearn.", "scipy.")


class HostMetricEveryStep(MetricRule):
    code = "GPL207"
    name = "host-metric-every-step"
    default_enabled = False  # mostly false on the fresh batches (its docs say how often)
    message = "computing a metric with numpy/sklearn on `.cpu()` copies every step stalls the GPU; compute it with torch on the device and read it when you log"
    triggers = ("sklearn", "cpu")
    docs = RuleDocs(
        what_it_does="Flags sklearn metric calls (`accuracy_score`, `f1_score`, ...), numpy functions or comparisons "
        "on `.cpu().numpy()` copies, and per-sample Python loops over such copies, in code that runs every training "
        "step and is not gated.",
        why_slow="`.cpu()` is a blocking device-to-host copy that waits for the step's kernels; then the metric runs on "
        "one CPU core while the GPU idles. Per step that is a full pipeline drain plus milliseconds of numpy time.",
        example="acc = accuracy_score(y.cpu().numpy(), out.argmax(1).cpu().numpy())",
        use_instead="Device-side metrics: `(out.argmax(1) == y).float().mean()` (or torchmetrics), accumulated on the "
        "device and read every N steps; or collect predictions and compute sklearn metrics once per epoch.",
        false_positives=off_by_default(
            code, 9, 30,
            "most of its host copies feed host algorithms by design (alignment search, environments) or ran "
            "outside training",
        )
        + "Metrics under a logging gate or in eval code are not flagged. Arrays that were always on the host "
        "fed to numpy functions are not flagged; sklearn metrics in the step always are.",
    )
    valid = (
        training_script("acc = (out.argmax(1) == y).float().mean()"),
        training_script("if step % 100 == 0:\n    acc = accuracy_score(y.cpu().numpy(), out.argmax(1).cpu().numpy())",
                 header="from sklearn.metrics import accuracy_score\n"),
        "import numpy as np\nimport torch\n\ndef evaluate(model, loader):\n    with torch.no_grad():\n"
        "        for x, y in loader:\n            print(np.mean(model(x).cpu().numpy() == y.numpy()))\n",
    )
    invalid = (
        Invalid(training_script("acc = accuracy_score(y.cpu().numpy(), out.argmax(1).cpu().numpy())",
                         header="from sklearn.metrics import accuracy_score\n")),
        Invalid(training_script("acc = np.mean(out.argmax(1).cpu().numpy() == y.cpu().numpy())", header="import numpy as np\n")),
        Invalid(training_script("acc = (out.argmax(1).cpu().numpy() == y.cpu().numpy()).mean()")),
        Invalid(training_script("for t, l in zip(y.cpu().numpy(), out.detach().cpu().numpy()):\n"
                                "    meters[int(t)].add(l)")),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        # numpy/sklearn calls being visited that were reported: a comparison inside one is the same finding.
        self._reported_calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        name = self.context.resolve(node.func) or ""
        if name.startswith("sklearn.metrics.") or (
            name.startswith(_NUMPY_PREFIXES) and any(device_to_host_copy(self.context, a.value) for a in node.args)
        ):
            self.report(node)
            self._reported_calls.append(node)

    def leave_Call(self, node: cst.Call) -> None:
        if self._reported_calls and self._reported_calls[-1] is node:
            self._reported_calls.pop()

    def visit_For(self, node: cst.For) -> None:
        # `for t, l in zip(ts.cpu().numpy(), losses.cpu().numpy()):` a per-sample host loop over copies made every step.
        if device_to_host_copy(self.context, node.iter):
            self.report(node.iter)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if self._reported_calls:
            return
        sides = [node.left] + [t.comparator for t in node.comparisons]
        if any(self._numpy_copy(s) for s in sides):
            self.report(node)

    def _numpy_copy(self, expr: cst.BaseExpression) -> bool:
        return (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "numpy"
            and device_to_host_copy(self.context, expr.func.value)
        )
