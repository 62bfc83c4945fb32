"""GPL203 per-class-metric-loop."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.rules.examples import training_script
from gpulint.rules.metrics.helpers import LoopFactsRule, LoopFrame, range_bound, size_of


class PerClassMetricLoop(LoopFactsRule):
    code = "GPL203"
    name = "per-class-metric-loop"
    message = "this Python loop computes a metric one class or one sample at a time, a few kernels (and often a sync) per iteration; compute it in one vectorised op"
    triggers = ("for ",)
    docs = RuleDocs(
        what_it_does="Flags loops in the training step that compute a metric per class (`for c in range(num_classes): "
        "correct[c] += ((pred == c) & (y == c)).sum()`) or per sample (`for p, t in zip(preds, targets): if p == t: ...`) "
        "on tensors.",
        why_slow="Each iteration launches its own compare and reduction kernels (plus a sync when the result is read with "
        "`.item()` or used in an `if`): C or N tiny launches per step where one `bincount` or one `(pred == y).sum()` "
        "does the same work in one or two kernels.",
        example="for c in range(num_classes):\n    mask = y == c\n    correct[c] += (pred[mask] == c).sum().item()",
        use_instead="Per-class counts: `torch.bincount(y[pred == y], minlength=num_classes)` and "
        "`torch.bincount(y, minlength=num_classes)`; accuracy: `(pred == y).sum()`; a confusion matrix: "
        "`torch.bincount(y * C + pred, minlength=C * C).view(C, C)`.",
        false_positives="Loops over host lists (after `.tolist()` / `.cpu()`), which gpulint skips when it can see the "
        "transfer in the same function.",
    )
    valid = (
        training_script("correct += (out.argmax(1) == y).sum()"),
        training_script("labels = y.tolist()\npreds = out.argmax(1).tolist()\nfor p, t in zip(preds, labels):\n"
                        "    if p == t:\n"
                        "        hits += 1"),
        training_script("for c in range(10):\n    print(c)"),
        training_script("for r in range(rounds):\n    sync = r == rounds - 1\n    out.sum().backward()"),
    )
    invalid = (
        Invalid(training_script("pred = out.argmax(1)\nfor c in range(10):\n"
                                "    correct[c] += ((pred == c) & (y == c)).sum()")),
        Invalid(training_script("pred = out.argmax(1)\nfor p, t in zip(pred, y):\n    if p == t:\n        hits += 1")),
    )

    def wants(self, node: cst.For) -> bool:
        iter_ = node.iter
        if _is_zip(iter_):
            return not all(self.context.is_host_value(a.value) for a in iter_.args)  # type: ignore[union-attr]
        bound = range_bound(iter_)
        return bound is not None and size_of(bound) is None  # loops over the rows of a tensor are GPL204's

    def judge(self, frame: LoopFrame) -> None:
        if _is_zip(frame.node.iter):
            if frame.compares_vars:
                self.report_loop(frame)
        elif frame.reductions and frame.compares_tensor:
            self.report_loop(frame)


def _is_zip(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "zip"
