"""GPL2xx fixes compute the same values: each fixable INVALID example and its fixed code run on CPU tensors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gpulint.linter.rule import rules_by_code  # noqa: E402

FIXABLE = [rule for code, rule in rules_by_code().items() if code.startswith("GPL2") and rule.fixable]
CASES = [
    pytest.param(rule, index, id=f"{rule.code}-invalid{index}")
    for rule in FIXABLE
    for index, example in enumerate(rule.invalid)
    if example.fixed is not None
]


def _run_train(source: str) -> object:
    """Exec an example training script and run its `train(model, loader, optimizer, device)` on CPU."""
    namespace: dict = {}
    exec(compile(source, "<example>", "exec"), namespace)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    loader = [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(6)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return namespace["train"](model, loader, optimizer, "cpu")


def test_there_are_fixable_metric_examples():
    assert CASES, "no fixable GPL2xx INVALID example with a `fixed` form"


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")  # `float(loss)` in the originals
@pytest.mark.parametrize("rule,index", CASES)
def test_fixed_example_computes_the_same_total(rule, index):
    example = rule.invalid[index]
    original = _run_train(example.code)
    fixed = _run_train(example.fixed)
    assert isinstance(original, float)
    assert isinstance(fixed, torch.Tensor) and fixed.dim() == 0 and not fixed.requires_grad
    assert float(fixed) == pytest.approx(original, rel=1e-6)
