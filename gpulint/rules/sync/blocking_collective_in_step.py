"""GPL420 blocking-collective-in-step."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.context import HOST_METHODS
from gpulint.linter.names import dotted_name, last_name, root_name, target_names
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.linter.syntax import SyntaxVisitor
from gpulint.project.vocab import ACCELERATE_OR_FABRIC
from gpulint.rules.common import is_false, is_true, keyword_arg
from gpulint.rules.examples import training_script
from gpulint.rules.sync.helpers import SyncRule, iterates_tensors_of_model, known_false_positives

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
# Helpers that gather Python objects (`all_gather_list(sample_size)`): they pickle into a device buffer, gather and
# unpickle on the host, whatever they are given.
_PICKLING_WRAPPER = re.compile(r"gather_(list|object)|broadcast_object", re.IGNORECASE)
# `accelerator.gather(loss)` / `fabric.all_reduce(x)`: Accelerate's and Fabric's collectives.
_ACCELERATOR_COLLECTIVES = frozenset({"gather", "reduce", "all_reduce", "all_gather", "broadcast"})
_LOOKAHEAD_STATEMENTS = 12
LOOP_NODES = (cst.For, cst.While)
_METADATA = frozenset({"shape", "ndim", "dtype", "device", "size", "dim", "numel", "is_cuda"})


class BlockingCollectiveInStep(SyncRule):
    code = "GPL420"
    name = "blocking-collective-in-step"
    message = "`{name}` without `async_op=True` is read on the host right after: every rank waits for the slowest, every step"
    message_loop = "`{name}` per tensor in a Python loop: one blocking collective launch per tensor, every step"
    message_host = "`{name}` of a host value builds a device tensor, reduces it and reads it back: a sync every step"
    triggers = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "gather", "scatter", "all_to_all")
    docs = RuleDocs(
        what_it_does="Flags collectives (`all_reduce`, `all_gather`, `broadcast`, ...) in the training step, ungated, "
        "whose result is read on the host later in the same step (`.item()`, `.tolist()`, `float()`, `.cpu()`, an "
        "f-string, `wandb.log` / `accelerator.log` of it or of a dict built from it, Lightning's "
        "`self.log(..., prog_bar=True)`; up to 12 statements on, following values computed from it, reads under a logging gate excepted), "
        "or tested in an `if` / `while` / `assert`, that run once per tensor in a Python loop, and project helpers "
        "(`all_reduce_mean(loss_value)`, `reduce_tensor(loss).item()`, `reduce_dict(losses)`) and Accelerate's "
        "`accelerator.gather(loss)` / `accelerator.reduce(x)` called on host values (a number, or a dict of numbers "
        "such as `{\"loss\": loss.item()}`) or read on the host the same way, and helpers that gather Python objects "
        "(`all_gather_list(sample_size)`, which pickle whatever they are given).",
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
        false_positives=known_false_positives("A blocking collective whose result only feeds device computation is fine and is not flagged. "
        "Helpers are recognised by name only (names containing `all_reduce` / `all_gather`, `reduce_tensor`, "
        "`reduce_sum`, `reduce_mean`, `reduce_dict`), and a read in the caller of a function that returns the "
        "reduced tensor is not seen."),
    )
    valid = (
        # Show-o: gathered for logging every step, read on the host only under the logging gate, inside another `if`
        training_script("avg = accelerator.gather(loss.detach()).mean()\nif sync:\n"
                        "    if (step + 1) % 50 == 0:\n        print(avg.item())",
                        header="sync = True\n\n\nclass Accelerator:\n    def gather(self, t):\n        return t\n\n\n"
                        "accelerator = Accelerator()"),
        ("import torch\n\n\nclass Loss(torch.nn.Module):\n    def forward(self, outputs, targets):\n"
         "        losses = {\"loss_mask\": 0, \"loss_dice\": 0}\n        losses[\"core\"] = self.reduce_loss(losses)\n"
         "        return losses\n\n    def reduce_loss(self, losses):\n        return sum(losses.values())\n"),
        training_script("dist.all_reduce(loss)\n"
                        "running = loss.detach() / 2", header="import torch.distributed as dist"),
        training_script("if step % 100 == 0:\n    dist.all_reduce(loss)\n    print(loss.item())",
                 header="import torch.distributed as dist"),
        training_script("work = dist.all_reduce(loss, async_op=True)\n"
                        "work.wait()", header="import torch.distributed as dist"),
        ("import torch\nimport torch.distributed as dist\n\n\ndef train(model, loader, optimizer, device):\n"
        "    total = torch.zeros(1, device=device)\n    for x, y in loader:\n        loss = model(x).sum()\n"
        "        loss.backward()\n        optimizer.step()\n        total += loss.detach()\n"
        "    dist.all_reduce(total)\n    print(total.item())\n"),
        training_script("stats = {\"loss\": loss.detach()}\nstats = all_reduce_dict(stats)",
                 header="def all_reduce_dict(d):\n    return d"),
    )
    invalid = (
        Invalid(training_script("dist.all_reduce(loss)\n"
                                "loss_value = loss.item()", header="import torch.distributed as dist")),
        Invalid(training_script("for p in model.parameters():\n    dist.all_reduce(p.data)",
                         header="import torch.distributed as dist")),
        Invalid(training_script("loss_value = loss.item()\nreduced = all_reduce_mean(loss_value)",
                         header="def all_reduce_mean(x):\n    return x")),
        Invalid(training_script("logs = {\"loss\": loss.item(), \"step\": step}\nlogs = all_reduce_dict(logs)",
                         header="def all_reduce_dict(d):\n    return d")),
        Invalid(training_script("count = optimizer.param_groups[0].get(\"count\", 1)\n"
                                "sizes = sum(all_gather_list(count, device))",
                                header="def all_gather_list(data, device):\n"
                                "    return torch.tensor([data], device=device).tolist()")),
        Invalid(training_script("mean_loss = loss.detach()\ndist.broadcast(mean_loss, 0)\n"
                                "logs = dict(loss=mean_loss, step=step)\naccelerator.log(logs)",
                                header="import torch.distributed as dist\n\n\nclass Accelerator:\n"
                                "    def log(self, values, step=None):\n        pass\n\n\naccelerator = Accelerator()")),
        Invalid(training_script("avg = accelerator.gather(loss.detach()).mean()\nprint(avg.item())",
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
            async_op = keyword_arg(node, "async_op")
            if async_op is not None and not is_false(async_op.value):
                return
            self._check_collective(node, resolved or method)
        elif _WRAPPER_NAME.search(method) and not resolved.startswith("torch.") and not _self_method(func):
            self._check_wrapper(node, method)  # a method of the class itself (`self.reduce_loss`) sums, it does not gather
        elif method in _ACCELERATOR_COLLECTIVES and isinstance(func, cst.Attribute) and (
            ACCELERATE_OR_FABRIC.search(last_name(func.value) or "")
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
        keyword = keyword_arg(node, "tensor") or keyword_arg(node, "tensor_list") or keyword_arg(node, "output_tensor")
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
            iterates_tensors_of_model(loop.iter)
        ):
            self.report(node, self.message_loop.format(name=name))
        elif self._read_in_chain():
            self.report(node, self.message.format(name=name))  # `reduce_tensor(loss).item()`
        elif self.context.is_host_value(argument) or self._host_dict(argument) or _PICKLING_WRAPPER.search(name):
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
            if chain[index].attr.value in HOST_METHODS:
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
        finder = _HostReadFinder(set(names), self.context.is_gate)
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

    def __init__(self, names: set[str], is_gate=lambda test: False) -> None:
        super().__init__()
        self.names = names
        self.found = False
        self.is_gate = is_gate  # a test that gates its body to every N steps: reads there are the gate's business

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in HOST_METHODS:
            read = func.value
        elif isinstance(func, cst.Name) and func.value in ("float", "int", "bool") and node.args:
            read = node.args[0].value
        elif _logs_to_host(node):  # `wandb.log(logs)`, `self.log("loss", x, prog_bar=True)` read each tensor
            read = cst.Tuple([cst.Element(arg.value) for arg in node.args])
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
        if not self.found and self.is_gate(node.test):
            # `if accelerator.sync_gradients:` then `if step % log_every == 0: log(avg.item())` (Show-o): the read
            # is gated, nested or not; an `else` runs the other steps
            if node.orelse is not None:
                self.walk(node.orelse)
            return False
        return not self.found

    def visit_While(self, node: cst.While) -> bool:
        self._test(node.test)
        return not self.found

    def visit_Assert(self, node: cst.Assert) -> bool:
        self._test(node.test)
        return not self.found

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


def _logs_to_host(call: cst.Call) -> bool:
    """A logger call that converts its tensors to Python numbers: `wandb.log(...)`, `accelerator.log(...)`, and
    Lightning's `self.log(..., prog_bar=True)` (the progress bar reads it every refresh)."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("log", "log_dict"):
        return False
    owner = last_name(func.value)
    if owner in ("wandb", "accelerator"):
        return True
    prog_bar = keyword_arg(call, "prog_bar")
    return owner == "self" and prog_bar is not None and is_true(prog_bar.value)


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


def _self_method(func: cst.BaseExpression) -> bool:
    return isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
