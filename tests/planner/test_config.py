"""The `plan:` section, budgets and factories: every bad field gets one line naming it."""

from __future__ import annotations

import pytest

from gpulint.planner.config import load_factory, load_plan_config, parse_budget
from gpulint.planner.errors import PlanError
from gpulint.planner.hardware import available, load_hardware
from gpulint.units import Size


@pytest.mark.parametrize("text,expected,unit", [
    ("24GB", 24 * 10**9, "GB"), ("24GiB", 24 * 2**30, "GiB"), ("512MiB", 512 * 2**20, "MiB"),
    ("1.5GB", 1_500_000_000, "GB"), ("2e9", 2 * 10**9, "B"), (3_000_000, 3_000_000, "B"), ("100 MB", 100 * 10**6, "MB"),
    # What people write: a bare G is decimal (the smaller reading), Gi binary, any case, with or without a space.
    ("24G", 24 * 10**9, "GB"), ("24g", 24 * 10**9, "GB"), ("24 GB", 24 * 10**9, "GB"), ("24 gb", 24 * 10**9, "GB"),
    ("24Gi", 24 * 2**30, "GiB"), ("512m", 512 * 10**6, "MB"), ("2T", 2 * 10**12, "TB"),
])
def test_budgets_are_absolute(text, expected, unit):
    assert parse_budget(text) == Size(expected, unit)


@pytest.mark.parametrize("text", ["0.2", 0.5, "20%", 1])
def test_fractions_are_rejected_with_an_explanation(text):
    with pytest.raises(PlanError, match="absolute"):
        parse_budget(text)


@pytest.mark.parametrize("text", ["lots", "24XB", "", "-5GB", None])
def test_unreadable_budgets(text):
    with pytest.raises(PlanError, match="budget"):
        parse_budget(text)


def _write(tmp_path, text):
    path = tmp_path / "gpulint.yaml"
    path.write_text(text)
    return path


def test_full_config(tmp_path):
    cfg = load_plan_config(_write(tmp_path, """
plan:
  model: m.py:build
  batch: m.py:batch
  optimizer: SGD-momentum
  dtype: bf16
  hardware: l4
  budget: 20GiB
"""))
    assert (cfg.optimizer, cfg.dtype, cfg.hardware, cfg.budget) == ("sgd-momentum", "bf16", "l4", Size(20 * 2**30, "GiB"))
    assert cfg.base_dir == tmp_path.resolve()


@pytest.mark.parametrize("body,field", [
    ("plan: [1, 2", "malformed YAML"),
    ("lint: {}", "no `plan:` section"),
    ("plan: {model: m.py:build}", "plan.batch"),
    ("plan: {model: m.py, batch: m.py:b}", "plan.model"),
    ("plan: {model: m.py:a, batch: m.py:b, optimizer: lion}", "plan.optimizer"),
    ("plan: {model: m.py:a, batch: m.py:b, dtype: fp8}", "plan.dtype"),
    ("plan: {model: m.py:a, batch: m.py:b, budget: 0.3}", "plan.budget"),
    ("plan: {model: m.py:a, batch: m.py:b, budgte: 3GB}", "plan.budgte: unknown field"),
])
def test_bad_fields_name_themselves(tmp_path, body, field):
    with pytest.raises(PlanError, match=field.replace("[", r"\[").replace("`", "`")):
        load_plan_config(_write(tmp_path, body))


def test_factories(tmp_path):
    (tmp_path / "m.py").write_text("def build():\n    return 42\nBROKEN = 1\n")
    (tmp_path / "bad.py").write_text("import no_such_module_xyz\n")
    assert load_factory("m.py:build", tmp_path)() == 42
    assert load_factory("os.path:join")("a", "b") == "a/b"
    with pytest.raises(PlanError, match="does not import.*no_such_module_xyz"):
        load_factory("bad.py:build", tmp_path, "plan.model")
    with pytest.raises(PlanError, match="does not exist"):
        load_factory("nope.py:build", tmp_path)
    with pytest.raises(PlanError, match="no callable named 'BROKEN'"):
        load_factory("m.py:BROKEN", tmp_path)
    with pytest.raises(PlanError, match="does not import"):
        load_factory("no_such_pkg_xyz.mod:f")


def test_hardware_profiles_are_dense_figures():
    assert {"h100-sxm", "h200", "a100-80gb", "l4", "t4", "cpu"} <= set(available())
    h100 = load_hardware("H100-SXM")
    assert h100.flops["bf16"] == 989e12  # dense, not the 1979 TFLOP/s sparse figure
    assert load_hardware("l4").memory_bandwidth == 300e9
    assert h100.round_up(1) == 512 and load_hardware("cpu").round_up(1) == 1
    with pytest.raises(PlanError, match="unknown hardware 'b200'"):
        load_hardware("b200")


def test_inputs_and_a_step_function(tmp_path):
    cfg = load_plan_config(_write(tmp_path, "plan:\n  model: m.py:build\n  batch: m.py:batch\n  inputs: 0\n"
                                            "  loss: m.py:criterion\n"))
    assert cfg.inputs == 0 and cfg.loss == "m.py:criterion" and cfg.step is None
    cfg = load_plan_config(_write(tmp_path, "plan:\n  model: m.py:build\n  batch: m.py:batch\n"
                                            "  inputs: [input_ids, attention_mask]\n"))
    assert cfg.inputs == ["input_ids", "attention_mask"]
    cfg = load_plan_config(_write(tmp_path, "plan:\n  model: m.py:build\n  batch: m.py:batch\n  step: train.py:compute_loss\n"))
    assert cfg.step == "train.py:compute_loss"


@pytest.mark.parametrize(("extra", "message"), [
    ("  step: compute_loss\n", r"plan\.step: expected 'path/file\.py:function' taking \(model, batch\)"),
    ("  step: t.py:s\n  loss: t.py:l\n", r"plan\.step: .* leave out plan\.loss and plan\.inputs"),
    ("  inputs: [0, 1]\n", r"plan\.inputs: expected an index \(0\), a key \(input_ids\) or a list of keys"),
    ("  inputs: true\n", r"plan\.inputs"),
])
def test_bad_step_and_inputs_name_the_field(tmp_path, extra, message):
    with pytest.raises(PlanError, match=message):
        load_plan_config(_write(tmp_path, "plan:\n  model: m.py:build\n  batch: m.py:batch\n" + extra))
