"""Eager application of a plan: exact gradients with dropout, real memory savings, clear mismatch errors."""

from __future__ import annotations

import copy
import gc
import json
import warnings
import weakref

import pytest

torch = pytest.importorskip("torch")
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from gpulint.planner import eager_apply, planfile
from gpulint.planner.address import layer_of, op_key
from gpulint.planner.eager_trace import saved_activations
from gpulint.planner.errors import PlanFileError, PlanMismatchError


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.act = nn.GELU()
        self.down = nn.Linear(4 * width, width)
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        return x + self.drop(self.down(self.act(self.up(self.norm(x)))))


class Net(nn.Module):
    def __init__(self, width: int = 16, depth: int = 3, act: type[nn.Module] = nn.GELU) -> None:
        super().__init__()
        self.embed = nn.Linear(8, width)
        self.layers = nn.ModuleList(Block(width) for _ in range(depth))
        for layer in self.layers:
            layer.act = act()
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(h).square().mean()


def make_net(**kwargs) -> Net:
    torch.manual_seed(0)
    return Net(**kwargs).train()


INPUT = torch.randn(4, 5, 8, generator=torch.Generator().manual_seed(1))


def step_loss(model: nn.Module, seed: int = 7) -> torch.Tensor:
    torch.manual_seed(seed)  # the same dropout masks for planned and unplanned runs
    return model(INPUT)


def plan_for(model: nn.Module, fraction: float, step=step_loss) -> dict:
    """A plan recomputing the largest `fraction` of the activations eager saves inside layers, as the planner would."""
    saved = saved_activations(model, lambda: step(model))
    in_layers = [s for s in saved if layer_of(model, s.address.module)]
    cut = round(fraction * len(in_layers))
    saved = sorted(in_layers, key=lambda s: -s.bytes) + [s for s in saved if s not in in_layers]
    decisions = [
        {
            "id": f"a{i}",
            "op": s.op,
            "bytes": s.bytes,
            "action": "recompute" if i < cut else "save",
            "module": s.address.module,
            "call_index": s.address.call_index,
            "source": {"path": "model.py", "line": 1},
        }
        for i, s in enumerate(saved)
    ]
    return {"schema": planfile.SCHEMA, "decisions": decisions}


def grads(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("fraction", [0.0, 0.5, 1.0])
def test_one_step_loss_and_gradients_are_bitwise_equal_with_dropout(fraction):
    reference = make_net()
    planned = copy.deepcopy(reference)
    eager_apply.apply(planned, plan_for(reference, fraction))

    ref_loss, plan_loss = step_loss(reference), step_loss(planned)
    ref_loss.backward()
    plan_loss.backward()

    assert torch.equal(ref_loss, plan_loss)
    ref_grads, plan_grads = grads(reference), grads(planned)
    assert ref_grads.keys() == plan_grads.keys()
    for name in ref_grads:
        assert torch.equal(ref_grads[name], plan_grads[name]), name


def test_five_optimizer_steps_give_the_same_parameters():
    reference = make_net()
    planned = copy.deepcopy(reference)
    eager_apply.apply(planned, plan_for(reference, 0.7))
    for model in (reference, planned):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        for seed in range(5):
            optimizer.zero_grad()
            step_loss(model, seed).backward()
            optimizer.step()
    for (name, p), (_, q) in zip(reference.named_parameters(), planned.named_parameters()):
        assert torch.equal(p, q), name


def test_dropout_without_preserved_rng_would_differ():
    """The equality above is not vacuous: recomputing dropout with a fresh mask changes the gradients."""
    reference = make_net()
    loss = step_loss(reference)
    loss.backward()
    ref_grads = grads(reference)

    redrawn = copy.deepcopy(reference)
    redrawn.zero_grad()
    for layer in redrawn.layers:
        inner = layer.forward
        layer.forward = lambda x, inner=inner: torch.utils.checkpoint.checkpoint(
            inner, x, use_reentrant=False, preserve_rng_state=False
        )
    step_loss(redrawn).backward()
    assert any(not torch.equal(ref_grads[n], g) for n, g in grads(redrawn).items())


class LiveBytes(TorchDispatchMode):
    """Bytes of the storages made by ops that are still alive (weakrefs): what the forward keeps for backward."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[weakref.ref] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(tensor, torch.Tensor):
                self.refs.append(weakref.ref(tensor.untyped_storage()))
        return out

    def alive(self) -> int:
        gc.collect()
        live = {s.data_ptr(): s.nbytes() for s in (ref() for ref in self.refs) if s is not None}
        return sum(live.values())


def kept_after_forward(model: nn.Module) -> int:
    """What the second step's forward keeps for the backward (the first step checks each layer's decisions)."""
    step_loss(model).backward()
    tracker = LiveBytes()
    with tracker:
        loss = step_loss(model)
    kept = tracker.alive()
    loss.backward()
    return kept


def test_recomputing_frees_memory_and_saving_everything_costs_nothing():
    reference = make_net(width=32)
    unplanned = kept_after_forward(reference)

    all_saved = copy.deepcopy(reference)
    eager_apply.apply(all_saved, plan_for(reference, 0.0))
    half = copy.deepcopy(reference)
    eager_apply.apply(half, plan_for(reference, 0.5))
    everything = copy.deepcopy(reference)
    eager_apply.apply(everything, plan_for(reference, 1.0))

    assert kept_after_forward(all_saved) == unplanned
    assert kept_after_forward(everything) < kept_after_forward(half) < unplanned


def test_only_layers_holding_recompute_decisions_are_checkpointed():
    model = make_net()
    plan = plan_for(model, 0.0)
    target = next(d for d in plan["decisions"] if d["module"].startswith("layers.1."))
    target["action"] = "recompute"
    eager_apply.apply(model, plan)
    assert eager_apply.applied_plan(model).regions == ["layers.1"]


def test_recompute_outside_any_layer_warns_and_is_listed():
    model = make_net()
    plan = plan_for(model, 0.0)
    root_level = next(d for d in plan["decisions"] if d["module"] in ("", "embed", "head"))
    root_level["action"] = "recompute"
    with pytest.warns(UserWarning, match="outside every layer"):
        eager_apply.apply(model, plan)
    assert [item.decision.id for item in eager_apply.applied_plan(model).left_out] == [root_level["id"]]


def test_remove_restores_the_model():
    model = make_net()
    eager_apply.apply(model, plan_for(model, 1.0))
    eager_apply.remove(model)
    assert eager_apply.applied_plan(model) is None
    assert all("forward" not in m.__dict__ for m in model.modules())
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_plan_from_a_file(tmp_path):
    model = make_net()
    path = tmp_path / "gpulint-plan.json"
    path.write_text(json.dumps(plan_for(model, 0.5)))
    reference = copy.deepcopy(model)
    eager_apply.apply(model, str(path))
    a, b = step_loss(reference), step_loss(model)
    assert torch.equal(a, b)


# --- a plan for another model never fails the run: what does not match is left out, named ----------------------


def _same_training(reference: nn.Module, planned: nn.Module, steps: int = 2) -> None:
    """Two steps of each give the same loss and gradients, bitwise."""
    for seed in range(steps):
        reference.zero_grad(set_to_none=True)
        planned.zero_grad(set_to_none=True)
        a, b = step_loss(reference, seed), step_loss(planned, seed)
        a.backward()
        b.backward()
        assert torch.equal(a, b)
        assert all(torch.equal(p.grad, q.grad) for p, q in zip(reference.parameters(), planned.parameters()))


def test_a_missing_module_is_left_out_with_a_warning():
    plan = plan_for(make_net(depth=3), 0.5)
    reference = make_net(depth=2)
    planned = copy.deepcopy(reference)
    with pytest.warns(UserWarning, match=r"left out \d+ plan decision\(s\) .*the model has no module 'layers\.2"):
        eager_apply.apply(planned, plan)
    reasons = {item.reason for item in eager_apply.applied_plan(planned).left_out}
    assert reasons == {"the model has no module 'layers.2.norm'", "the model has no module 'layers.2.up'",
                       "the model has no module 'layers.2.act'", "the model has no module 'layers.2.down'",
                       "the model has no module 'layers.2.drop'", "the model has no module 'layers.2'"} & reasons
    _same_training(reference, planned)


def test_a_changed_operation_is_left_out_on_the_first_forward():
    plan = plan_for(make_net(), 0.5)
    reference = make_net(act=nn.ReLU)  # same modules, different ops inside
    planned = copy.deepcopy(reference)
    eager_apply.apply(planned, plan)
    with pytest.warns(UserWarning, match=r"left out .*aten\.gelu.*\(its op does not happen there\)"):
        _same_training(reference, planned)
    assert eager_apply.applied_plan(planned).validated


class InPlaceRouter(nn.Module):
    """Keeps topk's weights and then divides them in place (`/=`), as MoE routers do."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Linear(16, 8)
        self.up = nn.Linear(16, 64)

    def forward(self, x):
        weights, _index = torch.topk(torch.softmax(self.gate(x), dim=-1), 2, dim=-1)
        weights /= weights.sum(dim=-1, keepdim=True)
        return torch.tanh(self.up(x)) * weights.sum(dim=-1, keepdim=True)


class Routed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(InPlaceRouter() for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)[..., :16]
        return x.square().mean()


def test_a_saved_tensor_written_in_place_later_is_recomputed_not_kept():
    """Keeping topk's output would make torch refuse it in the backward ("cached ... has been mutated")."""
    torch.manual_seed(0)
    reference = Routed().train()
    x = torch.randn(32, 16, generator=torch.Generator().manual_seed(1))
    saved = saved_activations(reference, lambda: reference(x))
    decisions = [{"id": f"a{i}", "op": s.op, "bytes": s.bytes, "module": s.address.module,
                  "call_index": s.address.call_index,
                  "action": "save" if s.op.startswith("aten.topk") else "recompute"} for i, s in enumerate(saved)]
    planned = copy.deepcopy(reference)
    eager_apply.apply(planned, {"schema": planfile.SCHEMA, "decisions": decisions})
    for _ in range(2):
        for model in (reference, planned):
            model.zero_grad(set_to_none=True)
            model(x).backward()
        assert all(torch.equal(p.grad, q.grad) for p, q in zip(reference.parameters(), planned.parameters()))
    mutated = [item for item in eager_apply.applied_plan(planned).left_out if "in place" in item.reason]
    assert [item.decision.op for item in mutated] == ["aten.topk.default"] * 2


def test_error_is_one_line_and_a_value_error():
    with pytest.raises(ValueError) as info:
        eager_apply.apply(make_net(), {"schema": "gpulint.plan/0", "decisions": []})
    assert "\n" not in str(info.value) and "schema" in str(info.value)


@pytest.mark.parametrize(
    ("plan", "field"),
    [
        ({"schema": planfile.SCHEMA}, "decisions"),
        ({"schema": planfile.SCHEMA, "decisions": [{"op": "aten.mm.default"}]}, r"decisions\[0\]\.action: missing"),
        (
            {"schema": planfile.SCHEMA, "decisions": [{"op": "aten.mm", "action": "drop", "module": "", "call_index": 0}]},
            r"decisions\[0\]\.action",
        ),
        (
            {"schema": planfile.SCHEMA, "decisions": [{"op": "a b", "action": "save", "module": "", "call_index": 0}]},
            "malformed op",
        ),
    ],
)
def test_malformed_plan_names_the_field(plan, field):
    with pytest.raises(PlanFileError, match=field):
        eager_apply.apply(make_net(), plan)


def test_missing_plan_file_names_the_file(tmp_path):
    with pytest.raises(PlanFileError, match="nope.json: plan file not found"):
        eager_apply.apply(make_net(), tmp_path / "nope.json")


def test_applying_twice_is_refused():
    model = make_net()
    eager_apply.apply(model, plan_for(model, 0.5))
    with pytest.raises(PlanMismatchError, match="already applied"):
        eager_apply.apply(model, plan_for(model, 0.5))


def test_op_key_matches_functional_and_inplace_forms():
    assert op_key("aten.div_.Scalar") == op_key(torch.ops.aten.div.Scalar) == "aten.div.Scalar"
    assert op_key("aten.div.Tensor") != op_key("aten.div.Scalar")
    assert op_key(torch.ops.aten.bernoulli_.float) == "aten.bernoulli.p"
    assert op_key("aten._unsafe_view.default") == "aten._unsafe_view.default"
    assert op_key("aten.relu_") == "aten.relu.default"


def test_gpulint_apply_is_the_eager_apply():
    import gpulint

    assert gpulint.apply is eager_apply.apply


def test_no_grad_forward_runs_without_checkpointing():
    reference = make_net()
    model = copy.deepcopy(reference)
    eager_apply.apply(model, plan_for(reference, 1.0))
    with torch.no_grad():
        assert torch.equal(step_loss(model), step_loss(reference))


def test_warnings_do_not_fire_for_a_plain_torch_model():
    model = make_net()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        eager_apply.apply(model, plan_for(model, 0.5))


def test_a_deepcopy_of_a_planned_model_trains_its_own_parameters():
    model = make_net()
    eager_apply.apply(model, plan_for(model, 1.0))
    twin = copy.deepcopy(model)
    step_loss(twin).backward()
    assert all(p.grad is None for p in model.parameters())
    assert all(p.grad is not None for p in twin.parameters())
    assert eager_apply.applied_plan(twin).model is twin and eager_apply.applied_plan(twin).validated
