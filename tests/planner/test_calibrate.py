"""`gpulint calibrate` writes a profile the planner reads, and the cost model uses what it measured."""

from __future__ import annotations

import pytest

from gpulint.planner.cost import Work, op_time
from gpulint.planner.hardware import Hardware, load_hardware

PROFILE = Hardware(
    name="test", kind="cpu", flops={"fp32": 100e9, "bf16": 100e9, "fp16": 100e9}, memory_bandwidth=10e9,
    memory_capacity=2**30, launch_overhead_s=1e-6, allocation_rounding=1,
    curves={"matmul": {"fp32": ((16, 10e9), (256, 80e9))}}, element_rates={"random": 1e8}, eager_overhead_s=5e-6,
)


def test_a_matmul_runs_at_the_rate_of_its_smallest_dimension():
    flops = 1e9
    assert op_time(Work(flops, 0, kernel="matmul", min_dim=16), "fp32", PROFILE) == pytest.approx(flops / 10e9 + 1e-6)
    assert op_time(Work(flops, 0, kernel="matmul", min_dim=256), "fp32", PROFILE) == pytest.approx(flops / 80e9 + 1e-6)
    # log-log between the points: 64 is halfway from 16 to 256, so the rate is the geometric mean
    halfway = op_time(Work(flops, 0, kernel="matmul", min_dim=64), "fp32", PROFILE) - 1e-6
    assert halfway == pytest.approx(flops / (10e9 * 80e9) ** 0.5)
    # beyond the curve: its ends; a kernel it has no curve for: the peak
    assert op_time(Work(flops, 0, kernel="matmul", min_dim=4), "fp32", PROFILE) == pytest.approx(flops / 10e9 + 1e-6)
    assert op_time(Work(flops, 0, kernel="conv", min_dim=64), "fp32", PROFILE) == pytest.approx(flops / 100e9 + 1e-6)


def test_random_ops_cost_their_elements_and_eager_ops_their_overhead():
    dropout = Work(0.0, 8 * 10**6, elements=10**6, special="random")
    assert op_time(dropout, "fp32", PROFILE) == pytest.approx(10**6 / 1e8 + 1e-6)  # more than moving 8 MB
    assert op_time(dropout, "fp32", PROFILE, eager=True) == pytest.approx(10**6 / 1e8 + 5e-6)
    assert op_time(Work(), "fp32", PROFILE) == 0.0  # a view


@pytest.mark.slow
def test_calibrate_writes_a_profile_the_planner_loads(tmp_path, capsys):
    from gpulint.cli import main

    out = tmp_path / "hw.yaml"
    assert main(["calibrate", "--quick", "--out", str(out), "--name", "this-box"]) == 0
    assert "wrote" in capsys.readouterr().out
    profile = load_hardware(str(out))
    assert profile.name == "this-box" and profile.kind == "cpu" and profile.allocation_rounding == 1
    assert profile.curves["matmul"]["fp32"] and profile.element_rates["random"] > 0
    assert profile.launch_overhead_s > 0 and profile.eager_overhead_s > 0 and profile.memory_bandwidth > 0
    assert profile.checkpoint_overhead_s > 0  # the checkpoint policy's dispatch mode, per op it sees
