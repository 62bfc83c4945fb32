"""Eager plans on real `transformers` models in train mode (dropout on): the planned step equals the unplanned one.

Plans here recompute the largest share of what eager autograd saves inside layers (three shares, like three
budgets). CPU fp32 is deterministic for these models, so the comparison is bitwise.
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from gpulint.planner import eager_apply, planfile
from gpulint.planner.address import layer_of
from gpulint.planner.eager_trace import saved_activations


def gpt2():
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=32, vocab_size=64)
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))
    return transformers.GPT2LMHeadModel(config), {"input_ids": ids, "labels": ids}


def llama():
    config = transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=64, max_position_embeddings=32, attention_dropout=0.1,
    )
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))
    return transformers.LlamaForCausalLM(config), {"input_ids": ids, "labels": ids}


def bert():
    config = transformers.BertConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, vocab_size=64,
        max_position_embeddings=32,
    )
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))
    return transformers.BertForMaskedLM(config), {"input_ids": ids, "labels": ids}


def t5():
    config = transformers.T5Config(
        d_model=32, d_ff=64, d_kv=8, num_layers=2, num_decoder_layers=2, num_heads=4, vocab_size=64,
        decoder_start_token_id=0,
    )
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))
    return transformers.T5ForConditionalGeneration(config), {"input_ids": ids, "labels": ids}


def vit():
    config = transformers.ViTConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=16,
        patch_size=4, num_labels=3, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
    )
    pixels = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    return transformers.ViTForImageClassification(config), {"pixel_values": pixels, "labels": torch.tensor([0, 2])}


MODELS = {"gpt2": gpt2, "llama": llama, "bert": bert, "t5": t5, "vit": vit}


def build(name: str):
    torch.manual_seed(0)
    model, batch = MODELS[name]()
    eager_apply.disable_kv_cache(model)  # a KV cache is inference state; apply() would turn it off with a warning
    return model.train(), batch


def loss_of(model, batch, seed: int):
    torch.manual_seed(seed)  # the same dropout masks in both runs
    return model(**batch).loss


def plan_for(model, batch, share: float) -> dict:
    saved = saved_activations(model, lambda: loss_of(model, batch, 0))
    in_layers = sorted((s for s in saved if layer_of(model, s.address.module)), key=lambda s: -s.bytes)
    cut = round(share * len(in_layers))
    recompute = {id(s) for s in in_layers[:cut]}
    decisions = [
        {
            "id": f"a{i}",
            "op": s.op,
            "bytes": s.bytes,
            "action": "recompute" if id(s) in recompute else "save",
            "module": s.address.module,
            "call_index": s.address.call_index,
        }
        for i, s in enumerate(saved)
    ]
    return {"schema": planfile.SCHEMA, "decisions": decisions}


def assert_same_step(name: str, share: float) -> None:
    reference, batch = build(name)
    planned = copy.deepcopy(reference)
    eager_apply.apply(planned, plan_for(reference, batch, share))
    assert eager_apply.applied_plan(planned).regions, "the plan must checkpoint at least one layer"

    ref_loss, plan_loss = loss_of(reference, batch, 1), loss_of(planned, batch, 1)
    ref_loss.backward()
    plan_loss.backward()
    assert torch.equal(ref_loss, plan_loss)
    for (label, p), (_, q) in zip(reference.named_parameters(), planned.named_parameters()):
        if p.grad is None:
            assert q.grad is None, label
        else:
            assert torch.equal(p.grad, q.grad), label


def assert_same_training(name: str) -> None:
    reference, batch = build(name)
    planned = copy.deepcopy(reference)
    eager_apply.apply(planned, plan_for(reference, batch, 0.6))
    for model in (reference, planned):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        for seed in range(5):
            optimizer.zero_grad()
            loss_of(model, batch, seed).backward()
            optimizer.step()
    for (label, p), (_, q) in zip(reference.named_parameters(), planned.named_parameters()):
        assert torch.equal(p, q), label


@pytest.mark.parametrize("share", [0.3, 1.0])
def test_gpt2_step_is_bitwise_equal(share):
    assert_same_step("gpt2", share)


@pytest.mark.slow
@pytest.mark.parametrize("share", [0.3, 0.6, 1.0])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_step_is_bitwise_equal(name, share):
    assert_same_step(name, share)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_trains_five_steps_to_the_same_parameters(name):
    assert_same_training(name)


def _trains_like(reference, planned, batch) -> None:
    """Two steps give the same loss and gradients as the model without the plan, bitwise."""
    for seed in range(2):
        for model in (reference, planned):
            model.zero_grad(set_to_none=True)
        a, b = loss_of(reference, batch, seed), loss_of(planned, batch, seed)
        a.backward()
        b.backward()
        assert torch.equal(a, b)
        assert all(torch.equal(p.grad, q.grad) for p, q in zip(reference.parameters(), planned.parameters()))


def test_a_gpt2_plan_on_a_gpt2_with_another_activation_leaves_out_what_differs():
    small, batch = build("gpt2")
    plan = plan_for(small, batch, 0.6)
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=32, vocab_size=64,
                                     activation_function="relu", use_cache=False)
    reference = transformers.GPT2LMHeadModel(config).train()
    planned = copy.deepcopy(reference)
    eager_apply.apply(planned, plan)
    with pytest.warns(UserWarning, match=r"left out .*\(its op does not happen there\)"):
        _trains_like(reference, planned, batch)


def test_a_gpt2_plan_on_llama_leaves_everything_out_and_trains_as_before():
    small, batch = build("gpt2")
    plan = plan_for(small, batch, 0.6)
    reference, _ = build("llama")
    planned = copy.deepcopy(reference)
    with pytest.warns(UserWarning, match="the model has no module 'transformer"):
        eager_apply.apply(planned, plan)
    assert eager_apply.applied_plan(planned).regions == []
    _trains_like(reference, planned, batch)


def test_kv_cache_is_turned_off_with_a_warning_and_restored():
    torch.manual_seed(0)
    model, batch = MODELS["t5"]()
    model.train()
    reference = copy.deepcopy(model)
    eager_apply.disable_kv_cache(reference)
    plan = plan_for(reference, batch, 0.5)
    with pytest.warns(UserWarning, match="KV cache"):
        eager_apply.apply(model, plan)
    assert model.config.use_cache is False and model.decoder.config.use_cache is False
    loss_of(model, batch, 0).backward()  # would fail in the recompute with the cache on
    eager_apply.remove(model)
    assert model.config.use_cache is True and model.decoder.config.use_cache is True
