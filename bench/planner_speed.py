"""Trace + plan time on big graphs (fake tensors: no real memory), beside torch's own min-cut partitioner.

    python bench/planner_speed.py                 # GPT-2 small: 12 layers, d=768, seq 1024, batch 8, bf16
    python bench/planner_speed.py --llama7b       # also the 32-layer Llama-7B shape (d=4096, seq 4096, bf16)

Targets: GPT-2 small <= 60 s; Llama-7B shape <= 5 min and <= 4 GB host memory (max RSS printed).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import planner_models

from gpulint.planner.cost import node_times
from gpulint.planner.greedy import GreedyPlanner
from gpulint.planner.hardware import load_hardware
from gpulint.planner.planning import floor_bytes
from gpulint.planner.trace import trace_step


def torch_partitioner_seconds(traced) -> float:
    """Time torch's min_cut_rematerialization_partition (activation_memory_budget=0.5) on the same joint graph."""
    import copy

    import torch._functorch.config as fconfig
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    joint = copy.deepcopy(traced.joint)
    start = time.perf_counter()
    with fconfig.patch(activation_memory_budget=0.5):
        min_cut_rematerialization_partition(joint, None, num_fwd_outputs=traced.num_fwd_outputs)
    return time.perf_counter() - start


def run(name: str, build, make, hardware: str, budget_fraction: float) -> None:
    start = time.perf_counter()
    traced = trace_step(build, make, optimizer="adamw", dtype="bf16", name=name)
    t_trace = time.perf_counter() - start
    hw = load_hardware(hardware)
    planner = GreedyPlanner(traced.graph, node_times(traced.graph, hw), hw.allocation_rounding)
    base = planner.run(budget=10**18).baseline.peak
    floor = floor_bytes(traced.graph, hw.allocation_rounding)
    budget = int(floor + (base - floor) * budget_fraction)
    p0 = time.perf_counter()
    result = planner.run(budget=budget)
    t_plan = time.perf_counter() - p0
    try:
        t_torch = f"{torch_partitioner_seconds(traced):.1f} s"
    except Exception as exc:  # report, do not hide, a torch failure  # noqa: BLE001 - user code may raise anything; reported as one line
        t_torch = f"failed ({type(exc).__name__})"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"{name}: {len(traced.graph.nodes)} ops; trace {t_trace:.1f} s + plan {t_plan:.1f} s "
          f"= {t_trace + t_plan:.1f} s (budget {budget / 2**30:.2f} GiB: floor {floor / 2**30:.2f} + "
          f"{budget_fraction:.0%} of the way to today's {base / 2**30:.2f} GiB -> "
          f"{result.chosen.peak / 2**30:.2f} GiB, {len(result.path) - 1} greedy steps, feasible={result.feasible}); "
          f"torch min-cut partitioner {t_torch}; max RSS {rss:.2f} GiB", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--llama7b", action="store_true")
    # 0.6: on GPT-2 small, halfway (0.5) is below the lowest peak any plan reaches, which times the whole descent
    # rather than a plan that fits.
    parser.add_argument("--fraction", type=float, default=0.6,
                        help="budget at this fraction of the way from the floor (weights, grads, optimizer) to today's peak")
    args = parser.parse_args()
    build, make = planner_models.gpt2(n_layer=12, d=768, seq=1024, batch=8, vocab=50257)
    run("gpt2-small", build, make, "h100-sxm", args.fraction)
    if args.llama7b:
        build, make = planner_models.llama(n_layer=32, d=4096, seq=4096, batch=1, vocab=32000, ffn=11008)
        run("llama-7b-shape", build, make, "h100-sxm", args.fraction)


if __name__ == "__main__":
    main()
