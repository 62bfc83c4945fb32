"""What the GPL2xx rules share: the base classes (`MetricRule`, `LoopFactsRule`), what is a host read of a device
value (`scalar_read`, `device_to_host_copy`), and the facts of the loops the step runs."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.names import dotted_name, last_name, target_names
from gpulint.linter.rule import Report, Rule
from gpulint.linter.syntax import SyntaxVisitor


class MetricRule(Rule):
    """Base of the GPL2xx rules: the cost of a metric in test code is not training time, so test files are skipped."""

    gpu_only = True  # a host read of a device tensor per step: nothing to wait for on the CPU
    hot_only = True  # every GPL2xx finding is per step (GPL205 overrides: it reports any growing loop in training)

    def report(self, node, message=None, **kwargs) -> None:  # type: ignore[override]
        if not self.context.in_tests:
            super().report(node, message, **kwargs)

    def report_with(self, node: cst.CSTNode, message: str, ancestors: tuple[cst.CSTNode, ...]) -> None:
        """Report `node` as seen from `ancestors` (a node remembered earlier in the traversal), every step."""
        if not self.context.in_tests and not in_parameter_loop(ancestors):
            self.context.add_report(Report(self, node, message, "per_step", ancestors))


def in_parameter_loop(ancestors) -> bool:
    """Inside a loop over parameters (`for p in model.parameters()`, `for p in self.master_params`): a per-parameter
    norm or read there is GPL1xx's (per-tensor loops), not an accumulator of step metrics."""
    for node in reversed(ancestors):
        if isinstance(node, cst.For):
            iter_ = node.iter
            while isinstance(iter_, cst.Call) and last_name(iter_.func) in ("zip", "enumerate", "list") and iter_.args:
                iter_ = iter_.args[0].value
            name = dotted_name(iter_.func if isinstance(iter_, cst.Call) else iter_) or ""
            return "param" in name.lower()
        if isinstance(node, (cst.FunctionDef, cst.While)):
            return False
    return False


# Tensor methods whose result is still a tensor on the receiver's device.
_TENSOR_METHODS = frozenset(
    {"sum", "mean", "detach", "norm", "max", "min", "float", "double", "half", "clone", "std", "var", "abs",
     "argmax", "eq", "ne", "prod", "exp", "log", "sqrt", "squeeze", "view", "reshape", "to", "cuda"}
)
# Results of these are Python numbers read from the device (a host-device round trip each).
_SCALAR_BUILTINS = frozenset({"float", "int"})


def scalar_read(context, expr: cst.BaseExpression) -> cst.Call | None:
    """`t.item()`, `float(t)`, `int(t)`, `t.cpu().numpy()` or a module's host-read lambda (`to_np(t)`) of a value not
    already on the host: the call, else None."""
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value == "item" and not expr.args:
        return None if context.is_host_value(func.value) else expr
    if isinstance(func, cst.Attribute) and func.attr.value == "numpy" and device_to_host_copy(context, func.value):
        return expr  # `loss.detach().cpu().numpy()`
    if isinstance(func, cst.Name) and func.value in context.host_read_lambdas and len(expr.args) == 1 \
            and looks_like_tensor(context, expr.args[0].value):
        return expr  # `to_np(torch.mean(dyn_loss))`, `to_np = lambda x: x.detach().cpu().numpy()`
    if isinstance(func, cst.Name) and func.value in _SCALAR_BUILTINS and len(expr.args) == 1:
        arg = expr.args[0].value
        if isinstance(arg, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) and looks_like_tensor(context, arg):
            return expr
    return None


def looks_like_tensor(context, expr: cst.BaseExpression) -> bool:
    """A value that is (very likely) a tensor not on the host: known device provenance, a tensor method result, or a
    name that says loss. Python numbers, sizes and values after `.item()`/`.cpu()` are not."""
    location = context.location_of(expr)
    if location == "host":
        return False
    if location == "device":
        return True
    if isinstance(expr, cst.Call):
        if not isinstance(expr.func, cst.Attribute):
            return False
        method = expr.func.attr.value
        # `x.detach()` / `x.sum()` are tensors whatever x is; other tensor methods are what their receiver is.
        return method in ("detach", "sum", "mean", "norm") or (
            method in _TENSOR_METHODS and looks_like_tensor(context, expr.func.value)
        )
    name = last_name(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    if isinstance(expr, cst.Subscript):
        name = last_name(expr.value)
    return bool(name) and "loss" in name.lower()


def scalar_reads_in(context, expr: cst.BaseExpression) -> list[cst.Call]:
    """Every device read (`scalar_read`) inside a (small) expression, lambdas excluded."""
    finder = _ScalarReads(context)
    finder.walk(expr)
    return finder.found


class _ScalarReads(SyntaxVisitor):
    def __init__(self, context) -> None:
        self.context = context
        self.found: list[cst.Call] = []

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> bool:
        if scalar_read(self.context, node) is not None:
            self.found.append(node)
            return False
        return True


def same_target(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    return a.deep_equals(b)


class ScalarLocals:
    """Locals assigned a scalar read from the device (`loss_value = loss.item()`). Accumulating such a name later in
    the same function is the same per-step sync as accumulating the read itself: it is reported at the read."""

    def __init__(self, rule: MetricRule) -> None:
        self.rule = rule
        self._reads: dict[tuple[int, str], tuple[cst.Call, tuple[cst.CSTNode, ...]]] = {}
        self._reported: set[int] = set()
        # Reads seen by the engine's traversal inside each assignment being visited (no re-walk of every value).
        self._open: list[list[cst.Call]] = []

    def enter(self, node: cst.Assign) -> None:
        self._open.append([])

    def note(self, call: cst.Call) -> None:
        """Called for every call the traversal visits: collects device reads for the enclosing assignments."""
        if self._open and scalar_read(self.rule.context, call) is not None:
            for reads in self._open:
                reads.append(call)

    def leave(self, node: cst.Assign) -> None:
        reads = self._open.pop()
        if len(node.targets) != 1:
            return
        target, value = node.targets[0].target, node.value
        if not reads:
            for name in target_names(target):
                self._reads.pop((id(self.rule.context.enclosing_function()), name), None)
            return
        if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple) and len(target.elements) == len(value.elements):
            pairs = [(t.value, v.value) for t, v in zip(target.elements, value.elements)]  # `a, b = x.item(), y.item()`
        else:
            pairs = [(target, value)]
        function = id(self.rule.context.enclosing_function())
        for name, expr in pairs:
            if not isinstance(name, cst.Name):
                continue
            # One element: the reads collected; a tuple (rare, and only when it holds a read): walk each element.
            found = reads if len(pairs) == 1 else scalar_reads_in(self.rule.context, expr)
            if found:
                self._reads[(function, name.value)] = (found[0], self.rule.context.ancestors_snapshot())
            else:
                self._reads.pop((function, name.value), None)

    def report_reads_in(self, expr: cst.BaseExpression, message: str) -> bool:
        """Report the read behind each recorded name `expr` is made of (`total += step_loss * n`); True if any."""
        if isinstance(expr, cst.BinaryOperation):
            left = self.report_reads_in(expr.left, message)
            return self.report_reads_in(expr.right, message) or left
        if not isinstance(expr, cst.Name):
            return False
        found = self._reads.get((id(self.rule.context.enclosing_function()), expr.value))
        if found is None:
            return False
        read, ancestors = found
        if id(read) not in self._reported:
            self._reported.add(id(read))
            text = self.rule.context.module.code_for_node(read)
            self.rule.report_with(read, message.format(read=text), ancestors)
        return True


class LoopFrame:
    """What the main traversal has seen inside one open `for` loop that involves its loop variables."""

    def __init__(self, node: cst.For, loop_vars: set[str], ancestors: tuple[cst.CSTNode, ...]) -> None:
        self.node = node
        self.loop_vars = loop_vars
        self.ancestors = ancestors
        self.indexed_by_var = False  # `x[i]` somewhere in the body
        self.compares_vars = False  # `p == t` between two loop variables
        self.compares_tensor = False  # `pred == c` with a loop variable and a non-host value
        self.reductions = 0  # `.sum()` / `.mean()` / `.item()` calls in the body
        self.sequential = False  # a chain product `acc = x[i] @ acc`: each iteration needs the previous one
        self.bound: set[str] = set()  # names the body assigned so far (a name bound before the loop carries state)
        self.reported = False


class LoopFactsRule(MetricRule):
    """Base of the rules that judge a `for` loop by its body. Facts are gathered by the engine's single traversal
    (no re-walk of the body per loop) into a frame per open loop; `leave_For` judges the loop."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self._frames: list[list[LoopFrame]] = [[]]  # one list per function scope being visited

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._frames.append([])

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._frames.pop()

    def visit_For(self, node: cst.For) -> None:
        loop_vars = target_names(node.target)
        if loop_vars and self.wants(node):
            self._frames[-1].append(LoopFrame(node, loop_vars, self.context.ancestors_snapshot()))

    def leave_For(self, node: cst.For) -> None:
        open_loops = self._frames[-1]
        if open_loops and open_loops[-1].node is node:
            frame = open_loops.pop()
            if not frame.reported:
                self.judge(frame)

    def wants(self, node: cst.For) -> bool:
        raise NotImplementedError

    def judge(self, frame: LoopFrame) -> None:
        raise NotImplementedError

    def report_loop(self, frame: LoopFrame, message: str | None = None) -> None:
        frame.reported = True
        self.report_with(frame.node.iter, message or self.message, frame.ancestors)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        for frame in self._frames[-1]:
            if not frame.indexed_by_var and any(index_name(e, scaled=True) in frame.loop_vars for e in node.slice):
                frame.indexed_by_var = True

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if not any(isinstance(t.operator, (cst.Equal, cst.NotEqual)) for t in node.comparisons):
            return
        sides = [node.left] + [t.comparator for t in node.comparisons]
        for frame in self._frames[-1]:
            vars_ = [s for s in sides if isinstance(s, cst.Name) and s.value in frame.loop_vars]
            if len(vars_) >= 2:
                frame.compares_vars = True
            elif vars_ and any(s not in vars_ and _tensor_operand(self.context, s) for s in sides):
                frame.compares_tensor = True

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("sum", "mean", "item", "float", "count_nonzero"):
            for frame in self._frames[-1]:
                frame.reductions += 1


def _tensor_operand(context, expr: cst.BaseExpression) -> bool:
    """A comparison operand that may be a tensor: a name, attribute, subscript or call not known to be on the host.
    Arithmetic (`num_rounds - 1`) and literals are loop bookkeeping, not a metric."""
    return isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) and not context.is_host_value(expr)


def index_name(element: cst.SubscriptElement, scaled: bool = False) -> str | None:
    """The name of `x[i]`; with `scaled`, also of `x[i * 3 + 1]` (rows laid out in groups: ViTPose's combined
    targets)."""
    index = element.slice
    if not isinstance(index, cst.Index):
        return None
    value = index.value
    while scaled and isinstance(value, cst.BinaryOperation) and isinstance(value.right, cst.Integer) \
            and isinstance(value.operator, (cst.Multiply, cst.Add, cst.Subtract)):
        value = value.left
    return value.value if isinstance(value, cst.Name) else None


def range_bound(iter_: cst.BaseExpression) -> cst.BaseExpression | None:
    """For `range(n)` / `range(0, n)`: n, else None."""
    if isinstance(iter_, cst.Call) and isinstance(iter_.func, cst.Name) and iter_.func.value == "range" and iter_.args:
        return iter_.args[-1].value if len(iter_.args) <= 2 else None
    return None


def size_of(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The tensor in `t.size(0)`, `t.shape[0]`, `t.size()[0]`, `len(t)`, else None."""
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "size" and len(expr.args) == 1:
            return expr.func.value
        if isinstance(expr.func, cst.Name) and expr.func.value == "len" and len(expr.args) == 1:
            return expr.args[0].value
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
        base = expr.value
        if isinstance(base, cst.Attribute) and base.attr.value == "shape":
            return base.value
        if isinstance(base, cst.Call) and isinstance(base.func, cst.Attribute) and base.func.attr.value == "size" and not base.args:
            return base.func.value
    return None


def device_to_host_copy(context, expr: cst.BaseExpression) -> bool:
    """True when `expr` contains `t.cpu()` / `t.to('cpu')` of a value not already on the host."""
    finder = _HostCopies(context)
    finder.walk(expr)
    return finder.found


class _HostCopies(SyntaxVisitor):
    def __init__(self, context) -> None:
        self.context = context
        self.found = False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func
        if isinstance(func, cst.Attribute) and (func.attr.value == "cpu" or (
            func.attr.value == "to" and node.args and isinstance(node.args[0].value, cst.SimpleString)
            and node.args[0].value.raw_value == "cpu"
        )):
            if not self.context.is_host_value(func.value):
                self.found = True
        return not self.found
