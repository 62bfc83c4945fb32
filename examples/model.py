"""A small GPT in plain PyTorch, the model the `gpulint plan` demo plans (see examples/gpulint.yaml).

`build_model()` returns the module and `make_batch()` the inputs of one training step; the output has a
`.loss`, so the planner needs no `loss:` entry. Sizes are small so that the demo traces and plans in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class GPTConfig:
    vocab_size: int = 4096
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 256
    seq_len: int = 256
    batch_size: int = 8


@dataclass
class Output:
    loss: torch.Tensor
    logits: torch.Tensor


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.ln_1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln_2 = nn.LayerNorm(cfg.d_model)
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.fc_out = nn.Linear(4 * cfg.d_model, cfg.d_model)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for y in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln_1(x))
        return x + self.fc_out(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> Output:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return Output(loss=loss, logits=logits)


def build_model(cfg: GPTConfig | None = None) -> GPT:
    return GPT(cfg or GPTConfig())


def make_batch(cfg: GPTConfig | None = None) -> dict[str, torch.Tensor]:
    cfg = cfg or GPTConfig()
    generator = torch.Generator().manual_seed(0)
    idx = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.seq_len + 1), generator=generator)
    return {"idx": idx[:, :-1], "targets": idx[:, 1:]}
