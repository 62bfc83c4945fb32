"""GPL2xx: training metrics computed element by element, or read to the host every step only to be summed there."""

from __future__ import annotations

import re
from functools import lru_cache

import libcst as cst

from gpulint.linter.names import callee_method, dotted_name, last_name, target_names
from gpulint.linter.rule import Invalid, Replace, Report, Rule, RuleDocs
from gpulint.linter.syntax import SyntaxVisitor
from gpulint.rules.examples import training_script


class _MetricRule(Rule):
    """Base of the GPL2xx rules: the cost of a metric in test code is not training time, so test files are skipped."""

    hot_only = True  # every GPL2xx finding is per step (GPL205 overrides: it reports any growing loop in training)

    def report(self, node, message=None, **kwargs) -> None:  # type: ignore[override]
        if not self.context.in_tests:
            super().report(node, message, **kwargs)

    def report_with(self, node: cst.CSTNode, message: str, ancestors: tuple[cst.CSTNode, ...]) -> None:
        """Report `node` as seen from `ancestors` (a node remembered earlier in the traversal), every step."""
        if not self.context.in_tests and not _in_parameter_loop(ancestors):
            self.context.add_report(Report(self, node, message, "per_step", ancestors))


def _in_parameter_loop(ancestors) -> bool:
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


def _scalar_read(context, expr: cst.BaseExpression) -> cst.Call | None:
    """`t.item()`, `float(t)`, `int(t)` or `t.cpu().numpy()` of a value not already on the host: the call, else None."""
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value == "item" and not expr.args:
        return None if context.is_host_value(func.value) else expr
    if isinstance(func, cst.Attribute) and func.attr.value == "numpy" and _device_to_host_copy(context, func.value):
        return expr  # `loss.detach().cpu().numpy()`
    if isinstance(func, cst.Name) and func.value in _SCALAR_BUILTINS and len(expr.args) == 1:
        arg = expr.args[0].value
        if isinstance(arg, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) and _looks_like_tensor(context, arg):
            return expr
    return None


def _looks_like_tensor(context, expr: cst.BaseExpression) -> bool:
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
            method in _TENSOR_METHODS and _looks_like_tensor(context, expr.func.value)
        )
    name = last_name(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    if isinstance(expr, cst.Subscript):
        name = last_name(expr.value)
    return bool(name) and "loss" in name.lower()


def _scalar_reads_in(context, expr: cst.BaseExpression) -> list[cst.Call]:
    """Every device read (`_scalar_read`) inside a (small) expression, lambdas excluded."""
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
        if _scalar_read(self.context, node) is not None:
            self.found.append(node)
            return False
        return True


def _same_target(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    return a.deep_equals(b)


class _ScalarLocals:
    """Locals assigned a scalar read from the device (`loss_value = loss.item()`). Accumulating such a name later in
    the same function is the same per-step sync as accumulating the read itself: it is reported at the read."""

    def __init__(self, rule: _MetricRule) -> None:
        self.rule = rule
        self._reads: dict[tuple[int, str], tuple[cst.Call, tuple[cst.CSTNode, ...]]] = {}
        self._reported: set[int] = set()
        # Reads seen by the engine's traversal inside each assignment being visited (no re-walk of every value).
        self._open: list[list[cst.Call]] = []

    def enter(self, node: cst.Assign) -> None:
        self._open.append([])

    def note(self, call: cst.Call) -> None:
        """Called for every call the traversal visits: collects device reads for the enclosing assignments."""
        if self._open and _scalar_read(self.rule.context, call) is not None:
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
            found = reads if len(pairs) == 1 else _scalar_reads_in(self.rule.context, expr)
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


class ItemAccumulator(_MetricRule):
    code = "GPL201"
    name = "item-accumulator"
    message = "accumulating `{read}` on the host forces a device-to-host sync every step; accumulate the detached tensor and read it when you log"
    triggers = (".item(", "float(", "int(", ".numpy(")
    fixable = True
    docs = RuleDocs(
        what_it_does="Flags a running total built from host scalars read every step: `total += loss.item()`, "
        "`total += float(loss)`, `total = total + loss.item()`, or `v = loss.item()` then `total += v` (reported at the "
        "read), where the read is not gated to a logging interval.",
        why_slow="Each `.item()` / `float(tensor)` is a device-to-host copy that waits for every kernel queued before it, "
        "so the CPU can no longer run ahead of the GPU: one host-device round trip per step, usually only to print an "
        "average every N steps. Summing on the device costs one tiny add kernel and no wait.",
        example="total = 0.0\nfor x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n"
        "    optimizer.step()\n    total += loss.item()\n    if step % 100 == 0:\n        print(total / 100)",
        use_instead="`total += loss.detach()` (a device tensor) and read it once under the logging gate: "
        "`print(total.item() / 100)`.",
        fix_safety="Unsafe: `x.item()` / `float(x)` becomes `x.detach()`, so the total becomes a 0-d tensor. Values are "
        "the same (`float(total)` matches), but code that serialises the total (json), formats it with `%d`, compares "
        "it (`if total > best` then syncs) or expects an int from `int(x)` must read it with `.item()` where it is used.",
        false_positives="A tensor that is already on the CPU (gpulint follows `.cpu()`/`.tolist()` within a function); a "
        "loop that is not the training step but is called from it with a name gpulint cannot see is cold.",
    )
    valid = (
        training_script("total += loss.detach()\nif step % 100 == 0:\n    print(total.item() / 100)"),
        training_script("if step % 100 == 0:\n    total += loss.item()"),
        training_script("host = loss.detach().cpu()\ntotal += host.item()"),
        training_script("total += x.size(0)"),
        training_script("sqsum = 0.0\nfor p in model.parameters():\n    sqsum += (p.grad ** 2).sum().item()"),
        "import torch\n\ndef evaluate(model, loader, criterion):\n    total = 0.0\n    with torch.no_grad():\n"
        "        for x, y in loader:\n            total += criterion(model(x), y).item()\n    return total\n",
    )
    invalid = (
        Invalid(training_script("total += loss.item()"), fixed=training_script("total += loss.detach()")),
        Invalid(training_script("total += float(loss)"), fixed=training_script("total += loss.detach()")),
        Invalid(training_script("total = total + loss.item()"), fixed=training_script("total = total + loss.detach()")),
        Invalid(training_script("total += x.size(0) * loss.item()")),
        Invalid(training_script("step_loss = loss.detach().clone().item()\ntotal += step_loss")),
        Invalid(training_script("total += loss.detach().cpu().numpy()")),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self.scalar_locals = _ScalarLocals(self)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign)):
            self._check(node.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if (
            len(node.targets) == 1
            and isinstance(value, cst.BinaryOperation)
            and isinstance(value.operator, cst.Add)
            and _same_target(node.targets[0].target, value.left)
        ):
            self._check(value.right)
        self.scalar_locals.enter(node)

    def leave_Assign(self, node: cst.Assign) -> None:
        self.scalar_locals.leave(node)

    def visit_Call(self, node: cst.Call) -> None:
        self.scalar_locals.note(node)

    def _check(self, value: cst.BaseExpression) -> None:
        direct = _scalar_read(self.context, value)
        reads = [direct] if direct is not None else _scalar_reads_in(self.context, value)
        if not reads:
            self.scalar_locals.report_reads_in(value, self.message)
            return
        fix = []
        if direct is not None and last_name(direct.func) in ("item", "float", "int"):
            # `t.item()` / `float(t)` -> `t.detach()`; a `.cpu().numpy()` copy has no one-token replacement.
            tensor = direct.func.value if isinstance(direct.func, cst.Attribute) else direct.args[0].value
            fix = [Replace(direct, cst.Call(func=cst.Attribute(value=tensor, attr=cst.Name("detach"))))]
        if _in_parameter_loop(self.context.ancestors):
            return
        read = self.context.module.code_for_node(reads[0])
        self.report(value, self.message.format(read=read), fix=fix, unsafe_fix=True)


_ACCUMULATING_METHODS = frozenset({"update", "append", "extend", "add", "add_"})
# Callees that collect statistics (`self._stats(...)`, `Statistics(loss, n_words, n_correct)`, `update_metrics(...)`).
_STATS_PARTS = frozenset({"stat", "stats", "statistics", "meter", "meters", "metric", "metrics"})
# Dicts whose entries are logged later (`loss['D/real'] = ...`, `metrics["loss"] = ...`).
_METRIC_DICT_WORDS = frozenset({"loss", "losses", "metrics", "stats", "logs", "log"})


_WORD_BOUNDARY = re.compile(r"[_.]+|(?<=[a-z])(?=[A-Z])")


@lru_cache(maxsize=8192)
def _words(name: str) -> frozenset[str]:
    """`log_metrics` -> {log, metrics}; `AverageMeter` -> {average, meter}."""
    return frozenset(w.lower() for w in _WORD_BOUNDARY.split(name) if w)


def _accumulating_callee(call: cst.Call) -> str | None:
    """The method or function name when the call collects values across steps (a meter, a list, a stats object);
    logging calls are not (a logged scalar is a GPL4xx sync)."""
    name = last_name(call.func)
    if name is None:
        return None
    if isinstance(call.func, cst.Attribute) and name in _ACCUMULATING_METHODS:
        return name
    words = _words(name)
    return name if words & _STATS_PARTS and "log" not in words else None


class ItemIntoMeter(_MetricRule):
    code = "GPL202"
    name = "item-into-meter"
    message = "`.{method}({read})` reads a device scalar to the host every step to feed a meter or list; keep it on the device until you log"
    tensor_message = "`{call}` hands a device tensor to a meter, which reads it with `.item()` every step; keep a device running sum and read it when you log"
    dict_message = "`{target} = {read}` reads a device scalar every step into a metrics dict that is only logged every N steps; store the detached tensor and read it when you log"
    triggers = (".item(", ".tolist(", "float(", ".numpy(", "update(")
    docs = RuleDocs(
        what_it_does="Flags meters and lists fed with host scalars read every step: `losses.update(loss.item(), n)`, "
        "`metric_logger.update(loss=loss.item())`, `history.append(loss.item())`, `preds.extend(out.argmax(1).tolist())`, "
        "statistics objects (`Statistics(loss.item(), n_correct)`, `self._stats(...)`), `v = loss.item()` later fed to "
        "one of those (reported at the read), device tensors handed to a `metric_logger.update(...)` (a "
        "MetricLogger calls `.item()` on each tensor itself), and reads stored into a metrics dict every step "
        "(`loss['D/real'] = d_real.item()`).",
        why_slow="The `.item()` / `.tolist()` is a device-to-host copy that waits for the whole step to finish, every step, "
        "while the meter's value is printed only every N steps: the CPU loses its lead over the GPU and the next step's "
        "kernels start late.",
        example="for images, target in loader:\n    loss = criterion(model(images), target)\n    loss.backward()\n"
        "    optimizer.step()\n    losses.update(loss.item(), images.size(0))",
        use_instead="Accumulate detached device tensors (`running += loss.detach() * n`) or collect them in a list and "
        "`torch.stack(...)` once; call `.item()` under the logging gate.",
        fix_safety="No fix: meters often format or serialise the value and would break on a tensor.",
        false_positives="Values already on the host (after `.cpu()` / `.tolist()` within the function). Meters whose "
        "`update` is itself a logger call every step are a GPL4xx sync as well.",
    )
    valid = (
        training_script("losses.update(loss.detach(), x.size(0))"),
        training_script("if step % 10 == 0:\n    losses.update(loss.item(), x.size(0))"),
        training_script("history.append(step)"),
        training_script("running_loss.update(loss.detach())\nmetric_logger.update(lr=optimizer.param_groups[0]['lr'])"),
        training_script("loss_meter.update(loss.detach())\nmetric_logger.update(loss_scale_value=scaler.get_scale())"),
        training_script("wandb_log_metrics({'loss': loss.item()})"),
        training_script("cache = {}\ncache['loss'] = loss.detach()\nlosses = {}\nlosses['n'] = x.size(0)"),
        "import torch\n\n@torch.no_grad()\ndef validate(model, loader, criterion, losses):\n    for x, y in loader:\n"
        "        losses.update(criterion(model(x), y).item(), x.size(0))\n",
    )
    invalid = (
        Invalid(training_script("losses.update(loss.item(), x.size(0))")),
        Invalid(training_script("metric_logger.update(loss=loss.item())")),
        Invalid(training_script("history.append(loss.item())")),
        Invalid(training_script("preds.extend(out.argmax(1).tolist())")),
        Invalid(training_script("losses.update(loss.item() * accum_steps, x.size(0))")),
        Invalid(training_script("loss_value = loss.item()\nmetric_logger.update(loss=loss_value)")),
        Invalid(training_script("if mixup is None:\n    class_acc = (out.argmax(-1) == y).float().mean()\nelse:\n"
                         "    class_acc = None\nmetric_logger.update(class_acc=class_acc)")),
        Invalid(training_script("stats = self._stats(x.size(0), loss.sum().item())")),
        Invalid(training_script("n_correct = (out.argmax(-1) == y).sum().item()\nreport = Statistics(n_correct, x.size(0))")),
        Invalid(training_script("l, a = loss.item(), out.max().item()\nmeter.update_stats(l, a)"), count=2),
        Invalid(training_script("logs = {}\nlogs['train/loss'] = loss.item()\nif step % 10 == 0:\n    print(logs)")),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self.scalar_locals = _ScalarLocals(self)
        self._tensor_locals: set[tuple[int, str]] = set()  # locals assigned a tensor expression (`acc = (p == y).mean()`)

    def visit_Assign(self, node: cst.Assign) -> None:
        self.scalar_locals.enter(node)
        self._metrics_dict_store(node)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            key = (id(self.context.enclosing_function()), node.targets[0].target.value)
            if _looks_like_tensor(self.context, node.value):
                self._tensor_locals.add(key)
            elif not (isinstance(node.value, cst.Name) and node.value.value == "None"):  # `else: acc = None` branches
                self._tensor_locals.discard(key)

    def leave_Assign(self, node: cst.Assign) -> None:
        self.scalar_locals.leave(node)

    def visit_Call(self, node: cst.Call) -> None:
        self.scalar_locals.note(node)
        method = _accumulating_callee(node)
        if method is None:
            return
        if method == "update" and self._tensor_into_meter(node):
            return
        for arg in node.args:
            reads = _scalar_reads_in(self.context, arg.value)
            read = reads[0] if reads else self._tolist(arg.value)
            if read is not None:
                if not _in_parameter_loop(self.context.ancestors):
                    text = self.context.module.code_for_node(read)
                    self.report(node, self.message.format(method=method, read=text))
                return
        for arg in node.args:  # every argument: `Statistics(loss, n_words, n_correct)` may carry several reads
            self.scalar_locals.report_reads_in(arg.value, self.message.replace("{method}", method))

    def _metrics_dict_store(self, node: cst.Assign) -> None:
        """`loss['D/loss_real'] = d_loss_real.item()`, `metrics["loss"] = loss.item() * k`: a per-step read stored in a
        dict of metrics (named loss/losses/metrics/stats/logs) for a later log call."""
        for target in node.targets:
            sub = target.target
            if not isinstance(sub, cst.Subscript) or not _words(last_name(sub.value) or "") & _METRIC_DICT_WORDS:
                continue
            reads = _scalar_reads_in(self.context, node.value)
            if reads:
                code = self.context.module.code_for_node
                self.report(node, self.dict_message.format(target=code(sub), read=code(reads[0])))
                return

    def _tensor_into_meter(self, call: cst.Call) -> bool:
        """`metric_logger.update(acc=class_acc)` with a tensor: a MetricLogger calls `.item()` on every tensor it gets.
        (An AverageMeter `losses.update(loss)` keeps a tensor as it is and syncs only when printed: not flagged.)"""
        receiver = last_name(call.func.value) if isinstance(call.func, cst.Attribute) else None
        if receiver is None or "logger" not in receiver.lower():
            return False
        for arg in call.args:
            if isinstance(arg.value, (cst.Name, cst.Attribute)) and self._tensor_like(arg.value):
                self.report(call, self.tensor_message.format(call=self.context.module.code_for_node(call)))
                return True
        return False

    def _tensor_like(self, expr: cst.BaseExpression) -> bool:
        # Tracked first: `acc = (p == y).mean()` in one branch and `acc = None` in the other is still a tensor here.
        if isinstance(expr, cst.Name) and (id(self.context.enclosing_function()), expr.value) in self._tensor_locals:
            return True
        location = self.context.location_of(expr)
        if location != "unknown":
            return location == "device"
        words = _words(last_name(expr) or "")
        return bool(words & {"loss", "acc", "accuracy", "norm"}) and not words & {"scale", "value", "val", "lr", "count"}

    def _tolist(self, expr: cst.BaseExpression) -> cst.Call | None:
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "tolist"
            and not self.context.is_host_value(expr.func.value)
        ):
            return expr
        return None


class _LoopFrame:
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
        self.reported = False


class _LoopFactsRule(_MetricRule):
    """Base of the rules that judge a `for` loop by its body. Facts are gathered by the engine's single traversal
    (no re-walk of the body per loop) into a frame per open loop; `leave_For` judges the loop."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self._frames: list[list[_LoopFrame]] = [[]]  # one list per function scope being visited

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._frames.append([])

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._frames.pop()

    def visit_For(self, node: cst.For) -> None:
        loop_vars = target_names(node.target)
        if loop_vars and self.wants(node):
            self._frames[-1].append(_LoopFrame(node, loop_vars, self.context.ancestors_snapshot()))

    def leave_For(self, node: cst.For) -> None:
        open_loops = self._frames[-1]
        if open_loops and open_loops[-1].node is node:
            frame = open_loops.pop()
            if not frame.reported:
                self.judge(frame)

    def wants(self, node: cst.For) -> bool:
        raise NotImplementedError

    def judge(self, frame: _LoopFrame) -> None:
        raise NotImplementedError

    def report_loop(self, frame: _LoopFrame, message: str | None = None) -> None:
        frame.reported = True
        self.report_with(frame.node.iter, message or self.message, frame.ancestors)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        for frame in self._frames[-1]:
            if not frame.indexed_by_var and any(_index_name(e) in frame.loop_vars for e in node.slice):
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


def _index_name(element: cst.SubscriptElement) -> str | None:
    index = element.slice
    if isinstance(index, cst.Index) and isinstance(index.value, cst.Name):
        return index.value.value
    return None




def _range_bound(iter_: cst.BaseExpression) -> cst.BaseExpression | None:
    """For `range(n)` / `range(0, n)`: n, else None."""
    if isinstance(iter_, cst.Call) and isinstance(iter_.func, cst.Name) and iter_.func.value == "range" and iter_.args:
        return iter_.args[-1].value if len(iter_.args) <= 2 else None
    return None


def _size_of(expr: cst.BaseExpression) -> cst.BaseExpression | None:
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


class PerClassMetricLoop(_LoopFactsRule):
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
        training_script("labels = y.tolist()\npreds = out.argmax(1).tolist()\nfor p, t in zip(preds, labels):\n    if p == t:\n"
                 "        hits += 1"),
        training_script("for c in range(10):\n    print(c)"),
        training_script("for r in range(rounds):\n    sync = r == rounds - 1\n    out.sum().backward()"),
    )
    invalid = (
        Invalid(training_script("pred = out.argmax(1)\nfor c in range(10):\n    correct[c] += ((pred == c) & (y == c)).sum()")),
        Invalid(training_script("pred = out.argmax(1)\nfor p, t in zip(pred, y):\n    if p == t:\n        hits += 1")),
    )

    def wants(self, node: cst.For) -> bool:
        iter_ = node.iter
        if _is_zip(iter_):
            return not all(self.context.is_host_value(a.value) for a in iter_.args)  # type: ignore[union-attr]
        bound = _range_bound(iter_)
        return bound is not None and _size_of(bound) is None  # loops over the rows of a tensor are GPL204's

    def judge(self, frame: _LoopFrame) -> None:
        if _is_zip(frame.node.iter):
            if frame.compares_vars:
                self.report_loop(frame)
        elif frame.reductions and frame.compares_tensor:
            self.report_loop(frame)


def _is_zip(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "zip"


class PerElementLoop(_LoopFactsRule):
    code = "GPL204"
    name = "per-element-loop"
    message = "`for i in range({bound})` runs tensor ops one row at a time: N small kernel launches per step where one batched op does the work"
    triggers = ("for ",)
    docs = RuleDocs(
        what_it_does="Flags `for i in range(x.size(0))` (also `x.shape[0]`, `len(x)` of a device tensor) in the training "
        "step when the body indexes with the loop variable, and loops that write a tensor one row at a time "
        "(`for i, n in enumerate(lengths): labels[i, n:] = -100`).",
        why_slow="Every iteration launches its own small kernels on one row: for a batch of 256 that is 256x the launch "
        "count of the batched op, each launch ~5-10 us of CPU time, with the GPU mostly idle between them.",
        example="for i in range(logits.size(0)):\n    losses[i] = criterion(logits[i], y[i])",
        use_instead="The batched form: `criterion(logits, y)` with `reduction='none'`, broadcasting, `torch.gather`, "
        "`torch.where`, or `torch.vmap` for a per-sample function; for row writes, one mask: "
        "`labels[torch.arange(T) > lengths[:, None]] = -100`.",
        false_positives="Loops whose body only does host work with the index (building a Python list of file names). "
        "`len(x)` loops are flagged only when `x` is known to be on the device; chain products (`acc = x[i] @ acc`) are "
        "sequential by nature and not flagged.",
    )
    valid = (
        training_script("losses = criterion(out, y)"),
        training_script("names = batch_names\nfor i in range(len(names)):\n    print(names[i])"),
        training_script("grid = x.cpu().numpy()\nfor i, n in enumerate(lengths):\n    grid[i, n:] = 0"),
        training_script("chain = x[0]\nfor i in range(1, x.shape[0]):\n    chain = x[i] @ chain"),
        "import torch\n\nclass TextCollate:\n    def __call__(self, batch):\n"
        "        padded = torch.zeros(len(batch), 50, dtype=torch.long)\n        for i, text in enumerate(batch):\n"
        "            padded[i, :text.size(0)] = text\n        return padded\n",
        "import torch\n\ndef evaluate(model, x):\n    for i in range(x.size(0)):\n        print(model(x[i]))\n",
    )
    invalid = (
        Invalid(training_script("for i in range(out.size(0)):\n    total = total + criterion(out[i], y[i])")),
        Invalid(training_script("for i in range(x.shape[0]):\n    x[i] = x[i] / x[i].norm()")),
        Invalid(training_script("labels = y.clone()\nfor i, n in enumerate(lengths):\n    labels[i, n:] = -100")),
        Invalid(training_script("bs = x.size(0)\nfor b in range(bs):\n    picks.append(torch.multinomial(out[b].softmax(-1), 1))")),
        Invalid(training_script("n, t, d = out.shape\nfor i in range(n):\n    kept = out[i][y[i] > 0]")),
    )

    row_message = "`{tensor}[i, ...] = ...` in a Python loop writes one row per iteration, a kernel launch each; build the mask or values once and write them in one op"

    def __init__(self, context) -> None:
        super().__init__(context)
        # Locals holding a row count: `bs = x.size(0)` / `bs, t, d = x.shape` -> x; `n = len(x)` -> x, from len().
        self._size_locals: dict[tuple[int, str], tuple[cst.BaseExpression, bool]] = {}

    def wants(self, node: cst.For) -> bool:
        return True

    def judge(self, frame: _LoopFrame) -> None:
        bound = _range_bound(frame.node.iter)
        if bound is not None and frame.indexed_by_var and not frame.sequential and self._over_tensor_rows(bound):
            self.report_loop(frame, self.message.format(bound=self.context.module.code_for_node(bound)))

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Tuple):
            first = node.targets[0].target.elements[0].value if node.targets[0].target.elements else None
            shape = node.value
            if isinstance(first, cst.Name) and (
                (isinstance(shape, cst.Attribute) and shape.attr.value == "shape")
                or (isinstance(shape, cst.Call) and callee_method(shape) == "size" and not shape.args)
            ):  # `batch_size, max_len, dim = x.shape`
                base = shape.value if isinstance(shape, cst.Attribute) else shape.func.value  # type: ignore[attr-defined]
                self._size_locals[(id(self.context.enclosing_function()), first.value)] = (base, False)
            return
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            key = (id(self.context.enclosing_function()), node.targets[0].target.value)
            tensor = _size_of(node.value)
            if tensor is not None:
                self._size_locals[key] = (tensor, _is_len_call(node.value))
            else:
                self._size_locals.pop(key, None)
            if _matmul_recurrence(node.targets[0].target.value, node.value):
                for frame in self._frames[-1]:
                    frame.sequential = True
            return
        # `t[i, a:b] = v` with i a loop variable: reported on the write itself, the line that runs N times.
        for target in node.targets:
            sub = target.target
            if not isinstance(sub, cst.Subscript) or len(sub.slice) < 2:
                continue
            index = _index_name(sub.slice[0])
            if index is None or _in_collate(self.context):
                continue
            for frame in self._frames[-1]:
                if index in frame.loop_vars and not frame.reported and not self.context.is_host_value(sub.value):
                    frame.reported = True
                    self.report(node, self.row_message.format(tensor=self.context.module.code_for_node(sub.value)))
                    return

    def _over_tensor_rows(self, bound: cst.BaseExpression) -> bool:
        if isinstance(bound, cst.Name):  # `bs = image.size(0)` earlier in the function
            tensor, from_len = self._size_locals.get((id(self.context.enclosing_function()), bound.value), (None, False))
        else:
            tensor, from_len = _size_of(bound), _is_len_call(bound)
        if tensor is None or self.context.is_host_value(tensor):
            return False
        # `len(x)` is a tensor's row count only when x is known to be on the device (lists have a len too).
        return self.context.location_of(tensor) == "device" if from_len else True


def _is_len_call(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "len"


def _in_collate(context) -> bool:
    """Inside a collate function or a `*Collate*` class: it runs in DataLoader workers on CPU tensors."""
    for node in reversed(context.ancestors):
        if isinstance(node, cst.FunctionDef) and "collate" in node.name.value.lower():
            return True
        if isinstance(node, cst.ClassDef):
            return "collat" in node.name.value.lower()
    return False


def _matmul_recurrence(name: str, value: cst.BaseExpression) -> bool:
    """`acc = x[i] @ acc` / `acc = torch.matmul(acc, x[i])`: each step needs the previous one (a chain product), so the
    loop is sequential by nature and no batched op replaces it."""
    if isinstance(value, cst.BinaryOperation):
        if isinstance(value.operator, cst.MatrixMultiply) and any(
            isinstance(side, cst.Name) and side.value == name for side in (value.left, value.right)
        ):
            return True
        return _matmul_recurrence(name, value.left) or _matmul_recurrence(name, value.right)
    if isinstance(value, cst.Call) and last_name(value.func) in ("matmul", "mm", "bmm"):
        return any(isinstance(a.value, cst.Name) and a.value.value == name for a in value.args)
    return False


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


def _is_self_cat(target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    parts = _cat_parts(value)
    return parts is not None and any(_same_target(e.value, target) for e in parts.elements)  # type: ignore[union-attr]


class TensorGrownByCat(_MetricRule):
    hot_only = False
    code = "GPL205"
    name = "tensor-grown-by-cat"
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
        false_positives="A name that is rebound every iteration before the cat (`x = batch; x = torch.cat([x, x])`) does "
        "not grow and is not flagged, nor is token-by-token decoding under `no_grad` (growing the sequence is the "
        "algorithm); a loop known to run only a couple of times is harmless.",
    )
    valid = (
        training_script("parts.append(out.argmax(1))"),
        "import torch\n\ndef train(model, loader, optimizer):\n    for x, y in loader:\n        x = torch.cat([x, x])\n"
        "        model(x).sum().backward()\n        optimizer.step()\n",
        "import torch\n\ndef evaluate(model, loader):\n    preds = torch.empty(0)\n    for x, y in loader:\n"
        "        preds = torch.cat([preds, model(x)])\n    return preds\n",
        training_script("if step % 250 == 0:\n    seq = x[:1]\n    with torch.no_grad():\n        while seq.size(1) < 64:\n"
                 "            seq = torch.cat((seq, model(seq)[:, -1:].argmax(-1)), dim=1)"),
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
        if head & names or self._under_no_grad():
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


_TENSOR_CONSTRUCTORS = frozenset({"torch.tensor", "torch.Tensor", "torch.FloatTensor", "torch.as_tensor", "torch.cuda.FloatTensor"})


class TensorFromScalars(_MetricRule):
    code = "GPL206"
    name = "tensor-from-step-scalars"
    message = "`torch.tensor([...])` of tensors or values read from the device copies each one to the host and back; use `torch.stack`"
    triggers = ("tensor(", "Tensor(")
    docs = RuleDocs(
        what_it_does="Flags `torch.tensor([a, b])` in the training step when the elements are tensors or scalars just "
        "read from the device (`loss.item()`), e.g. to build a vector of metrics for an all_reduce or a log call.",
        why_slow="`torch.tensor` needs Python numbers: each tensor element is read with an implicit `.item()` (a "
        "host-device round trip that waits for the GPU), then the list is copied back to the device: 2 transfers "
        "and a full pipeline stall per element per step, where `torch.stack` is one kernel that never leaves the GPU.",
        example="stats = torch.tensor([loss.item(), acc.item()], device='cuda')\ndist.all_reduce(stats)",
        use_instead="`torch.stack([loss.detach(), acc.detach()])` (same device, no sync), then read it once when logging.",
        false_positives="Elements that are Python numbers (step counters, literals, `len(...)`) are not flagged; an "
        "element named like a loss whose value is in fact a Python float would be.",
    )
    valid = (
        training_script("stats = torch.stack([loss.detach(), out.sum().detach()])"),
        training_script("counts = torch.tensor([step, x.size(0)], device='cuda')"),
        "import torch\n\ndef setup(n):\n    return torch.tensor([0.5, n])\n",
    )
    invalid = (
        Invalid(training_script("stats = torch.tensor([loss.item(), x.size(0)], device='cuda')")),
        Invalid(training_script("stats = torch.tensor([loss, out.sum()])")),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not node.args or not isinstance(node.args[0].value, (cst.List, cst.Tuple)):
            return
        if self.context.resolve(node.func) not in _TENSOR_CONSTRUCTORS:
            return
        elements = node.args[0].value.elements  # type: ignore[union-attr]
        for element in elements:
            if not isinstance(element, cst.Element):
                continue
            value = element.value
            if _scalar_read(self.context, value) is not None or _looks_like_tensor(self.context, value):
                self.report(node)
                return


_NUMPY_PREFIXES = ("numpy.", "np.", "sklearn.", "scipy.")


def _device_to_host_copy(context, expr: cst.BaseExpression) -> bool:
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


class HostMetricEveryStep(_MetricRule):
    code = "GPL207"
    name = "host-metric-every-step"
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
        false_positives="Metrics under a logging gate or in eval code are not flagged. Arrays that were always on the host "
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
        Invalid(training_script("for t, l in zip(y.cpu().numpy(), out.detach().cpu().numpy()):\n    meters[int(t)].add(l)")),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        # numpy/sklearn calls being visited that were reported: a comparison inside one is the same finding.
        self._reported_calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        name = self.context.resolve(node.func) or ""
        if name.startswith("sklearn.metrics.") or (
            name.startswith(_NUMPY_PREFIXES) and any(_device_to_host_copy(self.context, a.value) for a in node.args)
        ):
            self.report(node)
            self._reported_calls.append(node)

    def leave_Call(self, node: cst.Call) -> None:
        if self._reported_calls and self._reported_calls[-1] is node:
            self._reported_calls.pop()

    def visit_For(self, node: cst.For) -> None:
        # `for t, l in zip(ts.cpu().numpy(), losses.cpu().numpy()):` a per-sample host loop over copies made every step.
        if _device_to_host_copy(self.context, node.iter):
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
            and _device_to_host_copy(self.context, expr.func.value)
        )
