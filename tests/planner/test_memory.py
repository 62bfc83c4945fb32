"""The memory model against hand computation and against the real compiled step."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from gpulint.planner.measure import measure_step
from gpulint.planner.simulate import simulate
from gpulint.planner.trace import trace_step

from . import models


@pytest.fixture(scope="module")
def mlp_graph():
    return trace_step(models.mlp, models.mlp_batch, optimizer="none").graph


def test_mlp_peak_matches_hand_computation(mlp_graph):
    # fp32. Static: W1 16x8 (512 B) + W2 4x16 (256 B) + x 32x8 (1024 B) = 1792 B.
    # Forward: h = x@W1^T (2048), r = relu(h) (2048; h dies), y = r@W2^T (512), loss (4; y dies).
    # Saved for backward: r. Backward: tangent (4), grad_r = g@W2 (2048), grad_W2 (256),
    # grad_h = threshold_backward(grad_r, r) (2048) -> peak = 1792 + r + loss + grad_r + grad_W2 + grad_h.
    sim = simulate(mlp_graph, mlp_graph.default_saved())
    assert sim.static_bytes == 1792
    assert sim.peak == 1792 + 2048 + 4 + 4 + 2048 + 256 + 2048  # + the 4-byte seed gradient
    assert sim.peak_position >= sim.fw_len  # in the backward
    # The forward's own high point: x, h and r alive together.
    assert int(sim.timeline[:sim.fw_len].max()) == 1792 + 2048 + 2048
    # After the step: parameters, batch, both gradients, the loss and its seed gradient.
    assert int(sim.timeline[-1]) == 1792 + 512 + 256 + 4 + 4


def test_mlp_optimizer_state_counts(mlp_graph):
    adam = trace_step(models.mlp, models.mlp_batch, optimizer="adamw").graph
    assert adam.optimizer_state_bytes == 2 * (512 + 256)
    # + Adam's two `step` counters (4 B host tensors each), counted on CPU and not for CUDA targets.
    assert simulate(adam, adam.default_saved()).peak == simulate(mlp_graph, mlp_graph.default_saved()).peak + 1536 + 8


def test_rounding_to_allocator_blocks(mlp_graph):
    sim = simulate(mlp_graph, mlp_graph.default_saved(), rounding=512)
    # Every storage is rounded up to a 512-byte block: the 4-byte loss and tangent take 512 each.
    assert sim.static_bytes == 512 + 512 + 1024
    assert sim.peak % 512 == 0 and sim.peak > simulate(mlp_graph, mlp_graph.default_saved()).peak


def test_views_cost_nothing(mlp_graph):
    views = [n for n in mlp_graph.nodes if n.op in ("aten.t.default", "aten.expand.default")]
    assert views and all(n.nbytes == 0 and not n.creates for n in views)


@pytest.mark.parametrize(
    "which", ["default", pytest.param("none", marks=pytest.mark.slow), pytest.param("half", marks=pytest.mark.slow)]
)
def test_simulated_peak_equals_measured_gpt(which):
    graph = trace_step(models.tiny_gpt, models.tiny_batch, optimizer="adamw").graph
    default = sorted(graph.default_saved())
    saved = {"default": set(default), "none": set(), "half": set(default[::2])}[which]
    sim = simulate(graph, saved)
    names = {graph.nodes[i].name for i in sim.schedule.saved}
    measured = measure_step(models.tiny_gpt, models.tiny_batch, names, optimizer="adamw", repeats=1)
    assert measured.peak_bytes == sim.peak
