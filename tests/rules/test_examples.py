"""Every rule's VALID and INVALID examples, run through the real engine with every rule enabled."""

from __future__ import annotations

import pytest

from gpulint.linter.engine import lint_text
from gpulint.linter.fixes import fix_text
from gpulint.linter.rule import all_rules

RULES = all_rules()
VALID = [pytest.param(rule, i, id=f"{rule.code}-valid{i}") for rule in RULES for i in range(len(rule.valid))]
INVALID = [pytest.param(rule, i, id=f"{rule.code}-invalid{i}") for rule in RULES for i in range(len(rule.invalid))]


def _codes(source: str, rule) -> list:
    return [f for f in lint_text("example.py", source, RULES) if f.code == rule.code]


@pytest.mark.parametrize("rule,index", VALID)
def test_valid_example_has_no_finding(rule, index):
    findings = _codes(rule.valid[index], rule)
    assert findings == [], f"{rule.code} fired on its VALID example {index}: {findings}"


@pytest.mark.parametrize("rule,index", INVALID)
def test_invalid_example_has_findings(rule, index):
    example = rule.invalid[index]
    findings = _codes(example.code, rule)
    assert len(findings) == example.count, f"{rule.code} INVALID example {index}: {findings}"


@pytest.mark.parametrize("rule,index", INVALID)
def test_invalid_example_fix(rule, index):
    example = rule.invalid[index]
    fixed, _ = fix_text(example.code, lambda text: [f for f in lint_text("example.py", text, [rule])], unsafe=True)
    if example.fixed is None:
        assert all(f.fix is None for f in _codes(example.code, rule)), "a fixable INVALID example must state `fixed`"
        return
    assert fixed == example.fixed
    assert _codes(fixed, rule) == [], "the fixed code must be clean for the rule"
    again, codes = fix_text(fixed, lambda text: lint_text("example.py", text, [rule]), unsafe=True)
    assert again == fixed and codes == [], "fixing twice must change nothing the second time"


def test_every_rule_has_docs_and_examples():
    for rule in RULES:
        docs = rule.docs
        for section in ("what_it_does", "why_slow", "example", "use_instead", "fix_safety", "false_positives"):
            assert getattr(docs, section).strip(), f"{rule.code} has no {section}"
        assert rule.valid, f"{rule.code} has no VALID example"
        if not rule.code.startswith("GPL0"):  # engine codes are raised by the engine/runner, tested in tests/linter
            assert rule.invalid, f"{rule.code} has no INVALID example"
            assert rule.triggers, f"{rule.code} has no trigger words"
        if any(inv.fixed is not None for inv in rule.invalid):
            assert rule.fixable, f"{rule.code} has fixed examples but is not marked fixable"
