"""GPL4xx fixes compute the same values: each fixable rule's INVALID example and its fixed form train the same tiny
model on CPU tensors from the same seed, and must end with identical weights."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gpulint.linter.rule import all_rules

FIXED = [
    pytest.param(rule, index, id=f"{rule.code}-invalid{index}")
    for rule in all_rules()
    if rule.code.startswith("GPL4") and rule.fixable
    for index, example in enumerate(rule.invalid)
    if example.fixed is not None
]


def _train(source: str) -> list:
    """Run the example's `train(model, <loader or dataset>, optimizer, device)` on CPU; return the final weights."""
    torch.manual_seed(0)
    features, labels = torch.randn(16, 8), torch.randint(0, 4, (16,))
    dataset = torch.utils.data.TensorDataset(features, labels)
    model = torch.nn.Linear(8, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    namespace: dict = {}
    exec(compile(source, "<example>", "exec"), namespace)  # noqa: S102 - the rule's own example code
    train = namespace["train"]
    second = dataset if "dataset" in train.__code__.co_varnames[:2] else torch.utils.data.DataLoader(dataset, batch_size=4)
    train(model, second, optimizer, "cpu")
    return [p.detach().clone() for p in model.parameters()]


@pytest.fixture
def cpu_cuda(monkeypatch):
    """`.cuda()` and `.pin_memory()` on a machine without CUDA: each stands for itself (`.cuda()` accepts
    `non_blocking=`)."""
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, device=None, non_blocking=False: self)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self, device=None: self)


@pytest.mark.parametrize("rule,index", FIXED)
def test_fix_computes_the_same_values(rule, index, cpu_cuda):
    example = rule.invalid[index]
    assert example.fixed != example.code
    before, after = _train(example.code), _train(example.fixed)
    assert len(before) == len(after)
    for original, fixed in zip(before, after):
        assert torch.equal(original, fixed)


def test_there_is_a_fix_to_check():
    assert FIXED, "GPL411 offers a fix; its examples must be checked here"
