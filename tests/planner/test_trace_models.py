"""Steps the trace once failed on: models whose initialisers read values (ViT), T5, and steps that read tensor
values in forward (graph breaks for torch.compile), planned for the whole step and applied in eager mode."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from gpulint.cli import main
from gpulint.planner import eager_apply
from gpulint.planner.backend import compile as compile_plan
from gpulint.planner.backend import gpulint_backend
from gpulint.planner.errors import PlanError

HERE = Path(__file__).resolve().parent
MODELS = HERE / "models.py"
BENCH = HERE.parents[1] / "bench"


def _config(tmp_path: Path, model: str, batch: str, optimizer: str = "sgd") -> str:
    path = tmp_path / "gpulint.yaml"
    path.write_text(f"plan:\n  model: {model}\n  batch: {batch}\n  optimizer: {optimizer}\n  hardware: cpu\n")
    return str(path)


def _plan(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return json.loads(captured.out)


def _line_of(text: str) -> int:
    return next(i for i, line in enumerate(MODELS.read_text().splitlines(), 1) if text in line)


def test_a_model_whose_initialiser_reads_values_plans(tmp_path, capsys):
    plan = _plan(capsys, ["plan", _config(tmp_path, f"{MODELS}:trunc_normal_init", f"{MODELS}:mlp_batch"),
                          "--budget", "1GB", "--format", "json"])
    assert plan["eager"]["peak_bytes"] == plan["planned"]["peak_bytes"]  # nothing recomputed either way


# --- graph breaks: a branch on a tensor value and a .item() in forward -------------------------------------------


@pytest.fixture(scope="module")
def branchy_plan(tmp_path_factory):
    """The plan `gpulint plan` makes for models.Branchy at a budget between its floor and today's peak."""
    tmp = tmp_path_factory.mktemp("branchy")
    config = _config(tmp, f"{MODELS}:branchy", f"{MODELS}:branchy_batch", optimizer="none")
    assert main(["plan", config, "--format", "json", "--out", str(tmp / "all"), "--sweep", "2"]) == 0
    today = json.loads((tmp / "all" / "plan.json").read_text())
    budget = (today["lowest_peak_bytes"] + today["baseline"]["peak_bytes"]) // 2
    assert main(["plan", config, "--format", "json", "--out", str(tmp / "tight"), "--budget", str(budget),
                 "--measure"]) == 0
    return today, json.loads((tmp / "tight" / "plan.json").read_text())


def test_value_reads_are_reported_with_their_source_lines(branchy_plan):
    _, plan = branchy_plan
    reads = plan["data_dependent"]
    assert [(r["path"].endswith("models.py"), r["line"]) for r in reads] == [
        (True, _line_of("if x.sum() > 0:")), (True, _line_of("scale = x.abs().mean().item()")),
    ]
    assert "bool" in reads[0]["op"] and "item" in reads[1]["op"]


def test_the_whole_step_is_planned_under_the_budget(branchy_plan):
    today, plan = branchy_plan
    assert plan["feasible"] and plan["planned"]["peak_bytes"] <= plan["budget_bytes"] < today["baseline"]["peak_bytes"]
    assert any(d["action"] == "recompute" for d in plan["decisions"])
    # the eager path: measured in eager mode (the compiled path refuses, and says why), and it is what was predicted
    figures = plan["eager"]
    assert figures["layers"] and "tensor values" in plan["measured"]["error"]
    assert figures["measured"]["peak_bytes"] == figures["measured"]["predicted_peak_bytes"] == figures["peak_bytes"]


def test_the_plan_applies_in_eager_mode_with_the_same_gradients(branchy_plan):
    from tests.planner import models

    _, plan = branchy_plan
    torch.manual_seed(0)
    reference = models.branchy()
    planned = eager_apply.apply(copy.deepcopy(reference), plan)
    batch = models.branchy_batch()
    for model in (reference, planned):
        model(batch).sum().backward()
    assert eager_apply.applied_plan(planned).validated and not eager_apply.applied_plan(planned).left_out
    for (name, p), (_, q) in zip(reference.named_parameters(), planned.named_parameters()):
        assert torch.equal(p.grad, q.grad), name


def test_the_compiled_path_refuses_the_plan_naming_the_line(branchy_plan):
    from tests.planner import models

    _, plan = branchy_plan
    line = _line_of("if x.sum() > 0:")
    for make in (lambda: gpulint_backend(plan), lambda: compile_plan(models.branchy(), plan)):
        with pytest.raises(PlanError, match=rf"models.py:{line}.*eager mode"):
            make()


# Ops whose output shape depends on values (`y[y > 0]`): tests/planner/test_dynamic_ops.py


# --- real transformers models (slow) -------------------------------------------------------------------------------

TINY = """\
import sys
sys.path.insert(0, {bench!r})
import planner_models

build, make_batch = planner_models.{family}({args})
"""


@pytest.mark.slow
@pytest.mark.parametrize("family, args", [
    ("t5", "n_layer=2, d=64, seq=64, batch=4, vocab=128"),
    ("vit", "n_layer=2, d=64, image=64, patch=8, batch=4"),
])
def test_t5_and_vit_plan_and_measure(tmp_path, capsys, family, args):
    (tmp_path / "tiny.py").write_text(TINY.format(bench=str(BENCH), family=family, args=args))
    config = _config(tmp_path, "tiny.py:build", "tiny.py:make_batch")
    today = _plan(capsys, ["plan", config, "--sweep", "2", "--format", "json"])
    budget = (today["lowest_peak_bytes"] + today["baseline"]["peak_bytes"]) // 2
    plan = _plan(capsys, ["plan", config, "--budget", str(budget), "--format", "json", "--measure"])
    assert plan["feasible"] and any(d["action"] == "recompute" for d in plan["decisions"])
    assert plan["measured"]["peak_bytes"] <= budget
    assert plan["measured"]["loss"] == pytest.approx(plan["measured"]["baseline_loss"], rel=1e-6)
    eager_measured = plan["eager"]["measured"]
    assert abs(eager_measured["predicted_peak_bytes"] - eager_measured["peak_bytes"]) <= 0.02 * eager_measured["peak_bytes"]


def test_a_forward_down_another_branch_warns_that_the_plan_does_not_hold():
    import warnings

    from gpulint.planner.cost import node_times
    from gpulint.planner.greedy import GreedyPlanner
    from gpulint.planner.hardware import load_hardware
    from gpulint.planner.planning import plan_from_result
    from gpulint.planner.trace import trace_step
    from tests.planner import models

    traced = trace_step(models.branch_in_layers, models.positive_batch, optimizer="none")
    assert [r["line"] for r in traced.data_dependent] == [_line_of("positive = bool(x.mean() > 0)")]
    cpu = load_hardware("cpu")
    result = GreedyPlanner(traced.graph, node_times(traced.graph, cpu), 1).run(None)  # the lowest peak
    tightest = plan_from_result(traced.graph, result, hardware="cpu")
    torch.manual_seed(0)
    reference = models.branch_in_layers()
    planned = eager_apply.apply(copy.deepcopy(reference), tightest)
    assert eager_apply.applied_plan(planned).regions
    positive = models.positive_batch()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the planned branch, twice: no warning
        for _ in range(2):
            planned(positive).backward()
    with pytest.warns(UserWarning, match="another path than the one planned"):
        planned(-positive).backward()
    reference(positive).backward()
    reference(positive).backward()
    reference(-positive).backward()
    for (name, p), (_, q) in zip(reference.named_parameters(), planned.named_parameters()):
        assert torch.equal(p.grad, q.grad), name  # memory differs from the plan, results do not


def test_a_model_that_fails_when_really_run_is_one_line(tmp_path, capsys):
    """It runs only when compiled: the compiled form is planned and measured, the eager form says why it is not."""
    config = _config(tmp_path, f"{MODELS}:fails_when_run", f"{MODELS}:mlp_batch")
    assert main(["plan", config, "--budget", "1GB", "--format", "json", "--measure"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    plan = json.loads(captured.out)
    assert plan["eager"]["error"].startswith("the eager step could not be run on fake tensors")
    assert plan["eager"]["error"].endswith("RuntimeError: boom at run time")
    assert plan["measured"]["peak_bytes"] == plan["measured"]["predicted_peak_bytes"]
    assert "measured" not in plan["eager"]
