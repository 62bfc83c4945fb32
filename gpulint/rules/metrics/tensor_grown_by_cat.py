"""GPL205 tensor-grown-by-cat."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.names import names_used, target_names
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.linter.syntax import SyntaxVisitor
from gpulint.rules.common import off_by_default
from gpulint.rules.examples import training_script
from gpulint.rules.metrics.helpers import MetricRule, same_target

_NO_GRAD = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad"})
_CAT_FUNCTIONS = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.vstack", "torch.hstack", "torch.row_stack"})


class _AssignedNames(SyntaxVisitor):
    """Names (and dotted targets) a loop body binds, other than by `x = torch.cat([x, ...])` itself."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if not _is_self_cat(target.target, node.value):
                self.names |= target_names(target.target)

    def visit_For(self, node: cst.For) -> None:
        self.names |= target_names(node.target)


def _cat_parts(value: cst.BaseExpression) -> cst.BaseExpression | None:
    if isinstance(value, cst.Call) and value.args and isinstance(value.args[0].value, (cst.List, cst.Tuple)):
        return value.args[0].value
    return None


_CAT_CALL = re.compile(r"(?:cat|concat|concatenate|stack)\s*\(")
_ASSIGNED_BEFORE = re.compile(r"([A-Za-z_][\w.]*)(?:\[[^\]\n]*\])?\s*=[\s(\\]*[\w.]*$")


def _grows_by_cat(code: str) -> bool:
    """`x = torch.cat([x, part])` (or `x[i] = torch.cat((x[i], ...))`) in the text: what `_is_self_cat` accepts, and
    more. Found from each cat call back to its line's target, then forward to the target among the parts."""
    for call in _CAT_CALL.finditer(code):
        # The target is on the call's line, or on the line before (`x = (` or `x = \\` then the call).
        line_start = code.rfind("\n", 0, max(code.rfind("\n", 0, call.start()), 0)) + 1
        target = _ASSIGNED_BEFORE.search(code, line_start, call.start())
        if target is None:
            continue
        parts = code[call.end():call.end() + 400]
        if re.search(rf"(?<![\w.]){re.escape(target.group(1))}(?!\w)", parts):
            return True
    return False


def _slot_per_iteration(target: cst.BaseExpression, loop_names: set[str]) -> bool:
    """`batch[key] = torch.cat([batch[key], more])` where the loop sets `key`: each iteration extends another entry
    once, nothing grows."""
    if not isinstance(target, cst.Subscript):
        return False
    return any(names_used(element) & loop_names for element in target.slice)


def _is_self_cat(target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    parts = _cat_parts(value)
    return parts is not None and any(same_target(e.value, target) for e in parts.elements)  # type: ignore[union-attr]


class TensorGrownByCat(MetricRule):
    hot_only = False
    gpu_only = False  # the quadratic copying costs on the CPU too
    code = "GPL205"
    name = "tensor-grown-by-cat"
    default_enabled = False  # mostly false on the fresh batches (its docs say how often)
    message = "`{name} = torch.cat([{name}, ...])` inside a loop copies the whole tensor every iteration (quadratic); collect the parts in a list and concatenate once"
    triggers = ("cat(", "concat", "stack(")
    requires = (("for ", "while"),)  # the self-concatenation is in a loop of the same function

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        return super().may_report_in(code, name, class_name) and _grows_by_cat(code)
    docs = RuleDocs(
        what_it_does="Flags a tensor grown by concatenating onto itself inside a loop: `all_preds = torch.cat([all_preds, "
        "preds])`.",
        why_slow="`torch.cat` allocates a new tensor and copies both inputs: after N iterations it has copied O(N^2) "
        "elements, and every iteration allocates a bigger block from the caching allocator (fragmentation, and memory "
        "traffic that grows with the epoch).",
        example="preds = torch.empty(0, device='cuda')\nfor x, y in loader:\n    ...\n    preds = torch.cat([preds, "
        "out.argmax(1)])",
        use_instead="Append the parts to a Python list and call `torch.cat(parts)` once after the loop (one copy).",
        false_positives=off_by_default(
            code, 3, 13,
            "most growing concatenations were bounded (a few conditions, dense blocks) or decoding loops that"
            " do not train",
        )
        + "A name that is rebound every iteration before the cat (`x = batch; x = torch.cat([x, x])`) does "
        "not grow and is not flagged, nor is token-by-token decoding under `no_grad` (growing the sequence is the "
        "algorithm), nor an entry chosen by the loop (`batch[key] = torch.cat([batch[key], more])`, where the loop "
        "sets `key`: each entry is extended once); a loop known to run only a couple of times is harmless.",
    )
    valid = (
        training_script("parts.append(out.argmax(1))"),
        "import torch\n\ndef train(model, loader, optimizer):\n    for x, y in loader:\n        x = torch.cat([x, x])\n"
        "        model(x).sum().backward()\n        optimizer.step()\n",
        "import torch\n\ndef evaluate(model, loader):\n    preds = torch.empty(0)\n    for x, y in loader:\n"
        "        preds = torch.cat([preds, model(x)])\n    return preds\n",
        training_script("if step % 250 == 0:\n    seq = x[:1]\n    with torch.no_grad():\n"
                        "        while seq.size(1) < 64:\n"
                        "            seq = torch.cat((seq, model(seq)[:, -1:].argmax(-1)), dim=1)"),
        training_script("joined = {}\nfor k in pairs:\n    key = k.replace('rejected', 'both')\n"
                        "    joined[key] = torch.cat([joined[key], pairs[k]], dim=0)"),
    )
    invalid = (
        Invalid(training_script("preds = torch.cat([preds, out.argmax(1)])")),
        Invalid(
            "import torch\n\ndef embed_all(encoder, chunks):\n    out = torch.empty(0, 8)\n    for chunk in chunks:\n"
            "        out = torch.cat((out, encoder(chunk)), dim=0)\n    return out\n"
        ),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._loop_assigned: dict[int, set[str]] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.value, cst.Call):
            return
        if self.context.resolve(node.value.func) not in _CAT_FUNCTIONS:
            return
        target = node.targets[0].target
        if not _is_self_cat(target, node.value):
            return
        loop = self.context.innermost_loop()
        if loop is None:
            return
        names = self._assigned_in(loop)
        head = target_names(target) or {self.context.module.code_for_node(target)}
        if head & names or self._under_no_grad() or _slot_per_iteration(target, names):
            return
        self.report(node.value, self.message.format(name=self.context.module.code_for_node(target)), when="training")

    def _under_no_grad(self) -> bool:
        """Inside `with torch.no_grad()` / `inference_mode()` or a function decorated with them: decoding a sequence
        token by token there is the algorithm (autoregressive sampling), not an accumulation."""
        for node in self.context.ancestors:
            contexts: list[cst.BaseExpression] = []
            if isinstance(node, cst.With):
                contexts = [item.item for item in node.items]
            elif isinstance(node, cst.FunctionDef):
                contexts = [d.decorator for d in node.decorators]
            for expr in contexts:
                func = expr.func if isinstance(expr, cst.Call) else expr
                if self.context.resolve(func) in _NO_GRAD:
                    return True
        return False

    def _assigned_in(self, loop: cst.CSTNode) -> set[str]:
        names = self._loop_assigned.get(id(loop))
        if names is None:
            scan = _AssignedNames()
            scan.walk(loop.body)  # type: ignore[attr-defined]
            names = scan.names
            if isinstance(loop, cst.For):
                names |= target_names(loop.target)
            self._loop_assigned[id(loop)] = names
        return names
