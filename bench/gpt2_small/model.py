"""GPT-2 small (12 layers, d=768, 12 heads, 50,257-token vocabulary) built from its configuration (no weights), with
a batch of 8 sequences of 1,024 tokens: the model whose CI cost docs/ci.md quotes (`time gpulint plan
bench/gpt2_small/gpulint.yaml`)."""

from __future__ import annotations

import torch
from transformers import GPT2Config, GPT2LMHeadModel

BATCH, SEQ = 8, 1024


def build_model() -> GPT2LMHeadModel:
    return GPT2LMHeadModel(GPT2Config(n_positions=SEQ))


def make_batch() -> dict[str, torch.Tensor]:
    ids = torch.randint(0, GPT2Config().vocab_size, (BATCH, SEQ), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}
