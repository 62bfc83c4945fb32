"""Generated docs are current: docs/rules.md from the rules, docs/cli.md from every command's --help."""

from __future__ import annotations

from pathlib import Path

from gpulint.cli import help_markdown
from gpulint.linter.docs import reference_markdown
from gpulint.linter.rule import all_rules

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_rules_reference_is_current():
    expected = reference_markdown(all_rules())
    assert (DOCS / "rules.md").read_text() == expected, "run `gpulint rules --format md > docs/rules.md`"


def test_cli_reference_is_current():
    assert (DOCS / "cli.md").read_text() == help_markdown(), "run `python -m gpulint.cli > docs/cli.md`"


def test_every_rule_has_a_docs_anchor():
    text = (DOCS / "rules.md").read_text()
    for rule in all_rules():
        assert f"### {rule.code} {rule.name}" in text
        assert rule.url().endswith(f"#{rule.code.lower()}-{rule.name}")
