"""GPL405 tensor-condition-in-step."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.names import last_name
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.rules.common import is_false, is_number, is_true
from gpulint.rules.examples import training_script
from gpulint.rules.sync.helpers import SyncRule, known_false_positives


class TensorConditionInStep(SyncRule):
    code = "GPL405"
    name = "tensor-condition-in-step"
    message = "`{kind}` on a tensor value makes the host wait for the GPU to decide a Python branch, every step"
    message_compare = "`{func}()` compares a tensor on the host: a device-to-host sync every step"
    message_equal = "`torch.equal()` compares two tensors and returns a Python bool: a device-to-host sync every step"
    triggers = ("torch", "max(", "min(")
    _latches: frozenset[str] = frozenset()  # names the `if` being checked sets to True (see `_short_circuits`)
    docs = RuleDocs(
        what_it_does="Flags `if`, `while`, `assert` and conditional expressions whose test is a tensor (`if loss > 10:`, "
        "`assert torch.isfinite(loss)`, `if mask.any():`, `if 0.0 in attention_mask:`) or `any()` / `all()` over "
        "tensors (`if any(torch.isnan(l) for l in losses):`) in code that runs every step, ungated; `max()` / `min()` "
        "of a tensor and a number; and `torch.equal(a, b)`, which answers with a Python bool (the finding is on the "
        "call, wherever the bool is then tested). `assert` is not flagged where every command of the project's "
        "scripts and README that runs a training file runs it with `python -O`, which skips assertions.",
        why_slow="Python needs a bool, so the tensor is copied to the host (`Tensor.__bool__` calls `.item()`): a "
        "device-to-host round trip that drains the GPU queue before the branch can be taken.",
        example="for x, y in loader:\n    loss = F.cross_entropy(model(x), y)\n    if loss > 100:\n"
        "        continue\n    loss.backward()\n    optimizer.step()",
        use_instead="Make the decision on the device (`torch.where`, multiply by a mask, `torch._assert_async`), or "
        "check every N steps. For `max(1, t)` use `t.clamp(min=1)` (`torch.clamp_min`), which stays on the device.",
        fix_safety="No fix: a device-side rewrite (`torch.where`, masking, `torch._assert_async`) changes control flow.",
        false_positives=known_false_positives("Tests on names gpulint takes for tensors but that hold Python numbers (a helper returning a "
        "float named `loss`): add `# noqa: GPL405`. `x is None`, shape/size tests and comparisons with a class's member "
        "(`loss_mask == LossMask.output_only`, an Enum's) are never flagged."),
    )
    valid = (
        # a tensor compared with None: PyTorch's comparison gives way, and Python answers by identity (a bool)
        training_script("if loss != None:\n    total = 1"),
        training_script("if x.shape[0] > 1:\n    pass"),
        training_script("if hparams[\"aux_loss\"]:\n    print(\"with the auxiliary loss\")",
                        header="import collections\n\nhparams = collections.defaultdict(bool)"),
        training_script("if np.isnan(np.asarray(history)).all():\n    break",
                        header="import numpy as np\n\nhistory = [0.5, 0.25]"),
        training_script("lr = optimizer.param_groups[0][\"lr\"]\nif lr > 100:\n    break"),
        training_script("if step % 50 == 0:\n    assert torch.isfinite(loss)"),
        training_script("if optimizer is not None and step > 10:\n    pass"),
        training_script("if any(g[\"lr\"] > 1 for g in optimizer.param_groups):\n    break"),
        training_script("seen = {0: 1}\nif 0 in seen or 1 in [1, 2]:\n    pass"),
        training_script("count = (y > 0).sum().clamp(min=1)\nn = max(1, x.shape[0])"),
        training_script("if not model.training and loss > 100:\n    break"),
        training_script("if loss_mask == LossMask.output_only:\n    pass",
                        header="import enum\n\n\nclass LossMask(enum.Enum):\n    output_only = 1\n\n\nloss_mask = LossMask(1)"),
        ("import torch\n\n\ndef train(model, loader, optimizer, device):\n    queue_full = False\n"
         "    for x, y in loader:\n        y = y.to(device, non_blocking=True)\n"
         "        loss = model(x.to(device, non_blocking=True)).sum()\n"
         "        if queue_full or not torch.all(y == -1):\n            queue_full = True\n"
         "        loss.backward()\n        optimizer.step()\n"),
    )
    invalid = (
        Invalid(training_script("if loss > 100:\n    break")),
        Invalid(training_script("assert torch.isfinite(loss).all()")),
        Invalid(training_script("if torch.isnan(loss):\n    break")),
        Invalid(training_script("scale = 1.0 if loss.detach() < 1 else 0.5")),
        Invalid(training_script("if any(torch.isnan(t) for t in (loss, loss.detach())):\n    break")),
        Invalid(training_script("assert (out[:, 1:] >= out[:, 1:]).all()")),
        # LibAUC's AUC losses: Python's `sum` of a tensor adds its elements on the device, one by one
        Invalid(training_script("pos_mask = (y == 1).float()\nif sum(pos_mask) == 0:\n    continue")),
        Invalid(training_script("count = max(1, (y > 0).sum())")),
        Invalid(training_script("if model.training and loss > 100:\n    break")),
        Invalid(training_script("trimmed = False\nif trimmed or out.argmax(1)[-1] == 2:\n    continue")),
        Invalid(training_script("keep = y > 0\nif 0 in keep.long():\n    continue")),
        Invalid(training_script("unchanged = torch.equal(loss, loss.detach())\nif unchanged:\n    continue")),
        # the rows a boolean mask leaves are tensors, and so is a count of them (LLaVA's `num_images`)
        Invalid("import torch\nimport torch.nn.functional as F\n\n\ndef count_rows_with(ids, keep_mask, token):\n"
                "    rows = [row[mask] for row, mask in zip(ids, keep_mask)]\n    found = 0\n"
                "    for row in rows:\n        hits = (row == token).sum()\n        if hits == 0:\n"
                "            continue\n        found += 1\n    return found\n\n\n"
                "def train(model, loader, optimizer, device):\n    for x, y in loader:\n"
                "        out = model(x.to(device, non_blocking=True))\n"
                "        loss = F.cross_entropy(out, y.to(device, non_blocking=True))\n"
                "        loss.backward()\n        total = count_rows_with(out.argmax(1, keepdim=True), out[:, :1] > 0, 0)\n"
                "        optimizer.step()\n        optimizer.zero_grad()\n"),
    )

    def visit_If(self, node: cst.If) -> None:
        self._latches = _names_set_true(node.body)
        self._check(node.test, "if")
        self._latches = frozenset()

    def visit_While(self, node: cst.While) -> None:
        self._check(node.test, "while")

    def visit_Assert(self, node: cst.Assert) -> None:
        if not self.context.facts.asserts_off:  # (`python -O train.py` skips every assert)
            self._check(node.test, "assert")

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._check(node.test, "x if ... else y")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if self.context.resolve(func) == "torch.equal":
            # the answer is a Python bool: the sync is here, wherever the bool is tested (gpytorch's
            # `x1_eq_x2 = torch.equal(x1, x2)`, then `if x1_eq_x2:`)
            if not all(self.context.location_of(arg.value) == "host" for arg in node.args):
                self.report(node, self.message_equal)
            return
        if not (isinstance(func, cst.Name) and func.value in ("max", "min")) or len(node.args) < 2:
            return
        if any(arg.keyword is not None or arg.star for arg in node.args):
            return
        if any(self.tensors.is_tensor(arg.value) for arg in node.args) and not self.in_accumulator():
            self.report(node, self.message_compare.format(func=func.value))

    def _check(self, test: cst.BaseExpression, kind: str) -> None:
        if self._reads_tensor(test):
            self.report(test, self.message.format(kind=kind))

    def _reads_tensor(self, test: cst.BaseExpression) -> bool:
        """A tensor test, or `any(torch.isnan(l) for l in losses)`: the builtin calls `bool()` on each tensor."""
        if isinstance(test, cst.BooleanOperation):
            if self._reads_tensor(test.left):
                return True
            return not self._short_circuits(test) and self._reads_tensor(test.right)
        if self.tensors.named_only(test):
            return False  # `if aux_loss:`, `if hparams["f0_loss"]:`: a truth test of a flag named like a loss
        if self.tensors.is_tensor(test) or self._sliced_reduction(test) or self._membership(test):
            return True
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self._reads_tensor(test.expression)
        if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value in ("any", "all")):
            return False
        if len(test.args) == 1 and isinstance(test.args[0].value, (cst.GeneratorExp, cst.ListComp)):
            return self.tensors.is_tensor(test.args[0].value.elt)
        return False

    def _membership(self, test: cst.BaseExpression) -> bool:
        """`0.0 in attention_mask`: `Tensor.__contains__` compares on the device and reads the answer on the host (the
        causal-mask helper copied from Hugging Face's models asks it in every forward). A number looked up in a
        tensor, not a key in a dict (`"labels" in batch`)."""
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
                and isinstance(test.comparisons[0].operator, (cst.In, cst.NotIn))):
            return False
        needle, haystack = test.left, test.comparisons[0].comparator
        return is_number(needle) and not self.context.is_host_value(haystack) and (
            self.tensors.is_tensor(haystack) or self.tensors.is_mask(haystack))

    def _sliced_reduction(self, test: cst.BaseExpression) -> bool:
        """`(boxes[:, 2:] >= boxes[:, :2]).all()`: a reduction of a comparison between column slices of a 2-D
        array, which in the training step is a tensor's (DETR's `generalized_box_iou` asserts it on every call)."""
        if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) and test.func.attr.value in (
                "all", "any") and isinstance(test.func.value, cst.Comparison)):
            return False
        comparison = test.func.value
        sides = [comparison.left, *(c.comparator for c in comparison.comparisons)]
        return all(_column_slice(side) and not self.context.is_host_value(side.value) for side in sides)

    def _short_circuits(self, test: cst.BooleanOperation) -> bool:
        """Is the right side skipped in training? `not self.training and ...` (eval only), and `flag or ...` where
        the `if` sets the flag: the tensor is read only until the flag latches
        (`if use_queue or not torch.all(queue == 0):` followed by `use_queue = True`)."""
        left = test.left
        if isinstance(test.operator, cst.And):
            return _is_eval_test(left)
        return isinstance(left, cst.Name) and left.value in self._latches


def _is_eval_test(test: cst.BaseExpression) -> bool:
    """`not self.training`, `self.training is False`, `model.training == False`."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return last_name(test.expression) == "training"
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and last_name(test.left) == "training":
        comparison = test.comparisons[0]
        return isinstance(comparison.operator, (cst.Is, cst.Equal)) and is_false(comparison.comparator)
    return False


def _column_slice(expr: cst.BaseExpression) -> bool:
    """`x[:, 2:]`: a subscript of two or more elements, one of them a slice."""
    return isinstance(expr, cst.Subscript) and len(expr.slice) >= 2 and any(
        isinstance(element.slice, cst.Slice) for element in expr.slice)


def _names_set_true(body: cst.BaseSuite) -> frozenset[str]:
    """Names the block's own statements set to `True` (`use_queue = True`)."""
    if isinstance(body, cst.SimpleStatementSuite):  # `if flag or t.any(): flag = True`
        smalls = list(body.body)
    else:
        smalls = [s for line in body.body if isinstance(line, cst.SimpleStatementLine) for s in line.body]
    names = set()
    for small in smalls:
        if isinstance(small, cst.Assign) and is_true(small.value):
            names |= {t.target.value for t in small.targets if isinstance(t.target, cst.Name)}
    return frozenset(names)
