"""`gpulint plan CONFIG`: trace the step, plan recomputation under an absolute budget, print or write the plan.

    gpulint plan gpulint.yaml [--budget 24GB] [--hardware h100-sxm] [--format text|json|md|html]
                              [--out DIR] [--measure] [--sweep N] [-q]

Exit code: 0 when a form of the plan meets the budget (or no budget was given), 1 when none does (as `check` exits 1
on findings), 2 on a user's mistake. On a terminal the phases of the work show on stderr (progress.Phases).

Wired by gpulint/cli.py through `add_arguments(parser)` and `run(args) -> int`; the work is in planning.py. This
module imports no torch at import time. `--patch`/`--script` belong to gpulint/planner/patch.py: its
`add_arguments(parser)` adds them and `run_patch(args, plan)` is called after planning.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpulint.fileio import atomic_write

FORMATS = ("text", "json", "md", "html")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="gpulint.yaml with a `plan:` section")
    parser.add_argument("--budget", help="absolute memory budget: 24GB = 24G = 24e9 B, 24GiB = 24Gi = 24 * 2**30 B "
                        "(reports show it, and the peaks, in the unit written here)")
    parser.add_argument("--hardware", help="hardware profile name (h100-sxm, h200, a100-80gb, l4, t4, cpu) or YAML")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.add_argument("--out", metavar="DIR", help="also write plan.json and the report (and frontier.svg) here")
    parser.add_argument("--measure", action="store_true", help="run the real step with and without the plan")
    parser.add_argument("--sweep", type=int, metavar="N", default=0,
                        help="plan N budgets between the lowest reachable and today's peak")
    parser.add_argument("--top", type=int, default=10, help="recomputed activations to list (default: 10)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress on stderr (it is shown only on a terminal anyway)")
    from gpulint.planner import patch

    patch.add_arguments(parser)  # --patch / --script / --patch-mode


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


def write_atomic(path: Path, text: str) -> None:
    """Write via a temp file in the same folder, then rename: never a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)


def render(plan: Any, fmt: str, top: int = 10) -> str:
    from gpulint.planner import planfile, report

    if fmt == "json":
        return planfile.dump(plan)
    if fmt == "md":
        return report.render_markdown(plan, top)
    if fmt == "html":
        return report.render_html(plan, top)
    return report.render_text(plan, top)


def run(args: argparse.Namespace) -> int:
    from gpulint.errors import EXIT_FINDINGS, EXIT_OK
    from gpulint.planner import planning
    from gpulint.planner.config import load_plan_config, parse_budget
    from gpulint.planner.errors import PlanError
    from gpulint.planner.report import sweep_svg, verdict
    from gpulint.progress import Phases

    if importlib.util.find_spec("torch") is None:
        raise PlanError("gpulint plan needs torch: pip install 'gpulint[plan]'")
    config = load_plan_config(args.config)
    budget = parse_budget(args.budget, "--budget") if args.budget is not None else config.budget
    if args.sweep < 0 or args.sweep == 1:
        raise PlanError("--sweep: give at least 2 budgets")
    from gpulint.planner.shapes import config_is_bucketed  # a generator batch factory gets a plan per shape

    hardware = args.hardware or config.hardware
    budget_bytes = budget.bytes if budget is not None else None
    if config_is_bucketed(config):
        plan = planning.plan_config_buckets(config, budget_bytes, hardware, measure=args.measure, sweep=args.sweep)
    else:
        with Phases(planning.phase_count(args.sweep, args.measure), enabled=not args.quiet) as phases:
            with _one_line("the step could not be planned"):
                planned = planning.make_plan(config, budget_bytes, hardware, args.sweep, phases)
            if args.measure:
                planning.add_measurement(planned, phases)  # each form on its own: a failure is recorded, not raised
        plan = planned.plan
    if budget is not None:
        plan.budget_unit = budget.unit
    if args.patch or args.script:
        from gpulint.planner import patch

        patch.run_patch(args, plan)
    text = render(plan, args.format, args.top)
    if args.out:
        out = Path(args.out)
        write_atomic(out / "plan.json", render(plan, "json"))
        suffix = {"text": "txt", "json": "json", "md": "md", "html": "html"}[args.format]
        if args.format != "json":
            write_atomic(out / f"plan.{suffix}", text)
        if plan.sweep:
            write_atomic(out / "frontier.svg", sweep_svg(plan))
    sys.stdout.write(text)
    return EXIT_OK if verdict(plan).met else EXIT_FINDINGS
