"""GPL4xx: host-device synchronisation and synchronous communication in the training step.

Every rule here reports with `when="per_step"`: a sync only costs when it runs every step, and a value already on the
host is free. Whether an expression is a tensor is decided by `_Tensors` below, on top of the engine's device
provenance (`context.location_of`): host values are never tensors, and a value is a tensor when it comes from torch, a
tensor method, a parameter/gradient, or a name bound to one of those in the same function.

The family also leaves out, on purpose: error paths (`except`, `if ...: raise`), first-step-only code (`if step == 0:`),
training scripts that never name a device, and shapes another family owns (`total += loss.item()` is GPL2xx,
`[t.item() for t in ts]` and per-parameter loops are GPL1xx, `torch.zeros(n).cuda()` is GPL5xx). All rules of the
family share one `_FileState` per file, so each assignment is evaluated once however many rules are enabled.
"""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.names import (
    dotted_name,
    last_name,
    name_parts,
    root_name,
    target_names,
)
from gpulint.linter.rule import Invalid, Replace, Report, Rule, RuleDocs
from gpulint.linter.syntax import SyntaxVisitor, descendants

# ----------------------------------------------------------------------------------------------- examples
# Every example is a complete script the sync-debug harness (bench/sync_debug_check.py) can run: it defines
# `train(model, loader, optimizer, device)`; the harness supplies a tiny model, a pinned loader and an SGD optimizer.
_TRAIN_LOOP = """import torch
import torch.nn.functional as F


def train(model, loader, optimizer, device):
    for step, (x, y) in enumerate(loader):
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
{body}
"""


def _in_loop(body: str, header: str = "") -> str:
    """A training script with `body` at the end of the step loop (and `header` lines after the imports)."""
    script = _TRAIN_LOOP.format(body="\n".join("        " + line if line else "" for line in body.splitlines()))
    if header:
        script = script.replace("\n\n\ndef train", "\n" + header + "\n\n\ndef train", 1)
    return script


# ----------------------------------------------------------------------------------------------- what is a tensor
# Tensor methods that return a tensor. The first group exists only on tensors; the second also on numpy arrays and
# other containers, so it makes a tensor only when its receiver is one.
_TENSOR_ONLY_METHODS = frozenset(
    {
        "detach", "norm", "cuda", "softmax", "log_softmax", "argmax", "argmin", "eq", "ne", "gt", "lt", "ge", "le",
        "isnan", "isinf", "isfinite", "logical_and", "logical_or", "logical_not", "masked_fill", "float", "half",
        "bfloat16", "long", "sigmoid", "relu", "amax", "amin", "unsqueeze", "contiguous", "type_as", "view",
        "nansum", "nanmean", "topk", "square", "rsqrt", "clamp", "clamp_min", "clamp_max", "squeeze", "expand",
    }
)
_TENSOR_METHODS = _TENSOR_ONLY_METHODS | frozenset(
    {
        "sum", "mean", "max", "min", "std", "var", "abs", "sqrt", "exp", "log", "pow", "neg", "clip", "double",
        "int", "bool", "clone", "reshape", "flatten", "any", "all", "prod", "cumsum", "to", "mul", "add", "sub", "div",
        "matmul", "t", "transpose", "permute", "sort", "median", "round", "data",
    }
)
# torch.* functions that return something other than a tensor (or a tensor that is not the data: `torch.device`).
_TORCH_NON_TENSOR = frozenset(
    {
        "device", "dtype", "Size", "Generator", "no_grad", "enable_grad", "inference_mode", "autocast", "manual_seed",
        "save", "load", "compile", "numel", "typename", "set_grad_enabled", "finfo", "iinfo", "get_default_dtype",
        "use_deterministic_algorithms", "set_float32_matmul_precision", "get_rng_state", "seed", "initial_seed",
    }
)
# Names of nn.Modules (moved to the device too, but their attributes are Python values).
_MODULE_NAME = re.compile(r"model|module|net$|network|criterion|encoder|decoder", re.IGNORECASE)
_TORCH_TENSOR_FUNCTIONS = frozenset({"nn.utils.clip_grad_norm_", "nn.utils.get_total_norm"})
# Names that hold tensors in training code: `loss`, `total_loss`, `ce_loss`, `logits`; not flags or helpers named
# after them (`return_loss`, `loss_fn`, `loss_name`, `grad_accum_steps`).
_TENSOR_LAST_PARTS = frozenset({"loss", "losses", "logits"})
_FLAG_FIRST_PARTS = frozenset({"return", "use", "compute", "with", "has", "is", "should", "enable", "need", "calc"})
_TENSOR_NAMES = frozenset({"grad", "grads", "grad_norm", "total_norm", "param_norm"})
_TENSOR_ATTRS = frozenset({"grad", "loss", "logits"})




class _Tensors:
    """Which names hold tensors, per function, from the assignments seen so far; and `is_tensor(expr)`.

    One per rule instance: it only reads assignments (O(1) each), so keeping several is cheaper than sharing state.
    """

    def __init__(self, context) -> None:
        self.context = context
        self._bound: dict[tuple[int, str], bool] = {}
        self._masks: set[tuple[int, str]] = set()
        self._tensor_attributes: set[str] = set()  # `self.queue_ptr` registered as a buffer or assigned a tensor

    def _key(self, name: str) -> tuple[int, str]:
        return (id(self.context.enclosing_function()), name)

    # -- updates, called from the rule's leave_Assign / visit_For
    def assigned(self, node: cst.Assign | cst.AnnAssign) -> None:
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        value = node.value
        if value is None:
            return
        for target in targets:
            if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) and (
                len(target.elements) == len(value.elements)
            ):
                for name, element in zip(target.elements, value.elements):
                    self._bind(name.value, element.value)
            elif isinstance(target, (cst.Tuple, cst.List)) and self.is_mask(value):
                for element in target.elements:  # `j, k = mask_pair.T`: each row is a mask
                    if isinstance(element.value, cst.Name):
                        key = self._key(element.value.value)
                        self._bound[key] = True
                        self._masks.add(key)
            else:
                self._bind(target, value)

    def buffer_registered(self, call: cst.Call) -> None:
        """`self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))`."""
        if last_name(call.func) in ("register_buffer", "register_parameter") and call.args:
            name = call.args[0].value
            if isinstance(name, cst.SimpleString):
                self._tensor_attributes.add(name.raw_value)

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            if self.is_tensor(value) and not isinstance(value, cst.Name):
                self._tensor_attributes.add(target.attr.value)
            return
        if not isinstance(target, cst.Name):
            return
        key = self._key(target.value)
        self._bound[key] = self.is_tensor(value)
        if self.is_mask(value):
            self._masks.add(key)
        else:
            self._masks.discard(key)

    def loop_target(self, node: cst.For) -> None:
        # `for p in model.parameters()` / `for name, p in model.named_parameters()`: p is a tensor.
        if not isinstance(node.iter, cst.Call):
            return
        method = last_name(node.iter.func)
        target = node.target
        if method in ("parameters", "buffers") and isinstance(target, cst.Name):
            self._bound[self._key(target.value)] = True
        elif method in ("named_parameters", "named_buffers") and isinstance(target, cst.Tuple) and len(target.elements) == 2:
            second = target.elements[1].value
            if isinstance(second, cst.Name):
                self._bound[self._key(second.value)] = True

    # -- queries
    def is_tensor(self, expr: cst.BaseExpression) -> bool:
        """True when `expr` is (very likely) a tensor whose data may live on the device."""
        location = self.context.location_of(expr)
        if location == "host":
            return False
        if location == "device":
            return True
        if isinstance(expr, cst.Name):
            bound = self._bound.get(self._key(expr.value))
            if bound is not None:
                return bound
            return _tensor_name(expr.value)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in _TENSOR_ATTRS:
                return True
            if isinstance(expr.value, cst.Name) and expr.value.value == "self" and expr.attr.value in self._tensor_attributes:
                return True
            if self.context.location_of(expr.value) == "device" and not _MODULE_NAME.search(last_name(expr.value) or ""):
                return True  # `batch.y`, `data.train_mask` of a batch moved to the device (not `net.label_dim`)
            return expr.attr.value == "data" and self.is_tensor(expr.value)
        if isinstance(expr, cst.Subscript):
            key = _string_index(expr)
            if key is not None and _tensor_name(key):
                return True
            return self.is_tensor(expr.value)
        if isinstance(expr, cst.Call):
            return self._call_is_tensor(expr)
        if isinstance(expr, cst.BinaryOperation):
            return self.is_tensor(expr.left) or self.is_tensor(expr.right)
        if isinstance(expr, cst.UnaryOperation):
            return self.is_tensor(expr.expression)
        if isinstance(expr, cst.Comparison):
            if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons):
                return False
            return self.is_tensor(expr.left) or any(self.is_tensor(c.comparator) for c in expr.comparisons)
        if isinstance(expr, cst.BooleanOperation):
            return self.is_tensor(expr.left) or self.is_tensor(expr.right)
        return False

    def _call_is_tensor(self, call: cst.Call) -> bool:
        func = call.func
        resolved = self.context.resolve(func) or ""
        if resolved.startswith("torch."):
            rest = resolved[len("torch."):]
            if rest.startswith(("nn.functional.", "linalg.", "special.", "fft.")) or rest in _TORCH_TENSOR_FUNCTIONS:
                return True
            return not ("." in rest or rest in _TORCH_NON_TENSOR or rest.startswith(("is_", "get_", "set_")))
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in _TENSOR_ONLY_METHODS:
                return True
            if method in _TENSOR_METHODS:
                return self.is_tensor(func.value)
        return False

    def is_mask(self, expr: cst.BaseExpression) -> bool:
        """A boolean tensor: a comparison of tensors, `.bool()`, `~t`, `isnan(t)`, or a name bound to one."""
        if isinstance(expr, cst.Name):
            key = self._key(expr.value)
            if key in self._masks:
                return True
            if key in self._bound or self.context.location_of(expr) == "host":
                return False
            return "mask" in name_parts(expr.value)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in ("T", "mT"):  # `j, k = ((gxy % 1 < g) & (gxy > 1)).T`
                return self.is_mask(expr.value)
            return "mask" in name_parts(expr.attr.value) and self.context.location_of(expr) != "host"
        if isinstance(expr, cst.Comparison):
            return self.is_tensor(expr)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
            return self.is_mask(expr.expression) or self.is_tensor(expr.expression)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr)):
            return self.is_mask(expr.left) or self.is_mask(expr.right)
        if isinstance(expr, cst.Call) and expr.args and _keyword(expr, "dtype") is None:
            # `torch.stack((torch.ones_like(j), j, k))`: stacking or copying masks makes a mask
            resolved = self.context.resolve(expr.func)
            first = expr.args[0].value
            if resolved in ("torch.stack", "torch.cat") and isinstance(first, (cst.List, cst.Tuple)):
                return any(self.is_mask(e.value) for e in first.elements if isinstance(e, cst.Element))
            if resolved in ("torch.ones_like", "torch.zeros_like"):
                return self.is_mask(first)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            if method == "bool":
                return self.is_tensor(expr.func.value) or self.is_mask(expr.func.value)
            if method in ("isnan", "isinf", "isfinite", "eq", "ne", "gt", "lt", "ge", "le", "logical_not", "logical_and",
                          "logical_or"):
                return True
        return False


def _tensor_name(name: str) -> bool:
    parts = [p for p in re.split(r"[_.]+", name.lower()) if p]
    if not parts:
        return False
    return name in _TENSOR_NAMES or (parts[-1] in _TENSOR_LAST_PARTS and parts[0] not in _FLAG_FIRST_PARTS)


def _string_index(node: cst.Subscript) -> str | None:
    if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        value = node.slice[0].slice.value
        if isinstance(value, cst.SimpleString):
            return value.raw_value
    return None


# A training script (it calls backward) that never names a device, an accelerator or a distributed backend runs on
# the CPU: nothing to sync with. Helper modules (losses, matchers) get their tensors from elsewhere and are checked.
_GPU_EVIDENCE = re.compile(
    r"cuda|device|gpu|accelerat|fabric|lightning|distributed|(?<![a-z])rank|(?<![a-z])(xla|mps|xpu|npu)(?![a-z])"
)
_GPU_PACKAGES = ("accelerate", "lightning", "pytorch_lightning", "lightning_fabric", "deepspeed", "torch.distributed",
                 "torch_xla", "apex", "torch.cuda")


class _FileState:
    """What all GPL4xx rules of one file share: the tensor tracker and whether the file shows any sign of a GPU.
    It is one of the rules' `shared` helpers: the engine walks it once per file, before the rules (so each node
    updates it once, and every rule sees the update)."""

    def __init__(self, context) -> None:
        self.tensors = _Tensors(context)
        self.gpu = False
        self.backward = False

    def leave_Assign(self, node: cst.Assign) -> None:
        self.tensors.assigned(node)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.tensors.assigned(node)

    def visit_For(self, node: cst.For) -> None:
        self.tensors.loop_target(node)

    def leave_Call(self, node: cst.Call) -> None:
        self.tensors.buffer_registered(node)
        self.saw_call(node)

    def visit_Param(self, node: cst.Param) -> None:
        self.saw_param(node)

    def saw_call(self, call: cst.Call) -> None:
        method = last_name(call.func)
        if method == "backward":
            self.backward = True
        if self.gpu:
            return
        if method in ("to", "cuda") or _GPU_EVIDENCE.search(dotted_name(call.func) or ""):
            self.gpu = True
            return
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value in ("device", "non_blocking", "pin_memory"):
                self.gpu = True
                return

    def saw_param(self, param: cst.Param) -> None:
        if not self.gpu and _GPU_EVIDENCE.search(param.name.value):
            self.gpu = True  # `def train(model, loader, device)`

    def cpu_only(self, context) -> bool:
        if self.gpu or not self.backward:
            return False
        return not any(context.imports.imported(package) for package in _GPU_PACKAGES)


# Appended to every GPL4xx rule's "Known false positives": what the whole family leaves out on purpose.
_NOT_REPORTED = (
    " Never reported: error paths (an `except` handler, an `if` body ending in `raise`), first-step-only code "
    "(`if step == 0:`), and training scripts that never name a device (CPU-only)."
)


def _fp(text: str) -> str:
    return text + _NOT_REPORTED


class _SyncRule(Rule):
    """Shared plumbing: tensor tracking, the precedence checks the families agreed on, and no findings in files that
    never touch a device (a CPU-only script has no GPU to wait for)."""

    hot_only = True  # every GPL4xx finding is reported with when="per_step"
    shared = (_FileState,)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.file: _FileState = context.helper(_FileState)
        self.tensors = self.file.tensors

    def leave_Module(self, node: cst.Module) -> None:
        """Drop this rule's reports in a CPU-only training script (known only once the whole file is seen)."""
        if self.file.cpu_only(self.context):
            self.context.reports[:] = [r for r in self.context.reports if r.rule is not self]

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
        return isinstance(loop, cst.For) and _iterates_tensors_of_model(loop.iter)

    def report(self, node, message=None, *, when="per_step", fix=(), unsafe_fix=False) -> None:
        if not _rarely_runs(self.context.ancestors):
            super().report(node, message, when=when, fix=fix, unsafe_fix=unsafe_fix)

    def report_at(self, node: cst.CSTNode, message: str, ancestors: tuple[cst.CSTNode, ...], fix=(),
                  unsafe_fix: bool = False) -> None:
        """Report with ancestors saved earlier (for findings decided at the end of the file)."""
        if not _rarely_runs(ancestors):
            self.context.add_report(Report(self, node, message, "per_step", ancestors, tuple(fix), unsafe_fix))


_FIRST_STEP_PARTS = frozenset({"step", "steps", "iter", "iteration", "updates", "update", "epoch", "batch", "idx", "i"})


def _rarely_runs(chain) -> bool:
    """Error paths (an `except` handler, an `if` body that ends in `raise`) and first-step-only code
    (`if step == 0:`, `if self.get_num_updates() == 0:`) do not run every step."""
    for index in range(len(chain) - 2, -1, -1):
        node, child = chain[index], chain[index + 1]
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return False
        if isinstance(node, cst.ExceptHandler):
            return True
        if isinstance(node, cst.If) and child is node.body and (_ends_with_raise(node.body) or _is_first_step_test(node.test)):
            return True
    return False


def _ends_with_raise(body: cst.BaseSuite) -> bool:
    last = body.body[-1] if body.body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    return isinstance(last, cst.Raise)


def _is_first_step_test(test: cst.BaseExpression) -> bool:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _is_first_step_test(test.left) or _is_first_step_test(test.right)
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    comparison = test.comparisons[0]
    if not isinstance(comparison.operator, cst.Equal):
        return False
    if not (isinstance(comparison.comparator, cst.Integer) and comparison.comparator.value in ("0", "1")):
        return False
    left = test.left.func if isinstance(test.left, cst.Call) else test.left
    name = dotted_name(left) or ""
    return bool(name_parts(name.rsplit(".", 1)[-1]) & _FIRST_STEP_PARTS)


def _iterates_tensors_of_model(expr: cst.BaseExpression) -> bool:
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


def _keyword(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def _is_true(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "True"


def _is_false(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def _cpu_target(call: cst.Call) -> bool:
    """`.to("cpu")`, `.to(device="cpu")`, `.to(torch.device("cpu"))`."""
    target = call.args[0].value if call.args and call.args[0].keyword is None else None
    keyword = _keyword(call, "device")
    target = keyword.value if keyword is not None else target
    if isinstance(target, cst.SimpleString):
        return target.raw_value.split(":")[0] == "cpu"
    if isinstance(target, cst.Call) and last_name(target.func) == "device" and target.args:
        value = target.args[0].value
        return isinstance(value, cst.SimpleString) and value.raw_value.split(":")[0] == "cpu"
    return False


# ================================================================================================ GPL401
class ScalarSyncInStep(_SyncRule):
    code = "GPL401"
    name = "scalar-sync-in-step"
    message = "`.{method}()` copies a device tensor to the host every step and blocks until the GPU catches up"
    triggers = (".item(", ".tolist(", ".get_scale(", "scaler.state_dict(")
    docs = RuleDocs(
        what_it_does="Flags `.item()` and `.tolist()` on a tensor in code that runs every training step and is not "
        "gated to a logging interval, and `GradScaler.get_scale()` / `scaler.state_dict()`, which call `.item()`.",
        why_slow="Reading a device value on the host is a device-to-host copy that waits for every kernel queued before "
        "it: the CPU stops launching work, the GPU drains its queue and idles until the next launch. One sync per step "
        "removes the CPU's lead over the GPU, which is what keeps small-kernel models busy.",
        example="for batch in loader:\n    loss = model(batch)\n    loss.backward()\n    optimizer.step()\n"
        "    print(loss.item())",
        use_instead="Keep the value on the device (`running += loss.detach()`) and read it only every N steps under "
        "`if step % log_interval == 0:`.",
        fix_safety="No fix: the replacement (a device accumulator read at an interval) changes the program's structure.",
        false_positives=_fp("`.item()` on a value that is already on the host (after `.cpu()`, `.tolist()`, a numpy array, "
        "a tensor built by `torch.tensor(...)` without `device=`) costs nothing; gpulint follows assignments within a "
        "function but not across functions. `total += loss.item()` accumulators are reported by GPL2xx and "
        "`[t.item() for t in ts]` / per-parameter loops by GPL1xx instead."),
    )
    valid = (
        _in_loop("if step % 100 == 0:\n    print(loss.item())"),
        _in_loop("if step % 10 != 0:\n    continue\nprint(loss.item())"),
        _in_loop("counts = torch.zeros(4)\nfirst = counts[0].item()"),
        "import torch\n\n\ndef evaluate(model, loader):\n    for x, y in loader:\n        print(model(x).sum().item())\n",
    )
    invalid = (
        Invalid(_in_loop("loss_value = loss.item()")),
        Invalid(_in_loop("probs = F.softmax(model(x), dim=-1).tolist()")),
        Invalid(_in_loop("scaled = scaler.scale(loss)\nscale = scaler.get_scale()", header="scaler = torch.amp.GradScaler()")),
    )

    message_scaler = "`{call}` reads the loss scale with `.item()`: a device-to-host sync every step"

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or node.args:
            return
        method = func.attr.value
        if method in ("get_scale", "state_dict") and "scaler" in (last_name(func.value) or "").lower():
            # GradScaler.get_scale() and .state_dict() call `self._scale.item()`.
            self.report(node, self.message_scaler.format(call=f"{last_name(func.value)}.{method}()"))
            return
        if method not in ("item", "tolist"):
            return
        if self.context.is_host_value(func.value) or self.in_accumulator() or self.in_per_tensor_loop():
            return
        self.report(node, self.message.format(method=method))


# ================================================================================================ GPL402
class PythonScalarOfTensor(_SyncRule):
    code = "GPL402"
    name = "python-scalar-of-tensor"
    message = "`{func}(tensor)` converts a device tensor to a Python value every step: a blocking device-to-host copy"
    triggers = ("float(", "int(", "bool(", "math.")
    docs = RuleDocs(
        what_it_does="Flags `float(t)`, `int(t)`, `bool(t)` and `math.*(t)` (`math.isfinite(loss)`) on a tensor in "
        "code that runs every step and is not gated.",
        why_slow="Converting a tensor to a Python number calls `.item()` under the hood: a device-to-host copy that "
        "waits for the GPU to finish everything queued before it, so the CPU stops running ahead of the GPU.",
        example="for x, y in loader:\n    loss = F.cross_entropy(model(x), y)\n    loss.backward()\n"
        "    optimizer.step()\n    if not math.isfinite(loss):\n        raise RuntimeError(\"diverged\")",
        use_instead="Keep the check on the device (`torch.isfinite(loss)` accumulated, read every N steps), or read "
        "the value only under a logging gate.",
        fix_safety="No fix: keeping the value on the device changes its type (tensor instead of float) for every later "
        "use.",
        false_positives=_fp("Values gpulint cannot see are host values (a function's return value that is a Python float "
        "but named like `loss`): move the conversion or add `# noqa: GPL402`. `total += float(loss)` is reported by "
        "GPL2xx instead."),
    )
    valid = (
        _in_loop("lr = float(optimizer.param_groups[0][\"lr\"])"),
        _in_loop("n = int(x.shape[0])"),
        _in_loop("if step % 10 == 0:\n    print(float(loss))"),
        _in_loop("lr = optimizer.param_groups[0][\"lr\"]\nok = math.isfinite(lr)", header="import math"),
    )
    invalid = (
        Invalid(_in_loop("loss_f = float(loss)")),
        Invalid(_in_loop("ok = math.isfinite(loss)", header="import math")),
        Invalid(_in_loop("correct = int((model(x).argmax(1) == y).sum())")),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not node.args or node.args[0].keyword is not None:
            return
        if isinstance(func, cst.Name) and func.value in ("float", "int", "bool"):
            if len(node.args) != 1:
                return
            label = func.value
        else:
            resolved = self.context.resolve(func) or ""
            if not resolved.startswith("math."):
                return
            label = resolved
        if not self.tensors.is_tensor(node.args[0].value) or self.in_accumulator() or self.in_per_tensor_loop():
            return
        self.report(node, self.message.format(func=label))


# ================================================================================================ GPL403
class CpuCopyInStep(_SyncRule):
    code = "GPL403"
    name = "cpu-copy-in-step"
    message = "`{call}` copies a device tensor to host memory every step, waiting for the GPU to finish"
    triggers = (".cpu(", "cpu\"", "cpu'")
    docs = RuleDocs(
        what_it_does="Flags `.cpu()` and `.to(\"cpu\")` on tensors in code that runs every training step and is not "
        "gated (`.numpy()` needs a CPU tensor, so the copy before it is what is flagged).",
        why_slow="A device-to-host copy into pageable memory is synchronous: the host waits for the copy, and the copy "
        "waits for every kernel queued before it. The CPU loses its lead and the GPU idles between steps.",
        example="for x, y in loader:\n    out = model(x)\n    loss = F.cross_entropy(out, y)\n    loss.backward()\n"
        "    optimizer.step()\n    all_preds.append(out.argmax(1).cpu())",
        use_instead="Keep per-step results on the device (`preds.append(out.argmax(1))`, or a running device tensor) "
        "and move them once at the end of the epoch or at a logging interval.",
        fix_safety="No fix: where the host copy should move (epoch end, log interval) depends on how the result is used.",
        false_positives=_fp("Code that must hand results to the host every step (a replay buffer, an environment "
        "simulator) pays the copy on purpose: add `# noqa: GPL403`. Numpy/sklearn metrics on `.cpu().numpy()` are "
        "reported by GPL2xx instead."),
    )
    valid = (
        _in_loop("if step % 100 == 0:\n    history.append(loss.detach().cpu())", header="history = []"),
        _in_loop("snapshot = torch.tensor([1.0, 2.0]).cpu()"),
        ("import torch\n\n\ndef train(model, loader, optimizer, device):\n    for step, (x, y) in enumerate(loader):\n"
        "        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n"
        "    torch.save(model.cpu().state_dict(), \"model.pt\")\n"),
    )
    invalid = (
        Invalid(_in_loop("history.append(loss.detach().cpu())", header="history = []")),
        Invalid(_in_loop("pred = model(x).argmax(1).to(\"cpu\")")),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if method == "cpu" and not node.args:
            call = ".cpu()"
        elif method == "to" and node.args and _cpu_target(node):
            call = ".to(\"cpu\")"
        else:
            return
        if self.context.is_host_value(func.value) or self._feeds_numpy_metric() or self.in_per_tensor_loop():
            return
        self.report(node, self.message.format(call=call))

    def _feeds_numpy_metric(self) -> bool:
        """`metric(y, t.cpu().numpy())`: numpy/sklearn metrics on the host are GPL2xx's finding."""
        chain = self.context.ancestors
        if len(chain) < 5:
            return False
        attribute, call, arg, outer = chain[-2], chain[-3], chain[-4], chain[-5]
        if not (isinstance(attribute, cst.Attribute) and attribute.attr.value == "numpy" and isinstance(call, cst.Call)):
            return False
        if not (isinstance(arg, cst.Arg) and isinstance(outer, cst.Call)):
            return False
        resolved = self.context.resolve(outer.func) or ""
        return resolved.startswith(("sklearn.", "numpy.", "np.", "scipy."))


# ================================================================================================ GPL404
_LOG_METHODS = frozenset({"info", "debug", "warning", "warn", "error", "critical", "log", "exception"})
_LOG_RECEIVER_PARTS = frozenset({"logger", "logging", "log", "_logger", "LOGGER"})


class TensorFormattedInStep(_SyncRule):
    code = "GPL404"
    name = "tensor-formatted-in-step"
    message = "formatting a tensor as text ({how}) reads its values on the host every step: a blocking copy"
    triggers = ("torch",)  # `%` formatting and logger calls are too common to pre-filter on
    docs = RuleDocs(
        what_it_does="Flags `print(t)`, f-strings and `.format()` / `%` of tensors, logger calls with tensor "
        "arguments, and `SummaryWriter.add_scalar` / `wandb.log` of tensors in code that runs every step, ungated.",
        why_slow="Turning a tensor into text (or a logged scalar) copies its values to the host, and that copy waits "
        "for all queued GPU work: each step ends in a full host-device round trip before the next launch.",
        example="for x, y in loader:\n    loss = F.cross_entropy(model(x), y)\n    loss.backward()\n"
        "    optimizer.step()\n    print(f\"loss {loss}\")",
        use_instead="Log under `if step % log_interval == 0:`; between logs keep a running device sum "
        "(`running += loss.detach()`).",
        fix_safety="No fix: choosing a logging interval is the author's call; gating the line changes what is printed.",
        false_positives=_fp("Objects named like tensors that are Python numbers (a `loss` returned by a helper as a "
        "float) can be flagged: convert where they are made, or add `# noqa: GPL404`."),
    )
    valid = (
        _in_loop("if step % 100 == 0:\n    print(f\"step {step} loss {loss}\")"),
        _in_loop("lr = optimizer.param_groups[0][\"lr\"]\nprint(f\"lr {lr:.3f}\")"),
        _in_loop("print(f\"step {step} batch {x.shape}\")"),
        _in_loop("logger.info(\"step %d\", step)", header="import logging\nlogger = logging.getLogger(__name__)"),
    )
    invalid = (
        Invalid(_in_loop("print(loss)")),
        Invalid(_in_loop("print(f\"step {step} loss {loss:.4f}\")")),
        Invalid(_in_loop("logger.info(\"loss %s\", loss)", header="import logging\nlogger = logging.getLogger(__name__)")),
        Invalid(_in_loop("msg = \"loss {:.3f}\".format(loss)")),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Name) and func.value == "print":
            how = "print"
        elif isinstance(func, cst.Attribute) and func.attr.value in _LOG_METHODS and _is_logger(func.value):
            how = "a logger call"
        elif isinstance(func, cst.Attribute) and func.attr.value in ("add_scalar", "add_scalars"):
            how = "add_scalar"
        elif isinstance(func, cst.Attribute) and func.attr.value == "format" and isinstance(func.value, cst.SimpleString):
            how = "str.format"
        elif self.context.resolve(func) == "wandb.log":
            how = "wandb.log"
        else:
            return
        if any(self._tensor_arg(arg.value) for arg in node.args):
            self.report(node, self.message.format(how=how))

    def _tensor_arg(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Dict):
            return any(isinstance(e, cst.DictElement) and self.tensors.is_tensor(e.value) for e in value.elements)
        return self.tensors.is_tensor(value)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        # `print(f"{loss}")` is one finding, on the f-string: the print's argument is a host string.
        for part in node.parts:
            if isinstance(part, cst.FormattedStringExpression) and self.tensors.is_tensor(part.expression):
                self.report(node, self.message.format(how="f-string"))
                return

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Modulo) and _is_string_expression(node.left):
            right = node.right
            values = [e.value for e in right.elements] if isinstance(right, cst.Tuple) else [right]
            if any(self.tensors.is_tensor(v) for v in values):
                self.report(node, self.message.format(how="% formatting"))


def _is_string_expression(expr: cst.BaseExpression) -> bool:
    """A string literal, or arithmetic on one (`("%11s" * 2 + "%11.4g" * 5)`)."""
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Multiply)):
        return _is_string_expression(expr.left) or _is_string_expression(expr.right)
    return False


def _is_logger(receiver: cst.BaseExpression) -> bool:
    name = last_name(receiver)
    return name is not None and (name in _LOG_RECEIVER_PARTS or name.lower().endswith("logger"))


# ================================================================================================ GPL405
class TensorConditionInStep(_SyncRule):
    code = "GPL405"
    name = "tensor-condition-in-step"
    message = "`{kind}` on a tensor value makes the host wait for the GPU to decide a Python branch, every step"
    triggers = ("torch",)
    docs = RuleDocs(
        what_it_does="Flags `if`, `while`, `assert` and conditional expressions whose test is a tensor (`if loss > 10:`, "
        "`assert torch.isfinite(loss)`, `if mask.any():`) or `any()` / `all()` over tensors "
        "(`if any(torch.isnan(l) for l in losses):`) in code that runs every step, ungated.",
        why_slow="Python needs a bool, so the tensor is copied to the host (`Tensor.__bool__` calls `.item()`): a "
        "device-to-host round trip that drains the GPU queue before the branch can be taken.",
        example="for x, y in loader:\n    loss = F.cross_entropy(model(x), y)\n    if loss > 100:\n"
        "        continue\n    loss.backward()\n    optimizer.step()",
        use_instead="Make the decision on the device (`torch.where`, multiply by a mask, `torch._assert_async`), or "
        "check every N steps.",
        fix_safety="No fix: a device-side rewrite (`torch.where`, masking, `torch._assert_async`) changes control flow.",
        false_positives=_fp("Tests on names gpulint takes for tensors but that hold Python numbers (a helper returning a "
        "float named `loss`): add `# noqa: GPL405`. `x is None` and shape/size tests are never flagged."),
    )
    valid = (
        _in_loop("if x.shape[0] > 1:\n    pass"),
        _in_loop("lr = optimizer.param_groups[0][\"lr\"]\nif lr > 100:\n    break"),
        _in_loop("if step % 50 == 0:\n    assert torch.isfinite(loss)"),
        _in_loop("if optimizer is not None and step > 10:\n    pass"),
        _in_loop("if any(g[\"lr\"] > 1 for g in optimizer.param_groups):\n    break"),
    )
    invalid = (
        Invalid(_in_loop("if loss > 100:\n    break")),
        Invalid(_in_loop("assert torch.isfinite(loss).all()")),
        Invalid(_in_loop("if torch.isnan(loss):\n    break")),
        Invalid(_in_loop("scale = 1.0 if loss.detach() < 1 else 0.5")),
        Invalid(_in_loop("if any(torch.isnan(t) for t in (loss, loss.detach())):\n    break")),
    )

    def visit_If(self, node: cst.If) -> None:
        self._check(node.test, "if")

    def visit_While(self, node: cst.While) -> None:
        self._check(node.test, "while")

    def visit_Assert(self, node: cst.Assert) -> None:
        self._check(node.test, "assert")

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._check(node.test, "x if ... else y")

    def _check(self, test: cst.BaseExpression, kind: str) -> None:
        if self._reads_tensor(test):
            self.report(test, self.message.format(kind=kind))

    def _reads_tensor(self, test: cst.BaseExpression) -> bool:
        """A tensor test, or `any(torch.isnan(l) for l in losses)`: the builtin calls `bool()` on each tensor."""
        if self.tensors.is_tensor(test):
            return True
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self._reads_tensor(test.expression)
        if isinstance(test, cst.BooleanOperation):
            return self._reads_tensor(test.left) or self._reads_tensor(test.right)
        if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value in ("any", "all")):
            return False
        if len(test.args) == 1 and isinstance(test.args[0].value, (cst.GeneratorExp, cst.ListComp)):
            return self.tensors.is_tensor(test.args[0].value.elt)
        return False


# ================================================================================================ GPL406
class DataDependentShapeInStep(_SyncRule):
    code = "GPL406"
    name = "data-dependent-shape-in-step"
    message = "`{what}` has an output size that depends on tensor values: the host waits for the GPU to learn it"
    triggers = ("nonzero", "masked_select", "unique", "repeat_interleave", "where(", "argwhere", "torch")
    docs = RuleDocs(
        what_it_does="Flags operations whose output shape depends on tensor data: `nonzero`, `argwhere`, single-argument "
        "`torch.where`, `masked_select`, `unique`, `repeat_interleave` with tensor repeats and no `output_size`, and "
        "boolean-mask indexing `x[mask]` (masks are followed through `torch.stack` / `torch.cat`, `.T` and tuple "
        "unpacking), in code that runs every step, ungated.",
        why_slow="To allocate the result PyTorch must know how many elements it has, so it copies a count from the "
        "device and waits for it: a hidden device-to-host sync that also breaks CUDA graphs and `torch.compile` "
        "(graph break).",
        example="for x, y in loader:\n    logits = model(x)\n    keep = y != -1\n"
        "    loss = F.cross_entropy(logits[keep], y[keep])",
        use_instead="Keep shapes static: weight by the mask (`(loss * mask).sum() / mask.sum()`), use `ignore_index`, "
        "`torch.where(mask, a, b)`, `masked_fill`, or pass `output_size=` to `repeat_interleave`.",
        fix_safety="No fix: static-shape rewrites (masking, `ignore_index`, `output_size=`) need knowledge of the data.",
        false_positives=_fp("Masks gpulint takes for booleans that are integer index tensors (`x[mask_idx]` with long "
        "indices does not sync): add `# noqa: GPL406`. Assignments `x[mask] = 0` are not flagged."),
    )
    valid = (
        _in_loop("logits = model(x)\nsafe = torch.where(y > 0, logits.sum(1), torch.zeros_like(y, dtype=logits.dtype))"),
        _in_loop("rep = x.repeat_interleave(2, dim=0)"),
        _in_loop("mask = y > 0\nx[mask] = 0.0"),
        _in_loop("if step % 100 == 0:\n    n_pos = (y > 0).nonzero().shape[0]"),
        _in_loop("index = torch.zeros_like(y > 0, dtype=torch.long)\nfirst_rows = x[index]"),
    )
    invalid = (
        Invalid(_in_loop("idx = (y > 0).nonzero()")),
        Invalid(_in_loop("keep = y != 0\nkept = x[keep]")),
        Invalid(_in_loop("classes = torch.unique(y)")),
        Invalid(_in_loop("rep = torch.repeat_interleave(x, y, dim=0)")),
        Invalid(_in_loop("sel = x.masked_select(x > 0)")),
        Invalid(_in_loop("low, high = torch.stack((y > 0, y < 3))\nkept = x[low]")),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        method = last_name(func)
        resolved = self.context.resolve(func) or ""
        is_torch = resolved.startswith("torch.")
        is_method = isinstance(func, cst.Attribute) and not is_torch
        positional = [a for a in node.args if a.keyword is None]
        what = None
        if method in ("nonzero", "argwhere", "masked_select", "unique", "unique_consecutive") and (is_torch or is_method):
            what = method
        elif method == "where" and is_torch and len(node.args) == 1:
            what = "torch.where(condition)"
        elif method == "repeat_interleave" and (is_torch or is_method) and _keyword(node, "output_size") is None:
            repeats = _keyword(node, "repeats")
            if repeats is None:
                index = 1 if is_torch else 0
                if len(positional) > index:
                    repeats = positional[index]
                elif is_torch and positional:
                    repeats = positional[0]  # `torch.repeat_interleave(repeats)`
            if repeats is not None and self.tensors.is_tensor(repeats.value):
                what = "repeat_interleave"
        if what is None:
            return
        if is_method and self.context.is_host_value(func.value):  # numpy arrays and CPU tensors
            return
        self.report(node, self.message.format(what=what))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return
        index = node.slice[0].slice.value
        if not self.tensors.is_mask(index) or self.context.is_host_value(node.value) or self._is_store(node):
            return
        self.report(node, self.message.format(what="x[mask]"))

    def _is_store(self, node: cst.Subscript) -> bool:
        parent = self.context.parent()
        if isinstance(parent, cst.AssignTarget) and parent.target is node:
            return True
        return isinstance(parent, cst.AugAssign) and parent.target is node


# ================================================================================================ GPL410
_SYNC_FUNCTIONS = frozenset(
    {
        "torch.cuda.synchronize", "torch.cuda.empty_cache", "torch.accelerator.synchronize", "torch.mps.synchronize",
        "torch.xpu.synchronize", "torch.mps.empty_cache", "torch.xpu.empty_cache",
    }
)


class SynchronizeInStep(_SyncRule):
    code = "GPL410"
    name = "synchronize-in-step"
    message = "`{name}()` blocks the host until all queued GPU work finishes, every step"
    triggers = ("synchronize", "empty_cache")
    docs = RuleDocs(
        what_it_does="Flags `torch.cuda.synchronize()`, `torch.cuda.empty_cache()` and stream/event `synchronize()` "
        "calls in code that runs every training step.",
        why_slow="A device-wide synchronize drains the GPU queue and stops the CPU from running ahead: every kernel launch "
        "after it is exposed as idle GPU time. `empty_cache()` also synchronizes and returns cached blocks that the next "
        "step must allocate again with `cudaMalloc`, which is itself synchronous.",
        example="for batch in loader:\n    loss = model(batch)\n    loss.backward()\n    optimizer.step()\n"
        "    torch.cuda.synchronize()",
        use_instead="Time with `torch.cuda.Event(enable_timing=True)` read every N steps, or with the profiler; "
        "let the caching allocator keep its blocks.",
        fix_safety="No fix: removing a synchronize can change what a timing measures.",
        false_positives=_fp("Benchmark loops that time each step on purpose: put the call under an opt-in flag "
        "(`if args.synchronize_step:`, which gpulint respects), gate it, or add `# noqa: GPL410`."),
    )
    valid = (
        _in_loop("if step % 50 == 0:\n    torch.cuda.synchronize()"),
        _in_loop("if synchronize_step:\n    torch.cuda.synchronize()", header="synchronize_step = False"),
        ("import torch\n\n\ndef train(model, loader, optimizer, device):\n    for x, y in loader:\n"
        "        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n    torch.cuda.synchronize()\n"),
    )
    invalid = (
        Invalid(_in_loop("torch.cuda.synchronize()")),
        Invalid(_in_loop("torch.cuda.empty_cache()")),
        Invalid(_in_loop("torch.cuda.current_stream().synchronize()")),
        Invalid(_in_loop("done = torch.cuda.Event()\ndone.record()\ndone.synchronize()")),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = self.context.resolve(func)
        if self._opted_in():
            return
        if name in _SYNC_FUNCTIONS:
            self.report(node, self.message.format(name=name))
            return
        if not isinstance(func, cst.Attribute) or func.attr.value != "synchronize":
            return
        receiver = func.value
        receiver_name = last_name(receiver.func) if isinstance(receiver, cst.Call) else last_name(receiver)
        if receiver_name and re.search(r"stream|event|done|start|end", receiver_name, re.IGNORECASE):
            self.report(node, self.message.format(name=(dotted_name(receiver) or receiver_name) + ".synchronize"))

    def _opted_in(self) -> bool:
        """Under `if args.synchronize_step:` / `if timing:`: a sync the user asked for with a flag."""
        chain = self.context.ancestors
        for index in range(len(chain) - 2, -1, -1):
            node, child = chain[index], chain[index + 1]
            if isinstance(node, cst.FunctionDef):
                return False
            if isinstance(node, cst.If) and child is node.body:
                name = dotted_name(node.test) or ""
                if name_parts(name.rsplit(".", 1)[-1]) & {"sync", "synchronize", "timing", "time", "benchmark", "profile"}:
                    return True
        return False


# ================================================================================================ GPL411
_DEVICE_WORDS = re.compile(r"device|rank|gpu|cuda|dev$", re.IGNORECASE)
# Project helpers that move a (nested) batch with plain `.to(device)` (OLMo, Accelerate's send_to_device default).
_MOVE_HELPERS = frozenset({"move_to_device", "to_device", "send_to_device", "batch_to_device", "move_to_cuda"})
# `x.type(torch.cuda.FloatTensor)` is a host-to-device copy too (old scripts use it to move batches).
_CUDA_TENSOR_TYPE = re.compile(r"^torch\.cuda\.[A-Za-z]*Tensor$")


class BlockingHostToDeviceCopy(_SyncRule):
    code = "GPL411"
    name = "blocking-host-to-device-copy"
    message = "`{call}` of a batch without `non_blocking=True` is a synchronous copy: the host waits for the GPU queue"
    message_unpinned = (
        "`non_blocking=True` has no effect here: this file's DataLoader does not set `pin_memory=True`, so the copy "
        "from pageable memory is synchronous"
    )
    triggers = (".to(", ".cuda(", ".type(", "to_device(", "move_to_cuda(")
    fixable = True
    docs = RuleDocs(
        what_it_does="Flags host-to-device copies of batches in the training step (`x.to(device)`, `x.cuda()`, "
        "`x.type(torch.cuda.FloatTensor)` or a `Tensor` alias of it, `x.pin_memory().to(device)`, batch helpers such "
        "as `move_to_device(batch, device)`) without `non_blocking=True`, and `non_blocking=True` copies in a file "
        "whose DataLoader does not pin memory.",
        why_slow="A blocking copy is queued behind every kernel already launched and the host waits for it to finish, "
        "so the CPU cannot prepare the next step while the GPU works. From pinned memory, `non_blocking=True` lets the "
        "copy overlap with compute; from pageable memory CUDA stages the copy synchronously whatever the flag says.",
        example="train_loader = DataLoader(dataset, batch_size=64, shuffle=True)\nfor x, y in train_loader:\n"
        "    x, y = x.to(device), y.to(device)\n    loss = F.cross_entropy(model(x), y)",
        use_instead="`DataLoader(..., pin_memory=True)` and `x.to(device, non_blocking=True)`.",
        fix_safety="Unsafe: the fix adds `non_blocking=True` to `.to()` / `.cuda()` / `.type()` (helpers get no fix: "
        "they may not take the argument). Same values whenever the source tensor is not written again before the copy completes; a "
        "pinned host buffer that the code refills in place right after the call (a hand-written prefetcher reusing one "
        "buffer) could be overwritten while the copy is still in flight. Without `pin_memory=True` the flag changes "
        "nothing, so pin the loader too.",
        false_positives=_fp("Copies in a branch gpulint cannot tell is CPU-only (a `device` variable that is the CPU). "
        "`.to(dtype)`, `.to(other_tensor)`, `.to(other_tensor.device)` in a module's `forward` (a move between "
        "devices of a split model, such as `labels.to(logits.device)`: the batch's copy from the host happens in the "
        "step) and moves of tensors already on the device are not flagged, nor are files "
        "that hand their loaders to `accelerator.prepare` / `fabric.setup_dataloaders` (batches arrive on the device)."),
    )
    valid = (
        _in_loop("z = x.to(torch.float16)"),
        ("import torch\n\n\nclass Head(torch.nn.Module):\n    def forward(self, hidden, labels):\n"
         "        logits = self.proj(hidden)\n        labels = labels.to(logits.device)\n"
         "        return torch.nn.functional.cross_entropy(logits, labels)\n"),
        _in_loop("w = y.to(device)"),
        ("import torch\n\n\ndef train(model, loader, optimizer, device):\n    device_type = \"cuda\"\n"
        "    for x, y in loader:\n        if device_type == \"cuda\":\n"
        "            x = x.pin_memory().to(device, non_blocking=True)\n        else:\n            x = x.to(device)\n"
        "        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n"),
        ("import torch\nfrom torch.utils.data import DataLoader\n\n\ndef train(model, dataset, optimizer, device):\n"
        "    loader = DataLoader(dataset, batch_size=4, pin_memory=True)\n    for x, y in loader:\n"
        "        x = x.to(device, non_blocking=True)\n        loss = model(x).sum()\n        loss.backward()\n"
        "        optimizer.step()\n"),
        _in_loop("z = x.type(torch.half)"),
    )
    invalid = (
        Invalid(
            "import torch\n\n\ndef train(model, loader, optimizer, device):\n    for x, y in loader:\n"
            "        x, y = x.to(device), y.to(device)\n        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
            fixed="import torch\n\n\ndef train(model, loader, optimizer, device):\n    for x, y in loader:\n"
            "        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
            count=2,
        ),
        Invalid(
            "import torch\n\n\ndef train(model, loader, optimizer, device):\n    for x, y in loader:\n"
            "        x = x.cuda()\n        y = y.cuda()\n        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
            fixed="import torch\n\n\ndef train(model, loader, optimizer, device):\n    for x, y in loader:\n"
            "        x = x.cuda(non_blocking=True)\n        y = y.cuda(non_blocking=True)\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
            count=2,
        ),
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\n\n\ndef train(model, dataset, optimizer, device):\n"
            "    loader = DataLoader(dataset, batch_size=4, shuffle=True)\n    for x, y in loader:\n"
            "        x = x.to(device, non_blocking=True)\n        y = y.to(device, non_blocking=True)\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y)\n        loss.backward()\n"
            "        optimizer.step()\n        optimizer.zero_grad()\n",
            count=2,
        ),
        Invalid(
            "import torch\n\nTensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor\n\n\n"
            "def train(model, loader, optimizer, device):\n    for x, y in loader:\n        x = x.type(Tensor)\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y.to(device, non_blocking=True))\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
            fixed="import torch\n\nTensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor\n\n\n"
            "def train(model, loader, optimizer, device):\n    for x, y in loader:\n        x = x.type(Tensor, non_blocking=True)\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y.to(device, non_blocking=True))\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
        ),
        Invalid(
            "import torch\n\n\ndef train(model, loader, optimizer, device):\n    for x, y in loader:\n"
            "        x = x.pin_memory().to(device)\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y.to(device, non_blocking=True))\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
            fixed="import torch\n\n\ndef train(model, loader, optimizer, device):\n    for x, y in loader:\n"
            "        x = x.pin_memory().to(device, non_blocking=True)\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y.to(device, non_blocking=True))\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
        ),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._pinned_loader = False
        self._unpinned_loader = False
        self._prepared = False  # accelerate / Fabric place the batches on the device themselves
        self._nonblocking: list[tuple[cst.Call, tuple[cst.CSTNode, ...]]] = []
        self._blocking: list[tuple[cst.Call, str, tuple[cst.CSTNode, ...]]] = []
        self._cuda_type_names: set[str] = set()  # names bound to `torch.cuda.FloatTensor` and friends

    def leave_Assign(self, node: cst.Assign) -> None:
        # `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor` (the classic GAN scripts' idiom)
        if self._is_cuda_type(node.value):
            for target in node.targets:
                self._cuda_type_names |= target_names(target.target)

    def _is_cuda_type(self, expr: cst.BaseExpression) -> bool:
        """`torch.cuda.FloatTensor`, `"torch.cuda.LongTensor"`, a name bound to one, or `a if c else b` with one."""
        if isinstance(expr, cst.IfExp):
            return self._is_cuda_type(expr.body) or self._is_cuda_type(expr.orelse)
        if isinstance(expr, cst.SimpleString):
            return bool(_CUDA_TENSOR_TYPE.match(expr.raw_value))
        if isinstance(expr, cst.Name) and expr.value in self._cuda_type_names:
            return True
        return bool(_CUDA_TENSOR_TYPE.match(self.context.resolve(expr) or ""))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        method = last_name(func)
        if isinstance(func, cst.Attribute) and (method == "setup_dataloaders" or method in ("prepare", "prepare_data_loader")
                                                and re.search(r"accelerator|fabric", last_name(func.value) or "", re.IGNORECASE)):
            self._prepared = True
            return
        if method == "DataLoader":
            pin = _keyword(node, "pin_memory")
            if any(arg.star == "**" for arg in node.args):
                self._pinned_loader = True  # `**kwargs` may set pin_memory: do not claim it is unpinned
            elif pin is None or _is_false(pin.value):
                self._unpinned_loader = True
            else:
                self._pinned_loader = True
            return
        if method in _MOVE_HELPERS and len(node.args) >= 2 and _keyword(node, "non_blocking") is None:
            if not self._on_cpu_branch():
                self._blocking.append((node, f"{method}(batch, device)", self.context.ancestors_snapshot()))
            return
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("to", "cuda", "type"):
            return
        if func.attr.value == "to" and not self._device_target(node):
            return
        if func.attr.value == "type" and not (node.args and node.args[0].keyword is None and self._is_cuda_type(node.args[0].value)):
            return
        pinned = _is_pinned_call(func.value)  # `x.pin_memory().to(device)`: pinned for nothing without non_blocking
        if (self._moves_device_value(func.value) and not pinned) or self._on_cpu_branch():
            return
        non_blocking = _keyword(node, "non_blocking")
        if non_blocking is not None and not _is_false(non_blocking.value):
            if not pinned:
                self._nonblocking.append((node, self.context.ancestors_snapshot()))
            return
        call = {"cuda": "x.cuda()", "to": "x.to(device)", "type": "x.type(torch.cuda.FloatTensor)"}[func.attr.value]
        if non_blocking is None:
            self._blocking.append((node, call, self.context.ancestors_snapshot()))

    def leave_Module(self, node: cst.Module) -> None:
        self._emit()
        super().leave_Module(node)

    def _emit(self) -> None:
        if self._prepared:
            return
        for call, text, ancestors in self._blocking:
            # Helpers may not take `non_blocking`: only `.to()` / `.cuda()` get the fix.
            fix = [] if last_name(call.func) in _MOVE_HELPERS else [Replace(call, _with_non_blocking(call))]
            self.report_at(call, self.message.format(call=text), ancestors, fix=fix, unsafe_fix=True)
        if self._unpinned_loader and not self._pinned_loader:
            for call, ancestors in self._nonblocking:
                self.report_at(call, self.message_unpinned, ancestors)

    def _device_target(self, call: cst.Call) -> bool:
        """`.to(device)`, `.to("cuda")`, `.to(local_rank)`, `.to(device=...)`: a move to an accelerator."""
        if _cpu_target(call):
            return False
        keyword = _keyword(call, "device")
        if keyword is not None:
            return not self._to_other_tensors_device(dotted_name(keyword.value) or "")
        if not call.args or call.args[0].keyword is not None:
            return False
        target = call.args[0].value
        if isinstance(target, cst.SimpleString):
            return target.raw_value.split(":")[0] in ("cuda", "xpu", "mps")
        if isinstance(target, cst.Integer):
            return True
        name = dotted_name(target.func) if isinstance(target, cst.Call) else dotted_name(target)  # `dist_util.dev()`
        if name is None or "dtype" in name or re.search(r"accelerator|fabric", name):
            return False  # accelerate / Fabric move batches themselves; `x.to(accelerator.device)` is a no-op
        if self._to_other_tensors_device(name):
            return False
        return bool(_DEVICE_WORDS.search(name.rsplit(".", 1)[-1]))

    def _to_other_tensors_device(self, target: str) -> bool:
        """`labels.to(logits.device)` in a module's forward: a move between the devices of a split model (a no-op
        on one device), not the copy of a batch from the host, which the training step makes."""
        owner, _, attribute = target.rpartition(".")
        function = self.context.enclosing_function()
        return (
            attribute == "device" and "." not in owner and owner not in ("self", "cls", "args", "")
            and not _MODULE_NAME.search(owner) and function is not None and function.name.value == "forward"
        )

    def _moves_device_value(self, receiver: cst.BaseExpression) -> bool:
        """Already on the device (or a gradient), a module, or a CPU tensor built in the step (GPL5xx's `device=`
        finding)."""
        if self.context.location_of(receiver) == "device" or _mentions_grad(receiver) or self._built_by_torch(receiver):
            return True
        return bool(_MODULE_NAME.search(last_name(receiver) or ""))

    def _built_by_torch(self, expr: cst.BaseExpression) -> bool:
        """`torch.arange(n) + offset`, `torch.ones(k).float()`: a tensor made in the step, not a batch."""
        if isinstance(expr, cst.BinaryOperation):
            return self._built_by_torch(expr.left) or self._built_by_torch(expr.right)
        if isinstance(expr, cst.Call):
            if (self.context.resolve(expr.func) or "").startswith("torch."):
                return True
            if isinstance(expr.func, cst.Attribute):
                return self._built_by_torch(expr.func.value)
        return False

    def _on_cpu_branch(self) -> bool:
        """Inside the `else` of `if device_type == "cuda":` (or the body of `if device == "cpu":`)."""
        chain = self.context.ancestors
        for index in range(len(chain) - 2, -1, -1):
            node, child = chain[index], chain[index + 1]
            if isinstance(node, cst.FunctionDef):
                return False
            if isinstance(node, cst.If):
                compared = _compared_device_literal(node.test)
                if compared == "cuda" and child is node.orelse or compared == "cpu" and child is node.body:
                    return True
        return False


def _mentions_grad(expr: cst.BaseExpression) -> bool:
    """`p.grad.detach().abs().max()`: gradients are where their parameters are."""
    while True:
        if isinstance(expr, cst.Attribute):
            if expr.attr.value == "grad":
                return True
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        elif isinstance(expr, cst.Subscript):
            expr = expr.value
        else:
            return False


def _compared_device_literal(test: cst.BaseExpression) -> str | None:
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if isinstance(target.operator, cst.Equal) and isinstance(target.comparator, cst.SimpleString):
            value = target.comparator.raw_value.split(":")[0]
            return value if value in ("cuda", "cpu") else None
    return None


def _is_pinned_call(receiver: cst.BaseExpression) -> bool:
    return isinstance(receiver, cst.Call) and last_name(receiver.func) == "pin_memory"


def _with_non_blocking(call: cst.Call) -> cst.Call:
    args = list(call.args)
    if args:
        last = args[-1]
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(cst.Arg(keyword=cst.Name("non_blocking"), value=cst.Name("True"),
                        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
    return call.with_changes(args=args)


# ================================================================================================ GPL412
_DATA_CONSTRUCTORS = frozenset(
    {
        "torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor", "torch.LongTensor", "torch.IntTensor",
        "torch.FloatTensor", "torch.BoolTensor", "torch.ByteTensor",
    }
)


class TensorFromHostDataInStep(_SyncRule):
    code = "GPL412"
    name = "tensor-from-host-data-in-step"
    message = "`{func}(..., device=...)` from host data is a synchronous pageable copy every step"
    message_moved = "`{func}(host data)` then moved to the device: a synchronous pageable copy every step"
    triggers = ("device=", ".to(", ".cuda(")
    docs = RuleDocs(
        what_it_does="Flags `torch.tensor(data, device=...)` and `torch.as_tensor(data, device=...)` of host data "
        "(Python lists and numbers, numpy arrays), and host data wrapped then moved "
        "(`torch.tensor(ids).to(device)`, `torch.LongTensor(lengths).cuda()`), in code that runs every step, ungated.",
        why_slow="The data is copied from pageable host memory, which CUDA does synchronously: the host waits until "
        "the copy, queued behind all earlier kernels, is done. It is a sync hidden in a constructor.",
        example="for x, y in loader:\n    weights = torch.tensor(class_weights, device=\"cuda\")\n"
        "    loss = F.cross_entropy(model(x), y, weight=weights)",
        use_instead="Build constants once before the loop; for per-step host data use "
        "`torch.tensor(data).pin_memory().to(device, non_blocking=True)`, or create the values on the device.",
        fix_safety="No fix: the remedy (hoist a constant out of the loop, or pin and copy asynchronously) depends on "
        "whether the data changes between steps.",
        false_positives=_fp("A list that holds device tensors is GPL2xx's finding (`torch.tensor([...])` of step values), "
        "not this rule's."),
    )
    valid = (
        ("import torch\n\n\ndef train(model, loader, optimizer, device):\n"
        "    weights = torch.tensor([1.0, 2.0, 1.0, 1.0], device=device)\n    for x, y in loader:\n"
        "        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n"
        "        loss = torch.nn.functional.cross_entropy(model(x), y, weight=weights)\n        loss.backward()\n"
        "        optimizer.step()\n"),
        _in_loop("offsets = torch.tensor([0, 1, 2])"),
        _in_loop("offsets = torch.arange(4, device=device)"),
    )
    invalid = (
        Invalid(_in_loop("weights = torch.tensor([1.0, 2.0, 1.0, 1.0], device=device)")),
        Invalid(_in_loop("sizes = [len(x), len(y)]\nt = torch.tensor(sizes).to(device)")),
        Invalid(_in_loop("sizes = x.shape\nt = torch.as_tensor(sizes, device=device)")),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda") and isinstance(func.value, cst.Call):
            self._check_moved(node, func.value)
            return
        resolved = self.context.resolve(func)
        if resolved not in ("torch.tensor", "torch.as_tensor") or not node.args or node.args[0].keyword is not None:
            return
        device = _keyword(node, "device")
        if device is None or _is_cpu_string(device.value):
            return
        data = node.args[0].value
        if not self.context.is_host_value(data) or self.in_per_tensor_loop():
            return
        self.report(node, self.message.format(func=resolved))

    def _check_moved(self, move: cst.Call, made: cst.Call) -> None:
        """`torch.tensor(host_list).to(device)`, `torch.LongTensor(lengths).cuda()`: host data, then a blocking copy
        (factories without data, `torch.zeros(n).cuda()`, are GPL5xx's: create them on the device)."""
        resolved = self.context.resolve(made.func) or ""
        if resolved not in _DATA_CONSTRUCTORS or not made.args or made.args[0].keyword is not None:
            return
        if _keyword(move, "non_blocking") is not None or (move.func.attr.value == "to" and _cpu_target(move)):
            return
        if self.tensors.is_tensor(made.args[0].value):
            return  # a device tensor wrapped again is GPL2xx's finding (torch.tensor of step values)
        self.report(move, self.message_moved.format(func=resolved))


def _is_cpu_string(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.SimpleString) and expr.raw_value.split(":")[0] == "cpu"


# ================================================================================================ GPL420
_COLLECTIVES = frozenset(
    {
        "all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "broadcast",
        "reduce", "gather", "scatter", "all_to_all", "all_to_all_single",
    }
)
# Project helpers that wrap a collective (`all_reduce_mean(x)` in MAE, `reduce_tensor` in timm, `reduce_dict`).
_WRAPPER_NAME = re.compile(
    r"all_?reduce|all_?gather|^reduce_(tensor|mean|sum|dict|value|loss|losses|scalar)|^sync_tensor", re.IGNORECASE
)
# `accelerator.gather(loss)` / `fabric.all_reduce(x)`: Accelerate's and Fabric's collectives.
_ACCELERATOR_COLLECTIVES = frozenset({"gather", "reduce", "all_reduce", "all_gather", "broadcast"})
_ACCELERATOR = re.compile(r"accelerator|fabric", re.IGNORECASE)
_HOST_READ_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})
_LOOKAHEAD_STATEMENTS = 12
LOOP_NODES = (cst.For, cst.While)
_METADATA = frozenset({"shape", "ndim", "dtype", "device", "size", "dim", "numel", "is_cuda"})


class BlockingCollectiveInStep(_SyncRule):
    code = "GPL420"
    name = "blocking-collective-in-step"
    message = "`{name}` without `async_op=True` is read on the host right after: every rank waits for the slowest, every step"
    message_loop = "`{name}` per tensor in a Python loop: one blocking collective launch per tensor, every step"
    message_host = "`{name}` of a host value builds a device tensor, reduces it and reads it back: a sync every step"
    triggers = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "gather", "scatter", "all_to_all")
    docs = RuleDocs(
        what_it_does="Flags collectives (`all_reduce`, `all_gather`, `broadcast`, ...) in the training step, ungated, "
        "whose result is read on the host later in the same step (`.item()`, `.tolist()`, `float()`, `.cpu()`, an "
        "f-string; up to 12 statements on, following values computed from it, reads under a logging gate excepted), "
        "or tested in an `if` / `while` / `assert`, that run once per tensor in a Python loop, and project helpers "
        "(`all_reduce_mean(loss_value)`, `reduce_tensor(loss).item()`, `reduce_dict(losses)`) and Accelerate's "
        "`accelerator.gather(loss)` / `accelerator.reduce(x)` called on host values (a number, or a dict of numbers "
        "such as `{\"loss\": loss.item()}`) or read on the host the same way.",
        why_slow="The collective is queued behind the step's kernels and waits for every rank; reading its result on "
        "the host turns that into a host stall on the slowest rank, every step. Per-tensor collectives launch N small "
        "NCCL calls where one flattened (bucketed) call would do, each paying latency rather than bandwidth.",
        example="for x, y in loader:\n    loss = F.cross_entropy(model(x), y)\n    loss.backward()\n"
        "    optimizer.step()\n    dist.all_reduce(loss)\n    print(loss.item() / world)",
        use_instead="Keep the reduced value on the device and read it every N steps (or reduce a running sum only at "
        "the log interval); reduce many tensors in one call (`torch._utils._flatten_dense_tensors`, or stack them); "
        "pass `async_op=True` and `wait()` only where the value is needed.",
        fix_safety="No fix: moving the host read to a logging interval or batching tensors changes the program's "
        "structure.",
        false_positives=_fp("A blocking collective whose result only feeds device computation is fine and is not flagged. "
        "Helpers are recognised by name only (names containing `all_reduce` / `all_gather`, `reduce_tensor`, "
        "`reduce_sum`, `reduce_mean`, `reduce_dict`), and a read in the caller of a function that returns the "
        "reduced tensor is not seen."),
    )
    valid = (
        _in_loop("dist.all_reduce(loss)\nrunning = loss.detach() / 2", header="import torch.distributed as dist"),
        _in_loop("if step % 100 == 0:\n    dist.all_reduce(loss)\n    print(loss.item())",
                 header="import torch.distributed as dist"),
        _in_loop("work = dist.all_reduce(loss, async_op=True)\nwork.wait()", header="import torch.distributed as dist"),
        ("import torch\nimport torch.distributed as dist\n\n\ndef train(model, loader, optimizer, device):\n"
        "    total = torch.zeros(1, device=device)\n    for x, y in loader:\n        loss = model(x).sum()\n"
        "        loss.backward()\n        optimizer.step()\n        total += loss.detach()\n"
        "    dist.all_reduce(total)\n    print(total.item())\n"),
        _in_loop("stats = {\"loss\": loss.detach()}\nstats = all_reduce_dict(stats)",
                 header="def all_reduce_dict(d):\n    return d"),
    )
    invalid = (
        Invalid(_in_loop("dist.all_reduce(loss)\nloss_value = loss.item()", header="import torch.distributed as dist")),
        Invalid(_in_loop("for p in model.parameters():\n    dist.all_reduce(p.data)",
                         header="import torch.distributed as dist")),
        Invalid(_in_loop("loss_value = loss.item()\nreduced = all_reduce_mean(loss_value)",
                         header="def all_reduce_mean(x):\n    return x")),
        Invalid(_in_loop("logs = {\"loss\": loss.item(), \"step\": step}\nlogs = all_reduce_dict(logs)",
                         header="def all_reduce_dict(d):\n    return d")),
        Invalid(_in_loop("avg = accelerator.gather(loss.detach()).mean()\nprint(avg.item())",
                         header="class Accelerator:\n    def gather(self, t):\n        return t\n\n\n"
                         "accelerator = Accelerator()")),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._host_dicts: set[tuple[int, str]] = set()  # (function, name) bound to a dict of Python numbers

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        method = last_name(func)
        if method is None:
            return
        resolved = self.context.resolve(func) or ""
        is_collective = method in _COLLECTIVES and (
            resolved.startswith("torch.distributed.") or (dotted_name(func) or "").startswith(("dist.", "torch.distributed."))
        )
        if is_collective:
            async_op = _keyword(node, "async_op")
            if async_op is not None and not _is_false(async_op.value):
                return
            self._check_collective(node, resolved or method)
        elif _WRAPPER_NAME.search(method) and not resolved.startswith("torch."):
            self._check_wrapper(node, method)
        elif method in _ACCELERATOR_COLLECTIVES and isinstance(func, cst.Attribute) and (
            _ACCELERATOR.search(last_name(func.value) or "")
        ):
            self._check_wrapper(node, f"{last_name(func.value)}.{method}")
        elif method in _ACCELERATOR_COLLECTIVES and not resolved.startswith("torch.") and node.args and (
            self._host_dict(node.args[0].value)
        ):
            self._check_wrapper(node, dotted_name(func) or method)  # `comm.gather(metrics_dict)` of Python floats

    def leave_Assign(self, node: cst.Assign) -> None:
        names = {n for target in node.targets for n in target_names(target.target)}
        keys = {(id(self.context.enclosing_function()), name) for name in names}
        if self._is_host_dict_literal(node.value):
            self._host_dicts |= keys
        else:
            self._host_dicts -= keys

    def _is_host_dict_literal(self, value: cst.BaseExpression) -> bool:
        """`{"loss": loss.item(), "lr": lr}`, `{k: v.item() for k, v in losses.items()}`: Python numbers, no tensor."""
        if isinstance(value, cst.DictComp):
            return self.context.is_host_value(value.value)
        if not isinstance(value, cst.Dict):
            return False
        values = [e.value for e in value.elements if isinstance(e, cst.DictElement)]
        return any(self.context.is_host_value(v) for v in values) and not any(self.tensors.is_tensor(v) for v in values)

    def _host_dict(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Name):
            return (id(self.context.enclosing_function()), expr.value) in self._host_dicts
        return self._is_host_dict_literal(expr)

    def _check_collective(self, node: cst.Call, name: str) -> None:
        positional = [a.value for a in node.args if a.keyword is None]
        keyword = _keyword(node, "tensor") or _keyword(node, "tensor_list") or _keyword(node, "output_tensor")
        target = keyword.value if keyword is not None else (positional[0] if positional else None)
        if target is None:
            return
        loop = self.context.innermost_loop()
        if isinstance(loop, cst.For) and _mentions_any(target, target_names(loop.target)):
            self.report(node, self.message_loop.format(name=name))
        elif (root := root_name(target)) is not None and self._read_on_host_after({root}):
            self.report(node, self.message.format(name=name))

    def _check_wrapper(self, node: cst.Call, name: str) -> None:
        if not node.args:
            return
        argument = node.args[0].value
        loop = self.context.innermost_loop()
        if isinstance(loop, cst.For) and _mentions_any(argument, target_names(loop.target)) and (
            _iterates_tensors_of_model(loop.iter)
        ):
            self.report(node, self.message_loop.format(name=name))
        elif self._read_in_chain():
            self.report(node, self.message.format(name=name))  # `reduce_tensor(loss).item()`
        elif self.context.is_host_value(argument) or self._host_dict(argument):
            self.report(node, self.message_host.format(name=name))
        else:
            results: set[str] = set()
            assign = self._assignment_of_result()
            if assign is not None:
                for target in assign.targets:
                    results |= target_names(target.target)
            if results and self._read_on_host_after(results):
                self.report(node, self.message.format(name=name))

    def _read_in_chain(self) -> bool:
        """`reduce_tensor(loss).item()`, `accelerator.gather(x).sum().item()`: read on the host in the same expression."""
        chain = self.context.ancestors
        index = len(chain) - 2
        while index > 0 and isinstance(chain[index], cst.Attribute) and isinstance(chain[index - 1], cst.Call):
            if chain[index].attr.value in _HOST_READ_METHODS:
                return True
            index -= 2
        return False

    def _assignment_of_result(self) -> cst.Assign | None:
        """The `x = ...` that binds the visited call's result, through method calls on it
        (`avg = accelerator.gather(loss).mean()`)."""
        chain = self.context.ancestors
        index = len(chain) - 2
        while index > 0 and isinstance(chain[index], cst.Attribute) and isinstance(chain[index - 1], cst.Call):
            index -= 2
        return chain[index] if index >= 0 and isinstance(chain[index], cst.Assign) else None

    def _read_on_host_after(self, names: set[str]) -> bool:
        """Is one of `names` (or a value computed from them) read on the host later in this step?

        Looks at the statements after the collective's, then after each enclosing block's, up to the end of the
        innermost loop body (or function), at most _LOOKAHEAD_STATEMENTS of them; reads under a step gate do not count.
        """
        finder = _HostReadFinder(set(names))
        budget = _LOOKAHEAD_STATEMENTS
        chain = self.context.ancestors
        for index in range(len(chain) - 2, 0, -1):
            block, statement = chain[index], chain[index + 1]
            if isinstance(block, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if not isinstance(block, (cst.IndentedBlock, cst.Module)):
                continue
            body = list(block.body)
            position = next((i for i, s in enumerate(body) if s is statement), None)
            if position is None:
                continue
            for sibling in body[position + 1 :]:
                if budget == 0:
                    return False
                budget -= 1
                if isinstance(sibling, cst.If) and self.context.is_gate(sibling.test):
                    continue  # a read under a logging gate is that gate's business
                finder.walk(sibling)
                if finder.found:
                    return True
            if isinstance(chain[index - 1], LOOP_NODES + (cst.FunctionDef,)):
                return False  # the end of the step (or of the function)
        return False


class _HostReadFinder(SyntaxVisitor):
    """Finds a host read of one of `names`: `x.item()`, `x.tolist()`, `x.cpu()`, `float(x)` (also of `x[...]`,
    `x.detach()`), following assignments computed from them and comprehensions over them."""

    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.names = names
        self.found = False

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _HOST_READ_METHODS:
            read = func.value
        elif isinstance(func, cst.Name) and func.value in ("float", "int", "bool") and node.args:
            read = node.args[0].value
        else:
            return True
        if _mentions_names(read, self.names):
            self.found = True
        return not self.found

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> bool:
        if root_name(node.expression) in self.names and not isinstance(node.expression, cst.Call):
            self.found = True  # f"{loss}" formats the tensor: a host read
        return not self.found

    def _comprehension(self, node: cst.ListComp | cst.GeneratorExp | cst.SetComp | cst.DictComp) -> bool:
        if _mentions_names(node.for_in.iter, self.names):
            self.names |= target_names(node.for_in.target)
        return not self.found

    visit_ListComp = visit_GeneratorExp = visit_SetComp = visit_DictComp = _comprehension

    def leave_Assign(self, node: cst.Assign) -> None:
        if _mentions_names(node.value, self.names):
            for target in node.targets:
                self.names |= target_names(target.target)

    def visit_For(self, node: cst.For) -> bool:
        if _mentions_names(node.iter, self.names):  # `for name, value in reduced.items(): value.item()`
            self.names |= target_names(node.target)
        return not self.found

    def _test(self, test: cst.BaseExpression) -> None:
        """`if grad_norm > limit:` / `while not done:` on a reduced tensor: Python asks the tensor for a bool."""
        if _bool_of_names(test, self.names):
            self.found = True

    def visit_If(self, node: cst.If) -> bool:
        self._test(node.test)
        return not self.found

    def visit_While(self, node: cst.While) -> bool:
        self._test(node.test)
        return not self.found

    def visit_Assert(self, node: cst.Assert) -> bool:
        self._test(node.test)
        return not self.found

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


def _bool_of_names(test: cst.BaseExpression, names: set[str]) -> bool:
    """Does a condition turn one of `names` into a Python bool: `x`, `not x`, `x > 1`, `a or x < b` (not `x is None`,
    `k in x`, `len(x) > 0`, `x.shape[0] > 1`)?"""
    if isinstance(test, cst.BooleanOperation):
        return _bool_of_names(test.left, names) or _bool_of_names(test.right, names)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _bool_of_names(test.expression, names)
    if isinstance(test, cst.Comparison):
        if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in test.comparisons):
            return False
        return any(_is_value_of(operand, names) for operand in (test.left, *(c.comparator for c in test.comparisons)))
    return _is_value_of(test, names)


def _is_value_of(expr: cst.BaseExpression, names: set[str]) -> bool:
    """`x`, `x[0]`, `x.max()`, `x / n`: a value computed from one of `names` (not its shape or length)."""
    if isinstance(expr, cst.BinaryOperation):
        return _is_value_of(expr.left, names) or _is_value_of(expr.right, names)
    if isinstance(expr, cst.Attribute) and expr.attr.value in _METADATA:
        return False
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _METADATA:
        return False
    return isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) and root_name(expr) in names


class _NameCollector(SyntaxVisitor):
    """The names an expression reads values of: not those it only takes the shape or length of (`x.shape[0]`,
    `x.size(0)`, `len(x)` are host metadata, free to read)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return node.attr.value not in _METADATA

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _METADATA:
            return False
        return not (isinstance(func, cst.Name) and func.value == "len")


def _mentions_names(expr: cst.CSTNode, names: set[str]) -> bool:
    collector = _NameCollector()
    collector.walk(expr)
    return bool(collector.names & names)






def _mentions_any(expr: cst.BaseExpression, names: set[str]) -> bool:
    if isinstance(expr, (cst.List, cst.Tuple)):
        return any(_mentions_any(e.value, names) for e in expr.elements)
    return root_name(expr) in names


# ================================================================================================ GPL421
_BLOCKING_DIST = frozenset(
    {
        "barrier", "monitored_barrier", "all_gather_object", "broadcast_object_list", "gather_object",
        "scatter_object_list",
    }
)


class BarrierOrObjectCollectiveInStep(_SyncRule):
    code = "GPL421"
    name = "barrier-or-object-collective-in-step"
    message = "`{name}()` in the training step stalls every rank on the host until all ranks arrive, every step"
    triggers = ("barrier", "_object", "wait_for_everyone")
    docs = RuleDocs(
        what_it_does="Flags `dist.barrier()`, `monitored_barrier()`, `accelerator.wait_for_everyone()` and object "
        "collectives (`all_gather_object`, `broadcast_object_list`, `gather_object`, `scatter_object_list`) in code "
        "that runs every training step, ungated.",
        why_slow="A barrier blocks the host until every rank reaches it, so the CPU stops queueing work and every rank "
        "runs at the pace of the slowest one. Object collectives pickle Python objects, copy them to the device, "
        "run the collective, copy back and unpickle: several host-device syncs per call.",
        example="for x, y in loader:\n    loss = F.cross_entropy(model(x), y)\n    loss.backward()\n"
        "    optimizer.step()\n    dist.barrier()",
        use_instead="Synchronise ranks only where it is needed (before saving a checkpoint, at epoch end); exchange "
        "tensors with tensor collectives instead of Python objects.",
        fix_safety="No fix: whether ranks must agree every step is a property of the algorithm.",
        false_positives=_fp("Code that must agree on a Python object every step (a dynamic schedule): gate it or add "
        "`# noqa: GPL421`."),
    )
    valid = (
        _in_loop("if step % 1000 == 0:\n    dist.barrier()", header="import torch.distributed as dist"),
        ("import torch\nimport torch.distributed as dist\n\n\ndef train(model, loader, optimizer, device):\n"
        "    for x, y in loader:\n        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n"
        "    dist.barrier()\n"),
    )
    invalid = (
        Invalid(_in_loop("dist.barrier()", header="import torch.distributed as dist")),
        Invalid(_in_loop("stats = [None, None]\ndist.all_gather_object(stats, {\"step\": step})",
                         header="import torch.distributed as dist")),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        method = last_name(func)
        if method == "wait_for_everyone" and isinstance(func, cst.Attribute):
            self.report(node, self.message.format(name="accelerator.wait_for_everyone"))
            return
        if method not in _BLOCKING_DIST:
            return
        resolved = self.context.resolve(func) or ""
        if resolved.startswith("torch.distributed.") or (dotted_name(func) or "").startswith("dist."):
            self.report(node, self.message.format(name=resolved or method))


# ================================================================================================ GPL422
_OPTIMIZER = re.compile(r"optim|opt$|^opt|scaler", re.IGNORECASE)
_DDP_NAMES = frozenset({"DistributedDataParallel", "DDP"})
_NO_SYNC_NAMES = frozenset({"no_sync", "require_backward_grad_sync", "accumulate", "set_requires_gradient_sync"})


class DdpAccumulationWithoutNoSync(_SyncRule):
    code = "GPL422"
    name = "ddp-accumulation-without-no-sync"
    message = (
        "gradient accumulation under DDP without `no_sync()`: this `backward()` all-reduces gradients on every "
        "micro-step, not once per optimizer step"
    )
    triggers = ("DistributedDataParallel", "DDP")
    docs = RuleDocs(
        what_it_does="Flags `backward()` in a step loop that steps the optimizer only every N micro-batches "
        "(`if (i + 1) % accum_steps == 0: optimizer.step()`) in a file that wraps the model in "
        "`DistributedDataParallel` and never uses `no_sync()` / `require_backward_grad_sync` / `accelerator.accumulate`.",
        why_slow="DDP all-reduces every gradient bucket during each `backward()`. With N micro-batches per optimizer "
        "step, N-1 of those all-reduces are wasted communication (and the ranks wait on each other N times per step).",
        example="model = DDP(model)\nfor i, (x, y) in enumerate(loader):\n    loss = F.cross_entropy(model(x), y) / 4\n"
        "    loss.backward()\n    if (i + 1) % 4 == 0:\n        optimizer.step()\n        optimizer.zero_grad()",
        use_instead="`ctx = model.no_sync() if (i + 1) % accum != 0 else contextlib.nullcontext()` around "
        "forward+backward, or set `model.require_backward_grad_sync` on the last micro-step; "
        "with Accelerate, `with accelerator.accumulate(model):`.",
        fix_safety="No fix: wrapping forward and backward in `no_sync()` needs the accumulation boundary, which the "
        "author knows best.",
        false_positives=_fp("Models wrapped in DDP in another file are not seen (no finding: gpulint misses, never "
        "guesses); FSDP has its own `no_sync()` and is not checked."),
    )
    valid = (
        ("import contextlib\nimport torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n\n"
        "def train(model, loader, optimizer, device, accum=2):\n    model = DDP(model)\n"
        "    for i, (x, y) in enumerate(loader):\n        last = (i + 1) % accum == 0\n"
        "        with model.no_sync() if not last else contextlib.nullcontext():\n"
        "            loss = model(x).sum()\n            loss.backward()\n        if last:\n"
        "            optimizer.step()\n            optimizer.zero_grad()\n"),
        ("import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n\n"
        "def train(model, loader, optimizer, device):\n    model = DDP(model)\n    for x, y in loader:\n"
        "        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n"),
    )
    invalid = (
        Invalid(
            "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n\n"
            "def train(model, loader, optimizer, device, accum=2):\n    model = DDP(model)\n"
            "    for i, (x, y) in enumerate(loader):\n        loss = model(x).sum() / accum\n        loss.backward()\n"
            "        if (i + 1) % accum == 0:\n            optimizer.step()\n            optimizer.zero_grad()\n"
        ),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._uses_ddp = False
        self._uses_no_sync = False
        self._accumulating_loops: set[int] = set()
        self._backwards: list[tuple[cst.Call, int, tuple[cst.CSTNode, ...]]] = []

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in _DDP_NAMES:
            self._uses_ddp = True
        elif node.value in _NO_SYNC_NAMES:
            self._uses_no_sync = True

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        loop = self.context.innermost_loop()
        if loop is None:
            return
        if func.attr.value == "backward":
            self._backwards.append((node, id(loop), self.context.ancestors_snapshot()))
        elif func.attr.value == "step" and _OPTIMIZER.search(last_name(func.value) or "") and (
            self._under_accumulation_gate(loop)
        ):
            self._accumulating_loops.add(id(loop))

    def _under_accumulation_gate(self, loop: cst.CSTNode) -> bool:
        for node in reversed(self.context.ancestors[:-1]):
            if node is loop:
                return False
            if isinstance(node, cst.If) and _is_accumulation_test(node.test):
                return True
        return False

    def leave_Module(self, node: cst.Module) -> None:
        self._emit()
        super().leave_Module(node)

    def _emit(self) -> None:
        if not self._uses_ddp or self._uses_no_sync:
            return
        for call, loop_id, ancestors in self._backwards:
            if loop_id in self._accumulating_loops:
                self.report_at(call, self.message, ancestors)


def _is_accumulation_test(test: cst.BaseExpression) -> bool:
    """`(i + 1) % accum == 0`, `step % grad_accum_steps == 0`, `should_step`, `is_accumulation_boundary`."""
    for node in descendants(test):
        kind = type(node)
        if kind is cst.BinaryOperation and type(node.operator) is cst.Modulo:
            return True
        if kind is cst.Name and ("accum" in node.value.lower() or node.value.lower() in ("should_step", "sync_gradients")):
            return True
    return False
