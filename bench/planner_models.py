"""Model families the planner benchmarks use: transformers models built from configs (no weights), CPU, fp32.

Each entry gives `build()` and `batch()` factories; sizes are small so a whole sweep runs in minutes on 2 cores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

SEED = 0


def _ids(vocab: int, batch: int, seq: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(SEED))


def gpt2(n_layer: int = 2, d: int = 128, seq: int = 128, batch: int = 4, vocab: int = 2048) -> tuple[Callable, Callable]:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=n_layer, n_embd=d, n_head=max(1, d // 64), n_positions=seq, vocab_size=vocab,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)

    def build() -> Any:
        return GPT2LMHeadModel(cfg)

    def make() -> dict:
        ids = _ids(vocab, batch, seq)
        return {"input_ids": ids, "labels": ids}

    return build, make


def llama(n_layer: int = 2, d: int = 128, seq: int = 128, batch: int = 4, vocab: int = 2048,
          ffn: int | None = None) -> tuple[Callable, Callable]:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(num_hidden_layers=n_layer, hidden_size=d, intermediate_size=ffn or int(d * 8 / 3) // 8 * 8,
                      num_attention_heads=max(1, d // 64), num_key_value_heads=max(1, d // 64),
                      max_position_embeddings=seq, vocab_size=vocab, use_cache=False)

    def build() -> Any:
        return LlamaForCausalLM(cfg)

    def make() -> dict:
        ids = _ids(vocab, batch, seq)
        return {"input_ids": ids, "labels": ids}

    return build, make


def bert(n_layer: int = 2, d: int = 128, seq: int = 128, batch: int = 4, vocab: int = 2048) -> tuple[Callable, Callable]:
    from transformers import BertConfig, BertForMaskedLM

    cfg = BertConfig(num_hidden_layers=n_layer, hidden_size=d, intermediate_size=4 * d,
                     num_attention_heads=max(1, d // 64), max_position_embeddings=seq, vocab_size=vocab,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

    def build() -> Any:
        return BertForMaskedLM(cfg)

    def make() -> dict:
        ids = _ids(vocab, batch, seq)
        return {"input_ids": ids, "labels": ids}

    return build, make


def t5(n_layer: int = 2, d: int = 128, seq: int = 64, batch: int = 4, vocab: int = 2048) -> tuple[Callable, Callable]:
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(num_layers=n_layer, num_decoder_layers=n_layer, d_model=d, d_ff=4 * d, d_kv=64,
                   num_heads=max(1, d // 64), vocab_size=vocab, dropout_rate=0.0, use_cache=False,
                   decoder_start_token_id=0, pad_token_id=0)

    def build() -> Any:
        return T5ForConditionalGeneration(cfg)

    def make() -> dict:
        ids = _ids(vocab, batch, seq)
        return {"input_ids": ids, "labels": ids}

    return build, make


def vit(n_layer: int = 2, d: int = 128, image: int = 64, patch: int = 8, batch: int = 4) -> tuple[Callable, Callable]:
    from transformers import ViTConfig, ViTForImageClassification

    cfg = ViTConfig(num_hidden_layers=n_layer, hidden_size=d, intermediate_size=4 * d,
                    num_attention_heads=max(1, d // 64), image_size=image, patch_size=patch, num_labels=10,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

    def build() -> Any:
        return ViTForImageClassification(cfg)

    def make() -> dict:
        g = torch.Generator().manual_seed(SEED)
        return {"pixel_values": torch.randn(batch, 3, image, image, generator=g),
                "labels": torch.randint(0, 10, (batch,), generator=g)}

    return build, make


FAMILIES: dict[str, Callable[..., tuple[Callable, Callable]]] = {
    "gpt2": gpt2, "llama": llama, "bert": bert, "t5": t5, "vit": vit,
}
