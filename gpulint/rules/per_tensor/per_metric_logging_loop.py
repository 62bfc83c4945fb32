"""GPL103 per-metric-logging-loop."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.context import HOST_METHODS
from gpulint.linter.names import last_name, name_parts, root_name, target_names
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.linter.syntax import SyntaxVisitor
from gpulint.rules.examples import training_script
from gpulint.rules.per_tensor.helpers import PerTensorRule, is_model_tensor_iterable, iterates_host_values, loop_over

# What `PerMetricLoggingLoop._metric_value_vars` accepts: `loss_dict.items()`, `zip(names, losses)`.
METRIC_FOR_STATEMENT = loop_over(r"\.items\(|\.values\(|losses|metrics|dict", statements_only=True)
# What `_ReadFinder` finds in a loop's body: a value read on the host, or logged as a scalar.
_READ_WORDS = (".item(", ".tolist(", ".cpu(", ".numpy(", "add_scalar")
# `**loss_dict`, `**self.metrics`: a dict of metrics unpacked into a call (`_names_metrics` of a `**` argument).
METRICS_UNPACKED = re.compile(r"\*\*\s*[\w.]*(?:loss|metric)", re.IGNORECASE)


class PerMetricLoggingLoop(PerTensorRule):
    code = "GPL103"
    name = "per-metric-logging-loop"
    message = (
        "this loop reads a dict of metric tensors one value at a time: one device-to-host sync per metric; stack them "
        "and transfer once"
    )
    triggers = (".items()", ".values()", "losses", "metrics", "**")
    # A reported loop reads each value (`.item()`, `add_scalar`, ...); a reported call hands `**dict` to `update`/`log`.
    requires = (("update(", "log(", "log_dict(", ".item(", ".tolist(", ".cpu(", ".numpy(", "add_scalar"),)

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        # Reported: `logger.update(**loss_dict)`, or a loop over a dict or list of metrics that reads each value on
        # the host (`_ReadFinder`).
        unpacked = METRICS_UNPACKED.search(code) is not None and any(w in code for w in ("update(", "log(", "log_dict("))
        return super().may_report_in(code, name, class_name) and (unpacked or (
            METRIC_FOR_STATEMENT.search(code) is not None and any(w in code for w in _READ_WORDS)
        ))
    docs = RuleDocs(
        what_it_does="Flags a `for` loop over a dict of tensors (`.items()` / `.values()`) or over a list named like "
        "`losses` / `metrics` that reads each value on the host (`.item()`, `float()`, `.tolist()`, `.cpu()`, "
        "`add_scalar`), and a step that hands a dict of tensors to a metric logger as keyword arguments "
        "(`metric_logger.update(**loss_dict)`), whose `update` reads them one by one.",
        why_slow="Each read is a device-to-host copy that blocks until the GPU finishes all queued work. Logging ten "
        "loss terms every step costs ten round trips where one would do, and each one stalls the launch queue.",
        example="for k, v in loss_dict.items():\n    meters[k].update(v.item())",
        use_instead="keys = list(loss_dict)\nvalues = torch.stack([loss_dict[k].detach().float() for k in keys]).tolist()"
        "  # one transfer\nfor k, v in zip(keys, values):\n    meters[k].update(v)",
        fix_safety="No automatic fix: the values may have different shapes or dtypes, which `torch.stack` rejects "
        "or promotes.",
        false_positives="Dicts whose values are already Python numbers (then `.item()` would fail anyway); loops under a "
        "logging gate in the same function are not flagged.",
    )
    valid = (
        training_script("loss_dict = {\"ce\": loss.detach()}\nif step % 10 == 0:\n    for k, v in loss_dict.items():\n"
                        "        writer.add_scalar(k, v.item(), step)"),
        training_script("stats = {k: v for k, v in zip(names, values)}\nfor k, v in stats.items():\n    print(k, v)"),
        training_script("values = torch.stack(list(loss_dict.values())).tolist()\nfor k, v in zip(loss_dict, values):\n"
                        "    meters[k].update(v)"),
        "def metrics_format(metrics):\n    for k, v in metrics.items():\n        metrics[k] = f\"{int(v) >> 30}GF\"\n",
        training_script("metrics = {\"loss\": loss.detach()}\nmetrics.update(**probe_metrics)"),
    )
    invalid = (
        Invalid(training_script("loss_dict = criterion(out, y)\nfor k, v in loss_dict.items():\n"
                                "    meters[k].update(v.item())")),
        Invalid(
            "import torch\n\nclass MetricLogger:\n    def update(self, **kwargs):\n        for k, v in kwargs.items():\n"
            "            if isinstance(v, torch.Tensor):\n                v = v.item()\n            self.meters[k].update(v)\n"
        ),
        Invalid(training_script("for name, l in zip(names, losses):\n    writer.add_scalar(name, l, step)")),
        Invalid(training_script("loss_dict = criterion(out, y)\nfor k, v in loss_dict.items():\n"
                                "    if k != \"loss\":\n        writer.add_scalar(k, v.mean(), step)")),
        Invalid(training_script("loss_dict = criterion(out, y)\nmetric_logger.update(loss=loss_value, **loss_dict)")),
    )

    def visit_Call(self, node: cst.Call) -> None:
        # `metric_logger.update(**loss_dict)`: the logger's update() loops over the dict calling .item() on each.
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("update", "log", "log_dict"):
            return
        receiver = name_parts(last_name(func.value) or "")
        # `metrics.update(**probe_metrics)` is `dict.update`: it merges the tensors and reads none (a logger or meter
        # is named so); `metrics.log(**losses)` is no dict's
        loggers = {"logger", "meter", "meters", "tracker"} | ({"metrics"} if func.attr.value != "update" else set())
        if not receiver & loggers:
            return
        for arg in node.args:
            if arg.star == "**" and not self.context.is_host_value(arg.value) and _names_metrics(arg.value):
                self.report(node, when="per_step")
                return

    def visit_For(self, node: cst.For) -> None:
        value_vars = self._metric_value_vars(node)
        if not value_vars or is_model_tensor_iterable(node.iter):
            return
        if iterates_host_values(node.iter, self.context):
            return
        if _reads_each(value_vars, node.body, logged_counts=_names_losses(node.iter)):
            self._report_ungated(node.iter)

    def _metric_value_vars(self, node: cst.For) -> set[str]:
        iterable = node.iter
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute):
            method = iterable.func.attr.value
            if method == "items" and isinstance(node.target, cst.Tuple) and len(node.target.elements) == 2:
                return target_names(node.target.elements[1].value)
            if method == "values":
                return target_names(node.target)
        is_zip = isinstance(iterable, cst.Call) and last_name(iterable.func) == "zip"
        if is_zip and any(_names_metrics(arg.value) for arg in iterable.args):
            return target_names(node.target)
        if _names_metrics(iterable):
            return target_names(node.target)
        return set()


def _names_metrics(expr: cst.BaseExpression) -> bool:
    name = last_name(expr)
    if name is None:
        return False
    parts = name_parts(name)
    return bool(parts & {"losses", "metrics"}) or ("dict" in parts and bool(parts & {"loss", "metric", "losses"}))


class _ReadFinder(SyntaxVisitor):
    """Is one of `names` surely a tensor read on the host: `v.item()`, `v.tolist()`, `v.cpu()`, `v.numpy()`, or
    `writer.add_scalar(k, v)` (or of `v.mean()`) of a loss? (`float(v)` / `int(v)` are not counted: the dict may hold Python numbers.)"""

    def __init__(self, names: set[str], logged_counts: bool) -> None:
        super().__init__()
        self.names = names
        self.logged_counts = logged_counts  # only for dicts named for losses: others may hold Python numbers
        self.found = False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func
        method_read = (
            isinstance(func, cst.Attribute) and func.attr.value in HOST_METHODS and root_name(func.value) in self.names
        )
        logged = self.logged_counts and last_name(func) in ("add_scalar", "add_scalars") and any(
            # the value, or a reduction of it (`value.mean()`: Lumina-T2X's sub-losses)
            _value_or_reduction(arg.value) in self.names for arg in node.args
        )
        self.found = self.found or method_read or logged
        return not self.found


def _value_or_reduction(expr: cst.BaseExpression) -> str | None:
    """`v` of `v`, `v.mean()`, `v.detach().float()`: the name of a tensor logged whole or reduced (not `v.shape[0]`)."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and not expr.args \
            and expr.func.attr.value in _REDUCTIONS:
        expr = expr.func.value
    return expr.value if isinstance(expr, cst.Name) else None


_REDUCTIONS = frozenset({"mean", "sum", "detach", "float", "norm", "max", "min"})


def _names_losses(iterable: cst.BaseExpression) -> bool:
    """Does the loop iterate something named for losses (`loss_dict.items()`, `zip(names, losses)`)?"""
    while isinstance(iterable, cst.Call):
        if isinstance(iterable.func, cst.Name) and iterable.args:
            return any(_names_losses(arg.value) for arg in iterable.args)
        if not isinstance(iterable.func, cst.Attribute):
            return False
        iterable = iterable.func.value
    return bool(name_parts(last_name(iterable) or "") & {"loss", "losses"})


def _reads_each(names: set[str], body: cst.CSTNode, logged_counts: bool) -> bool:
    finder = _ReadFinder(names, logged_counts)
    finder.walk(body)
    return finder.found
