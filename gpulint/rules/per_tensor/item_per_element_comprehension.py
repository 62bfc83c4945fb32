"""GPL104 item-per-element-comprehension."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.names import root_name, target_names
from gpulint.linter.rule import Invalid, Replace, RuleDocs
from gpulint.rules.common import off_by_default
from gpulint.rules.examples import training_script
from gpulint.rules.per_tensor.helpers import (
    PerTensorRule,
    comprehension_element,
    is_model_tensor_iterable,
    iterates_host_values,
    scan_model_tensor_comprehension,
)


class ItemListComprehension(PerTensorRule):
    code = "GPL104"
    name = "item-per-element-comprehension"
    default_enabled = False  # mostly false on the fresh batches (its docs say how often)
    message = (
        "`.item()` per element of a comprehension: one device-to-host sync per tensor; "
        "`torch.stack(tensors).tolist()` reads them all in one transfer"
    )
    triggers = (".item()",)
    fixable = True
    docs = RuleDocs(
        what_it_does="Flags comprehensions such as `[t.item() for t in losses]` and `{k: v.item() / n for k, v in "
        "d.items()}` that call `.item()` on each element (also inside arithmetic or `round`), outside the data "
        "pipeline (tokenize/collate/dataset functions hold CPU tensors).",
        why_slow="Every `.item()` is a separate device-to-host copy that waits for the GPU queue to drain; N elements "
        "cost N round trips (each one a full host-device latency plus the lost CPU lead), where one `tolist()` on a stacked "
        "tensor costs one.",
        example="values = [t.item() for t in losses]\nlogs = {k: v.item() / world_size for k, v in loss_dict.items()}",
        use_instead="values = torch.stack(losses).tolist()",
        fix_safety="Unsafe, offered for list comprehensions of the form `[t.item() for t in ts]`: `torch.stack` needs "
        "tensors of one shape on one device (an element of shape `(1,)` among scalars fails, or yields nested lists "
        "when all are `(1,)`), raises on an empty list, and promotes mixed dtypes (ints become floats next to floats).",
        false_positives=off_by_default(
            code, 6, 24,
            "most of its lists were of host tensors or in samplers no shipped configuration uses",
        )
        + "Elements that are already on the host (the comprehension iterates a `.cpu()`/`.tolist()` "
        "result) are skipped when gpulint can see it; comprehensions under a logging gate in the same function are not "
        "flagged.",
    )
    valid = (
        training_script("values = torch.stack(losses).tolist()"),
        training_script("host = losses.cpu()\nvalues = [t.item() for t in host]"),
        training_script("if step % 100 == 0:\n    print([t.item() for t in losses])"),
        ("import torch\n\ndef _tokenize_fn(strings, tokenizer):\n"
         "    tokenized = [tokenizer(s, return_tensors=\"pt\") for s in strings]\n"
         "    return [t.input_ids.ne(tokenizer.pad_token_id).sum().item() for t in tokenized]\n"),
    )
    invalid = (
        Invalid(training_script("values = [t.item() for t in losses]"), fixed=training_script("values = torch.stack(losses).tolist()")),
        Invalid(
            training_script("values = [t.item() for t in loss_dict.values()]"),
            fixed=training_script("values = torch.stack(list(loss_dict.values())).tolist()"),
        ),
        Invalid(training_script("logs = {k: v.item() for k, v in loss_dict.items()}")),
        Invalid(training_script("values = [x.item() for y, n in zip(gathered, sizes) for x in y[:n]]")),
        Invalid(training_script("logs = {k: v.item() / world_size for k, v in loss_dict.items()}")),
    )

    def _visit_comprehension(self, node: cst.CSTNode) -> None:
        comp_for = node.for_in
        if iterates_host_values(comp_for.iter, self.context):
            return
        element = comprehension_element(node)
        names: set[str] = set()
        inner = comp_for
        while inner is not None:  # `[x.item() for y in ys for x in y]`
            names |= target_names(inner.target)
            inner = inner.inner_for_in
        if not _reads_item_of(element, names):
            return
        if is_model_tensor_iterable(comp_for.iter):
            scan = scan_model_tensor_comprehension(node, self.context)
            if scan is not None and scan.kind is not None:
                return  # a per-parameter reduction read: GPL101's finding
        self._report_ungated(node, fix=self._stack_fix(node), unsafe_fix=True)

    visit_ListComp = visit_GeneratorExp = visit_SetComp = visit_DictComp = _visit_comprehension

    def _stack_fix(self, node: cst.CSTNode) -> list[Replace]:
        comp_for = node.for_in
        element = node.elt if isinstance(node, cst.ListComp) else None
        if (
            not self._torch_bound
            or element is None
            or comp_for.ifs
            or comp_for.inner_for_in is not None
            or not isinstance(comp_for.target, cst.Name)
            # only `[t.item() for t in ts]`: not arithmetic around it (`len(c) - c.sum().item()`)
            or not (_is_item_of(element, {comp_for.target.value}) and isinstance(element.func.value, cst.Name))
        ):
            return []
        iterable = comp_for.iter
        if not isinstance(iterable, (cst.Name, cst.Attribute, cst.List, cst.Tuple)):
            iterable = cst.Call(cst.Name("list"), [cst.Arg(iterable)])
        stacked = cst.Call(cst.Attribute(cst.Name("torch"), cst.Name("stack")), [cst.Arg(iterable)])
        return [Replace(node, cst.Call(cst.Attribute(stacked, cst.Name("tolist"))))]


def _is_item_of(expr: cst.BaseExpression, names: set[str]) -> bool:
    return (
        isinstance(expr, cst.Call)
        and not expr.args
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "item"
        and root_name(expr.func.value) in names
    )


def _reads_item_of(expr: cst.BaseExpression, names: set[str]) -> bool:
    """`t.item()`, or arithmetic / rounding around it: `v.item() / world_size`, `round(v.item(), 4)`."""
    if _is_item_of(expr, names):
        return True
    if isinstance(expr, cst.BinaryOperation):
        return _reads_item_of(expr.left, names) or _reads_item_of(expr.right, names)
    if isinstance(expr, cst.UnaryOperation):
        return _reads_item_of(expr.expression, names)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("round", "float", "abs"):
        return bool(expr.args) and _reads_item_of(expr.args[0].value, names)
    return False
