"""Dynamic shapes: a generator batch factory gets one plan per shape bucket, and apply() picks it per forward."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from gpulint.planner import eager_apply, planfile, planning, shapes
from gpulint.planner.errors import PlanError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LENGTHS = (8, 16, 32)


def example_module():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import model as example
    finally:
        sys.path.remove(str(EXAMPLES))
    return example


def build():
    example = example_module()
    return example.build_model(example.GPTConfig(vocab_size=64, n_layer=2, n_head=2, d_model=32, seq_len=64))


def batch_of(length: int) -> dict:
    idx = torch.randint(0, 64, (2, length + 1), generator=torch.Generator().manual_seed(length))
    return {"idx": idx[:, :-1], "targets": idx[:, 1:]}


def buckets():
    for length in LENGTHS:
        yield batch_of(length)


@pytest.fixture(scope="module")
def bucketed_plan():
    everything = planning.plan_buckets(build, buckets, budget=10**12, hardware="cpu", optimizer="none")
    largest = everything.shapes[-1].baseline.peak_bytes
    smallest = everything.shapes[0].baseline.peak_bytes
    budget = (largest + smallest) // 2  # the small buckets fit as they are, the largest must recompute
    plan = planning.plan_buckets(build, buckets, budget=budget, hardware="cpu", optimizer="none")
    return planfile.to_dict(plan)  # as read back from the file


def recomputes(decisions) -> int:
    return sum(d["action"] == "recompute" for d in decisions)


def test_each_bucket_is_planned_under_the_same_budget(bucketed_plan):
    assert shapes.is_bucketed(buckets) and not shapes.is_bucketed(lambda: batch_of(8))
    entries = bucketed_plan["shapes"]
    assert [entry["signature"] for entry in entries] == [[[2, n], [2, n]] for n in LENGTHS]
    assert recomputes(entries[0]["decisions"]) == 0
    assert recomputes(entries[-1]["decisions"]) > 0
    assert all(entry["planned"]["peak_bytes"] <= bucketed_plan["budget_bytes"] for entry in entries)
    # the top level is the largest bucket's plan, so single-plan readers hold the budget at the largest shape
    assert bucketed_plan["decisions"] == entries[-1]["decisions"]
    assert bucketed_plan["largest_signature"] == [[2, 32], [2, 32]]


def step(model, batch, seed=0):
    torch.manual_seed(seed)
    loss = model(**batch).loss
    loss.backward()
    return loss


@pytest.mark.parametrize("length", LENGTHS)
def test_apply_picks_the_plan_of_each_shape_and_stays_exact(bucketed_plan, length):
    torch.manual_seed(0)
    reference = build().train()
    planned = eager_apply.apply(copy.deepcopy(reference), bucketed_plan)
    state = eager_apply.applied_plan(planned)
    batch = batch_of(length)
    ref_loss, loss = step(reference, batch), step(planned, batch)
    index = LENGTHS.index(length)
    expected = planfile.from_dict({**bucketed_plan, "decisions": bucketed_plan["shapes"][index]["decisions"]})
    assert state.decisions == eager_apply.applicable(expected.decisions) and state.validated
    assert torch.equal(ref_loss, loss)
    for p, q in zip(reference.parameters(), planned.parameters()):
        assert torch.equal(p.grad, q.grad)


def test_an_unplanned_shape_uses_the_largest_plan_with_a_warning(bucketed_plan):
    torch.manual_seed(0)
    reference = build().train()
    planned = eager_apply.apply(copy.deepcopy(reference), bucketed_plan)
    batch = batch_of(24)
    with pytest.warns(UserWarning, match="were not planned"):
        loss = step(planned, batch)
    expected = eager_apply.applicable(planfile.from_dict(bucketed_plan).decisions)
    assert eager_apply.applied_plan(planned).decisions == expected
    assert torch.equal(step(reference, batch), loss)


def test_bad_shapes_field_names_it():
    with pytest.raises(PlanError, match=r"shapes\[0\]"):
        planfile.from_dict({"schema": planfile.SCHEMA, "decisions": [], "shapes": [{"decisions": []}]})


def test_generator_that_yields_nothing():
    def empty():
        yield from ()

    with pytest.raises(PlanError, match="yielded no batch"):
        shapes.bucket_factories(empty)


def test_two_buckets_with_the_same_shape_are_refused():
    def twice():
        yield batch_of(8)
        yield batch_of(8)

    with pytest.raises(PlanError, match="same shapes"):
        planning.plan_buckets(build, twice, budget=10**12, hardware="cpu", optimizer="none")


FACTORIES = '''\
import torch
from torch import nn


def build_model():
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))


def make_batch():
    for rows in (4, 16):
        yield torch.randn(rows, 8)
'''


def test_gpulint_plan_on_a_generator_batch_factory(tmp_path, capsys):
    import json

    from gpulint.cli import main

    (tmp_path / "model.py").write_text(FACTORIES)
    config = tmp_path / "gpulint.yaml"
    config.write_text("plan:\n  model: model.py:build_model\n  batch: model.py:make_batch\n  hardware: cpu\n")
    assert main(["plan", str(config), "--format", "json", "--budget", "1GB"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [entry["signature"] for entry in plan["shapes"]] == [[[4, 8]], [[16, 8]]]
    assert plan["largest_signature"] == [[16, 8]]
    assert main(["plan", str(config), "--measure"]) == 2
    assert "--measure and --sweep take one batch shape" in capsys.readouterr().err
