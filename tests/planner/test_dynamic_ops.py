"""Steps with ops whose output shape depends on tensor values (`h[mask]`, `torch.nonzero`): traced by replaying
the shapes one real run gives, planned for the whole step, applied in eager mode with unchanged results, and
refused by the compiled path; a step that does not repeat those shapes fails with one line."""

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
from gpulint.planner.trace import trace_step

HERE = Path(__file__).resolve().parent
MODELS = HERE / "models.py"

CASES = {  # model factory -> (batch factory, the line with the value-dependent op, its name in the report)
    "masked_rows": ("branchy_batch", "h = h[x[:, 0] > 0]", "boolean-mask indexing"),
    "nonzero_rows": ("branchy_batch", "rows = torch.nonzero(x[:, 1] > -0.5)", "nonzero"),
}


def _config(tmp_path: Path, model: str, batch: str) -> str:
    path = tmp_path / "gpulint.yaml"
    path.write_text(f"plan:\n  model: {MODELS}:{model}\n  batch: {MODELS}:{batch}\n  optimizer: none\n  hardware: cpu\n")
    return str(path)


def _line_of(text: str) -> int:
    return next(i for i, line in enumerate(MODELS.read_text().splitlines(), 1) if text in line)


@pytest.fixture(scope="module", params=sorted(CASES))
def planned(request, tmp_path_factory):
    """(model name, the plan `gpulint plan --measure` makes at a budget between the lowest peak and today's)."""
    name = request.param
    tmp = tmp_path_factory.mktemp(name)
    config = _config(tmp, name, CASES[name][0])
    assert main(["plan", config, "--format", "json", "--out", str(tmp / "all"), "--sweep", "2"]) == 0
    today = json.loads((tmp / "all" / "plan.json").read_text())
    budget = (today["lowest_peak_bytes"] + today["baseline"]["peak_bytes"]) // 2
    assert main(["plan", config, "--format", "json", "--out", str(tmp / "tight"), "--budget", str(budget),
                 "--measure"]) == 0
    return name, today, json.loads((tmp / "tight" / "plan.json").read_text())


def test_the_op_is_reported_with_its_source_line(planned):
    name, _, plan = planned
    _, line, op = CASES[name]
    assert [(r["op"], r["path"].endswith("models.py"), r["line"]) for r in plan["data_dependent"]] == [
        (op, True, _line_of(line))]


def test_the_joint_graph_keeps_the_op_and_its_gradient_path():
    from tests.planner import models

    traced = trace_step(models.masked_rows, models.branchy_batch, optimizer="none")
    kept = int((models.branchy_batch()[:, 0] > 0).sum())
    index = [n for n in traced.joint.graph.nodes if str(n.target) == "aten.index.Tensor"]
    assert [tuple(n.meta["val"].shape) for n in index] == [(kept, 32)]  # the recorded size, not a guess
    # the masked rows' gradient is scattered back through the same mask (index_put), not cut off
    scatter = [n for n in traced.joint.graph.nodes if str(n.target) == "aten.index_put.default"]
    assert len(scatter) == 1 and scatter[0].args[1] == index[0].args[1]


def test_the_whole_step_is_planned_and_the_eager_peak_is_predicted(planned):
    _, today, plan = planned
    assert plan["feasible"] and plan["planned"]["peak_bytes"] <= plan["budget_bytes"] < today["baseline"]["peak_bytes"]
    assert any(d["action"] == "recompute" for d in plan["decisions"])
    figures = plan["eager"]
    assert figures["layers"] and "tensor values" in plan["measured"]["error"]  # the compiled path refuses
    assert figures["measured"]["peak_bytes"] == figures["measured"]["predicted_peak_bytes"] == figures["peak_bytes"]


def test_the_plan_applies_in_eager_mode_with_the_same_loss_and_gradients(planned):
    from tests.planner import models

    name, _, plan = planned
    build, batch = getattr(models, name), getattr(models, CASES[name][0])()
    torch.manual_seed(0)
    reference = build()
    applied = eager_apply.apply(copy.deepcopy(reference), plan)
    losses = [model(batch) for model in (reference, applied)]
    for loss in losses:
        loss.backward()
    assert eager_apply.applied_plan(applied).validated
    assert torch.equal(losses[0], losses[1])
    for (param, p), (_, q) in zip(reference.named_parameters(), applied.named_parameters()):
        assert torch.equal(p.grad, q.grad), param


def test_the_compiled_path_refuses_the_plan_naming_the_line(planned):
    from tests.planner import models

    name, _, plan = planned
    line = _line_of(CASES[name][1])
    for make in (lambda: gpulint_backend(plan), lambda: compile_plan(getattr(models, name)(), plan)):
        with pytest.raises(PlanError, match=rf"models.py:{line}.*eager mode"):
            make()


def test_a_value_dependent_shape_in_the_backward_is_recorded_too():
    from tests.planner import models

    traced = trace_step(models.masked_backward, models.mlp_batch, optimizer="none")
    line = _line_of("return x.clone()")  # the forward of the Function whose backward it is
    assert [(r["op"], r["line"]) for r in traced.data_dependent] == [("aten.nonzero.default in the backward", line)]
    nonzero = [n for n in traced.joint.graph.nodes if str(n.target) == "aten.nonzero.default"]
    assert len(nonzero) == 1 and nonzero[0].meta["val"].shape[0] > 0


def test_a_forward_and_a_backward_with_value_dependent_shapes_are_both_replayed():
    from tests.planner import models

    traced = trace_step(models.masked_both_ways, models.branchy_batch, optimizer="none")
    assert [(r["op"], r["line"]) for r in traced.data_dependent] == [
        ("boolean-mask indexing", _line_of("h = h[x[:, 0] > 0]")),
        ("aten.nonzero.default in the backward", _line_of("return x.clone()")),
    ]


def test_a_later_batch_with_another_count_keeps_the_gradients(planned):
    """The plan was made for the sample batch's count; another count changes memory, never results."""
    from tests.planner import models

    name, _, plan = planned
    build, batch = getattr(models, name), -getattr(models, CASES[name][0])()
    torch.manual_seed(0)
    reference = build()
    applied = eager_apply.apply(copy.deepcopy(reference), plan)
    for model in (reference, applied):
        model(batch).backward()
    for (param, p), (_, q) in zip(reference.named_parameters(), applied.named_parameters()):
        assert torch.equal(p.grad, q.grad), param


def _value_shaped(fn) -> list[tuple[str, list[tuple[int, ...]]]]:
    """Each op tagged as having a value-dependent output shape that `fn` runs, with its output shapes."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if torch.Tag.dynamic_output_shape in func.tags:
                outs = out if isinstance(out, (tuple, list)) else [out]
                seen.append((str(func), [tuple(o.shape) for o in outs]))
            return out

    with Log():
        fn()
    return seen


@pytest.mark.parametrize("kind, reported", [
    ("masked_select", "masked_select"), ("unique", "unique"),
    ("repeat_interleave", "repeat_interleave(tensor repeats)"), ("where", "torch.where(condition)"),
])
def test_each_value_shaped_op_is_traced_with_the_shapes_it_really_has(kind, reported):
    from tests.planner import models

    traced = trace_step(lambda: models.ValueShapeOp(kind), models.value_shape_batch, optimizer="none")
    assert [r["op"] for r in traced.data_dependent] == [reported]
    torch.manual_seed(0)
    real = _value_shaped(lambda: models.ValueShapeOp(kind)(models.value_shape_batch()))
    nodes = [n for n in traced.joint.graph.nodes
             if n.op == "call_function" and torch.Tag.dynamic_output_shape in getattr(n.target, "tags", ())]
    vals = [n.meta["val"] if isinstance(n.meta["val"], (tuple, list)) else [n.meta["val"]] for n in nodes]
    assert [(str(n.target), [tuple(v.shape) for v in val]) for n, val in zip(nodes, vals)] == real


def test_the_mask_of_a_scalar_loss_model_plans(tmp_path, capsys):
    assert main(["plan", _config(tmp_path, "data_dependent", "mlp_batch"), "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [(r["op"], r["line"]) for r in plan["data_dependent"]] == [
        ("boolean-mask indexing", _line_of("return y[y > 0].sum()"))]


def test_shapes_that_do_not_repeat_fail_with_one_line(tmp_path, capsys):
    assert main(["plan", _config(tmp_path, "masked_rows", "shifting_batch")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("gpulint: error:")]
    assert len(errors) == 1
    assert f"models.py:{_line_of('h = h[x[:, 0] > 0]')}" in errors[0] and "not deterministic" in errors[0]
