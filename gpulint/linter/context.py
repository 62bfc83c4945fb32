"""What every rule needs to know about where code runs: the hot-path context of one file.

During the single traversal the context keeps the ancestor stack, the import map, and which names hold values that
already live on the host. It also records what the hot-path analysis needs (loops and what they contain, calls and
where they are). After the traversal it decides, for each reported node, its execution state:

    hot     runs once per training step (or more): inside a step loop, or in a function the step calls
    gated   hot, but only on some steps: under `if step % N == 0`, `if should_log`, a master-process guard, or after an
            early `continue` on non-logging steps (the gate must enclose the reported node itself)
    cold    known not to run per step: eval/validate/test/generate functions, `__init__`, checkpoint saving

Anything else (module-level setup, helpers nobody in the step calls) is neither hot nor cold.

A *step loop* directly contains a step marker (`.backward()`, `optimizer.step()`, `scaler.step()`, `zero_grad()`),
iterates a data loader, or calls a hot function; a loop under `no_grad`/`inference_mode` never becomes one by iterating a
loader. An epoch loop that only contains a step loop is not itself one, so epoch-end code is not per step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Literal

import libcst as cst

from gpulint.linter.names import (
    ImportMap,
    callee_method,
    dotted_name,
    last_name,
    name_parts,
)
from gpulint.linter.regions import CALL_DEPTH
from gpulint.linter.syntax import SyntaxVisitor

if TYPE_CHECKING:
    from gpulint.linter.rule import Report

Location = Literal["host", "device", "unknown"]

# What makes code hot here (these names, step markers, loader names, `is_hot_function_name`) is mirrored on the
# text by the engine, which parses only the functions that may be hot (`_hot_code`, `may_be_step_work` below):
# widen those with any new source of hotness. `python bench/prune_check.py` shows a mismatch as a difference.
DEFAULT_HOT_FUNCTIONS = frozenset(
    {
        "train_step", "training_step", "_train_step", "train_one_epoch", "train_epoch", "_run_batch", "run_batch",
        "compute_loss", "train_batch", "train_on_batch", "forward_backward", "forward_backward_step", "fwd_bwd",
        "train_iter", "train_iteration", "optimizer_step", "update_step", "inner_loop", "forward", "__call__",
    }
)
# Split on "_": a function is cold when one of its name's parts is one of these (`evaluate_model`, `__init__`).
COLD_NAME_PARTS = frozenset(
    {
        "eval", "evaluate", "evaluation", "valid", "validate", "validation", "val", "test", "testing", "predict",
        "prediction", "inference", "infer", "generate", "generation", "sample", "sampling", "save", "checkpoint", "ckpt",
        "init", "setup", "export", "visualize", "plot", "demo", "benchmark", "profile", "decode", "greedy", "beam",
        "detect",
    }
)
# Identifier parts that make an `if` test a gate (`should_log`, `log_interval`, `args.print_freq`). Rank guards
# (`if master_process:`, `is_main_process()`) are not gates: rank 0 still runs the body every step.
DEFAULT_GATE_PARTS = frozenset(
    {
        "log", "logging", "logger", "print", "report", "display", "verbose", "debug", "interval", "every", "freq",
        "frequency", "period", "eval", "evaluate", "save", "checkpoint", "ckpt",
        "wandb", "tensorboard", "writer", "summary", "visualize", "sample", "tick",
    }
)
STEP_NAME_PARTS = frozenset({"step", "batch", "iter", "iteration", "microbatch"})
EVAL_LOADER_PARTS = frozenset({"eval", "val", "valid", "validation", "test", "testing", "dev"})
LOADER_PARTS = frozenset({"loader", "dataloader", "dl", "batches", "iterator", "train_iter", "data_iter", "prefetcher"})
STEP_METHODS = frozenset({"backward", "manual_backward", "zero_grad"})
_OPTIMIZER_RECEIVER = re.compile(r"(optim|opt$|^opt|scaler|solver)", re.IGNORECASE)
_NO_GRAD = frozenset(
    {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"}
)
HOST_METHODS = frozenset({"item", "tolist", "numpy", "cpu"})
METADATA_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "is_cuda", "requires_grad", "names", "layout"})
METADATA_METHODS = frozenset({"size", "dim", "numel", "element_size", "nelement", "stride", "get_device", "data_ptr"})
HOST_BUILTINS = frozenset(
    {"len", "float", "int", "bool", "str", "round", "range", "enumerate", "zip", "list",
     "tuple", "dict", "set", "sorted", "repr", "format", "isinstance", "getattr", "hasattr"}
)
# `sum(losses)`, `max(a, b)`, `abs(t)` of tensors are tensors: host only when every argument is.
VALUE_BUILTINS = frozenset({"abs", "min", "max", "sum"})
# torch factories make a CPU tensor unless given a `device=` (reading it back is free).
CPU_FACTORIES = frozenset(
    {"torch.tensor", "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.arange", "torch.linspace",
     "torch.rand", "torch.randn", "torch.randint", "torch.randperm", "torch.eye", "torch.from_numpy"}
)
# Tensor methods whose result lives where their receiver does.
SAME_PLACE_METHODS = frozenset(
    {"detach", "clone", "float", "half", "double", "long", "int", "bool", "mean", "sum", "median", "max", "min",
     "std", "var", "norm", "abs", "squeeze", "unsqueeze", "view", "reshape", "flatten", "contiguous", "prod"}
)
HOST_MODULE_PREFIXES = ("time.", "math.", "numpy.", "np.", "os.", "random.", "datetime.", "json.")
LOOPS = (cst.For, cst.While)
_LITERALS = frozenset(
    {cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.FormattedString, cst.ConcatenatedString}
)




def is_cold_function_name(name: str) -> bool:
    parts = name_parts(name)
    # `train_validate`, `train_and_evaluate`: the training half runs every step.
    return bool(parts & COLD_NAME_PARTS) and not parts & {"train", "training", "fit"}


# Named like per-step work, beyond the exact names above, unless the name also says it logs, plots or evaluates
# (`log_losses`, `eval_loss`): a loss (`compute_loss`, `loss_labels`, `_calc_losses`), gradient clipping
# (`clip_gradients`, `clip_grad_norm`), or preparing one batch (`parse_batch`, `prepare_batch`, `preprocess_batch`).
LOSS_NAME_PARTS = frozenset({"loss", "losses"})
_CLIP_GRAD_PARTS = frozenset({"grad", "grads", "gradient", "gradients"})
_BATCH_VERB_PARTS = frozenset({"parse", "prepare", "process", "preprocess", "feed", "move", "transfer", "unpack"})
_LOSS_CLASS = re.compile(r"(Loss|Criterion)$")


def is_hot_function_name(name: str) -> bool:
    parts = name_parts(name)
    per_step = (
        bool(parts & LOSS_NAME_PARTS)
        or ("clip" in parts and bool(parts & _CLIP_GRAD_PARTS))
        or ("batch" in parts and bool(parts & _BATCH_VERB_PARTS))
    )
    return per_step and not parts & DEFAULT_GATE_PARTS and not is_cold_function_name(name)


def may_be_step_work(name: str, class_name: str = "") -> bool:
    """Could a definition of this name (in this class) be hot by its name alone (see `_named_like_step_work`)?
    The engine asks before parsing, to keep such functions in what it parses."""
    return bool(class_name and _LOSS_CLASS.search(class_name)) or is_hot_function_name(name)


def is_test_path(path: str) -> bool:
    """A test module or a file under a tests/test_utils folder: `tests/x.py`, `test_x.py`, `x_test.py`, `conftest.py`."""
    parts = path.replace("\\", "/").split("/")
    base = parts[-1]
    return (
        base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"
        or any(p in ("tests", "test", "testing", "test_utils") for p in parts[:-1])
    )


@dataclass(frozen=True)
class ExecState:
    hot: bool
    gated: bool
    cold: bool
    reason: str

    @property
    def per_step(self) -> bool:
        return self.hot and not self.gated and not self.cold


NEUTRAL = ExecState(hot=False, gated=False, cold=False, reason="not on the training path")


@dataclass
class _LoopInfo:
    node: cst.CSTNode
    function: cst.FunctionDef | None
    has_marker: bool = False
    iterates_loader: bool = False
    fetches_batches: bool = False  # calls `next(loader_iterator)`
    under_no_grad: bool = False
    callees: set[str] = field(default_factory=set)


@dataclass
class _CallSite:
    callee: str
    ancestors: tuple[cst.CSTNode, ...]


class FileContext:
    """Per-file state shared by the engine and every rule."""

    def __init__(
        self,
        path: str,
        module: cst.Module,
        hot_functions: Iterable[str] = (),
        gate_names: Iterable[str] = (),
    ) -> None:
        self.path = path
        self.in_tests = is_test_path(path)
        self.module = module
        self.imports = ImportMap()
        self.hot_function_names = DEFAULT_HOT_FUNCTIONS | frozenset(hot_functions)
        self.gate_names = frozenset(gate_names)
        self._step_flags: set[str] = set()
        self._step_functions: set[str] = set()  # functions that backward/step outside any loop of their own  # names assigned `step % N == 0`-like tests (`is_metric_step = ...`)
        self.reports: list[Report] = []
        self.shared: dict[type, object] = {}  # the rules' shared helpers for this file (`helper`, `Rule.shared`)
        self._stack: list[cst.CSTNode] = []
        self._scopes: list[dict[str, Location]] = [{}]
        self._loops: dict[int, _LoopInfo] = {}
        self._functions: dict[str, list[cst.FunctionDef]] = {}
        self._loss_class_methods: set[str] = set()  # methods of `class BiEncoderNllLoss` / `class SetCriterion`
        self._call_sites: list[_CallSite] = []
        self._no_grad_depth = 0
        self._no_grad_withs: set[int] = set()
        # Filled by finalize().
        self._step_loops: set[int] = set()
        # Functions holding a loop over a data loader (`train_one_epoch`): code outside that loop runs once per epoch.
        self._epoch_functions: set[int] = set()
        self._function_state: dict[int, ExecState] = {}
        self._block_gate_index: dict[int, int | None] = {}
        self._gate_cache: dict[int, bool] = {}

    # ------------------------------------------------------------------ traversal (called by the engine)
    @property
    def ancestors(self) -> list[cst.CSTNode]:
        """The nodes enclosing the node being visited (outermost first), ending with that node itself."""
        return self._stack

    def ancestors_snapshot(self) -> tuple[cst.CSTNode, ...]:
        return tuple(self._stack)

    def parent(self, depth: int = 1) -> cst.CSTNode | None:
        """The node `depth` levels above the node being visited (1 = its parent)."""
        index = len(self._stack) - 1 - depth
        return self._stack[index] if index >= 0 else None

    def helper(self, kind: type) -> Any:
        """The file's one instance of a helper several rules share (`Rule.shared`), made on first use. It is kept
        here, not in a module-level table, so that it goes with the file."""
        found = self.shared.get(kind)
        if found is None:
            found = self.shared[kind] = kind(self)
        return found

    def add_report(self, report: "Report") -> None:
        self.reports.append(report)

    def enter(self, node: cst.CSTNode) -> None:
        # `type(node) is X`, not isinstance: libcst nodes are ABCs, and ABC instance checks dominate a walk's cost.
        self._stack.append(node)
        kind = type(node)
        if kind is cst.Call:
            self._record_call(node)
        elif kind is cst.For or kind is cst.While:
            self._record_loop(node)
        elif kind is cst.FunctionDef:
            self._functions.setdefault(node.name.value, []).append(node)
            self._scopes.append({})
            owner = self._stack[-3] if len(self._stack) >= 3 else None
            if type(owner) is cst.ClassDef and _LOSS_CLASS.search(owner.name.value):
                self._loss_class_methods.add(node.name.value)
        elif kind is cst.Lambda:
            self._scopes.append({})
        elif kind is cst.Import:
            self.imports.add_import(node)
        elif kind is cst.ImportFrom:
            self.imports.add_import_from(node)
        elif kind is cst.With and self._is_no_grad_with(node):
            self._no_grad_withs.add(id(node))
            self._no_grad_depth += 1

    def leave(self, node: cst.CSTNode) -> None:
        kind = type(node)
        if kind is cst.Assign:
            location = self.location_of(node.value)
            for target in node.targets:
                if _same_length_tuples(target.target, node.value):  # `x, y = x.to(dev), y.to(dev)`: element-wise
                    for name, value in zip(target.target.elements, node.value.elements):
                        self._bind(name.value, self.location_of(value.value))
                    continue
                self._bind(target.target, location)
                if isinstance(target.target, cst.Name) and _is_interval_test(node.value):
                    self._step_flags.add(target.target.value)
        elif kind is cst.AnnAssign and node.value is not None:
            self._bind(node.target, self.location_of(node.value))
        elif kind is cst.AugAssign and isinstance(node.target, cst.Name):
            current = self.location_of(node.target)
            added = self.location_of(node.value)
            self._bind(node.target, current if current == added else "unknown" if "unknown" in (current, added) else "device")
        elif kind is cst.FunctionDef or kind is cst.Lambda:
            self._scopes.pop()
        elif kind is cst.With and id(node) in self._no_grad_withs:
            self._no_grad_depth -= 1
        self._stack.pop()

    def _record_loop(self, node: cst.For | cst.While) -> None:
        function = self.enclosing_function()
        no_grad = self._no_grad_depth > 0 or (function is not None and self._decorated_no_grad(function))
        info = _LoopInfo(node=node, function=function, under_no_grad=no_grad)
        if isinstance(node, cst.For):
            info.iterates_loader = self._iterates_loader(node.iter)
            self._bind(node.target, "host" if self.location_of(node.iter) == "host" else "unknown")
        self._loops[id(node)] = info

    def _record_call(self, node: cst.Call) -> None:
        name = callee_method(node)
        if name is None:
            return
        if self._is_step_marker(node, name):
            loop = self.innermost_loop()
            if loop is not None:
                self._loops[id(loop)].has_marker = True
            elif name != "zero_grad" and (function := self.enclosing_function()) is not None:
                # `def train(): ...; loss.backward(); optimizer.step()` with no loop of its own is one step.
                self._step_functions.add(function.name.value)
        if name == "next" and isinstance(node.func, cst.Name) and node.args and self._iterates_loader(node.args[0].value):
            # `while True: batch = next(train_iter)` steps through a loader as surely as `for batch in loader:`.
            # It does not make the function an epoch function: `for _ in range(accum): x = next(it)` is a step's
            # micro-batch loop.
            loop = self.innermost_loop()
            if loop is not None:
                self._loops[id(loop)].fetches_batches = True
        func = node.func
        same_module_call = isinstance(func, cst.Name) or (
            isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls")
        )
        if same_module_call:
            loop = self.innermost_loop()
            if loop is not None:
                self._loops[id(loop)].callees.add(name)
            self._call_sites.append(_CallSite(name, tuple(self._stack)))

    def _is_step_marker(self, call: cst.Call, name: str) -> bool:
        if name in STEP_METHODS:
            return True
        if name == "step" and isinstance(call.func, cst.Attribute):
            receiver = last_name(call.func.value) or ""
            return bool(_OPTIMIZER_RECEIVER.search(receiver)) and "sched" not in receiver.lower()
        return False

    def _iterates_loader(self, expr: cst.BaseExpression) -> bool:
        # Unwrap enumerate(...), tqdm(...), zip(...), iter(...), islice(...) to what they iterate.
        while isinstance(expr, cst.Call) and expr.args:
            if last_name(expr.func) in ("enumerate", "tqdm", "zip", "iter", "islice", "track", "progress_bar"):
                expr = expr.args[0].value
            else:
                break
        name = last_name(expr) if not isinstance(expr, cst.Call) else last_name(expr.func)
        if name is None:
            return False
        lowered = name.lower()
        if name_parts(lowered) & EVAL_LOADER_PARTS:  # `val_loader`, `eval_dataloader`, `test_dl`
            return False
        return bool(name_parts(lowered) & LOADER_PARTS) or lowered.endswith("loader") or lowered in ("train_data", "data")

    def _decorated_no_grad(self, function: cst.FunctionDef) -> bool:
        for decorator in function.decorators:
            target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
            if self.imports.resolve(target) in _NO_GRAD:
                return True
        return False

    def _is_no_grad_with(self, node: cst.With) -> bool:
        for item in node.items:
            target = item.item.func if isinstance(item.item, cst.Call) else item.item
            if self.imports.resolve(target) in _NO_GRAD:
                return True
        return False

    # These two run for most calls and assignments: exact type tests (these node classes have no subclasses), not
    # isinstance, which for libcst's ABCs costs a Python-level call per miss.
    def enclosing_function(self) -> cst.FunctionDef | None:
        stack = self._stack
        for index in range(len(stack) - 2, -1, -1):
            if type(stack[index]) is cst.FunctionDef:
                return stack[index]  # type: ignore[return-value]
        return None

    def innermost_loop(self) -> cst.CSTNode | None:
        """The innermost For/While enclosing the current node within its function (the node itself excluded)."""
        stack = self._stack
        for index in range(len(stack) - 2, -1, -1):
            kind = type(stack[index])
            if kind is cst.For or kind is cst.While:
                return stack[index]
            if kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda:
                return None
        return None

    # ------------------------------------------------------------------ device provenance
    def _bind(self, target: cst.BaseExpression, location: Location) -> None:
        if isinstance(target, cst.Name):
            self._scopes[-1][target.value] = location
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value, "unknown" if location == "device" else location)

    def location_of(self, expr: cst.BaseExpression) -> Location:
        """Where the value of `expr` lives: "host" when it is already a Python/host value (`.item()`, `.tolist()`,
        `.cpu()`, a literal, a size, arithmetic on host values), "device" when it is a tensor known to be on the
        accelerator (`.to(device)`, `.cuda()`), else "unknown"."""
        kind = type(expr)  # exact types (none of these has subclasses): isinstance on libcst's ABCs is slow
        if kind in _LITERALS:
            return "host"
        if kind is cst.Name:
            if expr.value in ("True", "False", "None"):
                return "host"
            for scope in reversed(self._scopes):
                if expr.value in scope:
                    return scope[expr.value]
            return "unknown"
        if kind is cst.Call:
            return self._call_location(expr)
        if kind is cst.Attribute:
            if expr.attr.value in METADATA_ATTRS:
                return "host"
            return "unknown"
        if kind is cst.Subscript:
            return "host" if self.location_of(expr.value) == "host" else "unknown"
        if kind is cst.UnaryOperation:
            return self.location_of(expr.expression)
        if kind is cst.BinaryOperation:
            left, right = self.location_of(expr.left), self.location_of(expr.right)
            if left == right:
                return left
            return "device" if "device" in (left, right) else "unknown"
        if kind is cst.ListComp or kind is cst.GeneratorExp or kind is cst.SetComp:
            return "host" if self.location_of(expr.elt) == "host" else "unknown"
        if kind is cst.List or kind is cst.Tuple or kind is cst.Set:
            locations = {self.location_of(e.value) for e in expr.elements if type(e) is cst.Element}
            return "host" if locations <= {"host"} else "unknown"
        return "unknown"

    def _call_location(self, call: cst.Call) -> Location:
        func = call.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in HOST_METHODS or method in METADATA_METHODS:
                return "host"
            if method == "to" and call.args and _is_cpu_literal(call.args[0].value):
                return "host"
            if method in ("to", "cuda"):
                return "device"
            if method in SAME_PLACE_METHODS:
                return self.location_of(func.value)
        resolved = self.imports.resolve(func) or ""
        if isinstance(func, cst.Name) and func.value not in self._scopes[-1]:
            if func.value in HOST_BUILTINS:
                return "host"
            if func.value in VALUE_BUILTINS:
                return "host" if all(self.location_of(a.value) == "host" for a in call.args) else "unknown"
        if resolved in CPU_FACTORIES:
            device = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
            if device is None or _is_cpu_literal(device):
                return "host"
            return "device"
        if resolved.startswith(HOST_MODULE_PREFIXES):
            return "host"
        return "unknown"

    def is_host_value(self, expr: cst.BaseExpression) -> bool:
        return self.location_of(expr) == "host"

    def resolve(self, node: cst.CSTNode) -> str | None:
        """Qualified dotted name of a Name/Attribute through the file's imports (`t.cuda.synchronize` ->
        `torch.cuda.synchronize`)."""
        return self.imports.resolve(node)

    # ------------------------------------------------------------------ after the traversal
    def finalize(self) -> None:
        """Decide which loops are step loops and which functions the step calls. Called once, after the traversal."""
        step_named = {name for name in self._functions if name in self.hot_function_names} | {
            name for name in self._step_functions if not is_cold_function_name(name)
        }
        # Functions only *named* like step work run every step themselves, but a loop that calls one is not made a
        # step loop by it (a validation loop calling `process_batch`, a debug dump calling `unpack_batch`).
        hot_named = step_named | {name for name in self._functions if self._named_like_step_work(name)}
        for info in self._loops.values():
            if info.function is not None and is_cold_function_name(info.function.name.value):
                continue
            loader = info.iterates_loader and not info.under_no_grad
            fetches = info.fetches_batches and not info.under_no_grad
            if info.has_marker or loader or fetches or info.callees & step_named:
                self._step_loops.add(id(info.node))
                # `train_batch` / `train_step` run once per step: their loop over micro-batches is inside the step.
                per_step_name = name_parts(info.function.name.value) & STEP_NAME_PARTS if info.function else True
                if loader and info.function is not None and not per_step_name:
                    self._epoch_functions.add(id(info.function))
        for name in hot_named:
            for func in self._functions[name]:
                self._function_state[id(func)] = ExecState(True, False, False, f"in `{name}`, which runs every step")
        # Functions called from the step, two calls deep (regions.CALL_DEPTH: the engine parses no deeper). Each round
        # looks at call sites whose state is known.
        for _ in range(CALL_DEPTH):
            updates: dict[str, ExecState] = {}
            for site in self._call_sites:
                if site.callee not in self._functions or site.callee in hot_named:
                    continue
                state = self._state_of_chain(site.ancestors)
                if not state.hot or state.cold:
                    continue
                best = updates.get(site.callee)
                if best is None or (best.gated and not state.gated):
                    updates[site.callee] = ExecState(
                        True, state.gated, False, f"in `{site.callee}`, called from the training step"
                    )
            for name, state in updates.items():
                for func in self._functions[name]:
                    if id(func) not in self._function_state or self._function_state[id(func)].gated:
                        self._function_state[id(func)] = state

    def _named_like_step_work(self, name: str) -> bool:
        """`compute_loss`, `loss_labels`, `BiEncoderNllLoss.calc`: hot unless every definition runs under no_grad
        (`estimate_loss`, an eval). In a loss class, no_grad methods are still part of the loss (matching, metrics)."""
        if name in self._loss_class_methods:
            return not (name.startswith("__") or name_parts(name) & DEFAULT_GATE_PARTS or is_cold_function_name(name))
        return is_hot_function_name(name) and not all(self._decorated_no_grad(f) for f in self._functions[name])

    def state_of(self, report: "Report") -> ExecState:
        return self._state_of_chain(report.ancestors)

    def _state_of_chain(self, chain: tuple[cst.CSTNode, ...]) -> ExecState:
        gated = False
        for index in range(len(chain) - 1, -1, -1):
            node = chain[index]
            child = chain[index + 1] if index + 1 < len(chain) else None
            if isinstance(node, cst.If) and child is node.body and self._is_step_gate(node.test):
                gated = True
            elif isinstance(node, (cst.IndentedBlock, cst.Module)) and child is not None and self._after_early_exit_gate(node, child):
                gated = True
            elif isinstance(node, LOOPS) and id(node) in self._step_loops and child is node.body:
                return ExecState(True, gated, False, "inside the training loop")
            elif isinstance(node, cst.FunctionDef):
                name = node.name.value
                if is_cold_function_name(name) and name not in self.hot_function_names:
                    return ExecState(False, gated, True, f"in `{name}`, which does not run every step")
                state = self._function_state.get(id(node))
                if state is None:
                    return NEUTRAL
                if id(node) in self._epoch_functions:
                    return ExecState(False, gated, False, f"in `{name}` outside its loop over batches (once per epoch)")
                return ExecState(True, gated or state.gated, False, state.reason)
            elif isinstance(node, cst.ClassDef):
                return NEUTRAL
        return NEUTRAL

    def gated_here(self, switches_gate: bool = True) -> bool:
        """During the traversal: True when a gate inside the current function (`if step % N == 0:`, an early
        `continue` on non-logging steps) encloses the node being visited. Rules whose `when` is "training" use it to
        skip gated code, which "training" alone does not. With `switches_gate=False`, a configuration switch
        (`if args.log_grad_norm:`) is not a gate: when it is on, its body runs every step."""
        chain = self._stack
        for index in range(len(chain) - 2, -1, -1):
            node, child = chain[index], chain[index + 1]
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if isinstance(node, cst.If) and child is node.body and self._is_gate(node.test):
                if switches_gate or not _is_config_switch(node.test):
                    return True
            if isinstance(node, (cst.IndentedBlock, cst.Module)) and self._after_early_exit_gate(node, child):
                return True
        return False

    def _is_step_gate(self, test: cst.BaseExpression) -> bool:
        """A gate that skips steps. A configuration switch (`if args.print_loss:`, `if train_config.save_metrics:`) is
        not one: when it is on, its body runs every step."""
        return self._is_gate(test) and not _is_config_switch(test)

    def is_gate(self, test: cst.BaseExpression) -> bool:
        """Public form of `_is_gate` for rules that look ahead at sibling statements."""
        return self._is_gate(test)

    def _is_gate(self, test: cst.BaseExpression) -> bool:
        """Does `if test:` run its body only on some steps? `if step % N:` / `!= 0` run on most steps: not a gate."""
        cached = self._gate_cache.get(id(test))
        if cached is None:
            cached = self._gate_cache[id(test)] = _GateFinder(self.gate_names | self._step_flags).find(test)
        return cached and _modulo_form(test) != "inverted"

    def _is_exit_gate(self, test: cst.BaseExpression) -> bool:
        """Does `if test: continue` skip most steps? `if step % N != 0: continue` does; `if step % N == 0: continue` and
        `if resuming and step < start: continue` (skipping already-trained batches) do not."""
        form = _modulo_form(test)
        if form is not None:
            return form == "inverted"
        if _mentions_resume(test):
            return False
        return self._is_gate(test)

    def _after_early_exit_gate(self, block: cst.IndentedBlock | cst.Module, stmt: cst.CSTNode) -> bool:
        key = id(block)
        if key not in self._block_gate_index:
            self._block_gate_index[key] = None
            for position, sibling in enumerate(block.body):
                if isinstance(sibling, cst.If) and sibling.orelse is None and _ends_with_exit(sibling.body) and self._is_exit_gate(sibling.test):
                    self._block_gate_index[key] = position
                    break
        gate_index = self._block_gate_index[key]
        if gate_index is None:
            return False
        for position, sibling in enumerate(block.body):
            if sibling is stmt:
                return position > gate_index
        return False


class _GateFinder(SyntaxVisitor):
    """True when an `if` test names a logging/interval/master-process gate or takes a modulo."""

    def __init__(self, extra_names: frozenset[str]) -> None:
        self.extra = extra_names
        self.found = False

    def find(self, test: cst.BaseExpression) -> bool:
        self.walk(test)
        return self.found

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> bool:
        if _is_step_modulo(node):
            self.found = True
        return not self.found

    def visit_Call(self, node: cst.Call) -> bool:
        # `loss.item() > x` is not a gate: do not look for gate words inside calls' arguments, only their names.
        name = dotted_name(node.func)
        if name is not None:
            self._check(name)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self._check(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        name = dotted_name(node)
        if name is not None:
            self._check(name)
            return False
        return True

    def _check(self, name: str) -> None:
        if name in self.extra or name.rsplit(".", 1)[-1] in self.extra:
            self.found = True
        elif name_parts(name.rsplit(".", 1)[-1]) & DEFAULT_GATE_PARTS:
            self.found = True


_CONFIG_ROOTS = frozenset({"args", "config", "cfg", "conf", "opts", "options", "hparams", "flags", "settings"})


def _is_config_switch(test: cst.BaseExpression) -> bool:
    """`args.log_grad_norm`, `not cfg.debug`, `neox_args.a or neox_args.b`: only attributes of a configuration object
    (its root name has a part like args/config/cfg, possibly under `self.`), no comparison or arithmetic."""
    if isinstance(test, cst.BooleanOperation):
        return _is_config_switch(test.left) and _is_config_switch(test.right)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _is_config_switch(test.expression)
    name = dotted_name(test) if isinstance(test, cst.Attribute) else None
    if name is None:
        return False
    parts = name.split(".")[:-1]
    if parts and parts[0] == "self":
        parts = parts[1:]
    return bool(parts) and bool(name_parts(parts[0]) & _CONFIG_ROOTS)


def _mentions_resume(test: cst.BaseExpression) -> bool:
    """`if args.resume_from_checkpoint and step < resume_step: continue` skips batches already trained on."""
    parts = {"resume", "resumed", "skip", "skipped"}
    return any(name_parts((dotted_name(n) or "").rsplit(".", 1)[-1]) & parts for n in _leaf_names(test))


def _leaf_names(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(test, cst.BooleanOperation):
        return _leaf_names(test.left) + _leaf_names(test.right)
    if isinstance(test, cst.UnaryOperation):
        return _leaf_names(test.expression)
    if isinstance(test, cst.Comparison):
        return _leaf_names(test.left) + [n for c in test.comparisons for n in _leaf_names(c.comparator)]
    return [test]


def _same_length_tuples(target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    return (
        isinstance(target, (cst.Tuple, cst.List))
        and isinstance(value, (cst.Tuple, cst.List))
        and len(target.elements) == len(value.elements)
        and not any(isinstance(e, (cst.StarredElement)) for e in (*target.elements, *value.elements))
    )


def _is_interval_test(expr: cst.BaseExpression) -> bool:
    """`step % N == 0`, `(i % n == 0) or last_batch`: true once every N steps."""
    if isinstance(expr, cst.BooleanOperation):
        return _is_interval_test(expr.left) or _is_interval_test(expr.right)
    return _modulo_form(expr) == "equal"


def _is_step_modulo(node: cst.CSTNode) -> bool:
    """`step % N`, not `x.size(0) % world_size` (a divisibility check on a size says nothing about the step)."""
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo)):
        return False
    left = node.left
    if isinstance(left, cst.Subscript):
        left = left.value
    if isinstance(left, cst.Call):
        return last_name(left.func) not in METADATA_METHODS | {"len"}
    return not (isinstance(left, cst.Attribute) and left.attr.value in METADATA_ATTRS)


def _modulo_form(test: cst.BaseExpression) -> str | None:
    """"inverted" for `a % n` and `a % n != 0` (true on most steps), "equal" for `a % n == 0`, else None."""
    if _is_step_modulo(test):
        return "inverted"
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        left, comparison = test.left, test.comparisons[0]
        if _is_step_modulo(left):
            if isinstance(comparison.operator, cst.NotEqual):
                return "inverted"
            if isinstance(comparison.operator, cst.Equal):
                return "equal"
    return None


def _ends_with_exit(body: cst.BaseSuite) -> bool:
    statements = body.body
    if not statements:
        return False
    last = statements[-1]
    if isinstance(last, cst.SimpleStatementLine):
        small = last.body[-1] if last.body else None
    elif isinstance(body, cst.SimpleStatementSuite):
        small = last
    else:
        return False
    return isinstance(small, (cst.Continue, cst.Return, cst.Break))


def _is_cpu_literal(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.SimpleString):
        return expr.raw_value.split(":")[0] == "cpu"
    if isinstance(expr, cst.Call) and last_name(expr.func) == "device" and expr.args:
        return _is_cpu_literal(expr.args[0].value)
    return False
