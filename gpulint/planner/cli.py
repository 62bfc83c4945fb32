"""`gpulint plan CONFIG`: trace the step, plan recomputation under an absolute budget, print or write the plan.

    gpulint plan gpulint.yaml [--budget 24GB] [--hardware h100-sxm] [--format text|json|md|html]
                              [--out DIR] [--measure] [--sweep N]

Wired by gpulint/cli.py through `add_arguments(parser)` and `run(args) -> int`. This module imports no torch
at import time. `--patch`/`--script` belong to gpulint/planner/patch.py (the apply engineer's); when that
module exists its `add_arguments(parser)` adds them and `run_patch(args, plan)` is called after planning.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpulint.fileio import atomic_write

FORMATS = ("text", "json", "md", "html")


def _patch_module() -> Any:
    if importlib.util.find_spec("gpulint.planner.patch") is None:
        return None
    from gpulint.planner import patch

    return patch


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="gpulint.yaml with a `plan:` section")
    parser.add_argument("--budget", help="absolute memory budget, e.g. 24GB (1e9 B) or 24GiB (2**30 B)")
    parser.add_argument("--hardware", help="hardware profile name (h100-sxm, h200, a100-80gb, l4, t4, cpu) or YAML")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.add_argument("--out", metavar="DIR", help="also write plan.json and the report (and frontier.svg) here")
    parser.add_argument("--measure", action="store_true", help="run the real step with and without the plan")
    parser.add_argument("--sweep", type=int, metavar="N", default=0,
                        help="plan N budgets between the lowest reachable and today's peak")
    parser.add_argument("--top", type=int, default=10, help="recomputed activations to list (default: 10)")
    patch = _patch_module()
    if patch is not None and hasattr(patch, "add_arguments"):
        patch.add_arguments(parser)  # --patch / --script


@contextmanager
def _one_line(what: str) -> Iterator[None]:
    """Report anything running the user's model raises as the CLI's one line (exit code 2), naming the stage."""
    from gpulint.planner.errors import PlanError

    try:
        yield
    except PlanError:
        raise
    except Exception as exc:  # noqa: BLE001 - user code may raise anything; reported as one line
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise PlanError(f"{what}: {type(exc).__name__}: {text}") from None


def _progress(message: str) -> None:
    print(f"gpulint: {message}", file=sys.stderr, flush=True)


def write_atomic(path: Path, text: str) -> None:
    """Write via a temp file in the same folder, then rename: never a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)


def floor_bytes(graph: Any, rounding: int) -> int:
    """Parameters, buffers, batch, optimizer state and gradients: what no plan can remove."""
    from gpulint.planner.simulate import static_bytes

    sizes = graph.storage_bytes
    grads = {s for i in graph.grad_outputs for s in graph.nodes[i].storages}
    rnd = (lambda b: b) if rounding <= 1 else (lambda b: -(-b // rounding) * rounding)
    return static_bytes(graph, rounding) + sum(rnd(sizes[s]) for s in grads)


def make_plan(config: Any, budget: int | None, hardware_name: str, sweep: int = 0, progress: bool = True) -> dict:
    """Trace, plan and (optionally) sweep; return the gpulint.plan/1 dict."""
    from gpulint.planner.config import format_bytes
    from gpulint.planner.cost import node_times
    from gpulint.planner.errors import PlanError
    from gpulint.planner.greedy import GreedyPlanner
    from gpulint.planner.hardware import load_hardware
    from gpulint.planner.report import plan_dict
    from gpulint.planner.trace import trace_config

    hw = load_hardware(hardware_name)
    if progress:
        _progress(f"tracing {config.model} ({config.dtype}, fake tensors)...")
    traced = trace_config(config, progress=_progress if progress else None)
    graph = traced.graph
    if progress:
        _progress(f"traced {len(graph.nodes)} ops in {traced.seconds:.1f} s; planning for {hw.name}...")
    floor = floor_bytes(graph, hw.allocation_rounding)
    if budget is None:
        budget = hw.memory_capacity
    if budget < floor:
        raise PlanError(
            f"budget {format_bytes(budget)} is below the floor of {format_bytes(floor)} (parameters, gradients, "
            f"optimizer state and batch); no recomputation plan can reach it"
        )
    planner = GreedyPlanner(graph, node_times(graph, hw), hw.allocation_rounding, progress=progress)
    full = planner.run(None if sweep else budget)
    result = planner.for_budget(full, budget) if sweep else full
    plan = plan_dict(graph, result, hardware=hw.name, trace_seconds=traced.seconds, floor_bytes=floor)
    if traced.data_dependent:
        plan["data_dependent"] = traced.data_dependent
    if sweep:
        top, bottom = full.baseline.peak, full.lowest_peak
        rows = []
        for k in range(sweep):
            b = int(bottom + (top - bottom) * k / max(1, sweep - 1))
            r = planner.for_budget(full, b)
            rows.append({"budget_bytes": b, "peak_bytes": r.chosen.peak, "step_time_s": r.chosen.step_time_s,
                         "recompute_time_s": r.chosen.recompute_time_s, "feasible": r.feasible})
        plan["sweep"] = rows
    plan["_graph"] = graph  # dropped before output; lets --measure reuse the trace
    return plan


def add_measurement(plan: dict, config: Any, progress: bool = True) -> None:
    """Run the real step with and without the plan; record measured and on-device predicted figures."""
    from gpulint.planner.backend import saved_names
    from gpulint.planner.config import load_factory
    from gpulint.planner.measure import measure_step
    from gpulint.planner.simulate import simulate

    graph = plan["_graph"]
    build_model = load_factory(config.model, config.base_dir, "plan.model")
    make_batch = load_factory(config.batch, config.base_dir, "plan.batch")
    loss_fn = load_factory(config.loss, config.base_dir, "plan.loss") if config.loss else None
    kwargs = {"loss_fn": loss_fn, "optimizer": config.optimizer, "dtype": config.dtype}
    if progress:
        _progress("measuring today's step...")
    base = measure_step(build_model, make_batch, None, **kwargs)
    if progress:
        _progress("measuring the planned step...")
    names = saved_names(plan)
    planned = measure_step(build_model, make_batch, names, **kwargs)
    rounding = 512 if planned.device.startswith("cuda") else 1
    predicted = simulate(graph, graph.alias_closure({graph.by_name[n] for n in names}), rounding).peak
    predicted_base = simulate(graph, graph.default_saved(), rounding).peak
    plan["measured"] = {
        "peak_bytes": planned.peak_bytes, "step_time_s": planned.step_time_s, "device": planned.device,
        "predicted_peak_bytes": predicted, "baseline_peak_bytes": base.peak_bytes,
        "baseline_predicted_peak_bytes": predicted_base, "baseline_step_time_s": base.step_time_s,
        "loss": planned.loss, "baseline_loss": base.loss,
    }


def render(plan: dict, fmt: str, top: int = 10) -> str:
    from gpulint.planner import report

    if fmt == "json":
        return json.dumps({k: v for k, v in plan.items() if not k.startswith("_")}, indent=2) + "\n"
    if fmt == "md":
        return report.render_markdown(plan, top)
    if fmt == "html":
        return report.render_html(plan, top)
    return report.render_text(plan, top)


def run(args: argparse.Namespace) -> int:
    from gpulint.planner.config import load_plan_config, parse_budget
    from gpulint.planner.errors import PlanError

    if importlib.util.find_spec("torch") is None:
        raise PlanError("gpulint plan needs torch: pip install 'gpulint[plan]'")
    config = load_plan_config(args.config)
    budget = parse_budget(args.budget, "--budget") if args.budget is not None else config.budget
    if args.sweep < 0 or args.sweep == 1:
        raise PlanError("--sweep: give at least 2 budgets")
    from gpulint.planner import (
        shapes,  # dynamic shapes: a generator batch factory gets a plan per shape
    )

    if shapes.config_is_bucketed(config):
        plan = shapes.plan_config(config, budget, args.hardware or config.hardware, measure=args.measure,
                                  sweep=args.sweep)
    else:
        from gpulint.planner import eager  # the eager path's own figures: plan["eager"]

        plan = make_plan(config, budget, args.hardware or config.hardware, args.sweep)
        with _one_line("the eager step (gpulint.apply) could not be " + ("measured" if args.measure else "predicted")):
            eager.add_figures(plan, config, measured=args.measure)
    if args.measure:
        if plan.get("data_dependent"):
            # A step that reads tensor values has no single compiled graph to measure; eager mode runs it as is.
            _progress("the step reads tensor values: measured in eager mode only (the compiled path refuses it)")
        else:
            with _one_line("--measure: the real step failed"):
                add_measurement(plan, config)
    patch = _patch_module()
    if patch is not None and hasattr(patch, "run_patch") and (getattr(args, "patch", None) or getattr(args, "script", None)):
        patch.run_patch(args, {k: v for k, v in plan.items() if not k.startswith("_")})
    text = render(plan, args.format, args.top)
    if args.out:
        from gpulint.planner.report import sweep_svg

        out = Path(args.out)
        write_atomic(out / "plan.json", render(plan, "json"))
        suffix = {"text": "txt", "json": "json", "md": "md", "html": "html"}[args.format]
        if args.format != "json":
            write_atomic(out / f"plan.{suffix}", text)
        if plan.get("sweep"):
            write_atomic(out / "frontier.svg", sweep_svg(plan["sweep"]))
    sys.stdout.write(text)
    return 0
