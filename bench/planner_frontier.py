"""Frontier, exactness and budget-holding of gpulint's plans against torch's activation_memory_budget.

    python bench/planner_frontier.py [--models gpt2,llama,bert,t5,vit] [--points 8] [--out bench/results]

Per model (transformers, built from tiny configs, CPU, fp32, AdamW state resident): plan 8 budgets evenly
between the lowest reachable and today's peak, run each planned step for real and measure its peak with the
live-storage tracker; run torch's min-cut partitioner at activation_memory_budget 0.0..1.0 with the dp and ilp
solvers and measure those peaks the same way. Prints, per model:
  exact      max |predicted - measured| / measured over the gpulint points      (target < 1%)
  held       every measured peak <= its budget, and never higher at a lower budget
  frontier   share of torch points where gpulint's plan for a budget equal to torch's measured peak predicts
             equal or lower recompute time (gpulint's cost model, applied to the ops torch's partition
             recomputes)   (target >= 90%)
and writes <out>/frontier_<model>.csv and .svg (peak vs predicted step time for none, full checkpointing,
torch dp, torch ilp, gpulint).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import planner_models

from gpulint import charts
from gpulint.planner.cost import node_times
from gpulint.planner.graph import FWD
from gpulint.planner.greedy import GreedyPlanner
from gpulint.planner.hardware import load_hardware
from gpulint.planner.measure import measure_step
from gpulint.planner.simulate import simulate, step_time
from gpulint.planner.trace import trace_step

TORCH_BUDGETS = [1.0, 0.8, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.0]


def torch_partition(ratio: float, solver: str, seen: dict):
    """torch's min-cut partitioner at a ratio budget; records the forward ops its backward recomputes."""
    import torch._functorch.config as fconfig
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    def partition(joint, inputs, *, num_fwd_outputs, **kw):
        with fconfig.patch(activation_memory_budget=ratio, activation_memory_budget_solver=solver):
            fw, bw = min_cut_rematerialization_partition(joint, inputs, num_fwd_outputs=num_fwd_outputs, **kw)
        seen["bw_nodes"] = {n.name for n in bw.graph.nodes if n.op == "call_function"}
        return fw, bw

    return partition


def svg(series: dict[str, list[tuple[float, float]]], title: str) -> str:
    """Peak (MiB) against predicted step time (ms) per method; the legend sits above the plot, off the data."""
    styles = {"none": charts.GREY, "full checkpointing": charts.YELLOW, "torch dp": charts.RED,
              "torch ilp": charts.ORANGE, "gpulint": charts.BLUE}
    drawn = [charts.Series(name, [(peak, t * 1e3) for peak, t in points], styles.get(name), line=name == "gpulint",
                           markers=True) for name, points in series.items()]
    return charts.svg_chart(drawn, title=f"{title}: measured peak against predicted step time",
                            x_label="measured peak memory (MiB)", y_label="predicted step time (ms)")


def bench_model(name: str, points: int, out_dir: Path) -> dict:
    build, make = planner_models.FAMILIES[name]()
    traced = trace_step(build, make, optimizer="adamw", dtype="fp32", name=name)
    graph = traced.graph
    hw = load_hardware("cpu")
    times = node_times(graph, hw)
    planner = GreedyPlanner(graph, times)
    full = planner.run(None)
    top, bottom = full.baseline.peak, full.lowest_peak
    budgets = [int(bottom + (top - bottom) * k / (points - 1)) for k in range(points)]
    rows, ours = [], []
    worst, held, monotone, prev = 0.0, True, True, None
    for b in sorted(budgets, reverse=True):
        r = planner.for_budget(full, b)
        names = {graph.nodes[i].name for i in r.chosen.saved}
        m = measure_step(build, make, names, optimizer="adamw", repeats=1)
        err = abs(r.chosen.peak - m.peak_bytes) / m.peak_bytes
        worst = max(worst, err)
        held &= m.peak_bytes <= b or not r.feasible
        monotone &= prev is None or m.peak_bytes <= prev
        prev = m.peak_bytes
        ours.append((m.peak_bytes, r.chosen.step_time_s))
        rows.append(["gpulint", b, r.chosen.peak, m.peak_bytes, r.chosen.step_time_s, r.chosen.recompute_time_s])
    theirs: dict[str, list[tuple[int, float, float]]] = {"dp": [], "ilp": []}
    for solver, points_of_solver in theirs.items():
        for ratio in TORCH_BUDGETS:
            seen: dict = {}
            try:
                m = measure_step(build, make, None, optimizer="adamw", repeats=1,
                                 partition_fn=torch_partition(ratio, solver, seen))
            except Exception as exc:  # noqa: BLE001 - user code may raise anything; reported as one line
                print(f"  torch {solver} {ratio}: failed ({type(exc).__name__}: {str(exc)[:80]})")
                continue
            recomputed = {graph.by_name[n] for n in seen.get("bw_nodes", ()) if n in graph.by_name
                          and graph.nodes[graph.by_name[n]].kind == FWD}
            t_re = sum(times[i] for i in recomputed)
            t_step = full.baseline.step_time_s + t_re
            points_of_solver.append((m.peak_bytes, t_step, t_re))
            rows.append([f"torch {solver} {ratio}", "", "", m.peak_bytes, t_step, t_re])
    # gpulint at each torch point: the plan `gpulint plan --budget <torch's measured peak>` would give
    # (predicted peaks are exact, checked above, so its measured peak is at most torch's).
    wins = total = 0
    for pts in theirs.values():
        for peak, _t, t_re in pts:
            r = planner.for_budget(full, peak)
            total += 1
            wins += r.feasible and r.chosen.recompute_time_s <= t_re * (1 + 1e-9)
    none = simulate(graph, graph.default_saved())
    everything = simulate(graph, set())
    t_full, _ = step_time(graph, everything.schedule, times)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / f"frontier_{name}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["series", "budget_bytes", "predicted_peak_bytes", "measured_peak_bytes", "step_time_s",
                    "recompute_time_s"])
        w.writerow(["none", "", none.peak, "", full.baseline.step_time_s, 0.0])
        w.writerow(["full checkpointing", "", everything.peak, "", t_full, t_full - full.baseline.step_time_s])
        w.writerows(rows)
    mib = 2**20
    (out_dir / f"frontier_{name}.svg").write_text(svg({
        "none": [(none.peak / mib, full.baseline.step_time_s)],
        "full checkpointing": [(everything.peak / mib, t_full)],
        "torch dp": [(p / mib, t) for p, t, _ in theirs["dp"]],
        "torch ilp": [(p / mib, t) for p, t, _ in theirs["ilp"]],
        "gpulint": [(p / mib, t) for p, t in ours],
    }, name))
    torch_monotone = all(
        all(b[0] <= a[0] for a, b in itertools.pairwise(pts)) for pts in theirs.values()
    )
    return {"model": name, "ops": len(graph.nodes), "points": len(ours), "exact": worst, "held": held,
            "monotone": monotone, "wins": wins, "total": total, "torch_monotone": torch_monotone}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="gpt2,llama,bert,t5,vit")
    parser.add_argument("--points", type=int, default=8)
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()
    for name in args.models.split(","):
        r = bench_model(name, args.points, Path(args.out))
        print(f"{r['model']:6} ops {r['ops']:5}  points {r['points']}  exact: max err {r['exact']:.4%}  "
              f"held: {r['held']}  monotone: {r['monotone']}  frontier: {r['wins']}/{r['total']} "
              f"({r['wins'] / max(1, r['total']):.0%}) torch points beaten or tied  "
              f"(torch peak monotone in its ratio: {r['torch_monotone']})", flush=True)


if __name__ == "__main__":
    main()
