"""The plan file: one format, read and written in one module, backward compatible within gpulint.plan/1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulint.errors import UsageError
from gpulint.planner import planfile
from gpulint.planner.errors import PlanFileError

FIXTURE = Path(__file__).resolve().parents[1] / "bot" / "fixtures" / "plan.json"

# A plan as gpulint 0.1.0 wrote it (before the plan file had its own module): every field it had must still load.
OLD_PLAN = {
    "schema": "gpulint.plan/1", "model": "model.py:build_model", "hardware": "h100-sxm", "dtype": "fp32",
    "budget_bytes": 200000000, "feasible": True, "floor_bytes": 85175296, "lowest_peak_bytes": 150000000,
    "baseline": {"peak_bytes": 303240000, "step_time_s": 0.00176},
    "planned": {"peak_bytes": 198290000, "step_time_s": 0.00198, "recompute_time_s": 0.00023},
    "decisions": [
        {"id": "addmm_4", "op": "aten.addmm.default", "bytes": 8388608, "action": "recompute", "module": "h.0.fc",
         "call_index": 0, "source": {"path": "examples/model.py", "line": 52}},
        {"id": "getitem_3", "op": "aten.native_layer_norm.default", "bytes": 4096, "action": "save", "module": "h.0.ln_1",
         "call_index": 0, "source": None},
    ],
    "excluded": [{"id": "native_dropout", "op": "aten.native_dropout.default", "reason": "random op",
                  "source": None, "module": "h.0", "call_index": 0}],
    "timeline": {"baseline": [[0, 100], [3, 300]], "planned": [[0, 100], [3, 200]]},
    "stats": {"ops": 530, "trace_seconds": 3.9, "plan_seconds": 2.1, "greedy_steps": 29},
    "data_dependent": [{"op": "Tensor.item()", "path": "model.py", "line": 9}],
    "eager": {"decisions": [{"id": "addmm_4", "op": "aten.addmm.default", "bytes": 8388608, "action": "recompute",
                             "module": "h.0.fc", "call_index": 0, "source": None}],
              "planned_for_bytes": 190000000, "peak_bytes": 199000000, "step_time_s": 0.00217,
              "recompute_time_s": 0.00041, "layers": ["h.0"], "fits_budget": True,
              "measured": {"peak_bytes": 199000000, "step_time_s": 0.1, "device": "cpu",
                           "predicted_peak_bytes": 199000000}},
    "measured": {"peak_bytes": 198290000, "step_time_s": 0.2, "device": "cpu", "predicted_peak_bytes": 198290000,
                 "baseline_peak_bytes": 303240000, "baseline_predicted_peak_bytes": 303240000,
                 "baseline_step_time_s": 0.15, "loss": 5.5, "baseline_loss": 5.5},
    "sweep": [{"budget_bytes": 150000000, "peak_bytes": 149000000, "step_time_s": 0.002, "recompute_time_s": 0.0003,
               "feasible": True}],
}


def test_an_old_plan_loads_and_writes_back_the_same():
    plan = planfile.from_dict(OLD_PLAN, complete=True)
    assert plan.decisions[0].describe() == "aten.addmm.default call 0 in module 'h.0.fc'"
    assert plan.eager_decisions()[0].id == "addmm_4" and plan.eager.measured.device == "cpu"
    written = planfile.to_dict(plan)
    assert written.keys() == OLD_PLAN.keys() and written["decisions"] == OLD_PLAN["decisions"]
    assert written["excluded"] == OLD_PLAN["excluded"] and written["timeline"] == OLD_PLAN["timeline"]
    assert planfile.from_dict(written) == plan


def test_round_trip_through_text(tmp_path):
    plan = planfile.from_dict(OLD_PLAN)
    planfile.save(plan, tmp_path / "sub" / "plan.json")
    assert planfile.load(tmp_path / "sub" / "plan.json") == plan
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["plan.json"]  # nothing half-written left behind


def test_the_bots_fixture_loads_with_plain_timelines_and_float_bytes():
    plan = planfile.load(FIXTURE, complete=True)
    assert plan.budget_bytes == 24_000_000_000 and isinstance(plan.budget_bytes, int)
    assert plan.timeline.baseline[:2] == [[0, 8800000000], [1, 9609792844]]
    assert plan.decisions[0].call_index is None  # written without an eager address


def test_a_partial_plan_is_enough_to_apply_but_not_to_report():
    partial = {"schema": planfile.SCHEMA, "decisions": []}
    assert planfile.from_dict(partial).baseline is None
    with pytest.raises(PlanFileError, match=r"^plan\.baseline: missing$"):
        planfile.from_dict(partial, complete=True)


def test_without_eager_decisions_eager_mode_applies_the_plans_own():
    plan = planfile.from_dict({**OLD_PLAN, "eager": {"peak_bytes": 1, "step_time_s": 0.1}})
    assert plan.eager_decisions() is plan.decisions


@pytest.mark.parametrize(("change", "message"), [
    ({"schema": "gpulint.plan/9"}, r"plan\.schema: expected 'gpulint\.plan/1', got 'gpulint\.plan/9'"),
    ({"decisions": {}}, r"plan\.decisions: expected a list, got dict"),
    ({"decisions": [{"op": "aten.mm.default", "action": "drop"}]}, r"plan\.decisions\[0\]\.action: expected 'save'"),
    ({"decisions": [{"op": "aten.mm.default", "action": "save", "call_index": -1}]}, r"decisions\[0\]\.call_index"),
    ({"decisions": [{"action": "save"}]}, r"plan\.decisions\[0\]\.op: missing"),
    ({"baseline": {"peak_bytes": "big", "step_time_s": 1}}, r"plan\.baseline\.peak_bytes: expected a number, got str"),
    ({"eager": {"layers": [3]}}, r"plan\.eager\.layers\[0\]: expected a string, got int"),
    ({"timeline": {"baseline": [["a", 1]]}}, r"plan\.timeline\.baseline\[0\]"),
])
def test_errors_name_the_field(change, message):
    with pytest.raises(PlanFileError, match=message) as info:
        planfile.from_dict({**OLD_PLAN, **change})
    assert "\n" not in str(info.value) and isinstance(info.value, UsageError)


def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(PlanFileError, match=r"missing\.json: plan file not found"):
        planfile.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(PlanFileError, match=r"bad\.json: not valid JSON"):
        planfile.load(bad)
    big = tmp_path / "big.json"
    big.write_text(json.dumps(OLD_PLAN))
    with pytest.raises(PlanFileError, match=r"big\.json: the plan is \d+ bytes, over the 100 byte limit"):
        planfile.load(big, max_bytes=100)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**OLD_PLAN, "feasible": "yes"}))
    with pytest.raises(PlanFileError, match=r"wrong\.json: plan\.feasible: expected true or false"):
        planfile.load(wrong)


def test_coerce_takes_a_plan_its_dict_or_its_path(tmp_path):
    plan = planfile.from_dict(OLD_PLAN)
    path = tmp_path / "p.json"
    planfile.save(plan, path)
    assert planfile.coerce(plan) is plan
    assert planfile.coerce(OLD_PLAN) == planfile.coerce(path) == planfile.coerce(str(path)) == plan
