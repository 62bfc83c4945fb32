"""Plans made by the planner itself (trace -> greedy -> plan JSON), applied in eager mode at three budgets.

The planned step's loss and gradients equal the unplanned step's bitwise (CPU fp32, dropout on), every decision's
address is found in the eager forward, and the tightest budget really checkpoints layers.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from gpulint.planner import eager_apply, planfile
from gpulint.planner.eager_predict import predict
from gpulint.planner.planning import eager_fitting_plan, plan_from_result
from gpulint.planner.cost import node_times
from gpulint.planner.errors import PlanError
from gpulint.planner.greedy import GreedyPlanner
from gpulint.planner.hardware import load_hardware
from gpulint.planner.step import default_loss, split_batch
from gpulint.planner.trace import trace_step

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SHARES = (0.0, 0.5, 0.9)  # budget = lowest reachable peak + share * (today's peak - lowest)


def plans_at_three_budgets(build, make_batch, loss_fn=None) -> list[dict]:
    try:
        traced = trace_step(build, make_batch, loss_fn=loss_fn, optimizer="none")
    except (PlanError, ValueError) as exc:  # the planner cannot trace this model yet: a visible skip with the reason
        pytest.skip(f"planner trace: {exc}")
    hardware = load_hardware("cpu")
    planner = GreedyPlanner(traced.graph, node_times(traced.graph, hardware), hardware.allocation_rounding)
    full = planner.run(None)
    top, bottom = full.baseline.peak, full.lowest_peak
    plans = []
    for share in SHARES:
        result = planner.for_budget(full, int(bottom + share * (top - bottom)))
        plan = plan_from_result(traced.graph, result, hardware=hardware.name)
        plans.append(json.loads(planfile.dump(plan)))
    return plans


def loss_of(output, batch, loss_fn):
    return loss_fn(output, batch) if loss_fn else default_loss(output)


def run_step(model, batch, loss_fn, seed):
    torch.manual_seed(seed)
    args, kwargs = split_batch(batch)
    loss = loss_of(model(*args, **kwargs), batch, loss_fn)  # like the traced step, keeps no other output
    loss.backward()
    return loss


def assert_plans_apply_exactly(build, make_batch, loss_fn=None) -> None:
    plans = plans_at_three_budgets(build, make_batch, loss_fn)
    assert any(d["action"] == "recompute" for d in plans[0]["decisions"]), "the tightest plan recomputes something"
    torch.manual_seed(0)
    reference = build().train()
    batch = make_batch()
    ref_loss = run_step(reference, batch, loss_fn, seed=1)
    for share, plan in zip(SHARES, plans):
        planned = copy.deepcopy(reference)
        planned.zero_grad(set_to_none=True)
        eager_apply.apply(planned, plan)
        loss = run_step(planned, batch, loss_fn, seed=1)
        state = eager_apply.applied_plan(planned)
        assert state.validated, share
        assert torch.equal(ref_loss, loss), share
        for (name, p), (_, q) in zip(reference.named_parameters(), planned.named_parameters()):
            assert (p.grad is None and q.grad is None) or torch.equal(p.grad, q.grad), (share, name)
    assert eager_apply.applied_plan(planned) is not None


def test_eager_peak_prediction_matches_the_measured_eager_step():
    from gpulint.planner.measure import LiveStorageTracker

    build, make_batch = example_gpt()
    traced = trace_step(build, make_batch, optimizer="none")
    hardware = load_hardware("cpu")
    planner = GreedyPlanner(traced.graph, node_times(traced.graph, hardware), 1)
    full = planner.run(None)
    for share in SHARES:
        result = planner.for_budget(full, int(full.lowest_peak + share * (full.baseline.peak - full.lowest_peak)))
        plan = plan_from_result(traced.graph, result, hardware="cpu")
        predicted = predict(traced.graph, plan, build())
        torch.manual_seed(0)
        model = eager_apply.apply(build(), plan)
        batch = make_batch()
        run_step(model, batch, None, seed=0)  # first step validates the plan
        model.zero_grad(set_to_none=True)
        tracker = LiveStorageTracker()
        tracker.register([list(model.parameters()), batch])
        with tracker:
            run_step(model, batch, None, seed=0)
        assert abs(predicted.peak_bytes - tracker.peak) <= 0.02 * tracker.peak, (share, predicted.peak_bytes, tracker.peak)


def example_gpt():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import model as example
    finally:
        sys.path.remove(str(EXAMPLES))
    config = example.GPTConfig(vocab_size=128, n_layer=2, n_head=2, d_model=64, seq_len=64, batch_size=2)
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


def test_example_gpt_plans_apply_exactly():
    build, make_batch = example_gpt()
    assert_plans_apply_exactly(build, make_batch)


def test_dropout_model_plans_apply_exactly():
    # A batch large enough that activations, not parameters, make the peak.
    assert_plans_apply_exactly(dropout_stack, lambda: torch.randn(512, 8), loss_fn=lambda out, batch: out.square().mean())


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "llama", "bert", "t5", "vit"])
def test_transformers_plans_apply_exactly(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location("_eager_models", Path(__file__).with_name("test_eager_models.py"))
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)

    def build():
        model, _ = models.build(name)
        return model

    assert_plans_apply_exactly(build, lambda: models.MODELS[name]()[1])


TINY_GPT = """\
import sys

sys.path.insert(0, {examples!r})
import model as example

CONFIG = example.GPTConfig(vocab_size=128, n_layer=2, n_head=2, d_model=64, seq_len=64, batch_size=2)


def build_model():
    return example.build_model(CONFIG)


def make_batch():
    return example.make_batch(CONFIG)
"""


def test_gpulint_plan_reports_predicted_and_measured_eager_figures(tmp_path, capsys):
    from gpulint.cli import main

    (tmp_path / "tiny.py").write_text(TINY_GPT.format(examples=str(EXAMPLES)))
    config = tmp_path / "gpulint.yaml"
    config.write_text("plan:\n  model: tiny.py:build_model\n  batch: tiny.py:make_batch\n  optimizer: sgd\n"
                      "  hardware: cpu\n")
    assert main(["plan", str(config), "--format", "json", "--budget", "1GB"]) == 0
    today = json.loads(capsys.readouterr().out)["baseline"]["peak_bytes"]
    assert main(["plan", str(config), "--format", "json", "--budget", str(int(today * 0.9)), "--measure"]) == 0
    plan = json.loads(capsys.readouterr().out)
    figures = plan["eager"]
    assert figures["layers"], "the plan checkpoints some layers"
    assert figures["measured"]["device"] == "cpu"
    measured, predicted = figures["measured"]["peak_bytes"], figures["measured"]["predicted_peak_bytes"]
    assert abs(predicted - measured) <= 0.02 * measured  # the target; equal to the byte when last run


def test_eager_fitting_plan_holds_the_budget_in_eager_mode():
    build, make_batch = example_gpt()
    traced = trace_step(build, make_batch, optimizer="none")
    hardware = load_hardware("cpu")
    planner = GreedyPlanner(traced.graph, node_times(traced.graph, hardware), 1)
    full = planner.run(None)

    def eager_peak(plan):
        return predict(traced.graph, plan, build()).peak_bytes

    def plan_at(budget):
        return plan_from_result(traced.graph, planner.for_budget(full, budget), hardware="cpu")

    lowest, highest = eager_peak(plan_at(full.lowest_peak)), eager_peak(plan_at(full.baseline.peak))
    assert lowest < highest
    target = (lowest + highest) // 2
    fitting = eager_fitting_plan(traced.graph, build(), target, hardware)
    assert fitting is not None and eager_peak(fitting) <= target
    # apply() and predict() take the eager decisions when a plan carries them
    carrier = plan_at(full.baseline.peak)
    carrier.eager = planfile.EagerForm(peak_bytes=0, step_time_s=0.0, decisions=fitting.decisions)
    assert eager_peak(carrier) == eager_peak(fitting)
    assert eager_fitting_plan(traced.graph, build(), lowest - 1, hardware) is None
