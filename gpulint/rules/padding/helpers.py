"""What the GPL3xx rules share: which lengths are data-dependent and which are constants (`LengthTracker`)."""

from __future__ import annotations

import ast

import libcst as cst

from gpulint.linter.names import callee_method, dotted_name, name_parts, params_of
from gpulint.linter.syntax import SyntaxVisitor

# A name that says it holds a sequence length (`MAX_LEN`, `max_seq_length`, `self.max_length`, `SEQ_LEN`).
_LENGTH_PARTS = frozenset({"len", "length", "seq", "seqlen", "maxlen", "tokens", "words"})


def is_length_name(name: str) -> bool:
    return bool(name_parts(name) & _LENGTH_PARTS)


def _calls_max_or_len(expr: cst.BaseExpression) -> bool:
    """True when the expression computes something from the data (`max(len(s) for s in batch)`, `x.size(1)`)."""
    finder = _DataSizes()
    finder.walk(expr)
    return finder.found


def _clamped_at_zero(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """`e` of `max(0, e)` (a pad count never below zero), else None."""
    if not isinstance(expr, cst.Call) or dotted_name(expr.func) != "max" or len(expr.args) != 2:
        return None
    first, second = (a.value for a in expr.args)
    if isinstance(first, cst.Integer) and first.value == "0":
        return second
    return first if isinstance(second, cst.Integer) and second.value == "0" else None


def filled_length(amount: cst.BaseExpression) -> cst.BaseExpression | None:
    """`max_len` of `max_len - len(ids)` (or of `max(0, max_len - len(ids))`): the length a count fills a list up to
    (MiniCPM pads with `[eos_token_id] * (...)`, whatever the value is named); None for any other count."""
    amount = _clamped_at_zero(amount) or amount
    if isinstance(amount, cst.BinaryOperation) and isinstance(amount.operator, cst.Subtract) \
            and isinstance(amount.right, cst.Call) and dotted_name(amount.right.func) == "len":
        return amount.left
    return None


class _DataSizes(SyntaxVisitor):
    found = False

    def visit_Call(self, node: cst.Call) -> bool:
        self.found = self.found or callee_method(node) in ("max", "len", "size", "amax")
        return not self.found

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.found = self.found or node.attr.value == "shape"
        return not self.found


class LengthTracker:
    """Which names hold a constant sequence length: config attributes (`self.max_len`, `args.max_seq_length`),
    length-named constants and parameters not computed in the function (`MAX_LEN`, `max_seq_length`; not a parameter
    every call in the file fills with a length measured from the batch: `batch_fed_params`), and locals
    assigned from one of those. A local assigned from the batch (`max_len = max(len(s) for s in batch)`) is dynamic; the amount that
    pads up to a constant (`pad_len = MAX_LEN - len(ids)`) counts as constant: it is what padding to MAX_LEN looks like."""

    def __init__(self, context) -> None:
        self.context = context
        self._batch_fed: frozenset[tuple[str, str]] | None = None  # `batch_fed_params`, read once per file
        self._locals: dict[tuple[int, str], bool] = {}  # (id(function), name) -> constant?
        # locals counting what fills a list up to a length, with the length (`padding_size` -> `max_seq_len`)
        self._fill_counts: dict[tuple[int, str], cst.BaseExpression] = {}

    def record(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        name = node.targets[0].target.value
        function = self.context.enclosing_function()
        if function is not None:  # module-level names are judged by their name alone
            self._locals[(id(function), name)] = self.is_constant(node.value)
            if (length := filled_length(node.value)) is not None:
                self._fill_counts[(id(function), name)] = length

    def fill_length(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """The length `max_len - len(ids)` fills a list up to (`max_len`), also through a local holding the count
        (`padding_size = max(0, max_seq_len - len(token_ids))`); None for any other count."""
        if (length := filled_length(expr)) is not None:
            return length
        function = self.context.enclosing_function()
        if isinstance(expr, cst.Name) and function is not None:
            return self._fill_counts.get((id(function), expr.value))
        return None

    def is_constant(self, expr: cst.BaseExpression) -> bool:
        """True when `expr` is (arithmetic on) a constant length and nothing computed from the data."""
        if isinstance(expr, cst.Integer):
            return True
        if (clamped := _clamped_at_zero(expr)) is not None:
            return self.is_constant(clamped)
        if isinstance(expr, cst.BinaryOperation):
            if isinstance(expr.operator, cst.Subtract):
                return self.is_constant(expr.left)
            sides = (expr.left, expr.right)
            return any(self.is_constant(s) for s in sides) and not any(_calls_max_or_len(s) for s in sides)
        if isinstance(expr, cst.Name):
            function = self.context.enclosing_function()
            local = self._locals.get((id(function), expr.value)) if function is not None else None
            if local is not None:
                return local
            if function is not None and _is_param(function, expr.value) \
                    and (function.name.value, expr.value) in self.batch_fed_params():
                return False  # `def pad_token(self, tokens, max_length)`, handed the batch's longest by its callers
            if function is not None and _small_default(function, expr.value):
                return False  # `def digit_version(version_str, length=4)`: a few fields, no sequence a model reads
            return is_length_name(expr.value)
        if isinstance(expr, cst.Attribute):
            return is_length_name(expr.attr.value) and dotted_name(expr) is not None
        return False

    def batch_fed_params(self) -> frozenset[tuple[str, str]]:
        """(function, parameter) pairs of this file that every call here of the function (by its name, or
        `self.name(...)`) fills with a length computed from the batch: FlagAI's collators compute `max_length =
        max([len(t) for t in input_ids])` and hand it to `self.pad_token(tokens, max_length)`, which pads to it."""
        if self._batch_fed is None:
            tree = self.context.syntax_tree()  # (the file is linted whatever its shape)
            self._batch_fed = _batch_fed_params(tree) if tree is not None else frozenset()
        return self._batch_fed

    def is_dynamic_local(self, expr: cst.BaseExpression) -> bool:
        """True when `expr` is (arithmetic on) a local computed from the data in this function."""
        if isinstance(expr, cst.BinaryOperation):
            return self.is_dynamic_local(expr.left) or self.is_dynamic_local(expr.right)
        if isinstance(expr, cst.Name):
            function = self.context.enclosing_function()
            return function is not None and self._locals.get((id(function), expr.value)) is False
        return _calls_max_or_len(expr)


def _is_param(function: cst.FunctionDef, name: str) -> bool:
    """Is `name` a positional or keyword parameter of the function? (Only then are its callers read: that parses
    the file once more, with `ast`.)"""
    return any(p.name.value == name for p in params_of(function))


# A length below this is a count of fields (version digits, box corners), not a sequence a model runs over.
_SMALLEST_SEQUENCE_LENGTH = 16


def _small_default(function: cst.FunctionDef, name: str) -> bool:
    """Is `name` a parameter of the function whose default is an integer below `_SMALLEST_SEQUENCE_LENGTH`?"""
    default = next((p.default for p in params_of(function) if p.name.value == name), None)
    return isinstance(default, cst.Integer) and default.evaluated_value < _SMALLEST_SEQUENCE_LENGTH


def _batch_fed_params(tree: ast.Module) -> frozenset[tuple[str, str]]:
    """`LengthTracker.batch_fed_params` over a parsed file."""
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    params = {f.name: [a.arg for a in (*f.args.posonlyargs, *f.args.args)] for f in functions}
    fed: dict[tuple[str, str], bool] = {}  # (function, parameter) -> every call seen passes a batch length?
    for caller in functions:
        nodes = list(ast.walk(caller))  # walked once: a class's nested functions make repeated walks add up
        measured = {target.id for node in nodes if isinstance(node, ast.Assign) and _measures(node.value)
                    for target in node.targets if isinstance(target, ast.Name)}
        for call in (node for node in nodes if isinstance(node, ast.Call)):
            func = call.func
            on_self = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id in ("self", "cls")
            name = func.id if isinstance(func, ast.Name) else func.attr if on_self else None
            if name not in params:
                continue
            names = params[name][1:] if on_self and params[name][:1] in (["self"], ["cls"]) else params[name]
            bound = [(param, arg) for param, arg in zip(names, call.args) if not isinstance(arg, ast.Starred)]
            bound += [(k.arg, k.value) for k in call.keywords if k.arg is not None]
            for param, arg in bound:
                batch = isinstance(arg, ast.Name) and arg.id in measured or _measures(arg)
                fed[(name, param)] = fed.get((name, param), True) and batch
    return frozenset(key for key, batch in fed.items() if batch)


def _measures(expr: ast.expr) -> bool:
    """Is it computed by measuring the data: `max(len(t) for t in ids)`, `max(lengths)`?"""
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "len")
               for node in ast.walk(expr))
