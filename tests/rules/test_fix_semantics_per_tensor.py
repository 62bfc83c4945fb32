"""Fixes of the GPL1xx rules compute the same values as the original code, run on small CPU tensors.

Each INVALID example with a `fixed` form is executed twice, as written and as fixed: its training function runs on a
tiny model, and the local variables it leaves behind are compared.
"""

from __future__ import annotations

import pytest

from gpulint.linter.rule import rules_by_code

torch = pytest.importorskip("torch")

from .fix_semantics import TinyClassifier, batches, execute, train_locals  # noqa: E402

FIXABLE = ("GPL102", "GPL104")
CASES = [
    pytest.param(code, index, id=f"{code}-invalid{index}")
    for code in FIXABLE
    for index, example in enumerate(rules_by_code()[code].invalid)
    if example.fixed is not None
]


def run_training_function(source: str) -> dict:
    """Exec `source`, call its `train(model, loader, optimizer, device)` with fixed seeds, and return the locals of
    that call when it returns."""
    torch.manual_seed(0)
    model = TinyClassifier()
    loader = batches()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    namespace = {
        "losses": [torch.tensor(1.5), torch.tensor(-2.25), torch.tensor(0.125)],
        "loss_dict": {"ce": torch.tensor(0.5), "l1": torch.tensor(3.0)},
    }
    execute(source, namespace)
    return train_locals(namespace["train"], model, loader, optimizer, "cpu")


def assert_same(original, fixed) -> None:
    if isinstance(original, torch.Tensor):
        assert isinstance(fixed, torch.Tensor)
        torch.testing.assert_close(fixed, original, rtol=1e-6, atol=1e-7)
    elif isinstance(original, (list, tuple)):
        assert len(original) == len(fixed)
        for a, b in zip(original, fixed):
            assert_same(a, b)
    elif isinstance(original, float):
        assert fixed == pytest.approx(original, rel=1e-6)
    else:
        assert fixed == original


@pytest.mark.parametrize("code,index", CASES)
def test_fix_computes_the_same_values(code, index):
    example = rules_by_code()[code].invalid[index]
    original = run_training_function(example.code)
    fixed = run_training_function(example.fixed)
    compared = set(original) - {"model", "loader", "optimizer", "device"}
    assert compared, "the example leaves no value to compare"
    assert set(fixed) >= compared
    for name in sorted(compared):
        assert_same(original[name], fixed[name])


def test_cases_cover_every_fixable_rule_of_the_family():
    fixable = {r.code for r in rules_by_code().values() if r.fixable and r.code.startswith("GPL1")}
    assert fixable == set(FIXABLE)
    assert {case.values[0] for case in CASES} == fixable
