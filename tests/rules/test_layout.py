"""Where rules live: each family is a package under gpulint/rules/ and each rule a module of it named after the rule,
found by the registry without the engine naming any of them."""

from __future__ import annotations

from gpulint.linter.rule import all_rules

PACKAGE_OF_BAND = {"GPL1": "per_tensor", "GPL2": "metrics", "GPL3": "padding", "GPL4": "sync", "GPL5": "launch"}


def test_each_rule_is_a_module_of_its_family_package_named_after_it():
    for rule in all_rules():
        if rule.code.startswith("GPL0"):  # the engine's own codes (rules/parse.py)
            continue
        assert rule.__module__ == f"gpulint.rules.{PACKAGE_OF_BAND[rule.code[:4]]}.{rule.name.replace('-', '_')}"


def test_the_registry_finds_every_family():
    bands = {rule.code[:4] for rule in all_rules()}
    assert bands == {"GPL0", *PACKAGE_OF_BAND}
