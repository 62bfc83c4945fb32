"""What every rule needs to know about the file it reads: the ancestor stack, imports, and where values live.

During the single traversal the context keeps the ancestor stack, the import map, and which names hold values that
already live on the host ("host") or on the accelerator ("device"): `.item()`, `.tolist()`, `.cpu()`, a literal, a
size are on the host; `.to(device)`, `.cuda()` on the device. The project model adds what one file cannot know: the
parameters every caller passes a host (or device) value, and the project functions whose value lives on the host.

How often code runs (every step, gated, cold) is the project model's (gpulint/project/): the engine asks it for each
reported node after the traversal. A rule that needs to know during the traversal whether a gate encloses the node
being visited asks `gated_here`, which reads the gate on Python's ast, as the model does.
"""

from __future__ import annotations

import ast
import re
import warnings
from typing import TYPE_CHECKING, Any, Iterable, Literal

import libcst as cst

from gpulint.linter.names import ImportMap, dotted_name, last_name, name_parts, params_of
from gpulint.project.facts import PER_STEP, PROGRAM, FileFacts
from gpulint.project.local import (
    MODULE_SCOPE, gate_interval, gpu_branch, inverted_gate, is_exit_gate, is_gate, is_short_interval, merged_branches,
    switch_flags,
    tuple_kinds,
    typed_branch,
)
from gpulint.project.vocab import (  # noqa: F401  (re-exported: the rules import these words from here)
    CONTAINER_BUILTINS,
    DEFAULT_GATE_PARTS,
    DEFAULT_HOT_FUNCTIONS,
    DEVICE_HOLDER,
    HOST_BUILTINS,
    HOST_METHODS,
    HOST_MODULE_PREFIXES,
    JOINING_FUNCTIONS,
    METADATA_ATTRS,
    METADATA_METHODS,
    NOT_TRAINING_SWITCH_PARTS,
    NUMPY_ONLY_METHODS,
    PACKED_BATCH_SIZES,
    PREPROCESSOR_METHODS,
    PREPROCESSOR_NAMES,
    SAME_PLACE_FUNCTIONS,
    SAME_PLACE_METHODS,
    VALUE_BUILTINS,
    builds_on_cpu_by_default,
    is_cold_function_name,
    is_hot_function_name,
    is_test_path,
    may_be_step_work,
)

if TYPE_CHECKING:
    from gpulint.linter.reports import Report


def _through_inference(chain) -> bool:
    """Does the way in pass through a function named for inference or sampling (DiffSinger's `GaussianDiffusion.
    inference()`, which a guessed forward calls only when `infer` is true)? What it calls runs when the program
    samples, guessed or not."""
    return any(name_parts(frame.label.split("(", 1)[0].rsplit(".", 1)[-1]) & NOT_TRAINING_SWITCH_PARTS
               for frame in chain)


Location = Literal["host", "device", "unknown"]
LOOPS = (cst.For, cst.While)
STRING_NODES = frozenset({cst.SimpleString, cst.FormattedString, cst.ConcatenatedString})
_LITERALS = frozenset(
    {cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.FormattedString, cst.ConcatenatedString}
)


# A numpy random Generator (`self.rng = np.random.default_rng(seed)`) and its draws, which live on the host.
_RNG_NAME = re.compile(r"(^|_)(rng|np_random|random_state)$")
_GRAPH_FEATURES = frozenset({"ndata", "edata", "srcdata", "dstdata"})  # a DGL graph's node and edge feature tables
# What a model's `generate()` is called on (`self.actor_model.module.generate(prompts, ...)`, `policy.generate(...)`):
# the tokens it returns are on the model's device, as its inputs are (a tokenizer or a pipeline returns host values).
_GENERATING_MODEL_PARTS = frozenset({"model", "actor", "policy", "lm", "llm", "net", "transformer", "decoder"})
_NUMPY_RANDOM_METHODS = frozenset(
    {"choice", "integers", "permutation", "uniform", "normal", "random", "shuffle", "binomial", "beta", "randint", "rand"}
)

class FileContext:
    """Per-file state shared by the engine and every rule."""

    def __init__(
        self,
        path: str,
        module: cst.Module,
        gate_names: Iterable[str] = (),
        facts: FileFacts | None = None,
        text: str | None = None,
    ) -> None:
        self.path = path
        self.text = text  # what `module` was parsed from (None: `syntax_tree` prints the module again)
        self._syntax_tree: ast.Module | None | bool = False  # False: not parsed yet
        self.in_tests = is_test_path(path)
        self.module = module
        self.imports = ImportMap()
        self.gate_names = frozenset(gate_names)
        self.facts = facts or FileFacts()
        self._returns = dict(self.facts.return_kinds)
        self.reports: list[Report] = []
        self.shared: dict[type, object] = {}  # the rules' shared helpers for this file (`helper`, `Rule.shared`)
        self._stack: list[cst.CSTNode] = []
        self._names: list[str] = []  # the qualified name of the function being visited, part by part
        self._classes: list[str] = []  # the qualified names of the classes being visited, innermost last
        self._scopes: list[dict[str, Location]] = [{}]
        # Per scope, the names annotated as Python scalars (`n: int`, a parameter `scale: float`) and the parameters
        # defaulting to True or False: on the host.
        self._declared: list[set[str]] = [set()]
        self._assigned: list[set[str]] = [set()]  # per function: the names an assignment has bound by now
        self._element_lists = False  # some scope has bound a name to a list of device tensors (`_elements_on_device`)
        # Per scope, the moves to the device still ahead (`labels = labels.to(device)`), by name: until its move, a
        # name bound to a tensor of unknown place holds a CPU tensor (see `_later_moves`).
        self._moves: list[dict[str, list[int]]] = [{}]
        self._gate_cache: dict[int, bool] = {}
        # Per `if` being visited: the scope it binds in, the bindings before it, and those at the end of its body (the
        # `else` starts from the bindings before the `if`; after it, each name is where both branches agree:
        # `cont_loss` a device loss in one and `torch.Tensor([0])` in the other is of unknown place).
        self._branches: list[tuple[int, dict[str, Location], list[dict[str, Location]]]] = []
        # Module-level names bound to a lambda that reads its argument to the host (dreamerv3's
        # `to_np = lambda x: x.detach().cpu().numpy()`): calling one is that read.
        self.host_read_lambdas: set[str] = set()
        # Names bound to a dict display with string keys (`metrics = {"loss": loss, "step": step}`): each value's
        # place is kept in the scope under `metrics['loss']` (`_keyed`), so that `metrics["loss"]` is where it is.
        self._keyed_names: set[str] = set()

    def source(self) -> str:
        """The file's text: what `module` was parsed from, or the module printed again where that is not kept."""
        return self.text if self.text is not None else self.module.code

    def syntax_tree(self) -> ast.Module | None:
        """The file parsed by Python's `ast` (cheaper to walk than the libcst tree), once per file; None when Python
        cannot parse it."""
        if self._syntax_tree is False:
            self._syntax_tree = parse_ast(self.source())
        return self._syntax_tree

    # ------------------------------------------------------------------ traversal (called by the engine)
    @property
    def ancestors(self) -> list[cst.CSTNode]:
        """The nodes enclosing the node being visited (outermost first), ending with that node itself."""
        return self._stack

    def bound_here(self, name: str) -> bool:
        """Has an assignment in the function being visited bound `name` by now (a parameter rebound, a local)?"""
        return name in self._assigned[-1]

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
        if kind is cst.For:
            self._bind_loop_target(node.target, node.iter)
        elif kind is cst.If:
            self._branches.append((len(self._scopes) - 1, dict(self._scopes[-1]), []))
            self._bind_untyped(node, "body")
        elif kind is cst.FunctionDef:
            self._names.append(node.name.value)
            facts = self.facts.functions.get(".".join(self._names))
            # Every parameter is bound (to what its callers pass, where the model knows it): a branch that rebinds one
            # (`if valid_mics is None: valid_mics = torch.LongTensor(...)`) leaves it of unknown place after the `if`.
            scope: dict[str, Location] = {p.name.value: "unknown" for p in params_of(node)}
            self._scopes.append({**scope, **dict(facts.param_kinds)} if facts is not None else scope)
            self._assigned.append(set())
            self._declared.append({p.name.value for p in params_of(node) if _is_scalar_annotation(p.annotation)
                                   or _defaults_to_bool(p)})
            self._moves.append(_later_moves(node.body))
            for name in self._declared[-1]:
                self._scopes[-1][name] = "host"
        elif kind is cst.ClassDef:
            self._names.append(node.name.value)
            self._classes.append(".".join(self._names))
        elif kind is cst.Lambda:
            self._scopes.append({})
            self._declared.append(set())
            self._assigned.append(set())
            self._moves.append({})
        elif kind in _COMPREHENSIONS:
            # `[x.to(dev) for x in inputs]`: its own `x`, not the function's (Python 3 scopes comprehensions).
            self._scopes.append({})
            comprehension = node.for_in
            while comprehension is not None:
                self._bind_loop_target(comprehension.target, comprehension.iter)
                comprehension = comprehension.inner_for_in
        elif kind is cst.Call and type(node.func) is cst.Attribute and type(node.func.value) is cst.Name \
                and node.func.value.value in self._keyed_names:
            self._forget_keys(node.func.value.value)  # `metrics.update(extra)`: any key may hold anything now
        elif kind is cst.Import:
            self.imports.add_import(node)
        elif kind is cst.ImportFrom:
            self.imports.add_import_from(node)

    def leave(self, node: cst.CSTNode) -> None:
        kind = type(node)
        if kind is cst.Assign:
            if not self._names:
                self._module_alias(node)
                self._host_read_lambda(node)
            if self._moves[-1]:  # most functions move nothing: no per-assignment check
                _passed_move(self._moves[-1], node)
            location = self.location_of(node.value)
            elements = self._returned_tuple(node.value)
            on_device = self._elements_on_device(node.value)
            for target in node.targets:
                if _same_length_tuples(target.target, node.value):  # `x, y = x.to(dev), y.to(dev)`: element-wise
                    for name, value in zip(target.target.elements, node.value.elements):
                        self._bind(name.value, self.location_of(value.value))
                    continue
                if elements is not None and type(target.target) in (cst.Tuple, cst.List) \
                        and len(target.target.elements) == len(elements):  # `loss, parts = compute_loss(...)`
                    for name, element in zip(target.target.elements, elements):
                        self._bind(name.value, element)
                    continue
                # `x, lengths = moved_batch`; `states, actions = experiences`, a parameter every call hands a tuple of
                # device tensors (a replay buffer's `sample()`) or a device tensor (its rows)
                if type(target.target) in (cst.Tuple, cst.List) and (
                        on_device or type(node.value) is cst.Name and location == "device"):
                    for element in target.target.elements:
                        self._bind(element.value, "device")
                    continue
                self._bind(target.target, location)
                self._bind_keys(target.target, node.value, location)
                if on_device and type(target.target) is cst.Name:
                    self._scopes[-1][_ELEMENTS + target.target.value] = "device"
                    self._element_lists = True
        elif kind is cst.AnnAssign:
            if isinstance(node.target, cst.Name) and _is_scalar_annotation(node.annotation):
                self._declared[-1].add(node.target.value)  # `ref_size: int`: a Python number whatever it is bound to
                self._scopes[-1][node.target.value] = "host"
            elif node.value is not None:
                self._bind(node.target, self.location_of(node.value))
        elif kind is cst.AugAssign and type(node.target) is cst.Subscript and type(node.target.value) is cst.Name \
                and node.target.value.value in self._keyed_names:
            self._forget_keys(node.target.value.value)  # `metrics["loss"] += loss`
        elif kind is cst.AugAssign and isinstance(node.target, cst.Name):
            current = self.location_of(node.target)
            added = self.location_of(node.value)
            self._bind(node.target, current if current == added else "unknown" if "unknown" in (current, added) else "device")
        elif kind is cst.FunctionDef:
            self._scopes.pop()
            self._declared.pop()
            self._assigned.pop()
            self._moves.pop()
            self._names.pop()
        elif kind is cst.ClassDef:
            self._names.pop()
            self._classes.pop()
        elif kind is cst.Lambda:
            self._scopes.pop()
            self._declared.pop()
            self._assigned.pop()
            self._moves.pop()
        elif kind in _COMPREHENSIONS:
            self._scopes.pop()
        elif kind is cst.IndentedBlock or kind is cst.SimpleStatementSuite:
            parent = self._stack[-2] if len(self._stack) > 1 else None
            if type(parent) is cst.If and parent.body is node:  # the `else` starts from what held before the `if`
                index, before, ends = self._branches[-1]
                ends.append(self._scopes[index])
                self._scopes[index] = dict(before)
                self._bind_untyped(parent, "orelse")
        elif kind is cst.If:
            index, before, ends = self._branches.pop()
            if ends:
                body, orelse = ends[0], self._scopes[index]
                disagree = any(name in orelse and orelse[name] != where for name, where in body.items())
                gpu = self._gpu_branch(node) if disagree else None
                self._scopes[index] = merged_branches(before, body, orelse, gpu)
        self._stack.pop()

    def _bind_untyped(self, node: cst.If, part: str) -> None:
        """The branch of `if torch.is_tensor(size):` (or `isinstance(size, torch.Tensor)`) that `part` names, where
        it is the one taken for what is no tensor (the `else`; the body under `not`), holds `size` on the host:
        `else: size = float(size)` reads nothing from the device. Only for a name the function bound itself."""
        test = node.test
        if type(test) is cst.UnaryOperation:
            test = test.expression
        if type(test) is not cst.Call or last_name(test.func) not in ("is_tensor", "isinstance"):
            return  # the cheap test first: most `if`s test no type
        if len(test.args) == 2 and "torch.Tensor" not in (self.imports.resolve(test.args[1].value),
                                                          dotted_name(test.args[1].value)):
            return  # `isinstance(x, paddle.Tensor)`: another framework's tensor; x may still be torch's
        tree = self._ast_of(node.test)
        typed = typed_branch(tree, part) if tree is not None else None
        if typed is None or not typed[1]:
            return
        function = self.enclosing_function()
        if function is not None and any(p.name.value == typed[0] for p in params_of(function)):
            return  # a parameter's branch is the project model's: dead where every caller passes a tensor (local.py)
        self._scopes[-1][typed[0]] = "host"

    def _gpu_branch(self, node: cst.If) -> str | None:
        """The branch of `node` a GPU run takes, where its test chooses a device (`local.gpu_branch`, on the test's
        ast: asked only of an `if` whose branches bind a name apart)."""
        test = self._ast_of(node.test)
        return gpu_branch(test) if test is not None else None

    # These two run for many nodes: exact type tests (these node classes have no subclasses), not isinstance, which
    # for libcst's ABCs costs a Python-level call per miss.
    def enclosing_function(self) -> cst.FunctionDef | None:
        stack = self._stack
        for index in range(len(stack) - 2, -1, -1):
            if type(stack[index]) is cst.FunctionDef:
                return stack[index]  # type: ignore[return-value]
        return None

    def enclosing_class(self) -> str:
        """The qualified name of the innermost class around the current node ("" outside any class)."""
        return self._classes[-1] if self._classes else ""

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
    def _bind_loop_target(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        """`for x in xs`: x is on the host when xs is. `zip(a, b)` and `enumerate(a)` are host objects whatever they
        wrap: their elements are where the wrapped values' elements are (`for i, t in enumerate(losses)`: i on the
        host, t unknown)."""
        parts = self._zipped(iterable)
        if parts is None and self._elements_on_device(iterable):
            self._bind(target, "device")
            return
        if parts is None:
            self._bind_element_of(target, iterable)
            return
        located: list[Location] = ["host" if p is None or self.location_of(p) == "host" else "unknown" for p in parts]
        if type(target) in (cst.Tuple, cst.List) and len(target.elements) == len(parts):
            for element, location, part in zip(target.elements, located, parts):
                if type(element.value) in (cst.Tuple, cst.List) and part is not None and self._zipped(part):
                    # `for i, (start, end) in enumerate(zip(starts, ends))`: the inner pair is zip's, not a host pair
                    self._bind_loop_target(element.value, part)
                elif part is not None and location == "unknown":
                    # `for lvl, (H_, W_) in enumerate(spatial_shapes)`: the wrapped iterable's own elements
                    self._bind_element_of(element.value, part)
                else:
                    self._bind(element.value, location)
        else:
            self._bind(target, "host" if set(located) == {"host"} else "unknown")

    def _zipped(self, iterable: cst.BaseExpression) -> list[cst.BaseExpression | None] | None:
        """What `zip(a, b)` (a, b) or `enumerate(a)` (the index, None, then a) yields element by element; None for
        any other iterable."""
        if type(iterable) is not cst.Call or type(iterable.func) is not cst.Name:
            return None
        wrapper = iterable.func.value
        args = iterable.args
        if wrapper in self._scopes[-1] or any(a.keyword is not None or a.star for a in args) or not args:
            return None
        if wrapper == "zip":
            return [a.value for a in args]
        if wrapper == "enumerate" and len(args) == 1:
            return [None, args[0].value]
        return None

    def returned_kind(self, callee: str) -> str:
        """Where what the project function `callee` (as this file writes it) returns lives, as the model says: "host",
        "device", a tuple kind ("tuple:host,device"), or "" when it does not say."""
        return self._returns.get(callee, "")

    def _returned_tuple(self, value: cst.BaseExpression) -> list[Location] | None:
        """Where each element of the tuple a project function returns lives (`return loss, to_cpu(parts)`)."""
        if type(value) is not cst.Call or not self._returns:
            return None
        kinds = tuple_kinds(self._returns.get(dotted_name(value.func) or "", ""))
        return [k if k in ("host", "device") else "unknown" for k in kinds] if kinds is not None else None

    def _bind_keys(self, target: cst.BaseExpression, value: cst.BaseExpression, location: Location) -> None:
        """`metrics = {"loss": loss}` keeps where each value is, by key; `metrics["loss"] = loss` replaces one (and
        any other key written, or a key not written as a string, leaves every key of unknown place)."""
        if type(target) is cst.Name and type(value) is cst.Dict and value.elements \
                and all(type(e) is cst.DictElement and _string_key(e.key) is not None for e in value.elements):
            self._keyed_names.add(target.value)
            scope = self._scopes[-1]
            for element in value.elements:
                scope[_keyed(target.value, _string_key(element.key))] = self.location_of(element.value)
        elif type(target) is cst.Subscript and type(target.value) is cst.Name and target.value.value in self._keyed_names:
            key = _subscript_key(target)
            if key is None:
                self._forget_keys(target.value.value)
            else:
                self._scopes[-1][_keyed(target.value.value, key)] = location

    def _forget_keys(self, name: str) -> None:
        """The values of `name`'s keys are no longer known: each is "unknown" (not dropped, so that an `if` whose
        other branch keeps them merges to unknown)."""
        prefix = name + "["
        for scope in self._scopes:
            for key in [k for k in scope if k.startswith(prefix)]:
                scope[key] = "unknown"

    def _elements_on_device(self, value: cst.BaseExpression) -> bool:
        """A list whose every element is on the device: `[b.to(device) for b in batch]`, a dict whose every value is
        (`{k: v.to(device) for k, v in batch.items()}`), or a name bound to one."""
        kind = type(value)
        if kind is cst.ListComp or kind is cst.GeneratorExp:
            return self.location_of(value.elt) == "device"
        if kind is cst.DictComp:
            return self.location_of(value.value) == "device"
        if kind is cst.Name and self._element_lists:
            for scope in reversed(self._scopes):
                if _ELEMENTS + value.value in scope:
                    return True
                if value.value in scope:
                    return False
        return False

    def _bind_element_of(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        """Bind `target` to an element of `iterable`, as a loop over it would: the rows (or elements) of a device
        tensor (list) are on the device, and so are the parts of each row (`for H_, W_ in spatial_shapes`, 0-d device
        tensors)."""
        location = self.location_of(iterable)
        self._bind(target, location if location in ("host", "device") else "unknown", unpacked=location)

    def _bind(self, target: cst.BaseExpression, location: Location, unpacked: Location = "unknown") -> None:
        """`unpacked`: where the parts of an unpacked value live (a device tensor's rows unpack to device tensors; the
        parts of what a call returns may be anything)."""
        if isinstance(target, cst.Name):
            if self._element_lists:  # (most files bind no list of moved tensors: no lookup per binding)
                self._scopes[-1].pop(_ELEMENTS + target.value, None)
            if target.value in self._keyed_names:
                self._forget_keys(target.value)
            self._assigned[-1].add(target.value)
            if target.value not in self._declared[-1]:
                if location == "unknown" and self._moves[-1].get(target.value):
                    location = "host"  # `labels = input_ids.clone()`, moved by `labels = labels.to(device)` later
                self._scopes[-1][target.value] = location
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value, unpacked if location == "device" else location)

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
                    found = scope[expr.value]
                    break
            else:
                found = "unknown"
            return "host" if found == "unknown" and expr.value in PACKED_BATCH_SIZES else found
        if kind is cst.Call:
            return self._call_location(expr)
        if kind is cst.Attribute:
            if expr.attr.value in METADATA_ATTRS or expr.attr.value in PACKED_BATCH_SIZES:
                return "host"
            if (self.facts.host_attributes or self.facts.device_attributes) and self._classes \
                    and (held := _held_by_self(expr)):
                held = f"{self._classes[-1]}.{held}"
                if held in self.facts.host_attributes:
                    # a flag its class only ever sets from a literal (`self.add_z_loss = add_z_loss`), or a CPU
                    # parameter of an object it holds (`self._lagrange.lagrangian_multiplier`)
                    return "host"
                if held in self.facts.device_attributes:
                    return "device"  # `self.obs` of a replay buffer that `__init__` makes on the device
            if expr.attr.value == "data":
                return self.location_of(expr.value)  # `p.data`: the tensor's own storage, where the tensor is
            if expr.attr.value in _GRAPH_FEATURES:
                # `g.ndata["feat"]` of a DGL graph moved by `g = g.to(device)`: its features moved with it
                return "device" if self.location_of(expr.value) == "device" else "unknown"
            if type(expr.value) is cst.Call and (self.imports.resolve(expr.value.func) or "").startswith(
                    HOST_MODULE_PREFIXES):
                return "host"  # `np.finfo(np.float32).eps`: an attribute of what numpy returns
            return "unknown"
        if kind is cst.Subscript:
            if type(expr.value) is cst.Name and expr.value.value in self._keyed_names \
                    and (key := _subscript_key(expr)) is not None:
                name, keyed = expr.value.value, _keyed(expr.value.value, key)
                for scope in reversed(self._scopes):
                    if keyed in scope:
                        return scope[keyed]
                    if name in scope:  # bound here to something else (a parameter of an inner function)
                        break
            # a slice or an element of a device tensor is on the device too (`y[:, -pred_len:].to(device)` copies
            # nothing once `y` was moved)
            held = self.location_of(expr.value)
            if held == "unknown" and self._element_lists and self._elements_on_device(expr.value):
                return "device"  # `batch["mel"]` of a batch whose every value was moved
            return held if held in ("host", "device") else "unknown"
        if kind is cst.UnaryOperation:
            return self.location_of(expr.expression)
        if kind is cst.BinaryOperation:
            left, right = self.location_of(expr.left), self.location_of(expr.right)
            if left == right:
                return left
            if "device" not in (left, right) and (self._numpy_call(expr.left) or self._numpy_call(expr.right)):
                return "host"  # `np.ones((b, n)) * cfg.max_len`: numpy arithmetic with a setting stays on the host
            return "device" if "device" in (left, right) else "unknown"
        if kind is cst.Comparison and any(type(c.comparator) in STRING_NODES for c in expr.comparisons):
            return "host"  # `args.loss == "l1"`: no tensor compares to a string
        if kind is cst.Comparison and any(_is_none(c.comparator) for c in expr.comparisons):
            return "host"  # `p.grad != None`: a tensor compared with None gives Python's own answer, a bool
        if kind is cst.Comparison and self.location_of(expr.left) == "host" \
                and all(self.location_of(c.comparator) == "host" for c in expr.comparisons):
            return "host"
        if kind is cst.Comparison and len(expr.comparisons) == 1 \
                and type(expr.comparisons[0].operator) not in _IDENTITY_OR_MEMBERSHIP \
                and "device" in (self.location_of(expr.left), self.location_of(expr.comparisons[0].comparator)):
            return "device"  # `torch.rand(n, device=labels.device) < p`: a mask where its tensor is
        if kind is cst.ListComp or kind is cst.GeneratorExp or kind is cst.SetComp:
            return "host" if self.location_of(expr.elt) == "host" else "unknown"
        if kind is cst.List or kind is cst.Tuple or kind is cst.Set:
            locations = {self.location_of(e.value) for e in expr.elements if type(e) is cst.Element}
            return "host" if locations <= {"host"} else "unknown"
        if kind is cst.Dict and expr.elements:  # `{"indices": indices}` of host values
            locations = {self.location_of(e.value) if type(e) is cst.DictElement else "unknown" for e in expr.elements}
            return "host" if locations == {"host"} else "unknown"
        return "unknown"

    def _numpy_call(self, expr: cst.BaseExpression) -> bool:
        return type(expr) is cst.Call and (self.imports.resolve(expr.func) or "").startswith(HOST_MODULE_PREFIXES)

    def _call_location(self, call: cst.Call) -> Location:
        func = call.func
        resolved = self.imports.resolve(func) or ""
        if resolved.startswith(HOST_MODULE_PREFIXES):
            return "host"  # `np.sum(x)`: numpy computes on the host, whatever `sum` does on a tensor
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in SAME_PLACE_METHODS and type(func.value) is cst.Name and call.args \
                    and call.args[0].keyword is None and not call.args[0].star \
                    and self.imports.resolve(func.value) == "torch":
                return self.location_of(call.args[0].value)  # `torch.min(im_shape)`: where its tensor is
            if method in HOST_METHODS or method in METADATA_METHODS or method in NUMPY_ONLY_METHODS:
                return "host"
            if method == "to" and call.args and _is_cpu_literal(call.args[0].value):
                return "host"
            if method == "to" and call.args and type(call.args[0].value) is cst.Attribute \
                    and call.args[0].value.attr.value == "device":
                holder = call.args[0].value.value
                if DEVICE_HOLDER.search(last_name(holder) or ""):
                    return "device"  # `y.to(self.device)`: the training device
                return self.location_of(holder)  # `onehot.to(label.device)`: where `label` is
            if method in ("to", "cuda"):
                return "device"
            if method in SAME_PLACE_METHODS:
                return self.location_of(func.value)
            if method in ("pop", "get") and type(func.value) is cst.Attribute and func.value.attr.value in _GRAPH_FEATURES:
                return self.location_of(func.value)  # `bg.ndata.pop("h")` of a moved DGL graph: its features moved too
            if method in _NUMPY_RANDOM_METHODS and _RNG_NAME.search(last_name(func.value) or ""):
                return "host"  # `self.rng.choice(n, size=k)`: a numpy Generator draws on the host
            if method == "generate" and any(name_parts(part) & _GENERATING_MODEL_PARTS
                                            for part in (dotted_name(func.value) or "").split(".")):
                return "device"  # `seq = self.actor_model.module.generate(prompts, ...)` (ReMax's RLHF step)
        if self._returns:  # a project function the model knows returns a host (or device) value
            written = dotted_name(func)
            if written in self._returns:
                returned = self._returns[written]
                elements = tuple_kinds(returned)
                if elements is not None:  # a list of device tensors (`replay_buffer.sample(n)`) is on the device
                    return "device" if set(elements) == {"device"} else "unknown"
                return returned  # type: ignore[return-value]
        if isinstance(func, cst.Name) and func.value not in self._scopes[-1]:
            if func.value in CONTAINER_BUILTINS and not call.args:
                return "unknown"  # `outputs = dict()`, as `{}`: it starts empty and fills with values of any place
            if func.value in CONTAINER_BUILTINS or func.value in VALUE_BUILTINS:  # hold or compute what they're given
                return "host" if all(self.location_of(a.value) == "host" for a in call.args) else "unknown"
            if func.value in HOST_BUILTINS:
                return "host"
        if resolved in SAME_PLACE_FUNCTIONS and call.args and call.args[0].keyword is None and not call.args[0].star:
            return self.location_of(call.args[0].value)  # `Variable(conf_t)`: the tensor it wraps
        if builds_on_cpu_by_default(resolved, (a.keyword.value for a in call.args if a.keyword is not None)):
            device = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
            if device is None or _is_cpu_literal(device):
                return "host"
            return "device"
        if preprocesses(func):
            return "host"  # `self.processor.image_processor(images, return_tensors="pt")`: CPU tensors
        if resolved in JOINING_FUNCTIONS and call.args and type(call.args[0].value) in _SEQUENCE_DISPLAYS \
                and self.location_of(call.args[0].value) == "host":
            # `torch.stack([torch.as_tensor(row) for row in rows])`: CPU tensors joined on the CPU (not a list
            # named before, which starts empty on the host and fills with tensors of any place)
            return "host"
        return "unknown"

    def _host_read_lambda(self, node: cst.Assign) -> None:
        """`to_np = lambda x: x.detach().cpu().numpy()`: a name bound to a host read of its one argument."""
        value = node.value
        if len(node.targets) != 1 or type(node.targets[0].target) is not cst.Name or type(value) is not cst.Lambda \
                or len(value.params.params) != 1:
            return
        body, param = value.body, value.params.params[0].name.value
        if type(body) is cst.Call and last_name(body.func) in ("numpy", "item", "tolist") and not body.args:
            receiver = body.func.value  # type: ignore[attr-defined]
            while type(receiver) is cst.Call and type(receiver.func) is cst.Attribute:
                receiver = receiver.func.value
            if type(receiver) is cst.Name and receiver.value == param:
                self.host_read_lambdas.add(node.targets[0].target.value)

    def _module_alias(self, node: cst.Assign) -> None:
        """A module-level name bound to a torch function, on one branch of a conditional expression or plainly
        (`synchronize = torch.cuda.synchronize if device_type == "cuda" else lambda: None`)."""
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        value = node.value
        for option in (value.body, value.orelse) if isinstance(value, cst.IfExp) else (value,):
            if isinstance(option, (cst.Attribute, cst.Name)):
                full = self.imports.resolve(option) or ""
                if full.startswith("torch.") and full.count(".") >= 2:
                    self.imports.add_alias(node.targets[0].target.value, full)
                    return

    def is_host_value(self, expr: cst.BaseExpression) -> bool:
        return self.location_of(expr) == "host"

    def resolve(self, node: cst.CSTNode) -> str | None:
        """Qualified dotted name of a Name/Attribute through the file's imports (`t.cuda.synchronize` ->
        `torch.cuda.synchronize`)."""
        return self.imports.resolve(node)

    # ------------------------------------------------------------------ gates, during the traversal
    def gated_here(self, switches_gate: bool = True) -> bool:
        """True when a gate inside the current function (`if step % N == 0:`, an early `continue` on non-logging
        steps) encloses the node being visited. With `switches_gate=False`, a configuration switch
        (`if args.log_grad_norm:`) is not a gate: when it is on, its body runs every step."""
        chain = self._stack
        for index in range(len(chain) - 2, -1, -1):
            node, child = chain[index], chain[index + 1]
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if isinstance(node, cst.If) and child is node.body and self.is_gate(node.test) \
                    and not self._open_param(node.test):
                if switches_gate or switch_flags(self._ast_of(node.test)) is None:
                    return True
            if isinstance(node, cst.If) and child is node.orelse and type(child) is cst.Else \
                    and self._else_gated(node.test):
                return True
            if isinstance(node, (cst.IndentedBlock, cst.Module)) and self._after_early_exit_gate(node, child):
                return True
        return False

    def _function_facts(self):
        """The project model's facts for the function being visited, or None."""
        return self.facts.functions.get(".".join(self._names)) if self._names else None

    def holds_step_loops(self) -> bool:
        """The project model found training loops in the enclosing function (a script's `main` that trains)."""
        facts = self._function_facts()
        return facts is not None and bool(facts.step_loops)

    def runs_outside_the_step(self) -> bool:
        """The project model reached the enclosing function only outside the training step, through calls it
        resolved (setup, an epoch's evaluation, an offline tool's loop over a checkpoint): no way into it from a
        step, not even a guessed one."""
        facts = self._function_facts()
        return self.facts.entries and facts is not None and facts.reach is not None \
            and facts.reach.rank == PROGRAM and not facts.step_loops \
            and (not facts.reach.likely or _through_inference(facts.reach.chain)) \
            and not any(frame.label == "training loop" or frame.label.startswith("loop over ")
                        for frame in facts.reach.chain)  # (a step loop's call of a method named like generation)

    def outside_the_program(self) -> bool:
        """In a function the project model found no way into from the training program, where it found the
        program's entry points (nequip's unit-test helpers, a debugging script's function nothing calls)."""
        if not self.facts.entries or not self._names:
            return False
        facts = self._function_facts()
        return facts is None or (facts.reach is None and not facts.step_loops)

    def in_a_script_that_never_trains(self) -> bool:
        """At a module's top level, in a file the project model found no way into from the training program, or a
        script it found to train nothing (text-to-motion's `eval_comp_v6.py` beside its training scripts)."""
        if self._names or not self.facts.entries:
            return False
        facts = self.facts.functions.get(MODULE_SCOPE)
        return facts is None or facts.reach is None or facts.reach.rank > PROGRAM

    def called_every_step(self) -> bool:
        """The project model found the enclosing function called on every step by a call it resolved, whatever its
        name says (`FunctionFacts.called_every_step`)."""
        facts = self._function_facts()
        return facts is not None and facts.called_every_step

    def surely_per_step(self) -> bool:
        """The project model reached the enclosing function from the step through calls it resolved, none of them a
        guess (DARTS's `train_step -> _unrolled_backward -> _restore_weights`)."""
        facts = self._function_facts()
        return facts is not None and facts.reach is not None and facts.reach.rank == PER_STEP \
            and not facts.reach.likely and not facts.reach.guessed

    def _open_param(self, test: cst.BaseExpression) -> bool:
        """`if report_metric:` on a parameter the callers bind to a setting, not an interval test (the model's
        `open_params`)."""
        if type(test) is not cst.Name:
            return False
        facts = self._function_facts()
        return facts is not None and test.value in facts.open_params

    def is_gate(self, test: cst.BaseExpression) -> bool:
        """Does `if test:` run its body only on some steps? (The model's test, local.is_gate, read on ast.)"""
        cached = self._gate_cache.get(id(test))
        if cached is None:
            tree = self._ast_of(test)
            cached = self._gate_cache[id(test)] = tree is not None and is_gate(tree, self.gate_names) \
                and not is_short_interval(gate_interval(tree), self.facts.every_step_intervals)
        return cached

    def _else_gated(self, test: cst.BaseExpression) -> bool:
        """Does the `else` of `if test:` run only on some steps (`if step % N != N - 1:`)?"""
        tree = self._ast_of(test)
        return tree is not None and inverted_gate(tree) \
            and not is_short_interval(gate_interval(tree), self.facts.every_step_intervals)

    def _ast_of(self, expr: cst.BaseExpression) -> ast.expr | None:
        try:
            return ast.parse("(" + self.module.code_for_node(expr).strip() + "\n)", mode="eval").body
        except (SyntaxError, ValueError, RecursionError):
            return None

    def _after_early_exit_gate(self, block: cst.IndentedBlock | cst.Module, stmt: cst.CSTNode) -> bool:
        for sibling in block.body:  # the first early exit of the block that skips most steps gates what follows it
            if sibling is stmt:
                return False
            if isinstance(sibling, cst.If) and sibling.orelse is None and _ends_with_exit_cst(sibling.body):
                tree = self._ast_of(sibling.test)
                if tree is not None and is_exit_gate(tree, self.gate_names) \
                        and not is_short_interval(gate_interval(tree), self.facts.every_step_intervals):
                    return True
        return False


_SCALAR_ANNOTATIONS = frozenset({"int", "float", "bool", "str"})


def _is_scalar_annotation(annotation: cst.Annotation | None) -> bool:
    """`lr: float`, and `action: np.ndarray`: a host array, whatever its name says."""
    if annotation is None:
        return False
    node = annotation.annotation
    if type(node) is cst.Attribute:
        return node.attr.value == "ndarray" and type(node.value) is cst.Name and node.value.value in ("np", "numpy")
    return type(node) is cst.Name and node.value in _SCALAR_ANNOTATIONS


def _defaults_to_bool(param: cst.Param) -> bool:
    """`get_logits=False`: a Python flag, whatever its name says (a tensor is never a flag's default)."""
    return type(param.default) is cst.Name and param.default.value in ("True", "False")


def _later_moves(body: cst.BaseSuite) -> dict[str, list[int]]:
    """The statements of a function body (not of the functions it defines) that move a name's tensor to the device
    and rebind the name (`labels = labels.to(device_id)`, `x = x.cuda()`), by name, in source order. The code
    before such a move works on the tensor while it is still on the CPU (open_flamingo masks its labels there). A
    move under an `if` is left out: it may be the way back from a CPU fallback (YOLOX's `if mode == "cpu":`)."""
    found: dict[str, list[int]] = {}
    stack: list[cst.CSTNode] = [body]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.SimpleStatementLine:
            for statement in node.body:
                name = _moved_name(statement)
                if name is not None:
                    found.setdefault(name, []).append(id(statement))
        elif kind is cst.IndentedBlock:
            stack.extend(reversed(node.body))
        elif kind is cst.For or kind is cst.While:
            if node.orelse is not None:
                stack.append(node.orelse.body)
            stack.append(node.body)
        elif kind is cst.With:
            stack.append(node.body)
    return found


def _moved_name(statement: cst.CSTNode) -> str | None:
    """`x = x.to(device)` or `x = x.cuda()` (one target, the name it moves): the name, else None. A move to a dtype
    (`x = x.to(torch.float16)`) or to the CPU is none."""
    if type(statement) is not cst.Assign or len(statement.targets) != 1:
        return None
    target, value = statement.targets[0].target, statement.value
    if type(target) is not cst.Name or type(value) is not cst.Call or type(value.func) is not cst.Attribute:
        return None
    func = value.func
    if type(func.value) is not cst.Name or func.value.value != target.value:
        return None
    if func.attr.value == "cuda":
        return target.value
    if func.attr.value != "to" or not value.args or value.args[0].keyword is not None:
        return None
    where = dotted_name(value.args[0].value) or ""
    return target.value if name_parts(where.rsplit(".", 1)[-1]) & _DEVICE_NAME_PARTS else None


_DEVICE_NAME_PARTS = frozenset({"device", "dev", "cuda", "gpu", "rank", "local_rank"})


def _passed_move(moves: dict[str, list[int]], statement: cst.Assign) -> None:
    """The walk has reached `statement`: a move of `_later_moves` is no longer ahead."""
    name = _moved_name(statement)
    if name is not None and moves.get(name) and moves[name][0] == id(statement):
        moves[name].pop(0)


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
_SEQUENCE_DISPLAYS = (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp)


def _string_key(node: cst.BaseExpression | None) -> str | None:
    """The text of a plain string literal key (`"loss"`), None for any other key."""
    if type(node) is cst.SimpleString and "f" not in node.prefix.lower():
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _subscript_key(node: cst.Subscript) -> str | None:
    """The key of `metrics["loss"]`, None for any other subscript."""
    if len(node.slice) == 1 and type(node.slice[0].slice) is cst.Index:
        return _string_key(node.slice[0].slice.value)
    return None


# A scope's key for where the elements of a list bound to a name live (a name never starts with it).
_ELEMENTS = "*"


def _keyed(name: str, key: str) -> str:
    """The scope entry of one key of a dict bound to `name` (no Python name has brackets)."""
    return f"{name}[{key!r}]"


def _same_length_tuples(target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    return (
        isinstance(target, (cst.Tuple, cst.List))
        and isinstance(value, (cst.Tuple, cst.List))
        and len(target.elements) == len(value.elements)
        and not any(isinstance(e, (cst.StarredElement)) for e in (*target.elements, *value.elements))
    )


def _ends_with_exit_cst(body: cst.BaseSuite) -> bool:
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
    return isinstance(small, (cst.Continue, cst.Return))  # not `break`: see local._ends_with_exit


def preprocesses(func: cst.BaseExpression) -> bool:
    """`tokenizer(...)`, `self.processor(...)`, `self.processor.image_processor(...)`, `tokenizer.encode(...)`: a Hugging
    Face preprocessor, which returns host values and CPU tensors."""
    if last_name(func) in PREPROCESSOR_NAMES:
        return True
    return type(func) is cst.Attribute and func.attr.value in PREPROCESSOR_METHODS \
        and last_name(func.value) in PREPROCESSOR_NAMES


def _is_cpu_literal(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.SimpleString):
        return expr.raw_value.split(":")[0] == "cpu"
    if isinstance(expr, cst.Call) and last_name(expr.func) == "device" and expr.args:
        return _is_cpu_literal(expr.args[0].value)
    return False


def _held_by_self(expr: cst.Attribute) -> str:
    """`attribute` for `self.attribute`, `holder.attribute` for `self.holder.attribute`, else ""."""
    value = expr.value
    if type(value) is cst.Name:
        return expr.attr.value if value.value == "self" else ""
    if type(value) is cst.Attribute and type(value.value) is cst.Name and value.value.value == "self":
        return f"{value.attr.value}.{expr.attr.value}"
    return ""


# Comparisons that answer on the host whatever their operands are (`x is None`, `k in batch`).
_IDENTITY_OR_MEMBERSHIP = (cst.Is, cst.IsNot, cst.In, cst.NotIn)


def _is_none(expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.Name and expr.value == "None"


def parse_ast(text: str) -> ast.Module | None:
    """`text` parsed by Python's `ast`; None when it cannot be."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences: Python 3.12 warns on stderr while parsing
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
