"""GPL304 loss-masked-afterwards."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.names import dotted_name, last_name
from gpulint.linter.rule import Invalid, Report, Rule, RuleDocs
from gpulint.linter.syntax import descendants
from gpulint.rules.common import keyword_arg, off_by_default

_CE_FUNCTIONS = frozenset({"torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss"})
_CE_CLASSES = frozenset({"CrossEntropyLoss", "NLLLoss"})
_SHAPE_METHODS = frozenset({"view", "reshape", "flatten", "squeeze", "float"})
_MASKING_METHODS = frozenset({"masked_fill", "masked_select", "masked_fill_"})


def _reduction_none(call: cst.Call) -> bool:
    arg = keyword_arg(call, "reduction")
    return arg is not None and isinstance(arg.value, cst.SimpleString) and arg.value.raw_value == "none"


def _mentions_pad(expr: cst.BaseExpression) -> bool:
    name = dotted_name(expr)
    return name is not None and "pad" in name.lower()


def _mentions_mask(expr: cst.BaseExpression) -> bool:
    """True when a mask name appears in the expression (`mask`, `attention_mask.float()`, `batch["loss_mask"]`)."""
    for node in descendants(expr):
        kind = type(node)
        if kind is cst.Name and "mask" in node.value.lower():
            return True
        if kind is cst.SimpleString and "mask" in node.raw_value.lower():
            return True
    return False


def _thresholds(expr: cst.BaseExpression) -> bool:
    """`max_probs.ge(p).float()`, `(conf >= thr).float()`: a mask by a threshold (not `!= pad_id`, `== 0`)."""
    for node in descendants(expr):
        kind = type(node)
        if kind is cst.Comparison and any(type(c.operator) in (cst.GreaterThan, cst.GreaterThanEqual)
                                          for c in node.comparisons):
            return True
        if kind is cst.Call and last_name(node.func) in ("ge", "gt"):
            return True
    return False


_UNREDUCED_OR_MASKED = re.compile(r"\breduction\s*=|\bmasked_(?:select|fill)")


class LossMaskedAfterwards(Rule):
    code = "GPL304"
    pytorch_only = True
    name = "loss-masked-afterwards"
    default_enabled = False  # mostly false on the fresh batches (its docs say how often)
    message = "the per-token loss is computed over pad positions and masked afterwards; pass `ignore_index` (pads labelled -100) instead"
    triggers = ("reduction", "masked_select", "masked_fill")

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        # Every report is at a use of the loss that names a mask (`loss * mask`, `loss[mask]`, `masked_select`), of a
        # loss made with `reduction=` or masked by a method (words in strings, such as weight names, do not count).
        return "mask" in code.lower() and _UNREDUCED_OR_MASKED.search(code) is not None
    docs = RuleDocs(
        what_it_does="Flags `cross_entropy` / `nll_loss` (or a `CrossEntropyLoss`/`NLLLoss` built with "
        "`reduction='none'`) whose per-token result is then multiplied by or indexed with a mask (`(loss * mask).sum() / "
        "mask.sum()`, `loss[mask]`, `loss.masked_fill(...)`) in the training step or a function it calls (`compute_loss`, "
        "`training_step`); and a hand-written per-token `loss.masked_select(non_pad_mask)`.",
        why_slow="The unreduced loss materialises a (batch x length) tensor, including every pad position, and the mask "
        "costs a multiply, two reductions and a division: 4-5 extra kernel launches and a full read/write of the loss "
        "tensor per step. With `ignore_index` the fused loss kernel skips pad targets and normalises by the count of "
        "real tokens in one launch; `(loss * mask).mean()` in addition divides by pads too, a silent loss-scale bug.",
        example="loss = F.cross_entropy(logits.view(-1, V), labels.view(-1), reduction='none')\n"
        "loss = (loss * attention_mask.view(-1)).sum() / attention_mask.sum()",
        use_instead="`labels = labels.masked_fill(attention_mask == 0, -100)` once in the collate function, then "
        "`F.cross_entropy(logits.view(-1, V), labels.view(-1), ignore_index=-100)` (with `label_smoothing=eps` for a "
        "smoothed loss).",
        false_positives=off_by_default(
            code, 1, 15,
            "masking the loss costs what `ignore_index` would, since the logits over pads are computed either"
            " way, and most of its losses had no pads or already passed `ignore_index`",
        )
        + "Not reported for a mask the function makes by a threshold (`mask = max_probs.ge(p).float()`: "
        "the confidence weights of pseudo-labels). Masks that are real per-token weights (not 0/1 pad masks), and losses "
        "that need per-sequence "
        "normalisation before averaging (a weighted reduction ignore_index cannot express).",
    )
    valid = (
        "import torch.nn.functional as F\n\ndef compute_loss(logits_u, probs_u, threshold):\n"
        "    max_probs, pseudo = probs_u.max(dim=-1)\n    mask = max_probs.ge(threshold).float()\n"
        "    return (F.cross_entropy(logits_u, pseudo, reduction='none') * mask).mean()\n",
        "import torch.nn.functional as F\n\ndef compute_loss(logits, labels):\n"
        "    return F.cross_entropy(logits.view(-1, 100), labels.view(-1), ignore_index=-100)\n",
        "import torch.nn.functional as F\n\ndef compute_loss(logits, labels, weights):\n"
        "    loss = F.cross_entropy(logits, labels, reduction='none')\n    return (loss * weights).mean()\n",
        "import torch.nn.functional as F\n\ndef evaluate(logits, labels, mask):\n"
        "    loss = F.cross_entropy(logits, labels, reduction='none')\n    return (loss * mask).sum()\n",
        "import torch.nn.functional as F\n\ndef score_completions(logits, tokens, mask):\n"
        "    losses = F.cross_entropy(logits, tokens, reduction='none')\n"
        "    return (losses * mask).sum(dim=1) / mask.sum(dim=1)\n",
    )
    invalid = (
        Invalid(
            "import torch.nn.functional as F\n\ndef compute_loss(logits, labels, attention_mask):\n"
            "    loss = F.cross_entropy(logits.view(-1, 100), labels.view(-1), reduction='none')\n"
            "    return (loss * attention_mask.view(-1)).sum() / attention_mask.sum()\n"
        ),
        Invalid(
            "import torch.nn as nn\n\nclass Trainer:\n    def __init__(self):\n"
            "        self.criterion = nn.CrossEntropyLoss(reduction='none')\n\n    def training_step(self, batch):\n"
            "        loss = self.criterion(batch['logits'], batch['labels'])\n"
            "        return loss[batch['mask'].bool()].mean()\n"
        ),
        Invalid(
            "import torch.nn.functional as F\n\ndef compute_loss(logits, labels, pad_mask):\n"
            "    return (F.nll_loss(logits, labels, reduction='none') * pad_mask).sum() / pad_mask.sum()\n"
        ),
        Invalid(
            "import torch.nn.functional as F\n\ndef compute_loss(pred, gold, pad_idx, eps=0.1):\n"
            "    one_hot = F.one_hot(gold, pred.size(1)).float() * (1 - eps) + eps / pred.size(1)\n"
            "    loss = -(one_hot * F.log_softmax(pred, dim=1)).sum(dim=1)\n    non_pad_mask = gold.ne(pad_idx)\n"
            "    return loss.masked_select(non_pad_mask).sum()\n"
        ),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._criteria: set[str] = set()  # names of loss modules built with reduction='none'
        # (id(function), local name) -> the loss call and its ancestors, until a mask use reports it.
        self._losses: dict[tuple[int, str], tuple[cst.Call, tuple[cst.CSTNode, ...]]] = {}
        self._reported: set[int] = set()
        # (id(function), name) of masks made by a threshold (`mask = max_probs.ge(p)`): confidence weights of
        # pseudo-labels, not pads
        self._thresholded: set[tuple[int, str]] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        target = node.targets[0].target
        if len(node.targets) == 1 and isinstance(target, cst.Name) and _thresholds(value):
            self._thresholded.add((id(self.context.enclosing_function()), target.value))
        if len(node.targets) != 1 or not isinstance(value, cst.Call):
            return
        if last_name(value.func) in _CE_CLASSES and _reduction_none(value):
            name = last_name(target)
            if name:
                self._criteria.add(name)
        elif isinstance(target, cst.Name) and self._is_unreduced_loss(value):
            self._losses[(id(self.context.enclosing_function()), target.value)] = (value, self.context.ancestors_snapshot())

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if not isinstance(node.operator, cst.Multiply):
            return
        for loss_side, other in ((node.left, node.right), (node.right, node.left)):
            loss = self._find_loss(loss_side)  # cheap; the mask check walks the other operand
            if loss is not None and _mentions_mask(other) and not self._confidence_mask(other):
                self._report(*loss)
                return

    def visit_Subscript(self, node: cst.Subscript) -> None:
        loss = self._find_loss(node.value)
        if loss is not None and any(isinstance(e.slice, cst.Index) and _mentions_mask(e.slice.value) for e in node.slice):
            self._report(*loss)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in _MASKING_METHODS:
            if not self._report_loss(node.func.value) and node.args and self._hand_written_loss(node.func.value):
                if _mentions_pad(node.args[0].value) and not self.context.in_tests:
                    # `loss = -(one_hot * log_prb).sum(1); loss.masked_select(non_pad_mask)`: a hand-written
                    # per-token loss over pad positions (label smoothing before `label_smoothing=` existed).
                    self.report(node)

    def _confidence_mask(self, expr: cst.BaseExpression) -> bool:
        """`mask` or `mask_u[n:]` bound in this function by a threshold test (FixMatch's `max_probs.ge(p)`)."""
        while isinstance(expr, (cst.Subscript, cst.Attribute, cst.Call)):
            expr = expr.value if not isinstance(expr, cst.Call) else expr.func
        return isinstance(expr, cst.Name) and (id(self.context.enclosing_function()), expr.value) in self._thresholded

    def _hand_written_loss(self, expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Name) and "loss" in expr.value.lower()

    def _is_unreduced_loss(self, call: cst.Call) -> bool:
        if self.context.resolve(call.func) in _CE_FUNCTIONS:
            return _reduction_none(call)
        return last_name(call.func) in self._criteria

    def _report_loss(self, expr: cst.BaseExpression) -> bool:
        """Report the unreduced loss that `expr` is; True when it is one."""
        loss = self._find_loss(expr)
        if loss is not None:
            self._report(*loss)
        return loss is not None

    def _find_loss(self, expr: cst.BaseExpression) -> tuple[cst.Call, tuple[cst.CSTNode, ...]] | None:
        """The unreduced loss call `expr` is (through `.view(-1)` and the like, or a local assigned from one) and the
        ancestors to report it with."""
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _SHAPE_METHODS:
            expr = expr.func.value
        if isinstance(expr, cst.Call) and self._is_unreduced_loss(expr):
            return expr, self.context.ancestors_snapshot()
        if isinstance(expr, cst.Name):
            return self._losses.get((id(self.context.enclosing_function()), expr.value))
        return None

    def _report(self, call: cst.Call, ancestors: tuple[cst.CSTNode, ...]) -> None:
        if id(call) not in self._reported and not self.context.in_tests:
            self._reported.add(id(call))
            # "per_step": the training loss runs every step (compute_loss, training_step, code the step calls); a
            # masked per-row average in an eval or scoring helper, or behind an eval-interval gate, is not it.
            self.context.add_report(Report(self, call, self.message, "per_step", ancestors))
