"""`gpulint bot comment|review|check`: read the JSON inputs, find the PR, post; fall back when the token cannot write."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from gpulint.bot import github as gh_ops
from gpulint.bot import planpatch
from gpulint.bot.client import DEFAULT_API_URL, DEFAULT_DEADLINE_S, GitHub, GitHubError
from gpulint.bot.data import workspace_root
from gpulint.bot.diff import FILTER_MODES, PullDiff
from gpulint.bot.report import (
    COMMENT_LIMIT,
    JOB_SUMMARY_LIMIT,
    ReportInput,
    plan_patch_figures,
    render_markdown,
)
from gpulint.errors import UsageError


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}") from None
    if not 1 <= seconds <= 6 * 3600:
        raise argparse.ArgumentTypeError(f"expected 1 to 21600 seconds, got {value}")
    return seconds


def add_arguments(parser: argparse.ArgumentParser, add_inputs: Callable[[argparse.ArgumentParser], None]) -> None:
    sub = parser.add_subparsers(dest="bot_command", metavar="ACTION")
    sub.required = True
    helps = {
        "comment": "create or update the one gpulint comment on the PR",
        "review": "inline review comments with suggestions on the lines the PR added",
        "check": "a check run with annotations",
    }
    for name, text in helps.items():
        p = sub.add_parser(name, help=text)
        add_inputs(p)
        p.add_argument("--repo", metavar="OWNER/NAME", help="default: $GITHUB_REPOSITORY")
        p.add_argument("--pr", type=int, metavar="N", help="default: from $GITHUB_EVENT_PATH (or the head SHA)")
        p.add_argument("--head-sha", metavar="SHA",
                       help="the commit the findings are for (default: from the event); when the PR's head has "
                            "moved on, nothing is posted")
        p.add_argument("--login", default=os.environ.get("GPULINT_BOT_LOGIN"),
                       help="the bot's own login (needed for GitHub App tokens; default: github-actions[bot])")
        p.add_argument("--filter-mode", choices=FILTER_MODES, default="added",
                       help="which findings count: on added lines (default), in hunks, in changed files, all "
                            "(inline review comments go only on added lines, whatever the mode)")
        p.add_argument("--root", metavar="DIR",
                       help="the workspace the findings' absolute paths are under (default: $GITHUB_WORKSPACE, "
                            "else the current folder)")
        p.add_argument("--deadline", type=_seconds, default=DEFAULT_DEADLINE_S, metavar="SECONDS",
                       help="longest time to spend waiting on GitHub (rate limits, retries) before giving up "
                            f"with one line; keep it below the job's timeout (default: {DEFAULT_DEADLINE_S:.0f})")
        p.add_argument("--token-env", default="GITHUB_TOKEN", metavar="NAME",
                       help="environment variable holding the token (never a flag: flags show in logs)")
        if name == "comment":
            p.add_argument("--mode", choices=("update", "recreate", "off"), default="update",
                           help="update the comment in place (default), delete and post anew, or post nothing")


class BotApiError(UsageError):
    """GitHub refused or kept failing after the retries: one line, exit 2."""


def run(args: argparse.Namespace, load_inputs, *, env: dict | None = None, client: GitHub | None = None,
        out=None) -> int:
    env = dict(os.environ) if env is None else env
    out = out or sys.stdout
    if args.bot_command == "review" and not args.lint:
        # Without findings every earlier review comment would look fixed and be deleted.
        raise UsageError("gpulint bot review needs --lint FINDINGS.json")
    data = load_inputs(args, workspace_root(args.root, env))
    if args.bot_command == "comment" and args.mode == "off":
        print("gpulint: commenting is off (--mode off)", file=out)
        return 0
    gh = client or GitHub(token=env.get(args.token_env, ""), api_url=env.get("GITHUB_API_URL") or DEFAULT_API_URL,
                          deadline_s=args.deadline)
    try:
        target, diff, report = _prepare(args, data, gh, env, out)
    except gh_ops.NothingToPost as exc:
        print(f"gpulint: {exc}", file=out)
        return 0
    except GitHubError as exc:
        return _cannot_post(exc, data, env, out)
    try:
        _post(args, gh, target, diff, report, out)
    except GitHubError as exc:
        return _cannot_post(exc, report, env, out)
    return 0


def _prepare(args, data: ReportInput, gh: GitHub, env: dict, out) -> tuple[gh_ops.Target, PullDiff | None,
                                                                            ReportInput]:
    """The PR, its diff, and the report restricted to the findings `--filter-mode` keeps."""
    target = gh_ops.resolve_target(gh, env, args.repo, args.pr, args.head_sha)
    # The plans' delta puts activations on changed lines first; the plan's patch is suggested on them.
    needs_diff = data.findings or data.base_plan is not None or data.plan_patch is not None
    diff = gh_ops.pull_diff(gh, target) if needs_diff else None
    report = ReportInput(
        findings=diff.filter(data.findings, args.filter_mode) if diff else [],
        plan=data.plan,
        base_plan=data.base_plan,
        plan_patch=data.plan_patch,
        threshold_percent=data.threshold_percent,
        changed_only=args.filter_mode != "nofilter",
        total_findings=len(data.findings),
        link_base=gh_ops.link_base(gh.api_url, env, target),
        full_report=data.full_report,
    )
    report.compare_plans(diff)
    if diff is not None:
        report.files_listed = diff.listed
        elsewhere = diff.unmatched(data.findings)
        report.note_unmatched(elsewhere)
        if report.unmatched:
            print(f"gpulint: {len(elsewhere)} of {len(data.findings)} findings are in files this PR does not change "
                  f"(e.g. {elsewhere[0].path!r}; paths are matched relative to --root)", file=out)
        if diff.listed:
            print(f"gpulint: GitHub lists only {diff.listed[0]} of the PR's {diff.listed[1]} changed files: findings "
                  "in the others cannot be matched to changed lines", file=out)
    return target, diff, report


def _post(args, gh: GitHub, target: gh_ops.Target, diff: PullDiff | None, report: ReportInput, out) -> None:
    if args.bot_command == "comment":
        login = gh_ops.own_login(gh, args.login)
        body = render_markdown(report, limit=COMMENT_LIMIT)
        has_news = bool(report.findings) or report.plan is not None
        what = gh_ops.post_sticky(gh, target, login, body, args.mode, create=has_news)
        print(f"gpulint: PR #{target.number} comment {what}", file=out)
    elif args.bot_command == "review":
        login = gh_ops.own_login(gh, args.login)
        diff = diff or gh_ops.pull_diff(gh, target)
        extra = []
        if report.plan_patch is not None:
            buys = plan_patch_figures(report.plan)
            extra = [gh_ops.plan_patch_comment(s, buys) for s in planpatch.suggestions(report.plan_patch, diff.files)]
        r = gh_ops.post_review(gh, target, login, report.findings, diff, report.link_base, extra)
        suggested = f", {len(extra)} of them the memory plan's" if extra else ""
        print(f"gpulint: PR #{target.number} review: {r['posted']} new, {r['already']} already posted{suggested}, "
              f"{r['deleted']} removed, {r['kept']} outdated kept for their replies, "
              f"{r['dropped']} not on added lines", file=out)
    else:
        if args.lint or report.gate is None:
            r = gh_ops.post_check(gh, target, report.findings, report)
            left_out = f" ({r['left_out']} less severe left out)" if r["left_out"] else ""
            print(f"gpulint: check run {r['id']} {r['conclusion']} with {r['annotations']} annotations{left_out}",
                  file=out)
        if report.gate is not None:
            r = gh_ops.post_memory_check(gh, target, report.gate, report)
            print(f"gpulint: check run {r['id']} gpulint/memory {r['conclusion']}: {r['reason']}", file=out)


def _cannot_post(exc: GitHubError, report: ReportInput, env: dict, out) -> int:
    """A token that may not write (a fork PR, a read-only token) gets the fallback and exit 0; anything else that
    still fails after the retries (a rate limit past the deadline included) is one line and exit 2."""
    if not exc.is_permission:
        raise BotApiError(str(exc)) from None
    summary = render_markdown(report, "job_summary.md.j2", JOB_SUMMARY_LIMIT)
    gh_ops.fallback(report.findings, summary, f"gpulint cannot write to this pull request ({exc.status})", env, out)
    if report.gate is not None and not report.gate.passed:  # the check run could not be posted: say it here
        print(f"::error title=gpulint/memory::{gh_ops.escape_data(report.gate.reason)}", file=out)
    return 0
