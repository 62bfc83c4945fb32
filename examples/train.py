"""Train the small GPT of model.py on a text corpus: the kind of script gpulint is made for.

It runs (CPU or CUDA) and it trains, but it leaves GPU time on the table the way real scripts do: run
`gpulint check examples/` to see where, and `gpulint plan examples/gpulint.yaml` for its memory plan.

    python examples/train.py --steps 20

It seeds everything (`--seed`) and prints its losses and, at the end, the peak memory of its training steps, so that
a memory plan applied to it shows what it promises: the same losses at a lower peak.
"""

from __future__ import annotations

import argparse
import contextlib
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


class PeakMemory:
    """The peak memory of the training steps: the CUDA allocator's own count, or on the CPU (which keeps none) the
    bytes of live tensor storages after every op of the second step (the first creates the optimizer state), as
    `gpulint plan --measure` counts them (needs gpulint[plan]; counting slows that one step down)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.tracker = None
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(device)
        else:
            try:
                from gpulint.planner.measure import LiveStorageTracker
            except ImportError:
                return
            self.tracker = LiveStorageTracker()

    def step(self, number: int, held: list):
        """A context for one step's forward and backward; `held` are the tensors alive across steps (parameters,
        gradients, optimizer state, the batch), which count too."""
        if self.tracker is None or number != 1:
            return contextlib.nullcontext()
        self.tracker.register(held)
        return self.tracker

    def report(self) -> str:
        if self.cuda:
            return f"{torch.cuda.max_memory_allocated() / 2**20:.1f} MiB (CUDA allocator)"
        if self.tracker is None:
            return "unknown (install gpulint[plan] to measure it on the CPU)"
        return f"{self.tracker.peak / 2**20:.1f} MiB (live tensors)"


def train(args: argparse.Namespace) -> None:
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cfg = GPTConfig()  # the configuration examples/gpulint.yaml plans
    model = build_model(cfg).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, foreach=False)
    tokenizer = CharTokenizer()
    text = CORPUS * 200
    collate = make_collate(tokenizer, cfg.seq_len)
    loader = DataLoader(TextDataset(text, cfg.seq_len), batch_size=cfg.batch_size, shuffle=True, collate_fn=collate,
                        generator=torch.Generator().manual_seed(args.seed))
    val_loader = DataLoader(TextDataset(CORPUS * 20, cfg.seq_len), batch_size=cfg.batch_size, collate_fn=collate)
    ema = [p.detach().clone() for p in model.parameters()]

    peak = PeakMemory(device)
    step, running_loss, started = 0, 0.0, time.time()
    for epoch in range(args.epochs):
        for batch in loader:
            idx = batch["idx"].to(device)
            targets = batch["targets"].to(device)
            held = [*model.parameters(), *(p.grad for p in model.parameters()), optimizer.state, idx, targets]
            with peak.step(step, held):
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
                print(f"step {step:4d} | loss {running_loss / args.log_every:.4f} | "
                      f"largest grad {largest} {norms[largest]:.2f} | {elapsed:.1f}s")
                running_loss = 0.0
            if device.type == "cuda":
                torch.cuda.synchronize()
            step += 1
            if step >= args.steps:
                break
        print(f"epoch {epoch} | val loss {evaluate(model, val_loader, device):.4f}")
    print(f"peak memory of a training step: {peak.report()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    train(parser.parse_args())


if __name__ == "__main__":
    main()
