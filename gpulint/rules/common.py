"""Knowledge several rule families share: reading and adding a call's arguments, and telling literal values.

One place for each fact, so that two families never disagree on it (TorchFix keeps the same kind of helpers in
`torchfix/common.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.context import STRING_NODES
from gpulint.linter.names import last_name, name_parts
from gpulint.project.vocab import MICRO_STEP_PARTS

if TYPE_CHECKING:
    from gpulint.linter.context import FileContext


def keyword_arg(call: cst.Call, name: str) -> cst.Arg | None:
    """The argument `name=...` of `call`, or None."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


_TIGHT_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def new_keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    """`name=value`, spelled the PEP 8 way (for fixes that add an argument)."""
    return cst.Arg(value, keyword=cst.Name(name), equal=_TIGHT_EQUAL)


def is_true(expr: cst.BaseExpression | None) -> bool:
    """The literal `True`."""
    return isinstance(expr, cst.Name) and expr.value == "True"


def is_false(expr: cst.BaseExpression | None) -> bool:
    """The literal `False`."""
    return isinstance(expr, cst.Name) and expr.value == "False"


def is_cpu_string(expr: cst.BaseExpression) -> bool:
    """`"cpu"` or `"cpu:0"`."""
    return isinstance(expr, cst.SimpleString) and expr.raw_value.split(":")[0] == "cpu"


def is_cpu_device(expr: cst.BaseExpression) -> bool:
    """`"cpu"`, `"cpu:0"` or `torch.device("cpu")`."""
    if isinstance(expr, cst.Call) and last_name(expr.func) == "device" and expr.args:
        return is_cpu_string(expr.args[0].value)
    return is_cpu_string(expr)


def is_number(expr: cst.BaseExpression) -> bool:
    """A number written in the code: `0`, `0.5`, `-1`."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        expr = expr.expression
    return isinstance(expr, (cst.Integer, cst.Float))


def off_by_default(code: str, real: int, judged: int, why: str) -> str:
    """The opening of the docs' false-positives note of a rule that is off by default: its measured precision on the
    fresh batches (`bench/corpus/fresh`), why, and how to turn it on."""
    return (f"Off by default (turn it on with `--extend-select {code}`): on fresh batches 1-44 of `bench/corpus` its "
            f"findings were real per-step cost in {real} of {judged} judged; {why}. ")


def by_callee(calls: tuple[tuple[str, tuple[int, ...], tuple[str, ...]], ...]) -> dict[
        str, tuple[tuple[int, ...], tuple[str, ...]]]:
    """A project model's table of helper calls (`FileFacts.copy_calls`, `move_calls`, `read_calls`) by callee as
    written: the positions and keywords of the arguments each helper copies or reads (the first entry of a name wins,
    as the facts list them)."""
    return {func: (positions, keywords) for func, positions, keywords in reversed(calls)}


def arguments_at(call: cst.Call, positions: tuple[int, ...], keywords: tuple[str, ...]) -> list[cst.BaseExpression]:
    """The arguments a call passes at these positions or by these keywords (a project helper's copied or read
    parameters, as `FileFacts.copy_calls` and `read_calls` give them)."""
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    return [positional[i] for i in positions if i < len(positional)] + [
        a.value for a in call.args if a.keyword is not None and a.keyword.value in keywords]


# torch functions that build a CPU tensor from host data unless given a device (`torch.tensor(offsets)`,
# `torch.LongTensor(ids)`).
HOST_DATA_CONSTRUCTORS = frozenset(
    {
        "torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor", "torch.LongTensor", "torch.IntTensor",
        "torch.FloatTensor", "torch.BoolTensor", "torch.ByteTensor",
    }
)


# Function-name parts of the data pipeline (tokenization, collation, dataset items): its tensors are CPU tensors,
# built by the tokenizer or in loader workers, so reading them costs no device sync.
DATA_PIPELINE_PARTS = frozenset(
    {"tokenize", "tokenized", "tokenizer", "preprocess", "collate", "collator", "encode", "getitem", "dataset"}
)


def in_data_pipeline(context: FileContext) -> bool:
    """Is the node being visited in a data-pipeline function or in a Dataset, Collator or Sampler class?"""
    for node in reversed(context.ancestors):
        if isinstance(node, cst.FunctionDef) and name_parts(node.name.value) & DATA_PIPELINE_PARTS:
            return True
        if isinstance(node, cst.ClassDef):
            return is_data_class(node)
    return False


def in_data_class(context: FileContext) -> bool:
    """Is the node being visited in a method of a Dataset, Collator or Sampler class (a sampler's `__iter__` shuffles
    CPU indices once an epoch: LoFTR's `RandomConcatSampler`)? Not a function named like data work alone: a text
    encoder's `encode_text` runs in the model."""
    for node in reversed(context.ancestors):
        if isinstance(node, cst.ClassDef):
            return is_data_class(node)
    return False


def is_data_class(node: cst.ClassDef) -> bool:
    name = node.name.value.lower()
    return "dataset" in name or "collator" in name or "sampler" in name


def tests_one_time(test: cst.BaseExpression, params: frozenset[str]) -> bool:
    """`x == N`, `x is None` (x not a parameter), or one of them and-ed with other conditions
    (`n_iter == 0 and state_dict`)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return tests_one_time(test.left, params) or tests_one_time(test.right, params)
    if not isinstance(test, cst.Comparison):
        return False
    if _counts_micro_steps(test):
        return False  # `micro_step == accum_steps - 1`: the last micro-step of every optimizer step
    # `self.type == "byol"` picks a configured mode, taken on every step once chosen: no switch of the step count.
    comparisons = [t for t in test.comparisons if type(t.comparator) not in STRING_NODES]
    if isinstance(test.left, cst.Name) and test.left.value in params:
        return any(isinstance(t.operator, cst.Equal) for t in comparisons)
    # `if key not in mel_basis_cache:` builds what the cache then serves on every later call.
    return any(isinstance(t.operator, (cst.Equal, cst.Is, cst.NotIn)) for t in comparisons)


def _counts_micro_steps(test: cst.Comparison) -> bool:
    """Does a comparison name a counter of accumulated micro-steps, which comes round every optimizer step?"""
    stack: list[cst.CSTNode] = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name) and name_parts(node.value) & MICRO_STEP_PARTS:
            return True
        stack.extend(node.children)
    return False
