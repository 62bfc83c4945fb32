"""GPL422 ddp-accumulation-without-no-sync."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.names import dotted_name, last_name
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.linter.syntax import descendants
from gpulint.rules.sync.helpers import SyncRule, known_false_positives

_OPTIMIZER = re.compile(r"optim|opt$|^opt|scaler", re.IGNORECASE)
_DDP_NAMES = frozenset({"DistributedDataParallel", "DDP"})
_NO_SYNC_NAMES = frozenset({"no_sync", "require_backward_grad_sync", "accumulate", "set_requires_gradient_sync"})


class DdpAccumulationWithoutNoSync(SyncRule):
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
        "`DistributedDataParallel` and never uses `no_sync()` / `require_backward_grad_sync` / `accelerator.accumulate`; "
        "not where the shipped settings make N exactly 1 (`--accumulation_steps` with default 1 and no command "
        "raising it): then every backward is an optimizer step.",
        why_slow="DDP all-reduces every gradient bucket during each `backward()`. With N micro-batches per optimizer "
        "step, N-1 of those all-reduces are wasted communication (and the ranks wait on each other N times per step).",
        example="model = DDP(model)\nfor i, (x, y) in enumerate(loader):\n    loss = F.cross_entropy(model(x), y) / 4\n"
        "    loss.backward()\n    if (i + 1) % 4 == 0:\n        optimizer.step()\n        optimizer.zero_grad()",
        use_instead="`ctx = model.no_sync() if (i + 1) % accum != 0 else contextlib.nullcontext()` around "
        "forward+backward, or set `model.require_backward_grad_sync` on the last micro-step; "
        "with Accelerate, `with accelerator.accumulate(model):`.",
        fix_safety="No fix: wrapping forward and backward in `no_sync()` needs the accumulation boundary, which the "
        "author knows best.",
        false_positives=known_false_positives("Models wrapped in DDP in another file are not seen (no finding: gpulint misses, never "
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
        self._gated_steps: list[tuple[int, tuple[cst.CSTNode, ...]]] = []
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
            self._gated_steps.append((id(loop), self.context.ancestors_snapshot()))

    def _under_accumulation_gate(self, loop: cst.CSTNode) -> bool:
        ancestors = self.context.ancestors
        for depth in range(len(ancestors) - 2, -1, -1):
            node = ancestors[depth]
            if node is loop:
                return False
            # in the body of `if (i + 1) % accum == 0:`, not in its `else` (SimMIM's `else:` of `if accum > 1:`)
            if isinstance(node, cst.If) and ancestors[depth + 1] is node.body and _is_accumulation_test(node.test):
                return not self._accumulates_one_step(node.test)
        return False

    def _accumulates_one_step(self, test: cst.BaseExpression) -> bool:
        """`step % args.accumulation_steps == 0` where the shipped settings make `accumulation_steps` 1: every
        backward is followed by an optimizer step, and there is nothing to keep from syncing."""
        for node in descendants(test):
            if type(node) is cst.BinaryOperation and type(node.operator) is cst.Modulo:
                name = dotted_name(node.right) or ""
                return name.rsplit(".", 1)[-1] in self.context.facts.unit_intervals
        return False

    def leave_Module(self, node: cst.Module) -> None:
        self._emit()

    def _emit(self) -> None:
        if not self._uses_ddp or self._uses_no_sync:
            return
        for call, loop_id, ancestors in self._backwards:
            if any(step_loop == loop_id and not _exclusive(ancestors, step_ancestors)
                   for step_loop, step_ancestors in self._gated_steps):
                self.report_at(call, self.message, ancestors)


def _exclusive(first: tuple[cst.CSTNode, ...], second: tuple[cst.CSTNode, ...]) -> bool:
    """Are two nodes (by their ancestors, outermost first) in different branches of one `if`? SimMIM's loop steps
    its optimizer every N micro-batches in `if ACCUMULATION_STEPS > 1:` and every batch in the `else`: the `else`
    branch's backward accumulates nothing."""
    for depth, (a, b) in enumerate(zip(first, second)):
        if a is not b:
            parent = first[depth - 1] if depth else None
            return isinstance(parent, cst.If) and {id(a), id(b)} == {id(parent.body), id(parent.orelse)}
    return False


def _is_accumulation_test(test: cst.BaseExpression) -> bool:
    """`(i + 1) % accum == 0`, `step % grad_accum_steps == 0`, `should_step`, `is_accumulation_boundary`."""
    for node in descendants(test):
        kind = type(node)
        if kind is cst.BinaryOperation and type(node.operator) is cst.Modulo:
            return True
        if kind is cst.Name and ("accum" in node.value.lower() or node.value.lower() in ("should_step", "sync_gradients")):
            return True
    return False
