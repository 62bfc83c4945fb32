"""How far the greedy planner is from the exact optimum of the same problem, on graphs small enough to solve.

    python bench/planner_optimality.py [--points 16] [--cases gelu-mlp-2x256,...]    # ~35 s on 2 idle cores

The problem: choose which forward storages to keep for the backward (the rest are recomputed where the
backward needs them) so that the simulated peak is within the budget, minimising the recompute time under
the cost model (cpu profile). The exact optimum is found by enumerating every subset of the storages the
plain partition saves (2^k full simulations; k <= 16 here), the same decision space the greedy searches.
This is an exhaustive search, not an ILP: on these sizes it is exact and needs no linearisation of the peak.
Budgets run evenly from the greedy's lowest peak to today's peak; the exhaustive lowest peak is printed beside
the greedy's (below the greedy's floor the greedy reports the budget infeasible). Also checked: the plans are
monotone (a lower budget never gives a higher peak nor a faster plan).
Target: greedy recompute time within 5% of the optimum at every budget.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

import torch
from torch import nn

from gpulint.planner.cost import node_times
from gpulint.planner.greedy import GreedyPlanner
from gpulint.planner.hardware import load_hardware
from gpulint.planner.simulate import simulate, step_time
from gpulint.planner.trace import trace_step


class GeluMLP(nn.Module):
    def __init__(self, depth: int, width: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            h = layer(x)  # GELU written out, as GPT-2 does: several saved pointwise intermediates
            x = 0.5 * h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * torch.pow(h, 3.0))))
        return x.sum()


class ResidualNormMLP(nn.Module):
    def __init__(self, depth: int, width: int) -> None:
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(depth))
        self.up = nn.ModuleList(nn.Linear(width, 4 * width) for _ in range(depth))
        self.down = nn.ModuleList(nn.Linear(4 * width, width) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for norm, up, down in zip(self.norms, self.up, self.down):
            x = x + down(torch.relu(up(norm(x))))
        return (x * x).mean()


class PreNormAttention(nn.Module):
    """Pre-norm single-head self-attention blocks, attention written out (scores, softmax, weighted sum)."""

    def __init__(self, depth: int, width: int) -> None:
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(depth))
        self.qkv = nn.ModuleList(nn.Linear(width, 3 * width) for _ in range(depth))
        self.proj = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for norm, qkv, proj in zip(self.norms, self.qkv, self.proj):
            q, k, v = qkv(norm(x)).chunk(3, dim=-1)
            weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
            x = x + proj(weights @ v)
        return x.pow(2).mean()


class ConvBNNet(nn.Module):
    """A conv stem and residual BatchNorm-ReLU-conv blocks (batch norm saves its batch statistics)."""

    def __init__(self, depth: int, channels: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.BatchNorm2d(channels), nn.ReLU(), nn.Conv2d(channels, channels, 3, padding=1))
            for _ in range(depth)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = x + block(x)
        return x.square().mean()


CASES = {
    "gelu-mlp-2x256": (lambda: GeluMLP(2, 256), lambda: torch.randn(512, 256)),
    "gelu-mlp-3x128": (lambda: GeluMLP(3, 128), lambda: torch.randn(256, 128)),
    "resnorm-mlp-3x128": (lambda: ResidualNormMLP(3, 128), lambda: torch.randn(512, 128)),
    "resnorm-mlp-2x64": (lambda: ResidualNormMLP(2, 64), lambda: torch.randn(1024, 64)),
    "attention-2x64": (lambda: PreNormAttention(2, 64), lambda: torch.randn(4, 128, 64)),
    "convbn-3x8": (lambda: ConvBNNet(3, 8), lambda: torch.randn(16, 3, 16, 16)),
}


def exact_frontier(planner: GreedyPlanner) -> list[tuple[int, float]]:
    """(peak, recompute time) of every subset of the storages a plain partition saves (`planner.groups`) kept, on
    top of the saved nodes that are no decision (not in `planner.storage_of`): the exact frontier."""
    fixed = {i for i in planner.graph.default_saved() if i not in planner.storage_of}
    groups = list(planner.groups.values())
    out = []
    for keep in itertools.product((False, True), repeat=len(groups)):
        saved = fixed | {i for k, members in zip(keep, groups) if k for i in members}
        sim = simulate(planner.graph, planner.graph.alias_closure(saved))
        out.append((sim.peak, step_time(planner.graph, sim.schedule, planner.times)[1]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=16)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    hw = load_hardware("cpu")
    worst_all, monotone_all = 0.0, True
    for name in args.cases.split(","):
        build, make = CASES[name]
        graph = trace_step(build, make, optimizer="none", name=name).graph
        planner = GreedyPlanner(graph, node_times(graph, hw))
        start = time.perf_counter()
        frontier = exact_frontier(planner)
        t_exact = time.perf_counter() - start
        start = time.perf_counter()
        full = planner.run(None)
        lo, hi = full.lowest_peak, full.baseline.peak
        worst, rows, plans = 0.0, [], []
        for k in range(args.points):
            budget = int(lo + (hi - lo) * k / (args.points - 1))
            greedy = planner.for_budget(full, budget)
            plans.append((greedy.chosen.peak, greedy.chosen.recompute_time_s))
            best = min(t for peak, t in frontier if peak <= budget)
            gap = (greedy.chosen.recompute_time_s - best) / best if best > 0 else (
                0.0 if greedy.chosen.recompute_time_s == 0 else float("inf"))
            worst = max(worst, gap)
            rows.append(f"{budget / 2**20:.2f}MiB:{gap:+.1%}")
        t_greedy = time.perf_counter() - start
        monotone = all(a[0] <= b[0] and a[1] >= b[1] * (1 - 1e-9) for a, b in itertools.pairwise(plans))
        exact_lowest = min(peak for peak, _ in frontier)
        worst_all, monotone_all = max(worst_all, worst), monotone_all and monotone
        print(f"{name}: {len(planner.groups)} storages, 2^{len(planner.groups)} subsets in {t_exact:.1f} s, greedy {t_greedy:.1f} s; "
              f"greedy lowest peak {lo / 2**20:.3f} MiB vs exact {exact_lowest / 2**20:.3f} MiB; monotone {monotone}; "
              f"worst recompute-time gap {worst:+.2%}  [{' '.join(rows)}]", flush=True)
    print(f"worst gap over all cases and budgets: {worst_all:+.2%} (target <= +5%); monotone: {monotone_all}")


if __name__ == "__main__":
    main()
