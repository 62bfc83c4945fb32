"""Findings priced from a plan's launch profile (linter/pricing.py), on hand-made profiles: no torch needed."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gpulint.linter.finding import Finding
from gpulint.linter.pricing import costs, price, priced, profile_text, sync_seconds
from gpulint.planner import planfile
from gpulint.planner.planfile import Blocker, Launch, Padding

US = 1e-6


def _launch(**over) -> Launch:
    """A GPU step of 1 ms of kernels whose host dispatch takes 2 ms: launch-bound."""
    base = Launch(
        kind="cuda", kernels=400, small_kernels=350, device_time_s=1e-3, overhead_per_kernel_s=5 * US,
        overhead_source="test", host_time_s=2e-3, step_time_s=2e-3, launch_share=0.5, launch_bound=True,
        graph_step_time_s=1.4e-3, graph_saving_s=0.6e-3, graph_source="assumed", parameter_tensors=100,
        parameter_bytes=10**8, op_overhead_s=4 * US, op_source="test", foreach_op_s=12 * US, optimizer="adamw",
        optimizer_ops=40, optimizer_host_s=0.2e-3, optimizer_loop_host_s=4.2e-3, sync_overhead_s=10 * US,
        batch_bytes=64 * 10**6, h2d_bandwidth=32e9, h2d_source="spec", h2d_time_s=2e-3,
        interconnect_bandwidth=300e9, memory_bandwidth=2e12,
    )
    return replace(base, **over)


def _finding(code: str, line: int = 1, path: str = "train.py") -> Finding:
    return Finding(code=code, name="x", message="m", severity="warning", path=path, line=line, column=1,
                   end_line=line, end_column=2)


def test_a_per_tensor_loop_costs_its_tensors_ops_and_round_trips_less_the_foreach_form():
    launch = _launch()
    seconds, method = price("GPL101", launch, syncs=1)
    assert seconds == pytest.approx(100 * 4 * US - 12 * US + 99 * 10 * US)  # the fix still reads once
    assert "100 parameter tensors" in method and "round trip" in method
    assert price("GPL102", launch)[0] == pytest.approx(100 * 4 * US - 12 * US)


def test_a_host_sync_is_a_round_trip_plus_the_queue_it_drains_on_a_gpu_only():
    gpu = _launch()
    assert sync_seconds(gpu, 1) == pytest.approx(10 * US + 1e-3 / 2)
    assert sync_seconds(gpu, 3) == pytest.approx(10 * US + 1e-3 / 4)  # three syncs share the step's overlap
    cpu = _launch(kind="cpu", sync_overhead_s=0.2 * US)
    assert sync_seconds(cpu, 1) == pytest.approx(0.2 * US)  # a CPU has no queue to drain
    assert price("GPL401", gpu)[0] == pytest.approx(sync_seconds(gpu, 1))


def test_optimizer_loops_cost_their_launches_against_the_foreach_form():
    launch = _launch()
    assert price("GPL502", launch)[0] == pytest.approx(4.2e-3 - 0.2e-3)
    assert price("GPL501", launch)[0] == pytest.approx(2 * (100 * 4 * US - 12 * US))  # mul_ and add_ per tensor
    assert price("GPL503", launch)[0] == pytest.approx(12 * US + 10**8 / 2e12)


def test_padding_is_priced_only_when_the_config_gives_lengths():
    assert price("GPL301", _launch()) is None
    padded = _launch(padding=Padding(padded_length=512, mean_length=128.0, share=0.75))
    seconds, method = price("GPL301", padded)
    assert seconds == pytest.approx(0.75 * 1e-3) and "512" in method


def test_a_blocking_batch_copy_costs_the_copy_and_a_sync():
    launch = _launch()
    assert price("GPL411", launch)[0] == pytest.approx(2e-3 + sync_seconds(launch, 1))


def test_findings_the_trace_cannot_price_get_no_price():
    launch = _launch()
    for code in ("GPL203", "GPL204", "GPL506", "GPL001"):
        assert price(code, launch) is None


def test_findings_are_sorted_by_cost_and_shares_are_of_the_step_with_them():
    launch = _launch()
    findings = [_finding("GPL204", 1), _finding("GPL401", 2), _finding("GPL502", 3), _finding("GPL102", 4)]
    out = priced(findings, launch)
    assert [f.code for f in out] == ["GPL502", "GPL401", "GPL102", "GPL204"]
    assert out[-1].cost is None
    total = launch.step_time_s + sum(f.cost.seconds for f in out if f.cost)
    assert out[0].cost.share == pytest.approx(out[0].cost.seconds / total)
    assert sum(f.cost.share for f in out if f.cost) < 1
    assert [c is None for c in costs(findings, launch)] == [True, False, False, False]  # in the findings' order


def test_a_launch_bound_step_gets_cuda_graphs_with_its_saving_and_blockers_linked_to_findings():
    launch = _launch(blockers=[Blocker("sync", "the host reads a value", "train.py", 8),
                               Blocker("cpu-op", "Adam keeps its step counters on the host")])
    findings = [_finding("GPL401", 8), _finding("GPL410", 20)]
    text = profile_text(launch, findings)
    assert "CUDA Graphs: capture the step" in text and "0.600 ms per step (30%)" in text
    assert "blocks capture: sync at train.py:8: the host reads a value (see train.py:8 GPL401)" in text
    assert "blocks capture: cpu-op: Adam" in text
    assert "blocks capture: sync at train.py:20: a host-device sync in the step (see train.py:20 GPL410)" in text


def test_a_compute_bound_step_gets_no_cuda_graphs():
    launch = _launch(host_time_s=0.5e-3, step_time_s=1e-3, launch_share=0.0, launch_bound=False,
                     graph_step_time_s=1.4e-3, graph_saving_s=0.0)
    text = profile_text(launch, [])
    assert "CUDA Graphs: not worth it here" in text and "capture the step" not in text


def test_a_batch_copy_that_is_not_hidden_gets_streams_advice():
    text = profile_text(_launch(), [])
    assert "Batch copy: 64.00 MB host to device in 2.00 ms at 32 GB/s (spec)" in text
    assert "non_blocking=True" in text and "side stream" in text
    small = profile_text(_launch(h2d_time_s=1 * US, batch_bytes=32_000), [])
    assert "streams would save little" in small


def test_the_launch_profile_round_trips_through_the_plan_file():
    launch = _launch(blockers=[Blocker("rng", "own generator", "m.py", 3)],
                     padding=Padding(padded_length=64, mean_length=20.0, share=0.6875))
    plan = planfile.Plan(decisions=[], launch=launch)
    assert planfile.loads(planfile.dump(plan)).launch == launch
    raw = json.loads(planfile.dump(plan))
    raw["launch"]["kernels"] = "many"
    with pytest.raises(planfile.PlanFileError, match=r"plan\.launch\.kernels: expected an integer"):
        planfile.from_dict(raw)
    raw["launch"]["kernels"], raw["launch"]["h2d_bandwidth"] = 4, 0
    with pytest.raises(planfile.PlanFileError, match=r"plan\.launch\.h2d_bandwidth: must be positive"):
        planfile.from_dict(raw)


def _plan_file(tmp_path, launch: Launch | None):
    path = tmp_path / "plan.json"
    path.write_text(planfile.dump(planfile.Plan(decisions=[], launch=launch)))
    return path


def test_check_with_a_plan_prices_findings_and_prints_the_launch_profile(run, project, tmp_path):
    (project / "ema.py").write_text(
        "import torch\n\n"
        "def train(model, ema, loader, optimizer, device):\n"
        "    for batch in loader:\n"
        "        model(batch).backward()\n"
        "        optimizer.step()\n"
        "        for shadow, p in zip(ema.parameters(), model.parameters()):\n"
        "            shadow.mul_(0.99).add_(p, alpha=0.01)\n"
    )
    plan = _plan_file(tmp_path, _launch())
    code, out, err = run(project, "check", ".", "--no-cache", "--plan", str(plan), "--format", "concise")
    assert code == 1 and err == ""
    costs_shown = [line for line in out.splitlines() if "costs ~" in line]
    assert len(costs_shown) == 2 and "parameter tensors" in costs_shown[0]  # GPL501 first: the dearest
    assert "Launch profile (cuda, a model estimate from the trace)" in out
    code, out, _ = run(project, "check", ".", "--no-cache", "--plan", str(plan), "--format", "json")
    rows = json.loads(out)
    assert [r["cost"]["seconds"] for r in rows] == sorted((r["cost"]["seconds"] for r in rows), reverse=True)
    assert all(r["cost"]["method"] for r in rows)


def test_check_with_a_bad_plan_is_one_line(run, project, tmp_path):
    code, _, err = run(project, "check", ".", "--no-cache", "--plan", str(tmp_path / "missing.json"))
    assert code == 2 and err.count("\n") == 1 and "missing.json: plan file not found" in err
    old = _plan_file(tmp_path, None)
    code, _, err = run(project, "check", ".", "--no-cache", "--plan", str(old))
    assert code == 2 and "no launch profile" in err and err.count("\n") == 1
