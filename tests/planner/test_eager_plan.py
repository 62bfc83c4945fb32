"""The eager form planned by the planner itself: the step eager mode runs, recorded on fake tensors, planned with the
greedy over its own simulation, and checked by running it under the plan.

Today's figure and every planned figure equal the real eager step's measured peak (CPU, fp32); the planned step's
loss and gradients equal the unplanned step's bitwise, with dropout on.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from gpulint.planner import eager_apply
from gpulint.planner.eager_trace import trace_eager
from gpulint.planner.hardware import load_hardware
from gpulint.planner.measure import measure_eager
from gpulint.planner.planfile import Plan
from gpulint.planner.planning import plan_eager
from gpulint.planner.step import as_step

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CPU = load_hardware("cpu")
SHARES = (0.85, 0.7, 0.55)  # budgets as shares of today's peak


def example_gpt():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import model as example
    finally:
        sys.path.remove(str(EXAMPLES))
    config = example.GPTConfig(vocab_size=128, n_layer=2, n_head=2, d_model=64, seq_len=64, batch_size=4)
    return (lambda: example.build_model(config)), (lambda: example.make_batch(config))


class DropoutBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 64)
        self.out = torch.nn.Linear(64, 16)
        self.drop = torch.nn.Dropout(0.3)

    def forward(self, x):
        return x + self.drop(self.out(torch.tanh(self.fc(x))))


def dropout_stack():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), *(DropoutBlock() for _ in range(3)), torch.nn.Linear(16, 1))


def square_mean(out, batch):
    return out.square().mean()


CASES = {
    "gpt": (*example_gpt(), None),
    # a batch large enough that activations, not parameters, make the peak
    "dropout": (dropout_stack, lambda: torch.randn(512, 8, generator=torch.Generator().manual_seed(0)), square_mean),
}


def eager_plans(build, make_batch, loss_fn) -> tuple[object, list[Plan]]:
    program = trace_eager(build, make_batch, loss_fn=loss_fn, optimizer="none")
    plans = []
    for share in SHARES:
        budget = int(share * program.peak_bytes)
        plans.append(Plan(decisions=[], eager=plan_eager(program, CPU, budget, budget)))
    return program, plans


def run_step(model, batch, loss_fn, seed):
    torch.manual_seed(seed)
    loss = as_step(loss_fn)(model, batch)
    loss.backward()
    return loss


@pytest.mark.parametrize("case", sorted(CASES))
def test_todays_eager_peak_is_the_measured_one(case):
    build, make_batch, loss_fn = CASES[case]
    program = trace_eager(build, make_batch, loss_fn=loss_fn, optimizer="adamw")
    assert program.peak_bytes == measure_eager(build, make_batch, None, loss_fn=loss_fn, repeats=1).peak_bytes


@pytest.mark.parametrize("case", sorted(CASES))
def test_eager_plans_hold_their_figures_and_are_exact(case):
    build, make_batch, loss_fn = CASES[case]
    _program, plans = eager_plans(build, make_batch, loss_fn)
    assert plans[-1].eager.layers, "the tightest plan checkpoints layers"
    torch.manual_seed(0)
    reference = build().train()
    batch = make_batch()
    ref_loss = run_step(reference, batch, loss_fn, seed=1)
    for share, plan in zip(SHARES, plans):
        measured = measure_eager(build, make_batch, plan, loss_fn=loss_fn, optimizer="none", repeats=1)
        assert measured.peak_bytes == plan.eager.peak_bytes, share  # predicted by running it: to the byte
        planned = copy.deepcopy(reference)
        planned.zero_grad(set_to_none=True)
        eager_apply.apply(planned, plan)
        for _ in range(2):  # the first step checks each layer; the second runs the plan
            planned.zero_grad(set_to_none=True)
            loss = run_step(planned, batch, loss_fn, seed=1)
        state = eager_apply.applied_plan(planned)
        assert state.validated and not state.left_out, share
        assert torch.equal(ref_loss, loss), share
        for (name, p), (_, q) in zip(reference.named_parameters(), planned.named_parameters()):
            assert (p.grad is None and q.grad is None) or torch.equal(p.grad, q.grad), (share, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "llama", "bert", "t5", "vit"])
def test_transformers_eager_plans_are_exact(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location("_eager_models", Path(__file__).with_name("test_eager_models.py"))
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)

    def build():
        model, _ = models.build(name)
        return model

    def make_batch():
        return models.MODELS[name]()[1]

    _program, plans = eager_plans(build, make_batch, None)
    torch.manual_seed(0)
    reference = build().train()
    batch = make_batch()
    ref_loss = run_step(reference, batch, None, seed=1)
    for plan in plans:
        planned = copy.deepcopy(reference)
        eager_apply.apply(planned, plan)
        for _ in range(2):
            planned.zero_grad(set_to_none=True)
            loss = run_step(planned, batch, None, seed=1)
        assert torch.equal(ref_loss, loss)
        for p, q in zip(reference.parameters(), planned.parameters()):
            assert (p.grad is None and q.grad is None) or torch.equal(p.grad, q.grad)


TINY_GPT = """\
import sys

sys.path.insert(0, {examples!r})
import model as example

CONFIG = example.GPTConfig(vocab_size=128, n_layer=2, n_head=2, d_model=64, seq_len=64, batch_size=4)


def build_model():
    return example.build_model(CONFIG)


def make_batch():
    return example.make_batch(CONFIG)
"""


def test_gpulint_plan_measures_both_forms(tmp_path, capsys):
    from gpulint.cli import main

    (tmp_path / "tiny.py").write_text(TINY_GPT.format(examples=str(EXAMPLES)))
    config = tmp_path / "gpulint.yaml"
    config.write_text("plan:\n  model: tiny.py:build_model\n  batch: tiny.py:make_batch\n  optimizer: sgd\n"
                      "  hardware: cpu\n")
    assert main(["plan", str(config), "--format", "json", "--budget", "1GB"]) == 0
    today = json.loads(capsys.readouterr().out)["baseline"]["peak_bytes"]
    assert main(["plan", str(config), "--format", "json", "--budget", str(int(today * 0.8)), "--measure"]) == 0
    plan = json.loads(capsys.readouterr().out)
    eager, compiled = plan["eager"], plan["measured"]
    assert eager["layers"] and eager["fits_budget"]
    assert eager["measured"]["peak_bytes"] == eager["measured"]["predicted_peak_bytes"] == eager["peak_bytes"]
    assert eager["measured"]["baseline_peak_bytes"] == today
    assert compiled["peak_bytes"] == compiled["predicted_peak_bytes"] <= int(today * 0.8)
