"""A cheap import-alias resolver: turns `t.cuda.synchronize` into `torch.cuda.synchronize`.

libcst's QualifiedNameProvider costs about as much as parsing the file again (LINT_NOTES.md); rules only need to know
what a dotted name refers to after `import torch as t` / `from torch import distributed as dist`, which a map built from
the import statements seen so far answers.
"""

from __future__ import annotations

import re
from functools import lru_cache

import libcst as cst

_SEPARATORS = re.compile(r"[_.]+")


def dotted_name(node: cst.CSTNode) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None (calls, subscripts and literals have no dotted name)."""
    # Exact type tests: these classes have no subclasses, and isinstance on libcst's ABCs is slow on a miss.
    parts: list[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def last_name(node: cst.CSTNode) -> str | None:
    """The final identifier of a Name/Attribute (`self.train_loader` -> `train_loader`), else None."""
    kind = type(node)
    if kind is cst.Attribute:
        return node.attr.value
    if kind is cst.Name:
        return node.value
    return None


@lru_cache(maxsize=8192)
def name_parts(name: str) -> frozenset[str]:
    """The lower-case parts of an identifier or dotted name: `args.log_interval` -> {"args", "log", "interval"}."""
    return frozenset(p for p in _SEPARATORS.split(name.lower()) if p)


def root_name(expr: cst.CSTNode) -> str | None:
    """The variable a chain of attributes, subscripts and method calls starts from: `p.grad.data.norm(2)` -> `p`."""
    while True:
        if isinstance(expr, cst.Name):
            return expr.value
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        else:
            return None


def target_names(target: cst.CSTNode) -> set[str]:
    """The names an assignment target binds: `a`, `(a, b)`, `[a, (b, c)]`."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        names: set[str] = set()
        for element in target.elements:
            names |= target_names(element.value)
        return names
    return set()


def callee_method(call: cst.Call) -> str | None:
    """For `x.foo(...)` the method name `foo`; for `foo(...)` the name `foo`."""
    return last_name(call.func)


class ImportMap:
    """Local name -> fully qualified name, from the import statements seen so far."""

    def __init__(self) -> None:
        self._aliases: dict[str, str] = {}

    def add_import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self._aliases[alias.asname.name.value] = full
            else:
                # `import torch.distributed` binds `torch`, which already resolves to itself.
                head = full.split(".", 1)[0]
                self._aliases.setdefault(head, head)

    def add_import_from(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted_name(node.module)
        if module is None:
            return
        for alias in node.names:
            if not isinstance(alias.name, cst.Name):
                continue
            local = alias.name.value
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self._aliases[local] = f"{module}.{alias.name.value}"

    def add_alias(self, local: str, full: str) -> None:
        """`synchronize = torch.cuda.synchronize if cuda else lambda: None`: the name stands for the torch function."""
        self._aliases[local] = full

    def resolve(self, node: cst.CSTNode) -> str | None:
        """The qualified dotted name of a Name/Attribute chain, resolving its first part through the imports.

        A name that was never imported resolves to itself (`model.parameters` stays `model.parameters`).
        """
        name = dotted_name(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        full = self._aliases.get(head, head)
        return f"{full}.{rest}" if rest else full

    def imported(self, prefix: str) -> bool:
        """True when some import binds a name under `prefix` (e.g. `torch`)."""
        return any(v == prefix or v.startswith(prefix + ".") for v in self._aliases.values())


def params_of(function: cst.FunctionDef) -> list[cst.Param]:
    """A function's named parameters: positional-only, ordinary and keyword-only."""
    params = function.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def names_used(node: cst.CSTNode) -> set[str]:
    """Every name read or written anywhere in `node` (`batch[key + "_mask"]` -> {"batch", "key"})."""
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            found.add(current.value)
        stack.extend(current.children)
    return found
