"""The compiled form on what used to be left out: random ops recomputed exactly, integer gathers, the loss outside
the model, a user's own step function, what CPU kernels really keep, and value reads the trace never makes."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
from torch import nn
from torch.nn import functional as F

from gpulint.planner import rng
from gpulint.planner.backend import compile as compile_plan
from gpulint.planner.graph import CPU_INPUT_SIZED_RESULTS
from gpulint.planner.measure import measure_step
from gpulint.planner.simulate import simulate
from gpulint.planner.step import UserStep
from gpulint.planner.trace import trace_step

from . import models


def _nothing_saved(graph) -> set[str]:
    """The names a plan saving nothing it could recompute keeps: only what is never recomputed."""
    return {graph.nodes[i].name for i in simulate(graph, set()).schedule.saved}


def _step_and_grads(model, plan, batch, step=None, seed=5):
    compiled = compile_plan(model, plan, step)
    torch.manual_seed(seed)
    loss = compiled(batch)
    loss.backward()
    return loss, [p.grad for p in model.parameters()]


def test_dropout_is_recomputed_from_its_saved_generator_state_bitwise():
    graph = trace_step(models.dropout_mlp, models.dropout_batch, optimizer="none").graph
    sim = simulate(graph, set())
    recomputed = {graph.nodes[i].op for i in sim.schedule.recomputed}
    assert "aten.native_dropout.default" in recomputed
    assert {graph.nodes[i].op for i in sim.schedule.saved} == {"rng_state"}  # the state, not the mask
    torch.manual_seed(0)
    model, batch = models.dropout_mlp().train(), models.dropout_batch()
    planned, reference = copy.deepcopy(model), copy.deepcopy(model)
    ref_loss, ref_grads = _step_and_grads(reference, None, batch)
    loss, grads = _step_and_grads(planned, _nothing_saved(graph), batch)
    assert torch.equal(ref_loss, loss) and all(torch.equal(a, b) for a, b in zip(ref_grads, grads))
    # Not vacuous: a recompute that draws a fresh mask gives other gradients.
    fresh = copy.deepcopy(model)
    original, rng.replay_recomputed = rng.replay_recomputed, lambda module: None
    try:
        _loss, fresh_grads = _step_and_grads(fresh, _nothing_saved(graph), batch)
    finally:
        rng.replay_recomputed = original
    assert any(not torch.equal(a, b) for a, b in zip(ref_grads, fresh_grads))


def test_the_predicted_peak_with_recomputed_dropout_is_the_measured_one():
    graph = trace_step(models.dropout_mlp, models.dropout_batch, optimizer="none").graph
    names = _nothing_saved(graph)
    measured = measure_step(models.dropout_mlp, models.dropout_batch, names, optimizer="none", repeats=1)
    assert simulate(graph, graph.alias_closure({graph.by_name[n] for n in names})).peak == measured.peak_bytes


class Gather(nn.Module):
    """An embedding-like integer gather (`table[idx]`) whose result the backward needs."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(64, 32))
        self.fc = nn.Linear(32, 32)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc(torch.tanh(self.table[idx]))).square().mean()


def test_an_integer_gather_is_recomputed_from_its_saved_indices():
    batch = lambda: torch.randint(0, 64, (256,), generator=torch.Generator().manual_seed(0))
    graph = trace_step(Gather, batch, optimizer="none").graph
    gathers = [n for n in graph.nodes if n.op == "aten.index.Tensor" and n.kind == "fwd"]
    assert gathers and not any(n.excluded for n in gathers)
    sim = simulate(graph, set())
    assert any(graph.nodes[i].op == "aten.index.Tensor" for i in sim.schedule.recomputed)
    torch.manual_seed(0)
    model = Gather()
    ref_loss, ref_grads = _step_and_grads(copy.deepcopy(model), None, batch())
    loss, grads = _step_and_grads(copy.deepcopy(model), _nothing_saved(graph), batch())
    assert torch.equal(ref_loss, loss) and all(torch.equal(a, b) for a, b in zip(ref_grads, grads))


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def xy_batch():
    g = torch.Generator().manual_seed(0)
    return torch.randn(128, 16, generator=g), torch.randint(0, 8, (128,), generator=g)


def cross_entropy(output, batch):
    return F.cross_entropy(output, batch[1])


def compute_loss(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y) + 0.1 * model.body[0].weight.square().sum()


@pytest.mark.parametrize("step", [UserStep(loss_fn=cross_entropy, inputs=0), UserStep(step_fn=compute_loss)])
def test_the_loss_outside_the_model_and_a_users_step(step):
    graph = trace_step(Classifier, xy_batch, loss_fn=step, optimizer="none").graph
    names = _nothing_saved(graph)
    measured = measure_step(Classifier, xy_batch, names, loss_fn=step, optimizer="none", repeats=1)
    assert simulate(graph, graph.alias_closure({graph.by_name[n] for n in names})).peak == measured.peak_bytes
    torch.manual_seed(0)
    model = Classifier()
    with torch.no_grad():
        expected = step(copy.deepcopy(model), xy_batch())
    loss, _grads = _step_and_grads(model, names, xy_batch(), step)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)


def test_inputs_that_select_nothing_name_the_field():
    from gpulint.planner.errors import PlanError

    with pytest.raises(PlanError, match=r"plan\.inputs: 'x' does not select a part of the batch \(a tuple of 2\)"):
        trace_step(Classifier, xy_batch, loss_fn=UserStep(loss_fn=cross_entropy, inputs="x"), optimizer="none")


@pytest.mark.parametrize("op", sorted(CPU_INPUT_SIZED_RESULTS))
def test_cpu_kernels_that_keep_their_input_sized_buffer(op):
    """The table of CPU storage quirks is true for this torch: each 0-d loss keeps an input-sized storage."""
    a, b = torch.rand(8, 3, 16, 16), torch.rand(8, 3, 16, 16)
    loss = getattr(torch.ops.aten, op.split(".")[1]).default(a, b)
    assert loss.dim() == 0 and loss.untyped_storage().nbytes() == a.untyped_storage().nbytes()


def test_a_unet_style_loss_is_sized_as_the_cpu_keeps_it():
    """F.mse_loss's 0-d result keeps its elementwise buffer on CPU: the prediction counts it."""

    def mse(output, batch):
        return F.mse_loss(output, batch)

    make = lambda: torch.randn(64, 32, generator=torch.Generator().manual_seed(0))
    build = lambda: nn.Sequential(nn.Linear(32, 256), nn.Tanh(), nn.Linear(256, 32))
    graph = trace_step(build, make, loss_fn=mse, optimizer="none").graph
    measured = measure_step(build, make, None, loss_fn=mse, optimizer="none", repeats=1)
    assert simulate(graph, graph.default_saved()).peak == measured.peak_bytes


class OneHotThenRead(nn.Module):
    """one_hot, then a value read (`.item()`): CPU one_hot checks its indices with two reads the trace never makes,
    of the same op and shapes as the user's read after it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(10, 10)

    def forward(self, batch):
        x, y = batch
        hot = F.one_hot(y, 10)
        scale = x.abs().max().item()
        return (self.fc(x / scale) * hot).sum()


def test_value_reads_the_trace_never_makes_are_skipped():
    def batch():
        g = torch.Generator().manual_seed(0)
        return (torch.randn(8, 10, generator=g), torch.randint(0, 10, (8,), generator=g))

    traced = trace_step(OneHotThenRead, lambda: (batch(),), optimizer="none")
    assert [read["op"] for read in traced.data_dependent] == ["Tensor.item()"]
    # The read got x's largest magnitude (the trace divides by it), not one of one_hot's index checks.
    scale = batch()[0].abs().max().item()
    divisors = [n.args[1] for n in traced.joint.graph.nodes if n.op == "call_function" and "div" in str(n.target)]
    assert scale in divisors
