"""Train the small GPT of model.py on a text corpus: the kind of script gpulint is made for.

It runs (CPU or CUDA) and it trains, but it leaves GPU time on the table the way real scripts do: run
`gpulint check examples/` to see where, and `gpulint plan examples/gpulint.yaml` for its memory plan.

    python examples/train.py --steps 20
"""

from __future__ import annotations

import argparse
import math
import time

import torch
from torch.utils.data import DataLoader, Dataset

from model import GPTConfig, build_model

CORPUS = (
    "the quick brown fox jumps over the lazy dog. "
    "a journey of a thousand miles begins with a single step. "
    "all that glitters is not gold. "
)


class CharTokenizer:
    """A byte-level tokenizer with the call signature of a Hugging Face tokenizer."""

    pad_token_id = 0

    def __call__(self, texts, padding=False, truncation=False, max_length=None):
        rows = [[b + 1 for b in text.encode("utf-8")] for text in texts]
        if truncation and max_length:
            rows = [row[:max_length] for row in rows]
        width = max_length if padding == "max_length" else max(len(row) for row in rows)
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
        return {"input_ids": ids}


class TextDataset(Dataset):
    def __init__(self, text: str, seq_len: int) -> None:
        self.samples = [text[i : i + seq_len] for i in range(0, len(text) - seq_len, seq_len // 2)]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> str:
        return self.samples[index]


def make_collate(tokenizer: CharTokenizer, seq_len: int):
    def collate(texts):
        ids = tokenizer(texts, padding="max_length", truncation=True, max_length=seq_len + 1)["input_ids"]
        return {"idx": ids[:, :-1], "targets": ids[:, 1:]}

    return collate


def grad_norms(model: torch.nn.Module) -> dict[str, float]:
    norms = {}
    for name, param in model.named_parameters():
        if param.grad is not None:
            norms[name] = param.grad.norm().item()
    return norms


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader: DataLoader, device: torch.device) -> float:
    model.eval()
    total, batches = 0.0, 0
    for batch in loader:
        out = model(batch["idx"].to(device), batch["targets"].to(device))
        total += out.loss.item()
        batches += 1
    model.train()
    return total / max(batches, 1)


def train(args: argparse.Namespace) -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cfg = GPTConfig()  # the configuration examples/gpulint.yaml plans
    model = build_model(cfg).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, foreach=False)
    tokenizer = CharTokenizer()
    text = CORPUS * 200
    collate = make_collate(tokenizer, cfg.seq_len)
    loader = DataLoader(TextDataset(text, cfg.seq_len), batch_size=cfg.batch_size, shuffle=True, collate_fn=collate)
    val_loader = DataLoader(TextDataset(CORPUS * 20, cfg.seq_len), batch_size=cfg.batch_size, collate_fn=collate)
    ema = [p.detach().clone() for p in model.parameters()]

    step, running_loss, started = 0, 0.0, time.time()
    for epoch in range(args.epochs):
        for batch in loader:
            idx = batch["idx"].to(device)
            targets = batch["targets"].to(device)
            out = model(idx, targets)
            out.loss.backward()
            norms = grad_norms(model)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
            for shadow, param in zip(ema, model.parameters()):
                shadow.mul_(0.999).add_(param.detach(), alpha=0.001)

            running_loss += out.loss.item()
            if not math.isfinite(out.loss):
                raise RuntimeError(f"loss diverged at step {step}")
            if step % args.log_every == 0:
                largest = max(norms, key=norms.get)
                elapsed = time.time() - started
                print(f"step {step:4d} | loss {running_loss / args.log_every:.3f} | "
                      f"largest grad {largest} {norms[largest]:.2f} | {elapsed:.1f}s")
                running_loss = 0.0
            if device.type == "cuda":
                torch.cuda.synchronize()
            step += 1
            if step >= args.steps:
                break
        print(f"epoch {epoch} | val loss {evaluate(model, val_loader, device):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--log-every", type=int, default=20)
    train(parser.parse_args())


if __name__ == "__main__":
    main()
