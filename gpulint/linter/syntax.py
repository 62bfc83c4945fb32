"""Walking the syntax nodes of a libcst tree cheaply: the engine's traversal and the rules' searches of a subtree.

libcst's own `node.visit(visitor)` rebuilds every node it passes (`_visit_and_replace_children`, each rebuilt node
validated again) and dispatches per attribute, which costs several times a plain walk. Here a walk enters only the
syntax nodes, in source order, and skips the whitespace and punctuation nodes (commas, parentheses, operators'
tokens, comments), which no rule looks at.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Iterator, Sequence, TypeVar

import libcst as cst

T = TypeVar("T", bound=cst.CSTNode)

# Nodes that carry only layout or a token: never walked.
_NOT_SYNTAX = (
    cst.BaseParenthesizableWhitespace, cst.Comma, cst.Newline, cst.EmptyLine, cst.TrailingWhitespace, cst.Comment,
    cst.Semicolon, cst.Colon, cst.Dot, cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket,
    cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.AssignEqual, cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp,
    cst.BaseUnaryOp, cst.BaseAugOp, cst.Asynchronous, cst.ImportStar,
)
_LAYOUT_FIELDS = ("whitespace", "lpar", "rpar", "leading_lines", "lines_after", "header", "footer", "semicolon",
                  "comma", "equal", "colon", "lbracket", "rbracket", "lbrace", "rbrace", "asynchronous")
# Where a node's dataclass fields are not in source order, visit them in source order.
_SOURCE_ORDER = {
    cst.FunctionDef: ("decorators", "name", "params", "returns", "body"),
    cst.ClassDef: ("decorators", "name", "bases", "keywords", "body"),
    cst.IfExp: ("body", "test", "orelse"),
    cst.ExceptHandler: ("type", "name", "body"),
    cst.Parameters: ("posonly_params", "params", "star_arg", "kwonly_params", "star_kwarg"),
    cst.Arg: ("keyword", "value"),
    cst.MatchCase: ("pattern", "guard", "body"),
}

_SYNTAX_TYPES: dict[type, bool] = {}


def is_syntax(kind: type) -> bool:
    """Is a value of this type a node a walk enters? Decided once per type: libcst's node classes are ABCs, and an
    isinstance check against an ABC costs more than the rest of the walk."""
    known = _SYNTAX_TYPES.get(kind)
    if known is None:
        known = _SYNTAX_TYPES[kind] = issubclass(kind, cst.CSTNode) and not issubclass(kind, _NOT_SYNTAX)
    return known


@lru_cache(maxsize=None)
def child_fields(node_type: type) -> tuple[str, ...]:
    """The fields of a node type that may hold syntax nodes, in source order."""
    if node_type in _SOURCE_ORDER:
        return _SOURCE_ORDER[node_type]
    return tuple(
        f.name for f in dataclasses.fields(node_type)
        if not f.name.startswith(_LAYOUT_FIELDS) and f.name not in ("operator", "whitespace_after_arg")
    )


def syntax_children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for name in child_fields(type(node)):
        value = getattr(node, name)
        value_kind = type(value)
        if value_kind is tuple or value_kind is list:
            for child in value:
                if is_syntax(type(child)):
                    yield child
        elif is_syntax(value_kind):
            yield value


def qualname_of(ancestors: Sequence[cst.CSTNode]) -> str:
    """The qualified name of the innermost function or class among `ancestors` ("Trainer.step"), "" at module level."""
    return ".".join(node.name.value for node in ancestors if type(node) in (cst.FunctionDef, cst.ClassDef))


def innermost(ancestors: Sequence[cst.CSTNode], kind: type[T]) -> T | None:
    """The innermost node of `kind` (a `FunctionDef`, a `ClassDef`) among `ancestors`, outermost first: for reports
    decided at the end of a file, from the ancestors saved when they were seen."""
    return next((node for node in reversed(ancestors) if type(node) is kind), None)  # type: ignore[return-value]


def descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every syntax node under it, in source order."""
    yield node
    for child in syntax_children(node):
        yield from descendants(child)


class SyntaxVisitor:
    """A read-only visitor with libcst's `CSTVisitor` protocol: `visit_<Node>(node)` (return False to skip the
    node's children) and `leave_<Node>(node)`, or `on_visit` / `on_leave` for every node. Start it with
    `visitor.walk(node)`; it sees the syntax nodes only (see the module's docstring)."""

    def walk(self, node: cst.CSTNode) -> None:
        if self.on_visit(node):
            for child in syntax_children(node):
                self.walk(child)
        self.on_leave(node)

    def on_visit(self, node: cst.CSTNode) -> bool:
        handler = getattr(self, "visit_" + type(node).__name__, None)
        return handler is None or handler(node) is not False

    def on_leave(self, original_node: cst.CSTNode) -> None:
        handler = getattr(self, "leave_" + type(original_node).__name__, None)
        if handler is not None:
            handler(original_node)
