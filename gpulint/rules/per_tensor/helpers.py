"""What the GPL1xx rules share: the analysis of loops over a model's tensors (`scan_tensor_loop`, also read by
the GPL5xx rules), the words that pre-filter such loops, and the base class `PerTensorRule`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.context import HOST_METHODS, METADATA_ATTRS, METADATA_METHODS
from gpulint.linter.names import dotted_name, last_name, name_parts, root_name, target_names
from gpulint.linter.rule import Rule
from gpulint.linter.syntax import SyntaxVisitor, descendants
from gpulint.rules.common import in_data_pipeline, keyword_arg, tests_one_time

if TYPE_CHECKING:
    from gpulint.linter.context import FileContext


# Identifier parts that name a collection of model tensors (`model_params`, `self.grads`, `trainable_parameters`).
PARAM_WORDS = frozenset({"param", "params", "parameters", "grad", "grads", "gradients"})
# Words one of which a loop over a model's tensors has in its text (triggers of the rules that look for such loops).
PARAM_TRIGGERS = ("param", "Param", "grad", "Grad", "state_dict", "buffers", "state_iter")
# Words one of which a reduction has in its text (REDUCTION_METHODS, TORCH_REDUCTIONS, helpers named `*_norm`).
REDUCTION_WORDS = (
    "norm", "sum(", "mean(", "max(", "min(", "std(", "var(", "prod(", "any(", "all(", "count_nonzero(",
)


def loop_over(words: str, statements_only: bool = False) -> re.Pattern[str]:
    """A `for` header (`statements_only`: of a `for` statement, not a comprehension) whose iterable spells one of
    `words` (a regex alternation, any case) on the `for`'s line or before the header's colon. The rules' loop tests
    need such a header in a function's code, so functions without one need not be parsed (`may_report_in`)."""
    start = r"^[ \t]*(?:async[ \t]+)?for\b" if statements_only else r"\bfor\b"
    return re.compile(
        rf"{start}[^:]{{0,100}}?\bin\b(?:[^\n]{{0,200}}?|[^:]{{0,200}}?)(?:{words})", re.IGNORECASE | re.MULTILINE
    )


_ONE_LINE_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'')
_INDEXED = re.compile(r"[\w)\]]\s*\[\s*$")  # what comes before a string that is a subscript's key: `group[`


def has_loop(pattern: re.Pattern[str], code: str) -> bool:
    """Does `code` hold a loop `pattern` (from `loop_over`) finds, not counting words inside string literals
    (`for old, new in (("gradient_checkpointing", ...), ...)`)? A string that is a subscript's key still counts:
    `group["params"]` names a model's tensors."""
    if pattern.search(code) is None:
        return False

    def blank(match: re.Match[str]) -> str:
        indexed = _INDEXED.search(code, max(0, match.start() - 40), match.start()) is not None
        return match.group() if indexed else '""'

    return pattern.search(_ONE_LINE_STRING.sub(blank, code)) is not None


# What `is_model_tensor_iterable` accepts always spells one of these words.
PARAM_LOOP = loop_over("param|grad|state_dict|buffers")
PARAM_FOR_STATEMENT = loop_over("param|grad|state_dict|buffers|state_iter", statements_only=True)

# Parts that make such a name something else (`optimizer.param_groups` holds dicts of hyper-parameters).
NOT_PARAM_WORDS = frozenset({"groups", "group", "names", "name", "count", "counts", "numel", "shapes", "keys"})
# Iterables passed through unchanged by these wrappers: `enumerate(model.parameters())`, `zip(a.parameters(), ...)`.
WRAPPERS = frozenset({"enumerate", "zip", "list", "tuple", "sorted", "reversed", "filter", "tqdm", "chain", "iter"})
# Tensor methods that reduce a tensor to a scalar (one kernel, sometimes two, per call).
REDUCTION_METHODS = frozenset(
    {"norm", "sum", "mean", "max", "min", "amax", "amin", "std", "var", "prod", "any", "all", "count_nonzero"}
)
TORCH_REDUCTIONS = frozenset(
    {
        "torch.norm", "torch.linalg.norm", "torch.linalg.vector_norm", "torch.linalg.matrix_norm", "torch.sum",
        "torch.mean", "torch.max", "torch.min", "torch.amax", "torch.amin", "torch.std", "torch.var", "torch.prod",
        "torch.any", "torch.all", "torch.count_nonzero",
    }
)
# Functions that bring a device value to the host (the methods are `HOST_METHODS`).
HOST_READ_FUNCTIONS = frozenset(
    {
        "float", "int", "bool", "print", "add_scalar", "add_scalars", "add_histogram", "log", "log_dict", "log_metrics",
        "info", "debug", "warning", "record",
    }
)
# A call whose dotted name has one of these parts hands its arguments to a logger, which reads tensors on the host
# (`tb_wandb_log(name, norm)`, `logger.logkv_mean(...)`, `self.writer.add_scalar(...)`).
LOGGER_PARTS = frozenset({"log", "logger", "logging", "logkv", "wandb", "tensorboard", "tb", "writer", "summary"})
# Builtins that call bool() on each element of a comprehension: `any(not torch.isfinite(g).all() for g in grads)`.
TRUTH_CONSUMERS = frozenset({"any", "all", "max", "min", "sorted"})
# In-place tensor arithmetic: one kernel per call (optimizer updates, EMA, gradient scaling, manual zeroing).
INPLACE_ARITHMETIC = frozenset(
    {
        "add_", "sub_", "mul_", "div_", "lerp_", "addcmul_", "addcdiv_", "clamp_", "clamp_min_", "clamp_max_",
        "sqrt_", "pow_", "neg_", "copy_", "zero_", "sign_", "abs_",
    }
)
# Words one of which an update of a loop's tensors has in its text: an in-place method (INPLACE_ARITHMETIC), an
# augmented assignment, a store to `.data` / `.grad` or to a subscript (`exp_avg[n] = ...`), an `out=` argument.
UPDATE_WORDS = (
    *(f"{method}(" for method in sorted(INPLACE_ARITHMETIC)),
    "+=", "-=", "*=", "/=", "%=", "@=", "&=", "|=", "^=", ">>=", "<<=", ".data", ".grad", "] =", "]=", "out=",
)


UPDATE_NAME_PARTS = frozenset(
    {"update", "updates", "step", "ema", "sync", "apply", "swap", "average", "momentum", "accumulate"}
)
CONVERSIONS = frozenset({"to", "detach", "cuda", "float", "half", "bfloat16", "double", "type", "type_as", "contiguous"})


def tensor_targets(target: cst.BaseExpression, iterable: cst.BaseExpression) -> set[str]:
    """The loop variables that hold tensors: not the names of `named_parameters()` / `.items()`, not the index of
    `enumerate`; `zip` pairs each target with its iterable."""
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(iterable, cst.Call):
        elements = [e.value for e in target.elements]
        func = iterable.func
        if isinstance(func, cst.Name) and func.value == "enumerate" and len(elements) == 2 and iterable.args:
            return tensor_targets(elements[1], iterable.args[0].value)
        if isinstance(func, cst.Name) and func.value == "zip" and len(elements) == len(iterable.args):
            names: set[str] = set()
            for element, arg in zip(elements, iterable.args):
                names |= tensor_targets(element, arg.value)
            return names
        named = isinstance(func, cst.Attribute) and (func.attr.value in ("named_parameters", "named_buffers", "items")
                                                      or _names_a_state_walk(func.attr.value))
        if named and len(elements) == 2:
            return target_names(elements[1])
    return target_names(target)


def is_model_tensor_iterable(expr: cst.BaseExpression) -> bool:
    """True for what yields a model's tensors: `m.parameters()`, `m.named_parameters()`, `sd.values()` of a state
    dict, `group["params"]`, names like `params` / `grads`, and those wrapped in enumerate/zip/list."""
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Name) and func.value in WRAPPERS:
            return any(is_model_tensor_iterable(arg.value) for arg in expr.args)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in ("parameters", "named_parameters", "buffers", "named_buffers"):
                return True
            if _names_a_state_walk(method):
                return True
            if method in ("values", "items"):
                receiver = func.value
                if _chain_calls_state_dict(receiver):
                    return True
                name = last_name(receiver) or ""
                if isinstance(receiver, cst.Attribute) and name == "parameters":
                    return False  # `inspect.signature(f).parameters.values()`: not a module's parameters
                return "state_dict" in name.lower() or _is_param_name(name)
        return False
    if isinstance(expr, cst.Subscript):
        index = expr.slice[0].slice if len(expr.slice) == 1 else None
        return (
            isinstance(index, cst.Index)
            and isinstance(index.value, cst.SimpleString)
            and index.value.raw_value in ("params", "parameters")
        )
    name = last_name(expr)
    return name is not None and _is_param_name(name)


# A project method walking a model's tensors (detectron2-style EMAs' `_get_model_state_iterator(model)`, which
# chains `named_parameters()` and `named_buffers()`): named for a state or parameters, and for iterating.
_STATE_WALK_PARTS = frozenset({"state", "param", "params", "parameters", "weights", "buffers"})


def _names_a_state_walk(method: str) -> bool:
    parts = name_parts(method)
    return bool(parts & _STATE_WALK_PARTS) and bool(parts & {"iterator", "iter"})


def _chain_calls_state_dict(expr: cst.BaseExpression) -> bool:
    """`model.state_dict()`, `optimizer.state_dict()["state"]`: a chain that reads a state dict."""
    while isinstance(expr, (cst.Call, cst.Subscript, cst.Attribute)):
        if isinstance(expr, cst.Call):
            if last_name(expr.func) == "state_dict":
                return True
            expr = expr.func
        else:
            expr = expr.value
    return False


def _is_param_name(name: str) -> bool:
    parts = name_parts(name)
    return bool(parts & PARAM_WORDS) and not parts & NOT_PARAM_WORDS


# Methods returning a view of their receiver's memory: rebinding a tensor to one launches nothing.
_VIEW_METHODS = frozenset({"view", "view_as", "reshape", "reshape_as", "detach", "t", "transpose", "permute",
                           "squeeze", "unsqueeze", "expand", "expand_as", "flatten", "unflatten"})


def _is_view_of_stored(value: cst.BaseExpression) -> bool:
    """`p.summed_grad.view_as(p)`, `buf.detach().view(-1)`: views of a stored tensor (not of a sum computed here)."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
        return False
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _VIEW_METHODS:
        value = value.func.value
    return isinstance(value, (cst.Name, cst.Attribute))


@dataclass
class LoopScan:
    """What the body of a loop over tensors does with each tensor."""

    reductions: int = 0  # per-tensor reduction calls (norm, sum, max, ...)
    reads: int = 0  # places where a reduction's value reaches the host (.item(), float(), print, if-test, logger)
    inplace: int = 0  # per-tensor in-place arithmetic (add_, mul_, lerp_, copy_ of a computed value, p.data -= ...)
    first_inplace: cst.CSTNode | None = None
    reduced_names: set[str] = field(default_factory=set)
    plain_copies: int = 0  # `ema_v.copy_(model_v)` in a per-step update function
    builds_lists: bool = False  # appends loop tensors to lists (for a following torch._foreach_* call)
    touches_grad: bool = False  # reads or writes `.grad` of a loop tensor
    stores_state: bool = False  # stores a computed tensor per parameter (`self.exp_avg[n] = ...`)
    in_update_function: bool = False  # the enclosing function is named like a per-step update, or sits in a step loop
    surely_per_step: bool = False  # ... or the step reaches it through resolved calls
    blends: bool = False  # updates one loop tensor in place from another (EMA: `ema.mul_(d).add_(p, ...)`)

    @property
    def kind(self) -> str | None:
        """Which family owns the loop: reading a reduction -> "norm-read" (GPL101); arithmetic per parameter ->
        "arithmetic" (GPL501, the optimizer/EMA shape even when it also computes a norm); a reduction only -> "norm"
        (GPL102)."""
        if self.reductions and self.reads:
            return "norm-read"
        # (copying back what the loop computed from norms is the norm loop's own work, outside an update function:
        # timm's adaptive gradient clipping)
        if self.inplace or (self.plain_copies and not self.builds_lists
                            and (self.in_update_function or not self.reductions)):
            return "arithmetic"
        if self.reductions:
            return "norm"
        return None


class _LoopBodyScanner(SyntaxVisitor):
    """Walks a loop body (or a comprehension's element) once. Nested functions and classes are not part of it."""

    def __init__(self, loop_vars: set[str], context: FileContext, keys: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.tensors = set(loop_vars)  # names that hold a tensor of the loop (the loop variables and what derives)
        self.keys = keys  # loop variables that name each tensor: `ema[name]` is a tensor too
        self.context = context
        function = context.enclosing_function()
        # In a function named like a per-step update (`update`, `apply_update_`, `ema_step`), inside another loop
        # (stylegan3's training loop copies each buffer into G_ema every step), or one the step surely reaches
        # (DARTS's `_restore_weights` after each virtual step), copying each tensor unchanged is per-step work too;
        # elsewhere (`set`, `load_weights`) it is a one-off weight load.
        updates = function is not None and bool(name_parts(function.name.value) & UPDATE_NAME_PARTS) \
            or _in_step_loop(context)
        surely = function is not None and not updates and context.surely_per_step()
        self.copies_count = updates or surely
        self.scan = LoopScan(in_update_function=updates, surely_per_step=surely)
        self._stack: list[cst.CSTNode] = []
        self._hits_at_assign: list[int] = []
        self._hits = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        self._stack.append(node)
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return  # skipped in on_visit (libcst still calls on_leave for it)
        super().on_leave(original_node)
        self._stack.pop()

    # -- assignments propagate "derived from a loop tensor" and "holds a reduction"
    def visit_Assign(self, node: cst.Assign) -> None:
        self._hits_at_assign.append(self._hits)
        if root_name(node.value) in self.tensors or isinstance(node.value, cst.Subscript) and self.keys \
                and _indexed_by(node.value, self.keys):
            # (`ema_val = self.state[name]`, the counterpart a detectron2-style EMA then updates in place)
            for target in node.targets:
                self.tensors |= target_names(target.target)
        elif isinstance(node.value, cst.Tuple):
            # `old, new = ema_p.data, p.data`: element by element.
            for target in node.targets:
                if isinstance(target.target, cst.Tuple) and len(target.target.elements) == len(node.value.elements):
                    for name, value in zip(target.target.elements, node.value.elements):
                        if root_name(value.value) in self.tensors:
                            self.tensors |= target_names(name.value)
        for target in node.targets:
            self._check_rebind(target.target, node.value)

    def leave_Assign(self, original_node: cst.Assign) -> None:
        if self._hits > self._hits_at_assign.pop():
            for target in original_node.targets:
                self.scan.reduced_names |= target_names(target.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._hits_at_assign.append(self._hits)
        if root_name(node.target) in self.tensors:
            self._inplace(node)

    def leave_AugAssign(self, original_node: cst.AugAssign) -> None:
        if self._hits > self._hits_at_assign.pop():
            self.scan.reduced_names |= target_names(original_node.target)

    def _check_rebind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        # `p.data = p.data - lr * p.grad` and `self.exp_avg[n] = beta * self.exp_avg[n] + (1 - beta) * p.grad`
        # compute and store a new tensor per parameter, like an in-place update. Temporaries (`coef = clip / norm`)
        # are not updates.
        if not isinstance(target, (cst.Attribute, cst.Subscript)) or isinstance(value, (cst.Name, cst.Attribute)):
            return
        if isinstance(target, cst.Attribute) and target.attr.value not in ("data", "grad"):
            return  # `p.requires_grad = ...`: a flag, not a tensor
        if _is_plain_copy_source(value) and not isinstance(value, (cst.Name, cst.Attribute)):
            return  # `p.data = p.data.half()`: a cast, set up once
        if _is_view_of_stored(value):
            return  # `p.grad = p.summed_grad.view_as(p)`: a view of memory already there, no kernel
        if self._in_one_time_branch():
            return  # `if len(state) == 0: state["exp_avg"] = torch.zeros_like(p)`: the state's first step
        computed = isinstance(value, (cst.BinaryOperation, cst.Call)) and self._on_tensor(value)
        # `ma.data = updater.update_average(old, new)`: a helper computing from loop tensors.
        helper = isinstance(value, cst.Call) and any(self._on_tensor(arg.value) for arg in value.args)
        if computed or helper:
            self._inplace(target)
            self.scan.stores_state = True

    def _in_one_time_branch(self) -> bool:
        """Inside the body of an `if` of the loop that runs once per tensor (`if len(state) == 0:`, `if "hessian" not
        in state:`): a lazy initialisation, not a per-step update."""
        return any(isinstance(node, cst.If) and self._stack[i + 1] is node.body
                   and tests_one_time(node.test, frozenset()) for i, node in enumerate(self._stack[:-1]))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "grad" and not self.scan.touches_grad and self._on_tensor(node.value):
            self.scan.touches_grad = True

    def visit_For(self, node: cst.For) -> None:
        # `for ki, vi in v.items():` inside a loop over optimizer states: the inner values are loop tensors too.
        if self._on_tensor(node.iter):
            self.tensors |= target_names(node.target)

    # -- calls: reductions, in-place arithmetic
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            on_tensor = self._on_tensor(func.value)
            if method in REDUCTION_METHODS and on_tensor:
                self._reduction()
                return
            if method in INPLACE_ARITHMETIC and on_tensor:
                self._inplace_call(method, node, func.value)
                return
            if method == "append" and node.args and self._on_tensor(node.args[0].value):
                self.scan.builds_lists = True
        if not node.args or not self._on_tensor(node.args[0].value):
            return
        resolved = self.context.resolve(func) or ""
        if resolved in TORCH_REDUCTIONS:
            self._reduction()
        elif not resolved.startswith("torch.") and _names_a_norm(last_name(func) or ""):
            self._reduction()  # a helper such as `unitwise_norm(p.grad)` or `get_grad_norm(g)`
        out = keyword_arg(node, "out")
        if out is not None and self._on_tensor(out.value):
            self._inplace(node)  # `torch.nan_to_num(p.grad, out=p.grad)`

    def _on_tensor(self, expr: cst.BaseExpression) -> bool:
        """Does `expr` compute on a loop tensor: `p.grad.data`, `torch.isnan(g)`, `(p.grad ** 2)`? Metadata
        (`p.shape`, `p.numel()`) lives on the host and does not count."""
        while True:
            if isinstance(expr, cst.Name):
                return expr.value in self.tensors
            if isinstance(expr, cst.Attribute):
                if expr.attr.value in METADATA_ATTRS:
                    return False
                expr = expr.value
            elif isinstance(expr, cst.Subscript):
                if self.keys and _indexed_by(expr, self.keys):
                    return True  # `ema[name]`, `self.shadow[name]`
                expr = expr.value
            elif isinstance(expr, cst.BinaryOperation):
                return self._on_tensor(expr.left) or self._on_tensor(expr.right)
            elif isinstance(expr, cst.UnaryOperation):
                expr = expr.expression
            elif isinstance(expr, cst.Call):
                resolved = self.context.resolve(expr.func) or ""
                if resolved.startswith("torch.") and expr.args:
                    expr = expr.args[0].value
                elif isinstance(expr.func, cst.Attribute):
                    if expr.func.attr.value in METADATA_METHODS:
                        return False
                    expr = expr.func.value
                else:
                    return False
            else:
                return False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.scan.reduced_names:
            self._hits += 1
            if self._value_is_read():
                self.scan.reads += 1

    def _reduction(self) -> None:
        self.scan.reductions += 1
        self._hits += 1
        if self._value_is_read():
            self.scan.reads += 1

    def _inplace(self, node: cst.CSTNode) -> None:
        self.scan.inplace += 1
        if self.scan.first_inplace is None:
            self.scan.first_inplace = node

    def _inplace_call(self, method: str, call: cst.Call, receiver: cst.BaseExpression) -> None:
        if method == "copy_":
            # A plain copy (`ema.copy_(p)`, `ema.copy_(p.to(device))`) is a weight load, unless the function is a
            # per-step update (and the loop is not just sorting tensors into lists for a foreach call); copying a
            # computed value is an update.
            if not call.args:
                return
            if not _is_plain_copy_source(call.args[0].value):
                self._inplace(call)
            elif self.copies_count:
                self.scan.plain_copies += 1
        elif method == "zero_":
            # Zeroing gradients one by one is a manual zero_grad; zeroing weights is initialisation (cold).
            if _chain_has_attribute(receiver, "grad"):
                self._inplace(call)
        else:
            self._inplace(call)
        # `ema_p.mul_(d).add_(p, alpha=1 - d)`: one set of tensors updated from another (EMA, weight averaging).
        target = root_name(receiver)
        for arg in call.args:
            if self._on_tensor(arg.value) and root_name(arg.value) not in (None, target):
                self.scan.blends = True

    def _value_is_read(self) -> bool:
        """True when an enclosing expression of the node being visited brings its value to the host."""
        stack = self._stack
        for index in range(len(stack) - 2, -1, -1):
            node, child = stack[index], stack[index + 1]
            if isinstance(node, cst.Call):
                name = last_name(node.func)
                if child is node.func:
                    if isinstance(node.func, cst.Attribute) and name in HOST_METHODS:
                        return True
                    continue
                resolved = self.context.resolve(node.func) or ""
                if resolved.startswith(("math.", "numpy.", "np.")):
                    return True
                if not resolved.startswith("torch.") and (
                    name in HOST_READ_FUNCTIONS or name_parts(dotted_name(node.func) or "") & LOGGER_PARTS
                ):
                    return True
            elif isinstance(node, (cst.If, cst.While, cst.Assert, cst.IfExp)) and child is node.test or isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not) or isinstance(node, cst.FormattedStringExpression):
                return True
            elif isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
        return False


def _indexed_by(node: cst.Subscript, keys: frozenset[str]) -> bool:
    """`x[name]` with `name` one of `keys`."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return False
    index = node.slice[0].slice.value
    return isinstance(index, cst.Name) and index.value in keys


def _chain_has_attribute(expr: cst.BaseExpression, attribute: str) -> bool:
    """Does the chain `p.grad.detach()` / `p.grad.data` access `.attribute` somewhere?"""
    while True:
        if isinstance(expr, cst.Attribute):
            if expr.attr.value == attribute:
                return True
            expr = expr.value
        elif isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call):
            expr = expr.func
        else:
            return False


def _names_a_norm(name: str) -> bool:
    """`unitwise_norm`, `get_grad_norm`, `norm`: a helper returning a norm. Not `exclude_bias_and_norm` (a test)."""
    parts = [p for p in re.split(r"_+", name.lower()) if p]
    return bool(parts) and parts[-1] in ("norm", "norms") and parts[0] not in ("is", "has", "exclude", "include", "use")


def _is_plain_copy_source(expr: cst.BaseExpression) -> bool:
    """`p`, `p.data`, `p.detach().to(device)`: the same values, maybe moved or cast."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in CONVERSIONS:
        expr = expr.func.value
    return isinstance(expr, (cst.Name, cst.Attribute))


def scan_tensor_loop(
    loop_vars: set[str], body: cst.CSTNode, context: FileContext, keys: frozenset[str] = frozenset()
) -> LoopScan:
    """`keys`: loop variables naming each tensor (`name` of `named_parameters()`): what they index in the body
    (`ema[name]`, `self.shadow[name]`) is that tensor's counterpart, a tensor too."""
    scanner = _LoopBodyScanner(loop_vars, context, keys)
    scanner.walk(body)
    return scanner.scan


def iterated_by_truth_consumer(context: FileContext) -> bool:
    """Is the comprehension being visited the argument of `any(...)`, `all(...)`, `max(...)`, which call bool() on
    (or compare) each element on the host?"""
    parent = context.parent(1)
    call = context.parent(2) if isinstance(parent, cst.Arg) else parent
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in TRUTH_CONSUMERS


_STEP_CALL = re.compile(r"\.(?:backward|step)\(")


def _in_step_loop(context: FileContext) -> bool:
    """Inside a loop (of the same function) that calls backward or an optimizer step: not a loop over a model's
    submodules at construction."""
    for node in reversed(context.ancestors[:-1]):
        kind = type(node)
        if kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda:
            return False
        if (kind is cst.For or kind is cst.While) and _STEP_CALL.search(context.module.code_for_node(node)):
            return True
    return False


def scan_model_tensor_for(
    node: cst.For, context: FileContext, tensor_dicts: frozenset[str] = frozenset()
) -> LoopScan | None:
    """The scan of a `for` over a model's tensors, or None when the loop iterates something else. `tensor_dicts` are
    names bound to dicts of model tensors in the function (`par = dict(model.named_parameters())`): a loop over their
    keys indexes them (`par[k].mul_(d)`)."""
    if is_model_tensor_iterable(node.iter):
        tensors = tensor_targets(node.target, node.iter)
        keys = frozenset(target_names(node.target) - tensors)
        return scan_tensor_loop(tensors | tensor_dicts, node.body, context, keys)
    iterated = node.iter.func.value if isinstance(node.iter, cst.Call) and isinstance(node.iter.func, cst.Attribute) else node.iter
    if tensor_dicts and isinstance(iterated, cst.Name) and iterated.value in tensor_dicts:
        return scan_tensor_loop(target_names(node.target) | tensor_dicts, node.body, context)
    keys = _dict_loop_keys(node)
    if tensor_dicts and keys and _indexes_by(node.body, tensor_dicts, keys):
        # `for key, value in self.ema_state.items(): self.ema_state[key].mul_(r).add_(source[key])` with `source =
        # self.model.state_dict()` (ResShift's EMA): another dict walked key by key beside the model's tensors
        values = frozenset(target_names(node.target) - keys)
        return scan_tensor_loop(values | tensor_dicts, node.body, context, keys)
    return None


def _dict_loop_keys(node: cst.For) -> frozenset[str]:
    """The key names of a loop over a dict's `.items()` (`for key, value in d.items()`) or `.keys()`."""
    it = node.iter
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and not it.args):
        return frozenset()
    target = node.target
    if it.func.attr.value == "items" and isinstance(target, cst.Tuple) and len(target.elements) == 2 \
            and isinstance(target.elements[0].value, cst.Name):
        return frozenset({target.elements[0].value.value})
    if it.func.attr.value == "keys" and isinstance(target, cst.Name):
        return frozenset({target.value})
    return frozenset()


def _indexes_by(body: cst.CSTNode, dicts: frozenset[str], keys: frozenset[str]) -> bool:
    """Does `body` index one of `dicts` with one of `keys` (`source_state[key]`)?"""
    return any(isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value in dicts
               and _indexed_by(node, keys) for node in descendants(body))


def binds_tensor_dict(value: cst.BaseExpression) -> bool:
    """`dict(model.named_parameters())`, `model.state_dict()`: a dict of a model's tensors."""
    if not isinstance(value, cst.Call):
        return False
    if isinstance(value.func, cst.Name) and value.func.value in ("dict", "OrderedDict") and value.args:
        return is_model_tensor_iterable(value.args[0].value)
    return last_name(value.func) == "state_dict"


COMPREHENSIONS = (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)


def comprehension_element(node: cst.CSTNode) -> cst.BaseExpression:
    return node.value if isinstance(node, cst.DictComp) else node.elt


def scan_model_tensor_comprehension(node: cst.CSTNode, context: FileContext) -> LoopScan | None:
    """The scan of a one-`for` comprehension over a model's tensors, or None."""
    comp_for = node.for_in
    if comp_for.inner_for_in is not None or not is_model_tensor_iterable(comp_for.iter):
        return None
    scan = scan_tensor_loop(tensor_targets(comp_for.target, comp_for.iter), comprehension_element(node), context)
    if scan.reductions and iterated_by_truth_consumer(context):
        scan.reads += 1
    return scan


# Function-name parts of one-off work that is not named cold: loading/converting weights, building the model, fusing
# layers for deployment, a script's main() without a training loop.
ONE_OFF_PARTS = frozenset(
    {"load", "convert", "filter", "remap", "upgrade", "migrate", "port", "fuse", "reparam", "reparameterize",
     "deploy", "build", "main"}
)


def in_test_error_or_one_off_code(context: FileContext) -> bool:
    """Test code, an `except` handler (an error path), or a function named for one-off work that the project model
    does not find the step calling (`FunctionFacts.called_every_step`). A script's `main` is
    one-off work around its loops: the training loop it holds runs every step (learn2learn's examples average their
    meta-gradients parameter by parameter in `main`'s loop)."""
    if context.in_tests:
        return True
    for node in reversed(context.ancestors):
        if isinstance(node, cst.ExceptHandler):
            return True
        if isinstance(node, cst.FunctionDef):
            parts = name_parts(node.name.value) & ONE_OFF_PARTS
            # (not one the step calls, whatever its name says: a VAE's `reparameterize_gaussian(mean, logvar)`
            # samples every step, where RepVGG's `reparameterize()` fuses branches once)
            return bool(parts - {"main"} if context.holds_step_loops() else parts) and not context.called_every_step()
    return False


class PerTensorRule(Rule):
    """Shared by the GPL1xx rules: they report only outside gated code (a gated log every N steps is cheap) and
    outside the data pipeline. A configuration switch (`if args.log_grad_norm:`) is not a gate: when it is on, the
    loop runs every step."""

    gpu_only = True  # a launch and a sync per tensor: a GPU's cost

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._torch_bound = False  # `import torch` seen: a fix may spell `torch.` (not under an alias)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            if alias.asname is None and isinstance(alias.name, cst.Name) and alias.name.value == "torch":
                self._torch_bound = True

    def _report_ungated(self, node: cst.CSTNode, message: str | None = None, **kwargs) -> None:
        if self.context.gated_here(switches_gate=False) or in_data_pipeline(self.context) or in_test_error_or_one_off_code(self.context):
            return
        self.report(node, message, when="repeated", **kwargs)


def iterates_host_values(iterable: cst.BaseExpression, context: FileContext) -> bool:
    """Are the elements of `iterable` already on the host? `zip(a, b)` / `enumerate(a)` are when all they wrap is."""
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value in ("zip", "enumerate"):
        return all(context.is_host_value(arg.value) for arg in iterable.args)
    return context.is_host_value(iterable)
