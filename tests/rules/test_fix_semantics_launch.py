"""Fixes of the GPL5xx rules compute the same values as the original code, run on small CPU tensors.

Each INVALID example with a `fixed` form runs twice, as written and as fixed, and what it leaves behind is compared:
the locals of its training function (GPL503, GPL504), the parameters after a few optimizer steps (GPL502), the result
of a forward/backward pass (GPL506). This machine has no GPU, so for GPL504 both versions run with "cuda" spelled
"cpu" (`.cuda(x)` -> `.to(x)`, `device="cuda"` -> `device="cpu"`): the check is that the factory call with `device=`
makes the same values as the factory call followed by a move, which holds on any device for deterministic factories
and, for random ones, on the CPU only (hence their fix is unsafe).
"""

from __future__ import annotations

import pytest

from gpulint.linter.rule import rules_by_code

torch = pytest.importorskip("torch")

from .fix_semantics import TinyClassifier, TinyModel, batches, execute, train_locals  # noqa: E402

FIXABLE = ("GPL502", "GPL503", "GPL504", "GPL506")
CASES = [
    pytest.param(code, index, id=f"{code}-invalid{index}")
    for code in FIXABLE
    for index, example in enumerate(rules_by_code()[code].invalid)
    if example.fixed is not None
]


def on_cpu(source: str) -> str:
    return source.replace(".cuda(local_rank)", ".to(local_rank)").replace(".cuda()", ".cpu()").replace('"cuda"', '"cpu"')


def fresh_namespace(model_class: type = TinyModel, **kwargs) -> dict:
    torch.manual_seed(0)
    model = model_class(**kwargs)
    return {"model": model, "device": "cpu", "local_rank": "cpu", "params": list(model.parameters())}


def run_training_function(source: str, with_unused: bool = False) -> dict:
    """Exec `source`, call its `train(model, loader, optimizer, device)`, return that call's locals and the model's
    parameters afterwards."""
    namespace = fresh_namespace(TinyClassifier, with_unused=with_unused)
    model = namespace["model"]
    execute(on_cpu(source), namespace)
    loader = batches()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    captured = train_locals(namespace["train"], model, loader, optimizer, "cpu")
    drop = {"model", "loader", "optimizer", "device", "loss"}
    values = {name: value for name, value in captured.items() if name not in drop}
    values["parameters"] = [p.detach().clone() for p in model.parameters()]
    return values


def run_module_level_optimizer(source: str) -> dict:
    """Exec a module that builds `optimizer`/`opt` for `model`, then take three steps on a fixed batch."""
    namespace = fresh_namespace()
    model = namespace["model"]
    execute(source, namespace)
    optimizer = namespace.get("optimizer") or namespace["opt"]
    batch = torch.randn(5, 4)
    for _ in range(3):
        optimizer.zero_grad()
        model(batch).backward()
        optimizer.step()
    return {"parameters": [p.detach().clone() for p in model.parameters()]}


def run_module_with_backward(source: str) -> dict:
    """Exec a module (e.g. one that switches anomaly mode), then run forward/backward and collect the gradients."""
    previous = torch.is_anomaly_enabled()
    try:
        namespace = fresh_namespace()
        model = namespace["model"]
        execute(source, namespace)
        model(torch.randn(5, 4)).backward()
        return {"grads": [p.grad.clone() for p in model.parameters() if p.grad is not None]}
    finally:
        torch.autograd.set_detect_anomaly(previous)


def run_module_forward(source: str) -> dict:
    """Exec a module that defines the nn.Module `M`, then call it on a fixed input."""
    namespace = fresh_namespace()
    execute(on_cpu(source), namespace)
    return {"output": namespace["M"]()(torch.randn(2, 5))}


def run(source: str) -> dict:
    if "def train(" in source:
        return run_training_function(source)
    if "def forward(" in source:
        return run_module_forward(source)
    if "detect_anomaly" in source:  # `set_detect_anomaly(True)`, a framework's `detect_anomaly=True`
        return run_module_with_backward(source)
    return run_module_level_optimizer(source)


def assert_same(original, fixed) -> None:
    if isinstance(original, torch.Tensor):
        torch.testing.assert_close(fixed, original, rtol=1e-6, atol=1e-7)
    elif isinstance(original, (list, tuple)):
        assert len(original) == len(fixed)
        for a, b in zip(original, fixed):
            assert_same(a, b)
    else:
        assert fixed == original


@pytest.mark.parametrize("code,index", CASES)
def test_fix_computes_the_same_values(code, index):
    example = rules_by_code()[code].invalid[index]
    original = run(example.code)
    fixed = run(example.fixed)
    assert original.keys() == fixed.keys()
    for name in sorted(original):
        assert_same(original[name], fixed[name])


def test_the_check_notices_a_changed_value():
    # The harness is not vacuous: a "fix" that changes a factory's values is caught.
    example = next(e for e in rules_by_code()["GPL504"].invalid if e.fixed and "ones(8, 8" in e.fixed)
    original = run(example.code)["mask"]
    changed = run(example.fixed.replace("ones(8, 8", "zeros(8, 8"))["mask"]
    with pytest.raises(AssertionError):
        assert_same(original, changed)


def test_zero_grad_fix_changes_parameters_that_get_no_gradient():
    # Why GPL503's fix is unsafe: with zeroed gradients, SGD still applies weight decay to a layer the loss no longer
    # reaches; with `None` gradients it skips that layer.
    example = rules_by_code()["GPL503"].invalid[0]
    original = run_training_function(example.code, with_unused=True)["parameters"]
    fixed = run_training_function(example.fixed, with_unused=True)["parameters"]
    assert_same(original[:4], fixed[:4])  # the layers the loss reaches: identical
    with pytest.raises(AssertionError):
        assert_same(original[4:], fixed[4:])


def test_cases_cover_every_fixable_rule_of_the_family():
    fixable = {r.code for r in rules_by_code().values() if r.fixable and r.code.startswith("GPL5")}
    assert fixable == set(FIXABLE)
    assert {case.values[0] for case in CASES} == fixable


def test_gpl508_use_instead_computes_the_loop_s_advantages():
    # GPL508 offers no fix, but its docs' vectorised form must compute what the reversed loop computes.
    rule = rules_by_code()["GPL508"]
    namespace: dict = {}
    exec(rule.invalid[0].code, namespace)  # defines advantages(values, rewards, gamma, lam)
    torch.manual_seed(0)
    values, rewards = torch.randn(3, 17, dtype=torch.float64), torch.randn(3, 17, dtype=torch.float64)
    looped = namespace["advantages"](values, rewards, 0.99, 0.95)
    inputs = {"torch": torch, "values": values, "rewards": rewards, "gamma": 0.99, "lam": 0.95, "T": 17}
    exec(rule.docs.use_instead, inputs)
    torch.testing.assert_close(inputs["advantages"], looped)
