"""GPL401 scalar-sync-in-step."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.names import last_name
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.rules.examples import training_script
from gpulint.rules.sync.helpers import SyncRule, known_false_positives


# Library objects whose calls (with arguments) read the batch's values on the host (`library_objects`).
_METRIC_KINDS = frozenset({"allennlp_metric", "torchmetrics_aggregator"})


class ScalarSyncInStep(SyncRule):
    code = "GPL401"
    reads_to_host = True
    name = "scalar-sync-in-step"
    message = "`.{method}()` copies a device tensor to the host every step and blocks until the GPU catches up"
    triggers = (".item(", ".tolist(", ".get_scale(", "scaler.state_dict(", ".update()", "get_current_decay()")
    docs = RuleDocs(
        what_it_does="Flags `.item()` and `.tolist()` on a tensor in code that runs every training step and is not "
        "gated to a logging interval, and calls that run `.item()` inside a library: `GradScaler.get_scale()` / "
        "`scaler.state_dict()`, `update()` / `get_current_decay()` of ema_pytorch's `EMA`, and a call of an AllenNLP "
        "metric (`self._accuracy(logits, label)` with `self._accuracy = CategoricalAccuracy()`: `BooleanAccuracy`, "
        "`Average`, `F1Measure`, `SpanBasedF1Measure` and the others whose `__call__` reads the counts on the host), "
        "and an update or call of a torchmetrics aggregation metric (`MeanMetric`, `SumMetric`, `MaxMetric`, "
        "`MinMetric`, `CatMetric`), which checks the value for NaN with `if nans.any():` unless built with a "
        "`nan_strategy=`.",
        why_slow="Reading a device value on the host is a device-to-host copy that waits for every kernel queued before "
        "it: the CPU stops launching work, the GPU drains its queue and idles until the next launch. One sync per step "
        "removes the CPU's lead over the GPU, which is what keeps small-kernel models busy.",
        example="for batch in loader:\n    loss = model(batch)\n    loss.backward()\n    optimizer.step()\n"
        "    print(loss.item())",
        use_instead="Keep the value on the device (`running += loss.detach()`) and read it only every N steps under "
        "`if step % log_interval == 0:`.",
        fix_safety="No fix: the replacement (a device accumulator read at an interval) changes the program's structure.",
        false_positives=known_false_positives("`.item()` on a value that is already on the host (after `.cpu()`, `.tolist()`, a numpy array, "
        "a tensor built by `torch.tensor(...)` without `device=`) costs nothing; gpulint follows assignments within a "
        "function but not across functions. `total += loss.item()` accumulators are reported by GPL2xx and "
        "`[t.item() for t in ts]` / per-parameter loops by GPL1xx instead."),
    )
    valid = (
        training_script("if step % 100 == 0:\n    print(loss.item())"),
        training_script("if step % 10 != 0:\n    continue\nprint(loss.item())"),
        training_script("counts = torch.zeros(4)\nfirst = counts[0].item()"),
        training_script("picks = self_rng.choice(8, size=2).tolist()", header="import numpy as np\n\nself_rng = np.random.default_rng(0)"),
        training_script("if not torch.isfinite(loss).all():\n    print(f\"loss is {loss.item()}\")\n    break"),
        # a branch that only warns runs when the loss went wrong (its test is GPL405's)
        training_script("if loss.abs().gt(1e4):\n    logging.warning(f\"strange loss {loss.item()}\")",
                        header="import logging"),
        "import torch\n\n\ndef evaluate(model, loader):\n    for x, y in loader:\n        print(model(x).sum().item())\n",
        training_script("mean_loss.update(loss.detach())", header="from torchmetrics import MeanMetric"
                        "\n\nmean_loss = MeanMetric(nan_strategy=\"disable\")"),
        training_script("names = frame.columns.tolist()",
                        header="import numpy as np\n\n\nclass Frame:\n    columns = np.array([\"a\", \"b\"])\n\n\nframe = Frame()"),
    )
    invalid = (
        Invalid(training_script("loss_value = loss.item()")),
        Invalid(training_script("probs = F.softmax(model(x), dim=-1).tolist()")),
        Invalid(training_script("scaled = scaler.scale(loss)\n"
                                "scale = scaler.get_scale()", header="scaler = torch.amp.GradScaler()")),
        Invalid(training_script("ema.update()", header="from ema_pytorch import EMA\n\nema = EMA(torch.nn.Linear(2, 2))")),
        Invalid(training_script("accuracy(out, y)", header="from allennlp.training.metrics import CategoricalAccuracy"
                                "\n\naccuracy = CategoricalAccuracy()")),
        Invalid(training_script("mean_loss.update(loss.detach())", header="from torchmetrics import MeanMetric"
                                "\n\nmean_loss = MeanMetric()")),
    )

    message_scaler = "`{call}` reads the loss scale with `.item()`: a device-to-host sync every step"
    message_metric = (
        "`{call}` of an AllenNLP metric reads the batch's counts on the host (`.item()`, `float()`) on every call: a "
        "device-to-host sync every step"
    )
    message_aggregator = (
        "`{call}` of a torchmetrics aggregation metric checks the value for NaN (`if nans.any():`) on every update: a "
        "device-to-host sync every step; build it with `nan_strategy=\"disable\"` where torchmetrics offers it, or "
        "accumulate the detached tensor"
    )
    message_library = (
        "`{call}` of ema_pytorch's EMA reads its step counter with `.item()`: a device-to-host sync every step"
    )

    @classmethod
    def runs_for_facts(cls, facts) -> bool:
        # `self._accuracy(logits, label)` where the model's `__init__` built `self._accuracy = CategoricalAccuracy()`;
        # `self.train_loss(loss)` or `.update(loss)` of a torchmetrics `MeanMetric`
        return any(kind in _METRIC_KINDS for _, kind in facts.library_objects)

    @classmethod
    def may_report_for_facts(cls, code: str, facts) -> bool:
        return any(kind in _METRIC_KINDS and name in code for name, kind in facts.library_objects)

    def _aggregates(self, func: cst.BaseExpression) -> bool:
        """`self.train_loss(loss)`, `meter.update(loss)`, where the name holds a torchmetrics `MeanMetric` (or
        `SumMetric`, `MaxMetric`, `MinMetric`, `CatMetric`) built without a `nan_strategy=`."""
        if isinstance(func, cst.Attribute) and func.attr.value in ("update", "forward"):
            func = func.value
        return isinstance(func, (cst.Name, cst.Attribute)) \
            and self.context.facts.library_kind(last_name(func) or "") == "torchmetrics_aggregator"

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if node.args and isinstance(func, (cst.Name, cst.Attribute)) \
                and self.context.facts.library_kind(last_name(func) or "") == "allennlp_metric":
            self.report(node, self.message_metric.format(call=f"{last_name(func)}(...)"))
            return
        if node.args and self._aggregates(func):
            self.report(node, self.message_aggregator.format(call=f"{last_name(func)}(...)"))
            return
        if not isinstance(func, cst.Attribute) or node.args:
            return
        method = func.attr.value
        if method in ("update", "get_current_decay") \
                and self.context.facts.library_kind(last_name(func.value) or "") == "ema_pytorch":
            self.report(node, self.message_library.format(call=f"{last_name(func.value)}.{method}()"))
            return
        if method in ("get_scale", "state_dict") and "scaler" in (last_name(func.value) or "").lower():
            # GradScaler.get_scale() and .state_dict() call `self._scale.item()`.
            self.report(node, self.message_scaler.format(call=f"{last_name(func.value)}.{method}()"))
            return
        if method not in ("item", "tolist"):
            return
        if self.context.is_host_value(func.value) or self.in_accumulator() or self.in_per_tensor_loop():
            return
        self.report(node, self.message.format(method=method))
