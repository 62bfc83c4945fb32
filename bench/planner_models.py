"""Model families the planner benchmarks use: transformers models built from configs (no weights), CPU, fp32,
and hand-written models where no library has the kind.

FAMILIES give `build()` and `batch()` factories for planner_frontier.py, planner_speed.py and gpu_validate.py;
PLAN_FAMILIES are the families of planner_families.py (of different kinds, each a `Family`). Sizes are small so a
whole sweep runs in minutes on 2 cores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

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


# --- the families of bench/planner_families.py -----------------------------------------------------------------------
# Small, activation-heavy configurations (the batch's activations, not the weights, make the peak, so 0.45x of today
# is reachable), CPU fp32, dropout on wherever the family has it. `step` is what the gpulint.yaml would say: the
# loss function (`loss:`) and the part of the batch the model gets (`inputs:`), or a step function (`step:`).


@dataclass
class Family:
    build: Callable[[], Any]
    batch: Callable[[], Any]
    kind: str
    step: Any = None  # gpulint.planner.step.UserStep; None: the output's `.loss`


def _lm(config_cls: Any, model_cls: Any, batch: int = 8, seq: int = 128, **config: Any) -> tuple[Callable, Callable]:
    vocab = config.setdefault("vocab_size", 256)

    def build() -> Any:
        return model_cls(config_cls(**config))

    def make() -> dict:
        ids = _ids(vocab, batch, seq)
        return {"input_ids": ids, "labels": ids}

    return build, make


def neox() -> Family:
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    return Family(*_lm(GPTNeoXConfig, GPTNeoXForCausalLM, hidden_size=64, num_hidden_layers=4,
                       num_attention_heads=4, intermediate_size=256, max_position_embeddings=128, hidden_dropout=0.1,
                       attention_dropout=0.1, use_cache=False), "decoder LLM (parallel residual, dropout)")


def mistral() -> Family:
    from transformers import MistralConfig, MistralForCausalLM

    return Family(*_lm(MistralConfig, MistralForCausalLM, hidden_size=64, num_hidden_layers=4,
                       num_attention_heads=4, num_key_value_heads=2, intermediate_size=192,
                       max_position_embeddings=128, sliding_window=64, attention_dropout=0.1, use_cache=False),
                  "decoder LLM (grouped-query, sliding window)")


def phi() -> Family:
    from transformers import PhiConfig, PhiForCausalLM

    return Family(*_lm(PhiConfig, PhiForCausalLM, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                       intermediate_size=256, max_position_embeddings=128, resid_pdrop=0.1, embd_pdrop=0.1,
                       attention_dropout=0.1, use_cache=False), "decoder LLM (partial rotary, dropout)")


def mixtral() -> Family:
    from transformers import MixtralConfig, MixtralForCausalLM

    return Family(*_lm(MixtralConfig, MixtralForCausalLM, hidden_size=64, num_hidden_layers=4,
                       num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
                       max_position_embeddings=128, num_local_experts=4, num_experts_per_tok=2, use_cache=False),
                  "mixture of experts (top-2 router)")


def distilbert() -> Family:
    from transformers import DistilBertConfig, DistilBertForMaskedLM

    config = DistilBertConfig(dim=64, hidden_dim=256, n_layers=4, n_heads=4, vocab_size=256,
                              max_position_embeddings=128, dropout=0.1, attention_dropout=0.1)

    def make() -> dict:
        ids = _ids(256, 8, 128)
        return {"input_ids": ids, "labels": ids}

    return Family(lambda: DistilBertForMaskedLM(config), make, "encoder (masked LM, dropout)")


def whisper() -> Family:
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    config = WhisperConfig(d_model=64, encoder_layers=3, decoder_layers=3, encoder_attention_heads=4,
                           decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256, num_mel_bins=32,
                           max_source_positions=128, max_target_positions=64, vocab_size=256, dropout=0.1,
                           use_cache=False, decoder_start_token_id=1, pad_token_id=0, bos_token_id=1,
                           eos_token_id=2)

    def make() -> dict:
        g = torch.Generator().manual_seed(SEED)
        return {"input_features": torch.randn(8, 32, 256, generator=g),
                "labels": torch.randint(3, 256, (8, 64), generator=g)}

    return Family(lambda: WhisperForConditionalGeneration(config), make, "audio encoder-decoder (dropout)")


def clip() -> Family:
    from transformers import CLIPConfig, CLIPModel

    config = CLIPConfig(
        text_config={"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 3, "num_attention_heads": 4,
                     "vocab_size": 256, "max_position_embeddings": 64, "bos_token_id": 0, "eos_token_id": 1,
                     "pad_token_id": 1, "attention_dropout": 0.1},
        vision_config={"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 3,
                       "num_attention_heads": 4, "image_size": 64, "patch_size": 8, "attention_dropout": 0.1},
        projection_dim=32)

    def make() -> dict:
        g = torch.Generator().manual_seed(SEED)
        return {"input_ids": torch.randint(2, 256, (32, 64), generator=g),
                "pixel_values": torch.randn(32, 3, 64, 64, generator=g), "return_loss": True}

    return Family(lambda: CLIPModel(config), make, "two-tower (contrastive text + image)")


def resnet() -> Family:
    from transformers import ResNetConfig, ResNetForImageClassification

    config = ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64], depths=[2, 2, 2], num_labels=10,
                          layer_type="basic")

    def make() -> dict:
        g = torch.Generator().manual_seed(SEED)
        return {"pixel_values": torch.randn(16, 3, 64, 64, generator=g),
                "labels": torch.randint(0, 10, (16,), generator=g)}

    return Family(lambda: ResNetForImageClassification(config), make, "convolutional with BatchNorm (train mode)")


def mamba() -> Family:
    from transformers import MambaConfig, MambaForCausalLM

    return Family(*_lm(MambaConfig, MambaForCausalLM, batch=4, seq=64, hidden_size=32, state_size=8,
                       num_hidden_layers=3, expand=2, conv_kernel=4, use_cache=False),
                  "state-space (Mamba, its sequential scan)")


class _UNetBlock(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv1, self.norm1 = nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(4, cout)
        self.conv2, self.norm2 = nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(4, cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.silu(self.norm1(self.conv1(x)))
        return F.silu(self.norm2(self.conv2(x)))


class UNet(nn.Module):
    """A small image-to-image U-Net (GroupNorm, skip connections) trained with its own loss function."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.ModuleList([_UNetBlock(3, 16), _UNetBlock(16, 32)])
        self.mid = _UNetBlock(32, 32)
        self.up = nn.ModuleList([_UNetBlock(64, 16), _UNetBlock(32, 16)])
        self.out = nn.Conv2d(16, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = F.avg_pool2d(x, 2)
        x = self.mid(x)
        for block in self.up:
            x = F.interpolate(x, scale_factor=2.0, mode="nearest")
            x = block(torch.cat([x, skips.pop()], dim=1))
        return self.out(x)


def denoising_loss(output: torch.Tensor, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """`loss:` of the U-Net: the model gets the noisy image (`inputs: 0`), the loss compares with the clean one."""
    return F.mse_loss(output, batch[1])


def unet() -> Family:
    from gpulint.planner.step import UserStep

    def make() -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(SEED)
        clean = torch.randn(16, 3, 32, 32, generator=g)
        return clean + 0.1 * torch.randn(16, 3, 32, 32, generator=g), clean

    return Family(UNet, make, "U-Net with its own loss (loss outside the model)",
                  UserStep(loss_fn=denoising_loss, inputs=0))


class Checkpointed(nn.Module):
    """A residual MLP stack whose author already checkpoints every block with torch.utils.checkpoint."""

    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.reentrant = reentrant
        self.embed = nn.Linear(32, 64)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Dropout(0.1), nn.Linear(256, 64))
                                    for _ in range(4))
        self.head = nn.Linear(64, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = x + torch.utils.checkpoint.checkpoint(block, x, use_reentrant=self.reentrant)
        return self.head(torch.tanh(x)).square().mean()


def _features() -> torch.Tensor:
    return torch.randn(1024, 32, generator=torch.Generator().manual_seed(SEED))


def checkpointed() -> Family:
    return Family(lambda: Checkpointed(reentrant=False), _features, "already checkpoints (non-reentrant)")


def checkpointed_reentrant() -> Family:
    return Family(lambda: Checkpointed(reentrant=True), _features, "already checkpoints (reentrant)")


class ValueLoop(nn.Module):
    """Runs its layers as many times as the batch's values say: a Python loop over a value read from a tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 64))
                                    for _ in range(2))
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rounds = int((x.abs() > 7.0).sum()) % 3 + 2  # reads a value: torch.compile would break the graph here
        for step in range(rounds):
            x = 0.5 * x + 0.1 * self.drop(self.layers[step % 2](x))
        return x.square().mean()


def value_loop() -> Family:
    return Family(ValueLoop, lambda: 4 * torch.randn(512, 64, generator=torch.Generator().manual_seed(SEED)),
                  "value-dependent loop (reads tensor values)")


def contrastive_step(model: nn.Module, batch: dict) -> torch.Tensor:
    """`step:`: two views through the same encoder, and an InfoNCE loss between them (a SimCLR-style step)."""
    a = F.normalize(model(batch["view_a"]), dim=-1)
    b = F.normalize(model(batch["view_b"]), dim=-1)
    logits = a @ b.T / 0.1
    return F.cross_entropy(logits, torch.arange(len(a)))


def siamese() -> Family:
    from gpulint.planner.step import UserStep

    def build() -> nn.Module:
        return nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Dropout(0.1),
                             *(nn.Sequential(nn.Linear(256, 256), nn.GELU(), nn.Dropout(0.1)) for _ in range(3)),
                             nn.Linear(256, 64))

    def make() -> dict:
        g = torch.Generator().manual_seed(SEED)
        return {"view_a": torch.randn(512, 64, generator=g), "view_b": torch.randn(512, 64, generator=g)}

    return Family(build, make, "two views through one encoder (a user's own step function)",
                  UserStep(step_fn=contrastive_step))


PLAN_FAMILIES: dict[str, Callable[[], Family]] = {
    "neox": neox, "mistral": mistral, "phi": phi, "mixtral": mixtral, "distilbert": distilbert, "whisper": whisper,
    "clip": clip, "resnet": resnet, "mamba": mamba, "unet": unet, "checkpointed": checkpointed,
    "checkpointed-reentrant": checkpointed_reentrant, "value-loop": value_loop, "siamese": siamese,
}
