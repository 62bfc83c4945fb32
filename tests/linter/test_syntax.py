"""The plain syntax walk the engine and the rules use instead of libcst's visitor."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.syntax import SyntaxVisitor, descendants


def names(node: cst.CSTNode) -> list[str]:
    return [n.value for n in descendants(node) if type(n) is cst.Name]


def test_descendants_are_the_syntax_nodes_in_source_order():
    module = cst.parse_module("x = f(a, key=b)[d] + g(*e)\n")
    assert names(module) == ["x", "f", "a", "key", "b", "d", "g", "e"]
    kinds = {type(n) for n in descendants(module)}
    assert cst.Comma not in kinds and cst.Add not in kinds and cst.SimpleWhitespace not in kinds
    function = cst.parse_module("@deco\ndef f(p: int = q) -> r:\n    return s\n")
    assert names(function) == ["deco", "f", "p", "int", "q", "r", "s"]


def test_a_visitor_can_skip_children_and_still_leaves_every_node():
    class Calls(SyntaxVisitor):
        def __init__(self) -> None:
            self.seen: list[str] = []
            self.left: list[str] = []

        def visit_Call(self, node: cst.Call) -> bool:
            self.seen.append(cst.Module([]).code_for_node(node.func))
            return False  # not into its arguments

        def leave_Call(self, node: cst.Call) -> None:
            self.left.append(cst.Module([]).code_for_node(node.func))

    visitor = Calls()
    visitor.walk(cst.parse_module("a(b(c)); d(e)\n"))
    assert visitor.seen == ["a", "d"] and visitor.left == ["a", "d"]
