"""What the GPL5xx rules share: the base class `WhereItRuns` (where a per-step construct runs) and the one-time
branches that do not run every step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.names import last_name, name_parts
from gpulint.linter.rule import Replace, Report, Rule
from gpulint.linter.syntax import descendants
from gpulint.project.vocab import is_cold_method
from gpulint.rules.common import tests_one_time
from gpulint.rules.per_tensor.helpers import in_test_error_or_one_off_code

if TYPE_CHECKING:
    from gpulint.linter.context import FileContext


# Calls that mark a loop as the training loop (`loss.backward()`, `optimizer.step()`, `optimizer.zero_grad()`).
STEP_CALLS = frozenset({"backward", "zero_grad", "step"})


def one_time_branch(context: FileContext) -> bool:
    """Under `if x == N:` or `if x is None:` in the same function: a switch (`if step == warmup:`), a lazy build or
    a first-step state init (`if len(state) == 0:`), not per step. A parameter tested against None
    (`if mask is None:` with `mask=None` in the signature) is the caller's choice, made again on every call."""
    chain = context.ancestors
    function = context.enclosing_function()
    params = _parameter_names(function) if function is not None else frozenset()
    for index in range(len(chain) - 2, -1, -1):
        node = chain[index]
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(node, cst.If) and chain[index + 1] is node.body and tests_one_time(node.test, params):
            return True
    return False


def _parameter_names(function: cst.FunctionDef) -> frozenset[str]:
    params = function.params
    every = (*params.posonly_params, *params.params, *params.kwonly_params)
    return frozenset(p.name.value for p in every)


def _singular(name: str) -> str:
    return "_".join(part.removesuffix("s") for part in name.split("_"))


class WhereItRuns(Rule):
    """Decides, per function, when a finding counts. Code in a function that holds the training loop counts only
    inside that loop ("per_step": the setup before it runs once); code at module level likewise; code in a helper
    without a training loop (a forward-like method, an EMA `update`, a per-step utility in another module) counts
    wherever it is not known to be cold ("training"). Findings in a function wait for the end of the function, where
    that is known."""

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._pending: dict[int, list[Report]] = {}
        self._training_functions: set[int] = set()

    def _track_call(self, node: cst.Call) -> None:
        if last_name(node.func) in STEP_CALLS and isinstance(node.func, cst.Attribute) and self.context.innermost_loop():
            self._note_training_function()

    def _track_for(self, node: cst.For) -> None:
        iterable = node.iter
        while isinstance(iterable, cst.Call) and iterable.args and last_name(iterable.func) in ("enumerate", "tqdm", "iter"):
            iterable = iterable.args[0].value
        name = last_name(iterable.func if isinstance(iterable, cst.Call) else iterable) or ""
        if "loader" in name.lower():
            self._note_training_function()

    def _note_training_function(self) -> None:
        function = self.context.enclosing_function()
        if function is not None:
            self._training_functions.add(id(function))

    def _report_where_it_runs(
        self, node: cst.CSTNode, message: str | None = None, fix: Sequence[Replace] = (), unsafe: bool = False,
        ancestors: tuple[cst.CSTNode, ...] | None = None,
    ) -> None:
        """Report `node`, which runs where the code being visited runs (`ancestors`: its own enclosing nodes, when it
        is an earlier statement of the same function)."""
        function = self.context.enclosing_function()
        if in_test_error_or_one_off_code(self.context):
            return
        snapshot = ancestors or self.context.ancestors_snapshot()
        if function is None or "forward" in name_parts(function.name.value):
            when = "per_step" if function is None else "training"
            self.context.add_report(Report(self, node, message or self.message, when, snapshot, tuple(fix), unsafe))
        elif is_cold_method(_singular(function.name.value), self.context.enclosing_class()) \
                and not self.context.called_every_step():
            # `print_samples`, `save_checkpoints`: the plural of a cold name is cold too; not a distribution's or a
            # replay buffer's `sample()`, which draws for the step
            return
        elif self.context.runs_outside_the_step() and not _yields(function):
            return  # an epoch's evaluation metrics, model surgery at setup, an offline tool's loop (not a generator
            # of batches, whose body runs where a loop consumes it)
        else:
            report = Report(self, node, message or self.message, "training", snapshot, tuple(fix), unsafe)
            self._pending.setdefault(id(function), []).append(report)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        pending = self._pending.pop(id(original_node), ())
        when = "per_step" if id(original_node) in self._training_functions else "training"
        for report in pending:
            self.context.add_report(
                Report(self, report.node, report.message, when, report.ancestors, report.fix, report.unsafe_fix)
            )


def _yields(function: cst.FunctionDef) -> bool:
    return any(isinstance(node, cst.Yield) for node in descendants(function.body))


def under_any_if(context: FileContext) -> bool:
    """Inside the body of any `if` in the same function (`if args.debug:`): switched by a flag, not always on. A
    script's `if __name__ == "__main__":` switches nothing (MotionDiffuse's training script turns anomaly mode on
    there)."""
    chain = context.ancestors
    for index in range(len(chain) - 2, -1, -1):
        node = chain[index]
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(node, (cst.If, cst.IfExp)) and chain[index + 1] is not node.test and not _is_main_guard(node.test):
            return True
    return False


def _is_main_guard(test: cst.BaseExpression) -> bool:
    """`__name__ == "__main__"`, either way round."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Equal)):
        return False
    sides = {side.value if isinstance(side, cst.Name) else side.evaluated_value
             if isinstance(side, cst.SimpleString) else None for side in (test.left, test.comparisons[0].comparator)}
    return sides == {"__name__", "__main__"}
