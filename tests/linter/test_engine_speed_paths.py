"""The engine's shortcuts for speed change nothing a user can see."""

from __future__ import annotations

import gc

import libcst as cst
import pytest

from gpulint.linter import engine
from gpulint.linter.engine import lint_text
from gpulint.linter.rule import all_rules

RULES = [r for r in all_rules() if r.default_enabled]
SCRIPT = (
    "import torch\n\ndef train(model, loader, optimizer, device):\n    for x in loader:\n"
    "        loss = model(x.to(device))\n        loss.backward()\n        optimizer.step()\n"
    "        print(loss.item())\n"
)


def test_the_unvalidated_parse_builds_the_same_tree_and_restores_validation():
    tree = engine._parse(SCRIPT)
    assert tree.deep_equals(cst.parse_module(SCRIPT)) and tree.code == SCRIPT
    with pytest.raises(cst.CSTValidationError):
        cst.SimpleWhitespace("x")  # nodes built by hand are still checked afterwards


def test_validation_is_restored_when_the_parse_fails():
    with pytest.raises(cst.ParserSyntaxError):
        engine._parse("def f(:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.SimpleWhitespace("x")


def _trees_alive(collect: bool = True) -> int:
    if collect:
        gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is cst.Module)


def test_a_lint_leaves_no_tree_alive_and_the_collector_on():
    before = _trees_alive()
    assert [f.code for f in lint_text("train.py", SCRIPT, RULES)] == ["GPL411", "GPL401"]
    assert gc.isenabled()
    assert _trees_alive() == before  # no table of per-file state keeps a tree (and all it points to) for good


def test_a_lint_frees_its_tree_without_the_cycle_collector():
    gc.collect()
    gc.disable()
    try:
        before = _trees_alive(collect=False)
        lint_text("train.py", SCRIPT, RULES)
        assert _trees_alive(collect=False) == before  # no cycle holds it
    finally:
        gc.enable()


def test_the_nesting_guard_counts_across_blocks():
    pad = "x = 1\n" * 1000  # more than one block of text before the brackets
    assert engine._may_nest_too_deep(pad + "(" * 201 + ")" * 201)
    assert not engine._may_nest_too_deep(pad + "(" * 200 + ")" * 200)
    assert not engine._may_nest_too_deep(")" * 300 + pad + "(" * 300)  # closing brackets first: depth never > 200
    assert engine._may_nest_too_deep("(" * 150 + pad + "[" * 51 + pad)  # deep across two blocks
