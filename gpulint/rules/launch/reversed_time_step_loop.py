"""GPL508 reversed-time-step-loop."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.names import last_name, target_names
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.linter.syntax import SyntaxVisitor
from gpulint.rules.examples import training_script
from gpulint.rules.launch.helpers import WhereItRuns
from gpulint.rules.sync.tensors import Tensors

if TYPE_CHECKING:
    from gpulint.linter.context import FileContext


# Calls a loop body may make and still be only small elementwise kernels: collecting results, torch math, casts.
_LIST_METHODS = frozenset({"append", "insert", "appendleft"})
_ELEMENTWISE_METHODS = frozenset(
    {"clone", "detach", "float", "double", "half", "unsqueeze", "squeeze", "view", "reshape", "mul", "add", "sub",
     "div", "mul_", "add_", "sub_", "div_", "clamp", "exp", "log", "abs", "neg", "pow", "sqrt", "to"}
)
_NAME_BUILTINS = frozenset({"float", "int", "min", "max", "abs", "len"})


class ReversedTimeStepLoop(WhereItRuns):
    code = "GPL508"
    gpu_only = True  # kernel launches saved: none on the CPU
    name = "reversed-time-step-loop"
    message = (
        "a Python loop runs backwards over time steps doing tensor arithmetic on one step at a time: a few tiny "
        "kernel launches per step of the sequence; compute the discounted sum for all steps at once"
    )
    triggers = ("reversed(", ", -1)")
    docs = RuleDocs(
        what_it_does="Flags `for t in reversed(range(T)):` (or `range(T - 1, -1, -1)`) whose body only does "
        "elementwise arithmetic on tensors indexed by the step (`rewards[:, t] + gamma * values[:, t + 1]`), the shape "
        "of generalized advantage estimation (GAE) and discounted returns, in code that runs every step. A body that "
        "calls a model or any other function is not flagged: there the per-step launches are not the cost.",
        why_slow="Kernel launch count: each time step launches a few kernels on slices of a handful of elements "
        "(a subtraction, two multiplications, an addition, a copy), so a 512-token response costs about 2,000 "
        "launches, each paying Python and launch overhead on the CPU for a kernel that touches a few elements. The GPU "
        "waits on the Python loop.",
        example="lastgaelam = 0\nadvantages_reversed = []\nfor t in reversed(range(T)):\n"
        "    nextvalues = values[:, t + 1] if t < T - 1 else 0.0\n"
        "    delta = rewards[:, t] + gamma * nextvalues - values[:, t]\n"
        "    lastgaelam = delta + gamma * lam * lastgaelam\n    advantages_reversed.append(lastgaelam)\n"
        "advantages = torch.stack(advantages_reversed[::-1], dim=1)",
        use_instead="# the recurrence A_t = delta_t + (gamma * lam) * A_{t+1} is one matrix product over all steps\n"
        "next_values = torch.cat([values[:, 1:], torch.zeros_like(values[:, :1])], dim=1)\n"
        "deltas = rewards + gamma * next_values - values\n"
        "steps = torch.arange(T, device=values.device)\n"
        "power = (steps[None, :] - steps[:, None]).clamp(min=0)\n"
        "discount = torch.triu((gamma * lam) ** power.to(values.dtype))\n"
        "advantages = deltas @ discount.T\n"
        "# or keep the loop inside a function compiled with torch.compile",
        fix_safety="No fix: the vectorised form changes the summation order (floating-point results differ in the "
        "last bits), and its T x T discount matrix needs memory that a very long sequence may not have.",
        false_positives="Loops over host values (numpy arrays or Python lists in a replay buffer) launch no kernels "
        "and are not flagged when gpulint sees where the values live; a buffer it cannot place is taken for a tensor "
        "when the loop stacks its results with `torch.stack` / `torch.cat`. Short sequences (a handful of steps) cost "
        "little: add `# noqa: GPL508`.",
    )
    valid = (
        training_script("deltas = out - out.mean()\nadvantages = torch.flip(torch.cumsum(torch.flip(deltas, [1]), 1), [1])"),
        ("import numpy as np\n\ndef returns(rewards, gamma):\n    out = np.zeros(len(rewards))\n    running = 0.0\n"
         "    for t in reversed(range(len(rewards))):\n        running = rewards[t] + gamma * running\n"
         "        out[t] = running\n    return out\n"),
        ("import torch\n\ndef sample(model, x, alphas):\n    for t in reversed(range(len(alphas))):\n"
         "        x = (x - model(x, t)) / alphas[t]\n    return x\n"),
    )
    invalid = (
        Invalid(
            "import torch\n\ndef advantages(values, rewards, gamma, lam):\n    T = rewards.shape[1]\n"
            "    last = 0\n    out = []\n    for t in reversed(range(T)):\n"
            "        following = values[:, t + 1] if t < T - 1 else 0.0\n"
            "        delta = rewards[:, t] + gamma * following - values[:, t]\n"
            "        last = delta + gamma * lam * last\n        out.append(last)\n"
            "    return torch.stack(out[::-1], dim=1)\n"
        ),
        Invalid(training_script("returns = torch.zeros_like(out)\nrunning = torch.zeros_like(out[:, 0])\n"
                                "for t in range(out.shape[1] - 1, -1, -1):\n"
                                "    running = out[:, t] + 0.99 * running\n    returns[:, t] = running")),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self.tensors = Tensors(context)

    def leave_Assign(self, original_node: cst.Assign) -> None:
        self.tensors.assigned(original_node)

    def visit_Call(self, node: cst.Call) -> None:
        self._track_call(node)

    def visit_For(self, node: cst.For) -> None:
        self._track_for(node)
        if not _runs_backwards(node.iter) or not isinstance(node.target, cst.Name):
            return
        body = _BodyScan(node.target.value, self.context)
        body.walk(node.body)
        if not body.indexed_arithmetic or body.other_calls:
            return
        if any(self.context.is_host_value(base) for base in body.bases):
            return  # numpy arrays or Python lists: no kernels
        tensors = any(self.tensors.is_tensor(base) for base in body.bases)
        if tensors or self._stacked_later(body.collected):
            self._report_where_it_runs(node.iter)

    def _stacked_later(self, collected: set[str]) -> bool:
        """Are the lists the loop appends to joined by `torch.stack` / `torch.cat` in the same function?"""
        function = self.context.enclosing_function()
        if not collected or function is None:
            return False
        finder = _StackFinder(collected, self.context)
        finder.walk(function.body)
        return finder.found


def _runs_backwards(iterable: cst.BaseExpression) -> bool:
    """`reversed(range(...))` or `range(start, stop, -1)`."""
    if not isinstance(iterable, cst.Call) or not isinstance(iterable.func, cst.Name):
        return False
    if iterable.func.value == "reversed" and len(iterable.args) == 1:
        inner = iterable.args[0].value
        return isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == "range"
    if iterable.func.value == "range" and len(iterable.args) == 3:
        step = iterable.args[2].value
        return isinstance(step, cst.UnaryOperation) and isinstance(step.operator, cst.Minus)
    return False


class _BodyScan(SyntaxVisitor):
    """What a loop body does: arithmetic on values indexed by the step, the values so indexed, the lists it
    appends to, and whether it calls anything beyond small elementwise work."""

    def __init__(self, step: str, context: FileContext) -> None:
        super().__init__()
        self.step = step
        self.context = context
        self.indexed_arithmetic = False
        self.other_calls = False
        self.bases: list[cst.BaseExpression] = []
        self.collected: set[str] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        for side in (node.left, node.right):
            if isinstance(side, cst.Subscript) and self._indexed_by_step(side):
                self.indexed_arithmetic = True
                self.bases.append(side.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if isinstance(node.target, cst.Subscript) and self._indexed_by_step(node.target):
            self.bases.append(node.target.value)  # `returns[:, t] = running`

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _LIST_METHODS:
            self.collected |= target_names(func.value)
            return
        if isinstance(func, cst.Attribute) and func.attr.value in _ELEMENTWISE_METHODS:
            return
        if isinstance(func, cst.Name) and func.value in _NAME_BUILTINS:
            return
        if (self.context.resolve(func) or "").startswith("torch."):
            return
        self.other_calls = True

    def _indexed_by_step(self, node: cst.Subscript) -> bool:
        for element in node.slice:
            if isinstance(element.slice, cst.Index) and self.step in _names_in(element.slice.value):
                return True
        return False


def _names_in(expr: cst.BaseExpression) -> set[str]:
    if isinstance(expr, cst.Name):
        return {expr.value}
    if isinstance(expr, cst.BinaryOperation):
        return _names_in(expr.left) | _names_in(expr.right)
    return set()


class _StackFinder(SyntaxVisitor):
    def __init__(self, names: set[str], context: FileContext) -> None:
        super().__init__()
        self.names = names
        self.context = context
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        if self.found or not node.args or self.context.resolve(node.func) not in ("torch.stack", "torch.cat"):
            return
        first = node.args[0].value
        while isinstance(first, (cst.Subscript, cst.Call)):  # `out[::-1]`, `list(reversed(out))`
            if isinstance(first, cst.Subscript):
                first = first.value
            elif first.args and last_name(first.func) in ("list", "reversed"):
                first = first.args[0].value
            else:
                break
        self.found = isinstance(first, cst.Name) and first.value in self.names
