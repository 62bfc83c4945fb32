"""The step's launch profile from the trace (planner/launch.py): launch-bound or not, CUDA Graphs, capture blockers."""

from __future__ import annotations

import pytest
import torch

from gpulint.linter.pricing import profile_text
from gpulint.planner import planfile
from gpulint.planner.config import load_plan_config
from gpulint.planner.eager_trace import trace_eager
from gpulint.planner.errors import PlanError
from gpulint.planner.hardware import load_hardware
from gpulint.planner.launch import blockers, launch_profile, optimizer_ops, padding_share


def _mlp(width: int, layers: int = 4):
    return lambda: torch.nn.Sequential(*(m for _ in range(layers) for m in (torch.nn.Linear(width, width),
                                                                            torch.nn.ReLU())))


def _profile(width: int, batch: int, hardware: str = "h100-sxm", optimizer: str = "adamw"):
    program = trace_eager(_mlp(width), lambda: torch.ones(batch, width), optimizer=optimizer)
    return launch_profile(program.graph, load_hardware(hardware), optimizer=optimizer)


def test_a_small_mlp_at_batch_1_is_launch_bound_and_gets_cuda_graphs_with_a_saving():
    launch = _profile(width=32, batch=1)
    assert launch.launch_bound and launch.launch_share > 0.5
    assert launch.host_time_s > launch.device_time_s and launch.small_kernels == launch.kernels - launch.optimizer_ops
    assert 0 < launch.graph_saving_s < launch.step_time_s
    assert launch.graph_step_time_s == pytest.approx(launch.step_time_s - launch.graph_saving_s)
    text = profile_text(launch, [])
    assert "launch-bound" in text and "CUDA Graphs: capture the step" in text and "reduce-overhead" in text
    assert "blocks capture: cpu-op: Adam keeps its step counters in host tensors" in text


def test_a_large_mlp_is_compute_bound_and_gets_no_cuda_graphs():
    launch = _profile(width=4096, batch=8192)
    assert not launch.launch_bound and launch.launch_share == 0.0
    assert launch.step_time_s == pytest.approx(launch.device_time_s)  # the host runs ahead of the device
    assert launch.graph_saving_s == 0.0
    assert "CUDA Graphs: not worth it here" in profile_text(launch, [])


def test_on_a_cpu_the_host_runs_the_kernels_so_their_times_add():
    launch = _profile(width=32, batch=1, hardware="cpu")
    assert launch.step_time_s == pytest.approx(launch.host_time_s + launch.device_time_s)
    assert launch.graph_saving_s == 0.0 and launch.h2d_bandwidth is None and not launch.blockers
    assert "CUDA Graphs" not in profile_text(launch, [])


def test_the_batch_copy_is_priced_at_the_profiles_stated_bandwidth():
    launch = _profile(width=32, batch=1024)
    hw = load_hardware("h100-sxm")
    assert launch.h2d_time_s == pytest.approx(launch.batch_bytes / hw.h2d_bandwidth)
    assert "PCIe Gen5" in launch.h2d_source


def test_optimizer_ops_are_counted_by_running_the_optimizer():
    adamw, sgd = optimizer_ops("adamw"), optimizer_ops("sgd")
    assert adamw.loop_per_tensor > adamw.foreach_per_tensor and adamw.foreach_ops > 0
    assert adamw.bytes_per_param_byte > sgd.bytes_per_param_byte > 0
    hw = load_hardware("h100-sxm")
    assert adamw.host_seconds(300, hw, foreach=False) > 3 * adamw.host_seconds(300, hw)
    assert optimizer_ops("none").host_seconds(300, hw) == 0.0


def test_blockers_name_syncs_dynamic_shapes_and_host_state():
    program = trace_eager(_mlp(8), lambda: torch.ones(1, 8), optimizer="sgd")
    reads = [planfile.ValueRead(op="aten._local_scalar_dense.default", path="train.py", line=12),
             planfile.ValueRead(op="aten.nonzero.default", path="train.py", line=14)]
    found = blockers(program.graph, "adam", reads, shapes=3)
    assert [(b.kind, b.line) for b in found] == [("sync", 12), ("dynamic-shape", 14), ("dynamic-shape", 0),
                                                 ("cpu-op", 0)]
    assert "3 shapes" in found[2].reason
    assert blockers(program.graph, "sgd", [], shapes=1) == []


def test_plan_forms_records_the_launch_profile_in_the_plan():
    from gpulint.planner.planning import plan_forms, trace_forms
    from gpulint.planner.step import UserStep

    forms = trace_forms(_mlp(16), lambda: torch.ones(2, 16), UserStep(), optimizer="adamw")
    plan = plan_forms(forms, None, "h100-sxm").plan
    assert plan.launch is not None and plan.launch.parameter_tensors == 8
    assert plan.launch.batch_bytes == 2 * 16 * 4
    assert planfile.loads(planfile.dump(plan)).launch == plan.launch


def test_padding_share_and_its_config(tmp_path):
    assert padding_share(512, 128).share == pytest.approx(0.75)
    config = tmp_path / "gpulint.yaml"
    config.write_text("plan:\n  model: m.py:f\n  batch: m.py:g\n  padding: {padded_length: 100, lengths: [50, 30]}\n")
    assert load_plan_config(config).padding == (100, 40.0)
    config.write_text("plan:\n  model: m.py:f\n  batch: m.py:g\n  padding: {padded_length: 100, mean_length: 130}\n")
    with pytest.raises(PlanError, match=r"plan\.padding\.mean_length: expected a number between 0 and"):
        load_plan_config(config)
    config.write_text("plan:\n  model: m.py:f\n  batch: m.py:g\n  padding: 12\n")
    with pytest.raises(PlanError, match=r"plan\.padding: expected"):
        load_plan_config(config)


def test_a_batch_in_several_shapes_blocks_one_graph():
    from gpulint.planner.planning import plan_buckets

    def buckets():
        for batch in (1, 2):
            yield torch.ones(batch, 8)

    plan = plan_buckets(_mlp(8), buckets, budget=None, hardware="h100-sxm", optimizer="sgd")
    assert plan.launch is not None
    assert [b.reason for b in plan.launch.blockers if b.kind == "dynamic-shape"] == [
        "the batch comes in 2 shapes: a graph is captured per shape (or pad the batches to a few lengths)"]
