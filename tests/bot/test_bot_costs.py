"""The PR comment shows each finding's estimated cost per step when the plan carries the step's launch profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulint.bot.data import BotInputError, load_findings, load_plan
from gpulint.bot.report import ReportInput, finding_costs, render_markdown

FIXTURES = Path(__file__).parent / "fixtures"
LAUNCH = {
    "kind": "cuda", "kernels": 400, "device_time_s": 1e-3, "overhead_per_kernel_s": 5e-6, "host_time_s": 2e-3,
    "step_time_s": 2e-3, "launch_share": 0.5, "launch_bound": True, "parameter_tensors": 100,
    "op_overhead_s": 4e-6, "foreach_op_s": 12e-6, "sync_overhead_s": 1e-5, "optimizer_host_s": 2e-4,
    "optimizer_loop_host_s": 4.2e-3,
}


def _plan(tmp_path: Path, launch: dict | None) -> Path:
    raw = json.loads((FIXTURES / "plan.json").read_text())
    if launch is not None:
        raw["launch"] = launch
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(raw))
    return path


def test_each_priced_finding_shows_its_cost_in_the_comment(tmp_path):
    findings = load_findings(FIXTURES / "findings.json")
    data = ReportInput(findings, load_plan(_plan(tmp_path, LAUNCH)))
    shown = finding_costs(data)
    assert len(shown) == len(findings) and any(shown)
    body = render_markdown(data)
    assert body.count("(estimate)") == sum(1 for cost in shown if cost)
    assert "per step (" in body


def test_no_cost_without_a_launch_profile(tmp_path):
    data = ReportInput(load_findings(FIXTURES / "findings.json"), load_plan(_plan(tmp_path, None)))
    assert not any(finding_costs(data)) and "(estimate)" not in render_markdown(data)


def test_a_bad_launch_profile_is_one_line_naming_the_field(tmp_path):
    with pytest.raises(BotInputError, match=r"plan\.json: plan\.launch\.kernels: expected an integer"):
        load_plan(_plan(tmp_path, {**LAUNCH, "kernels": "many"}))
