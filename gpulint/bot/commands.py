"""`gpulint bot comment|review|check`: read the JSON inputs, find the PR, post; fall back when the token cannot write."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from gpulint.bot import github as gh_ops
from gpulint.bot.client import DEFAULT_API_URL, GitHub, GitHubError
from gpulint.bot.diff import FILTER_MODES
from gpulint.bot.report import (
    COMMENT_LIMIT,
    JOB_SUMMARY_LIMIT,
    ReportInput,
    render_markdown,
)


def add_arguments(parser: argparse.ArgumentParser, add_inputs: Callable[[argparse.ArgumentParser], None]) -> None:
    sub = parser.add_subparsers(dest="bot_command", metavar="ACTION")
    sub.required = True
    helps = {
        "comment": "create or update the one gpulint comment on the PR",
        "review": "inline review comments with suggestions on the PR's changed lines",
        "check": "a check run with annotations",
    }
    for name, text in helps.items():
        p = sub.add_parser(name, help=text)
        add_inputs(p)
        p.add_argument("--repo", metavar="OWNER/NAME", help="default: $GITHUB_REPOSITORY")
        p.add_argument("--pr", type=int, metavar="N", help="default: from $GITHUB_EVENT_PATH (or the head SHA)")
        p.add_argument("--head-sha", metavar="SHA", help="default: from the event, else the PR's head")
        p.add_argument("--login", default=os.environ.get("GPULINT_BOT_LOGIN"),
                       help="the bot's own login (needed for GitHub App tokens; default: github-actions[bot])")
        p.add_argument("--filter-mode", choices=FILTER_MODES, default="added",
                       help="which findings count: on added lines (default), in hunks, in changed files, all")
        p.add_argument("--token-env", default="GITHUB_TOKEN", metavar="NAME",
                       help="environment variable holding the token (never a flag: flags show in logs)")
        if name == "comment":
            p.add_argument("--mode", choices=("update", "recreate", "off"), default="update",
                           help="update the comment in place (default), delete and post anew, or post nothing")


def run(args: argparse.Namespace, load_inputs, *, env: dict | None = None, client: GitHub | None = None,
        out=None) -> int:
    env = dict(os.environ) if env is None else env
    out = out or sys.stdout
    data = load_inputs(args)
    if args.bot_command == "comment" and args.mode == "off":
        print("gpulint: commenting is off (--mode off)", file=out)
        return 0
    api_url = env.get("GITHUB_API_URL") or DEFAULT_API_URL
    gh = client or GitHub(token=env.get(args.token_env, ""), api_url=api_url)
    target = gh_ops.resolve_target(gh, env, args.repo, args.pr, args.head_sha)
    all_findings = data.findings
    diff = gh_ops.pull_diff(gh, target) if all_findings else None
    findings = diff.filter(all_findings, args.filter_mode) if diff else []
    report = ReportInput(
        findings=findings,
        plan=data.plan,
        changed_only=args.filter_mode != "nofilter",
        total_findings=len(all_findings),
        link_base=gh_ops.link_base(gh.api_url, env, target),
        full_report=data.full_report,
    )
    try:
        if args.bot_command == "comment":
            login = gh_ops.own_login(gh, args.login)
            what = gh_ops.post_sticky(gh, target, login, render_markdown(report, limit=COMMENT_LIMIT), args.mode)
            print(f"gpulint: PR #{target.number} comment {what}", file=out)
        elif args.bot_command == "review":
            login = gh_ops.own_login(gh, args.login)
            r = gh_ops.post_review(gh, target, login, findings, diff or gh_ops.pull_diff(gh, target))
            print(f"gpulint: PR #{target.number} review: {r['posted']} new, {r['already']} already posted, "
                  f"{r['deleted']} removed, {r['dropped']} outside the diff", file=out)
        else:
            r = gh_ops.post_check(gh, target, findings, report)
            print(f"gpulint: check run {r['id']} {r['conclusion']} with {r['annotations']} annotations", file=out)
    except GitHubError as exc:
        if not exc.is_permission:
            raise
        summary = render_markdown(report, "job_summary.md.j2", JOB_SUMMARY_LIMIT)
        gh_ops.fallback(findings, summary, f"gpulint cannot write to this pull request ({exc.status})", env, out)
    return 0
