"""`gpulint report` and `gpulint bot comment|review|check`: flags and entry points (wired in gpulint/cli.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from gpulint.bot import planpatch
from gpulint.bot.data import BotInputError, load_findings, load_plan, workspace_root
from gpulint.bot.delta import DEFAULT_THRESHOLD, parse_threshold
from gpulint.bot.diff import FILTER_MODES, from_git
from gpulint.bot.report import (
    COMMENT_LIMIT,
    DEFAULT_FULL_REPORT,
    JOB_SUMMARY_LIMIT,
    ReportInput,
    render_html,
    render_markdown,
)
from gpulint.fileio import atomic_write


def _add_input_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lint", metavar="FINDINGS.json", help="findings from `gpulint check --format json`")
    parser.add_argument("--plan", metavar="PLAN.json", help="plan from `gpulint plan --format json`")
    parser.add_argument("--base-plan", metavar="BASE.json",
                        help="the plan of the PR's base: the report opens with what the PR changes (needs --plan)")
    parser.add_argument("--plan-patch", metavar="PLAN.diff",
                        help="the diff `gpulint plan --patch` printed: shown under \"Suggested patches\" with the "
                             "figures it buys (and offered as suggestions by `bot review`)")
    parser.add_argument("--memory-threshold", default=DEFAULT_THRESHOLD, metavar="PERCENT",
                        help="the gpulint/memory gate fails when today's peak grows by more than this "
                             f"(default: {DEFAULT_THRESHOLD.replace('%', '%%')}), or when the head's plan does not "
                             "fit its budget")
    parser.add_argument(
        "--full-report",
        metavar="WHERE",
        default=DEFAULT_FULL_REPORT,
        help="where readers find the untrimmed report (named when findings are left out for size)",
    )


def _load_inputs(args: argparse.Namespace, root: str | None) -> ReportInput:
    """The findings (absolute paths made relative to `root`, the workspace) and the plan."""
    if args.base_plan and not args.plan:
        raise BotInputError("--base-plan needs --plan (the head's plan) to compare with")
    if not args.lint and not args.plan:
        raise BotInputError("nothing to report: give --lint FINDINGS.json and/or --plan PLAN.json")
    return ReportInput(
        findings=load_findings(args.lint, root) if args.lint else [],
        plan=load_plan(args.plan) if args.plan else None,
        base_plan=load_plan(args.base_plan) if args.base_plan else None,
        plan_patch=planpatch.load(args.plan_patch) if args.plan_patch else None,
        threshold_percent=parse_threshold(args.memory_threshold),
        linted=bool(args.lint),
        full_report=args.full_report,
    )


# ---------------------------------------------------------------------------------------------- gpulint report


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    _add_input_arguments(parser)
    parser.add_argument("--format", choices=("md", "html", "summary", "delta"), default="md",
                        help="md: the PR comment; html: a self-contained report; summary: the Actions job summary; "
                             "delta: the base and head plans compared, as JSON (gpulint.delta/1; needs --base-plan)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write here (default: stdout)")
    parser.add_argument("--link-base", metavar="URL",
                        help="link findings to source, e.g. https://github.com/OWNER/REPO/blob/SHA/")
    parser.add_argument("--source-root", metavar="DIR",
                        help="read files here to show fixes as diffs, and make the findings' absolute paths "
                             "relative to it (default: $GITHUB_WORKSPACE, else the current folder)")
    parser.add_argument("--diff-base", metavar="REF",
                        help="report only findings on lines changed since REF (`git diff REF...HEAD`)")
    parser.add_argument("--filter-mode", choices=FILTER_MODES, default="added",
                        help="with --diff-base: added lines (default), whole hunks, changed files, or everything")


def run_report(args: argparse.Namespace) -> int:
    root = workspace_root(args.source_root, os.environ)
    data = _load_inputs(args, root)
    data.link_base = args.link_base
    data.source_root = Path(root)
    if args.format == "delta" and data.base_plan is None:
        raise BotInputError("--format delta needs --base-plan BASE.json and --plan PLAN.json")
    diff = None
    if args.diff_base:
        diff = from_git(args.diff_base, cwd=args.source_root)
        data.total_findings = len(data.findings)
        data.changed_only = args.filter_mode != "nofilter"
        data.note_unmatched(diff.unmatched(data.findings))
        data.findings = diff.filter(data.findings, args.filter_mode)
    data.compare_plans(diff)
    if args.format == "delta":
        text = json.dumps(data.delta.to_dict(), indent=2, ensure_ascii=False) + "\n"
    elif args.format == "html":
        text = render_html(data)
    elif args.format == "summary":
        text = render_markdown(data, "job_summary.md.j2", JOB_SUMMARY_LIMIT)
    else:
        text = render_markdown(data, "pr_comment.md.j2", COMMENT_LIMIT)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        atomic_write(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


# ---------------------------------------------------------------------------------------------- gpulint bot


def add_bot_arguments(parser: argparse.ArgumentParser) -> None:
    from gpulint.bot import commands

    commands.add_arguments(parser, _add_input_arguments)


def run_bot(args: argparse.Namespace) -> int:
    from gpulint.bot import commands

    return commands.run(args, _load_inputs)
