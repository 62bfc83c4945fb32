"""Fixes beyond the rules' own examples: which findings get one, how safe it is, and that the fixed code stays valid.
(Where findings land is in the fixture files, tests/rules/fixtures/; that fixes compute the same values is in
test_fix_semantics_*.py.)"""

from __future__ import annotations

from gpulint.linter.engine import lint_text
from gpulint.linter.fixes import fix_text, parses
from gpulint.linter.rule import all_rules, rules_by_code
from gpulint.rules.examples import training_script

RULES = all_rules()


def findings(source: str, code: str) -> list:
    return [f for f in lint_text("train.py", source, RULES) if f.code == code]


def fixed(source: str, code: str) -> str:
    rule = rules_by_code()[code]
    text, _ = fix_text(source, lambda t: lint_text("train.py", t, [rule]), unsafe=True)
    return text


# ---------------------------------------------------------------- GPL102
def test_foreach_norm_fix_keeps_other_comprehensions_alone():
    # Only `torch.stack([norm(x) for ...])` gets the fix; a norm with `dim=` has no foreach form.
    source = "import torch\n\ndef norms(params):\n    return torch.stack([torch.norm(p.grad, dim=0) for p in params])\n"
    (finding,) = findings(source, "GPL102")
    assert finding.fix is None


# ---------------------------------------------------------------- GPL502
def test_foreach_false_fix_keeps_the_call_valid_in_any_position():
    for call in (
        "torch.optim.SGD(params, foreach=False)",
        "torch.optim.SGD(params, foreach=False, lr=0.1)",
        "torch.optim.SGD(params, lr=0.1, foreach=False,)",
        "torch.optim.SGD(foreach=False, params=params)",
    ):
        out = fixed(f"import torch\nopt = {call}\n", "GPL502")
        assert parses(out) and "foreach" not in out, out


# ---------------------------------------------------------------- GPL504
def test_device_move_through_import_alias_gets_a_fix():
    source = training_script("mask = t.ones(4, 4).to(device)").replace("import torch\n", "import torch as t\n")
    assert "t.ones(4, 4, device=device)" in fixed(source, "GPL504")


def test_move_to_another_tensor_is_flagged_without_a_fix():
    (finding,) = findings(training_script("z = torch.zeros(3).to(local_ts)"), "GPL504")
    assert finding.fix is None


def test_random_factory_fix_is_unsafe_and_deterministic_is_safe():
    (random_move,) = findings(training_script("z = torch.randn(3).cuda()"), "GPL504")
    (zeros_move,) = findings(training_script("z = torch.zeros(3).cuda()"), "GPL504")
    assert random_move.fix.applicability == "unsafe" and zeros_move.fix.applicability == "safe"


def test_reshape_chain_fix_moves_the_device_into_the_factory():
    source = training_script("idx = torch.arange(8).view(-1, 1).to(device)")
    assert "idx = torch.arange(8, device=device).view(-1, 1)" in fixed(source, "GPL504")
