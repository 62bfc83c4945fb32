"""What the GPL4xx rules share: their base class, the per-file state every rule of the family reads, the
precedence checks with other families, and the known false positives every rule of the family appends."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.context import STRING_NODES
from gpulint.linter.devices import DeviceEvidence
from gpulint.linter.names import dotted_name, last_name, name_parts, root_name
from gpulint.linter.rule import Report, Rule
from gpulint.linter.syntax import innermost
from gpulint.project.vocab import ACCUMULATION_PARTS, CUDA_TENSOR_TYPE, is_replay_buffer_class
from gpulint.rules.common import is_cpu_device, keyword_arg
from gpulint.rules.sync.tensors import Tensors


class FileState:
    """What all GPL4xx rules of one file share: the tensor tracker (whether the file shows a GPU: linter/devices.py).
    It is one of the rules' `shared` helpers: the engine walks it once per file, before the rules (so each node
    updates it once, and every rule sees the update)."""

    def __init__(self, context) -> None:
        self.tensors = Tensors(context)

    def leave_Assign(self, node: cst.Assign) -> None:
        self.tensors.assigned(node)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.tensors.assigned(node)

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        self.tensors.aug_assigned(node)

    def visit_For(self, node: cst.For) -> None:
        self.tensors.loop_target(node)

    def leave_Call(self, node: cst.Call) -> None:
        self.tensors.buffer_registered(node)

    def visit_Param(self, node: cst.Param) -> None:
        self.tensors.annotated(node)


# Appended to every GPL4xx rule's "Known false positives": what the whole family leaves out on purpose.
_NOT_REPORTED = (
    " Never reported: error paths (an `except` handler, an `if` body ending in `raise`), first-step-only code "
    "(`if step == 0:`), fallbacks for empty or all-NaN tensors (the `else` of `x.mean() if x.numel() > 0`, the body "
    "of `if not mask.any():`), the step a loss scaler skips (`if scaler.has_overflow:`), "
    "training scripts that never name a device (CPU-only), projects of several files none of which names a device, "
    "an accelerator, a trainer or mixed precision (they train on the CPU), the methods of a class that fixes "
    "`self.device` to the CPU (`torch.device(\"cpu\")`, pfrl's A3C), and the exchange with a "
    "reinforcement-learning environment, which runs on the host (anything in `select_action` / `act` / `max_action` / an `Agent`'s `__call__`, and host reads of "
    "`actions` or of what is assigned to them), and the methods of a replay buffer class whose code names no device "
    "(`SequenceReplayBuffer.sanitize` over batches drawn from numpy storage: host tensors)."
)


def _assigns_action(ancestors) -> bool:
    """Is the node in the value of `action = ...` or `actions = ...` (`action = policy(obs).cpu().numpy()`): the action
    the loop hands to the host environment?"""
    assign = innermost(ancestors, cst.Assign)
    return assign is not None and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name) \
        and assign.targets[0].target.value in ("action", "actions")  # (not `num_actions`, a count of tokens)


def known_false_positives(text: str) -> str:
    return text + _NOT_REPORTED


# (and a Q-learner's `max_action`, `greedy_action`, GPI's `gpi_action`, whose result the loop hands to `env.step`; not
# any `*_action`: FastVideo's `_get_optional_action` loads a world model's action conditions from the batch)
_ACTION_SELECTOR = re.compile(
    r"^_?(act|(select|get|choose|sample|take|compute|predict|max|greedy|best|gpi|policy|random|explore)_actions?)$")
_AGENT_CLASS = re.compile(r"Agent$")
_ACTION_NAME = re.compile(r"^(\w+_)?actions?$")


def selects_action(name: str) -> bool:
    """`select_action`, `act`, `get_actions`, `max_action`: a policy choosing the action for a host environment."""
    return bool(_ACTION_SELECTOR.match(name))


# Words naming a device in a class's code.
_NAMES_DEVICE = re.compile(r"cuda|device|\.to\(")


class SyncRule(Rule):
    """Shared plumbing: tensor tracking, the precedence checks the families agreed on, and no findings in files that
    never touch a device (a CPU-only script has no GPU to wait for)."""

    hot_only = True  # every GPL4xx finding is reported with when="per_step"
    gpu_only = True
    shared = (DeviceEvidence, FileState)
    reads_to_host = False  # the rule reports a device-to-host read (`.item()`, `.cpu()`, `int(t)`)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.file: FileState = context.helper(FileState)
        self.tensors = self.file.tensors
        self._buffer_names_device: dict[int, bool] = {}  # per replay-buffer class (`_in_host_replay_buffer`)

    # -- precedence: shapes that belong to other families
    def in_accumulator(self) -> bool:
        """Inside the value of `total += ...` (GPL2xx accumulators)."""
        for node in reversed(self.context.ancestors[:-1]):
            if isinstance(node, cst.AugAssign):
                return True
            if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
        return False

    def in_per_tensor_loop(self) -> bool:
        """Inside a loop over parameters / grads / state_dict values, or a comprehension element (GPL1xx)."""
        parent = self.context.parent()
        if isinstance(parent, (cst.ListComp, cst.GeneratorExp, cst.SetComp)) and parent.elt is self.context.ancestors[-1]:
            return True
        loop = self.context.innermost_loop()
        return isinstance(loop, cst.For) and iterates_tensors_of_model(loop.iter)

    def ruled_out_as_tensor(self, expr: cst.BaseExpression) -> bool:
        """Is `expr` in the branch an `isinstance(x, torch.Tensor)` test sends non-tensors to
        (`x.item() if isinstance(x, torch.Tensor) else float(x)`, `if not isinstance(x, Tensor): ... float(x)`)?"""
        name = root_name(expr)
        chain = self.context.ancestors
        for index in range(len(chain) - 2, -1, -1):
            node, child = chain[index], chain[index + 1]
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if isinstance(node, (cst.If, cst.IfExp)) and child is not node.test:
                tested = _isinstance_tensor(node.test)
                if tested is not None and tested[0] == name:
                    in_body = child is node.body
                    return in_body != tested[1]  # the body of a positive test holds tensors, the else does not
        return False

    def report(self, node, message=None, *, when="per_step", fix=(), unsafe_fix=False) -> None:
        chain = self.context.ancestors
        if in_error_path_or_first_step(chain) or self._exchanges_with_environment(node, chain) \
                or self._in_host_replay_buffer(chain):
            return
        super().report(node, message, when=when, fix=fix, unsafe_fix=unsafe_fix)

    def _in_host_replay_buffer(self, ancestors) -> bool:
        """A replay buffer's method, in a buffer class that names no device (spr's `sanitize_batch` over a batch of
        CPU tensors drawn from numpy storage): its tensors live on the host, where reading them waits for nothing."""
        owner = innermost(ancestors, cst.ClassDef)
        if owner is None or not is_replay_buffer_class(owner.name.value):
            return False
        named = self._buffer_names_device.get(id(owner))
        if named is None:
            named = self._buffer_names_device[id(owner)] = bool(
                _NAMES_DEVICE.search(self.context.module.code_for_node(owner)))
        return not named

    def _exchanges_with_environment(self, node: cst.CSTNode, ancestors) -> bool:
        """Reinforcement learning steps its environment on the host: the policy's action must reach it, and the
        observation the policy acts on must reach the device, every environment step. No device-side form avoids
        that copy, so it is not reported: anything synced in an action-selection method (`select_action`, `act`,
        an `Agent`'s `__call__`), and a host read of the actions themselves (`actions.cpu().numpy()`)."""
        function = innermost(ancestors, cst.FunctionDef)
        if function is not None:
            owner = innermost(ancestors, cst.ClassDef)
            if selects_action(function.name.value) or (
                    function.name.value == "__call__" and owner is not None and _AGENT_CLASS.search(owner.name.value)):
                return True
        return self.reads_to_host and (bool(_ACTION_NAME.search(root_name(node) or "")) or _assigns_action(ancestors))

    def report_at(self, node: cst.CSTNode, message: str, ancestors: tuple[cst.CSTNode, ...], fix=(),
                  unsafe_fix: bool = False) -> None:
        """Report with ancestors saved earlier (for findings decided at the end of the file)."""
        if not (in_error_path_or_first_step(ancestors) or self._exchanges_with_environment(node, ancestors)):
            self.context.add_report(Report(self, node, message, "per_step", ancestors, tuple(fix), unsafe_fix))


_FIRST_STEP_PARTS = frozenset({"step", "steps", "iter", "iteration", "updates", "update", "epoch", "batch"})
# A bare index counts steps (`idx == 0`, `self.global_i`); one of something else does not: Lightning's
# `optimizer_idx == 0` is the first optimizer's turn, every step.
_INDEX_PARTS = frozenset({"idx", "i"})
_INDEX_QUALIFIERS = frozenset({"global", "cur", "current", "train", "it"})


def is_cuda_tensor_type(expr: cst.BaseExpression, context, names: set[str]) -> bool:
    """`torch.cuda.FloatTensor`, `"torch.cuda.LongTensor"`, a name of `names` (those the file bound to one), or `a if
    c else b` with one (`Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`, old GAN and RL code)."""
    if isinstance(expr, cst.IfExp):
        return is_cuda_tensor_type(expr.body, context, names) or is_cuda_tensor_type(expr.orelse, context, names)
    if isinstance(expr, cst.SimpleString):
        return bool(CUDA_TENSOR_TYPE.match(expr.raw_value))
    if isinstance(expr, cst.Name) and expr.value in names:
        return True
    return bool(CUDA_TENSOR_TYPE.match(context.resolve(expr) or ""))


def is_lightning_log(func: cst.BaseExpression) -> bool:
    """`self.log(...)` / `self.log_dict(...)` of a LightningModule."""
    return (
        isinstance(func, cst.Attribute)
        and func.attr.value in ("log", "log_dict")
        and isinstance(func.value, cst.Name)
        and func.value.value == "self"
    )


def in_error_path_or_first_step(chain) -> bool:
    """Error paths (an `except` handler, a `raise`, an `assert`'s message, an `if` body that ends in `raise`),
    first-step-only code (`if step == 0:`, `if self.get_num_updates() == 0:`) and fallbacks for empty or all-NaN
    tensors (`x.mean() if x.numel() > 0 else torch.tensor(0.0, device=d)`) do not run every step."""
    for index in range(len(chain) - 2, -1, -1):
        node, child = chain[index], chain[index + 1]
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return False
        if isinstance(node, (cst.ExceptHandler, cst.Raise)):
            return True
        if isinstance(node, cst.Assert) and child is node.msg:  # `assert ok, f"bad {x}"`: built when it fails
            return True
        if isinstance(node, cst.If) and child is node.body and (
            _ends_with_raise(node.body) or _only_warns(node.body) or _is_first_step_test(node.test)
            or _is_non_finite_test(node.test)
        ):
            return True
        if isinstance(node, (cst.If, cst.IfExp)) and child in (node.body, node.orelse) \
                and _empty_branch(node.test) == ("body" if child is node.body else "orelse"):
            return True
    return False


def _empty_branch(test: cst.BaseExpression) -> str | None:
    """Which branch of a test runs only for an empty (or all-NaN) tensor: `x.numel() == 0`, `mask.sum() == 0`,
    `not mask.any()` and `torch.isnan(x).all()` have it in the body, `x.numel() > 0` and `mask.any()` in the
    else."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _empty_branch(test.expression)
        return {"body": "orelse", "orelse": "body"}.get(inner or "")
    if isinstance(test, cst.Call) and last_name(test.func) == "all" and isinstance(test.func, cst.Attribute) \
            and isinstance(test.func.value, cst.Call) and last_name(test.func.value.func) == "isnan":
        return "body"
    if _is_size_call(test) or isinstance(test, cst.Call) and last_name(test.func) == "any" and not test.args:
        return "orelse"  # `if valid_mask.any():` ... else: the batch without a valid token
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and (_is_size_call(test.left) or _is_count_call(test.left))):
        return None
    comparison = test.comparisons[0]
    if not (isinstance(comparison.comparator, cst.Integer) and comparison.comparator.value in ("0", "1")):
        return None
    bound, operator = int(comparison.comparator.value), comparison.operator
    if isinstance(operator, cst.Equal) and bound == 0 or isinstance(operator, cst.LessThan) and bound == 1 \
            or isinstance(operator, cst.LessThanEqual) and bound == 0:
        return "body"
    if isinstance(operator, (cst.GreaterThan, cst.NotEqual)) or isinstance(operator, cst.GreaterThanEqual) and bound == 1:
        return "orelse"
    return None


def _is_count_call(expr: cst.BaseExpression) -> bool:
    """`mask.sum()`, `mask.count_nonzero()`: how many entries a mask selects (`if mask.sum() == 0:` is the batch
    with none)."""
    return isinstance(expr, cst.Call) and not expr.args and last_name(expr.func) in ("sum", "count_nonzero")


def _is_size_call(expr: cst.BaseExpression) -> bool:
    """`x.numel()`, `len(x)`."""
    return isinstance(expr, cst.Call) and last_name(expr.func) in ("numel", "len", "nelement")


def _only_warns(body: cst.BaseSuite) -> bool:
    """An `if` body that only warns (`logging.warn(f"strange loss {loss.item()}")`, ParlAI's `warn_once(...)`): it
    runs when something went wrong, not on a normal step (its test, read every step, is judged apart)."""
    lines = body.body if isinstance(body, cst.IndentedBlock) else (body,)
    statements = [s for line in lines if isinstance(line, cst.SimpleStatementLine) for s in line.body]
    return len(statements) == len(lines) and bool(statements) and all(
        isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and "warn" in (last_name(s.value.func) or "")
        for s in statements)


def _ends_with_raise(body: cst.BaseSuite) -> bool:
    last = body.body[-1] if body.body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    return isinstance(last, cst.Raise)


_NON_FINITE_TESTS = frozenset({"isnan", "isinf"})
_OVERFLOW_PARTS = frozenset({"overflow", "overflowed"})


def _is_non_finite_test(test: cst.BaseExpression) -> bool:
    """`if not math.isfinite(loss.item()):`, `if torch.isnan(loss).any():`, `if scaler.has_overflow_serial:` (an
    `and` of such a test with others too): the body handles a diverged run or a step the loss scaler skips."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _is_non_finite_test(test.left) or _is_non_finite_test(test.right)
    if isinstance(test, (cst.Name, cst.Attribute)) and name_parts(last_name(test) or "") & _OVERFLOW_PARTS:
        return True
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = test.expression
        if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and last_name(inner.func) == "all":
            inner = inner.func.value
        return isinstance(inner, cst.Call) and last_name(inner.func) == "isfinite"
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) and last_name(test.func) == "any":
        test = test.func.value
    return isinstance(test, cst.Call) and last_name(test.func) in _NON_FINITE_TESTS


def _is_first_step_test(test: cst.BaseExpression) -> bool:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _is_first_step_test(test.left) or _is_first_step_test(test.right)
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    comparison = test.comparisons[0]
    if isinstance(comparison.operator, cst.NotIn) and type(test.left) in STRING_NODES \
            and last_name(comparison.comparator) == "state":
        return True  # `if "z" not in state:`: an optimizer's state for a parameter, made at its first step
    if not isinstance(comparison.operator, cst.Equal):
        return False
    if not (isinstance(comparison.comparator, cst.Integer) and comparison.comparator.value in ("0", "1")):
        return False
    left = test.left.func if isinstance(test.left, cst.Call) else test.left
    name = dotted_name(left) or ""
    parts = name_parts(name.rsplit(".", 1)[-1])
    # `acc_step == 0` counts micro-batches modulo the accumulation: true on every optimizer step, not the first.
    counts_steps = bool(parts & _FIRST_STEP_PARTS) or bool(
        parts & _INDEX_PARTS and parts <= _INDEX_PARTS | _INDEX_QUALIFIERS)
    return counts_steps and not parts & ACCUMULATION_PARTS


def iterates_tensors_of_model(expr: cst.BaseExpression) -> bool:
    while isinstance(expr, cst.Call) and last_name(expr.func) in ("enumerate", "zip", "list", "sorted", "filter"):
        if not expr.args:
            return False
        expr = expr.args[0].value
    if isinstance(expr, cst.Call):
        method = last_name(expr.func)
        if method in ("parameters", "named_parameters", "buffers", "named_buffers"):
            return True
        if method in ("items", "values") and isinstance(expr.func, cst.Attribute):
            inner = expr.func.value
            return isinstance(inner, cst.Call) and last_name(inner.func) == "state_dict"
    return False


def holds_training_loop(context, function: cst.FunctionDef) -> bool:
    """Does `function` hold a training loop (a step loop, or a loop over a loader)? The project model's answer;
    without it, True (the cautious answer for a rule that stays quiet outside training loops)."""
    names = [n.name.value for n in context.ancestors if type(n) is cst.FunctionDef or type(n) is cst.ClassDef]
    while names and names[-1] != function.name.value:
        names.pop()
    facts = context.facts.functions.get(".".join(names))
    if facts is None:
        return True
    return bool(facts.step_loops) or facts.epoch


def _isinstance_tensor(test: cst.BaseExpression) -> tuple[str, bool] | None:
    """(x, True) for `isinstance(x, torch.Tensor)`, (x, False) for `not isinstance(x, torch.Tensor)`."""
    positive = True
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, positive = test.expression, False
    if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "isinstance"):
        return None
    if len(test.args) != 2 or not isinstance(test.args[0].value, cst.Name):
        return None
    if last_name(test.args[1].value) != "Tensor":
        return None
    return test.args[0].value.value, positive


def cpu_target(call: cst.Call) -> bool:
    """`.to("cpu")`, `.to(device="cpu")`, `.to(torch.device("cpu"))`."""
    target = call.args[0].value if call.args and call.args[0].keyword is None else None
    keyword = keyword_arg(call, "device")
    target = keyword.value if keyword is not None else target
    return target is not None and is_cpu_device(target)
