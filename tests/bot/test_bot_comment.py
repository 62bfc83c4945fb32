"""The sticky comment and the client's fault handling, against a loopback GitHub that validates every request."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from gpulint.bot import commands
from gpulint.bot import github as ops
from gpulint.bot.cli import _load_inputs, add_bot_arguments
from gpulint.bot.client import GitHubError
from gpulint.bot.report import COMMENT_LIMIT, MARKER

from .fakegithub import DENIED, TOKEN, Fault, make_client

FIXTURES = Path(__file__).parent / "fixtures"
PATCH = "@@ -50,6 +50,9 @@ def train(model, loader):\n" + "".join(
    f"+line {n}\n" if 55 <= n <= 58 else f" line {n}\n" for n in range(50, 59 + 1)
)


def _target(fake) -> ops.Target:
    return ops.Target(f"{fake.owner}/{fake.repo}", fake.number, fake.head_sha)


def _bot(fake, tmp_path, *argv, env_extra=None):
    """Run `gpulint bot ...` as the CLI would, with the GitHub environment of an Actions job."""
    parser = argparse.ArgumentParser()
    add_bot_arguments(parser)
    args = parser.parse_args(list(argv))
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": fake.number, "head": {"sha": fake.head_sha}}}))
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.base_url, "GITHUB_REPOSITORY": f"{fake.owner}/{fake.repo}",
           "GITHUB_EVENT_PATH": str(event), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), **(env_extra or {})}
    out = io.StringIO()
    code = commands.run(args, _load_inputs, env=env, out=out)
    return code, out.getvalue()


def test_comment_three_times_leaves_one_sticky_comment(fake, tmp_path):
    fake.files = [{"filename": "examples/train.py", "status": "modified", "patch": PATCH}]
    fake.page_size = 2  # the comments span pages: the bot must follow rel="next"
    for n in range(3):
        fake.add_comment(f"review remark {n}", "octocat")
    human = fake.add_comment(f"{MARKER}\nI quoted the bot's marker, please do not edit me", "octocat")
    lint, plan = str(FIXTURES / "findings.json"), str(FIXTURES / "plan.json")
    for _ in range(3):
        code, out = _bot(fake, tmp_path, "comment", "--lint", lint, "--plan", plan)
        assert code == 0
    ours = [c for c in fake.comments.values() if c["login"] == "github-actions[bot]"]
    assert len(ours) == 1 and ours[0]["body"].startswith(MARKER)
    # 4 comments in 2 pages; after creating, a look for a copy from an overlapping run; then ours on page 3, twice
    assert len(fake.calls("list_comments")) == 2 + 3 + 3 + 3
    assert "GPL401" in ours[0]["body"]  # on an added line (57)
    assert "GPL301" not in ours[0]["body"]  # examples/data.py is not in the PR
    assert "**Peak memory 31.60 GB → 22.06 GB**" in ours[0]["body"]
    assert fake.comments[human["id"]]["body"].startswith(MARKER + "\nI quoted")  # the human's comment untouched
    assert len(fake.calls("create_comment")) == 1
    assert len(fake.calls("update_comment")) == 0  # same body twice more: no request at all
    assert "unchanged" in out
    # the token is never printed, and every request carried the documented headers
    assert TOKEN not in out
    assert all(h.get("X-GitHub-Api-Version") == "2022-11-28" for h in fake.seen_headers)


def test_changed_body_updates_in_place_and_recreate_mode(fake, tmp_path):
    fake.files = [{"filename": "examples/train.py", "status": "modified", "patch": PATCH}]
    lint = str(FIXTURES / "findings.json")
    _bot(fake, tmp_path, "comment", "--lint", lint)
    first = next(iter(fake.comments))
    _bot(fake, tmp_path, "comment", "--lint", lint, "--plan", str(FIXTURES / "plan.json"))
    assert list(fake.comments) == [first] and "Peak memory" in fake.comments[first]["body"]
    _bot(fake, tmp_path, "comment", "--lint", lint, "--mode", "recreate")
    assert len(fake.comments) == 1 and first not in fake.comments
    code, out = _bot(fake, tmp_path, "comment", "--lint", lint, "--mode", "off")
    assert code == 0 and "off" in out and len(fake.calls("list_comments")) == 4


def test_app_token_login_is_configurable(fake, tmp_path):
    """An App's comments are by `my-app[bot]`: with --login the bot finds its own comment and not the Action's."""
    fake.writer_login = "my-app[bot]"
    fake.files = [{"filename": "examples/train.py", "status": "modified", "patch": PATCH}]
    lint = str(FIXTURES / "findings.json")
    foreign = fake.add_comment(MARKER + "\nfrom another bot", "github-actions[bot]")
    for _ in range(2):
        _bot(fake, tmp_path, "comment", "--lint", lint, "--login", "my-app[bot]")
    assert len(fake.calls("create_comment")) == 1
    assert fake.comments[foreign["id"]]["body"].endswith("from another bot")


def test_read_only_token_falls_back_to_annotations_and_summary(fake, tmp_path):
    fake.deny_writes = DENIED
    fake.files = [{"filename": "examples/train.py", "status": "modified", "patch": PATCH}]
    code, out = _bot(fake, tmp_path, "comment", "--lint", str(FIXTURES / "findings.json"))
    assert code == 0
    assert "\n::warning title=gpulint::gpulint cannot write to this pull request (403)" in out
    assert "::warning file=examples/train.py,line=57,endLine=57,col=20,title=GPL401 scalar-sync-in-step::" in out
    assert "GPL401" in (tmp_path / "summary.md").read_text()
    assert fake.comments == {}


def test_pr_resolved_from_head_sha_for_workflow_run(fake, tmp_path):
    """Fork PRs: workflow_run.pull_requests is empty, the PR is found from the run's head SHA (across pages)."""
    fake.page_size = 1
    fake.files = [{"filename": "examples/train.py", "status": "modified", "patch": PATCH}]
    event = tmp_path / "run.json"
    event.write_text(json.dumps({"workflow_run": {"head_sha": fake.head_sha, "pull_requests": []}}))
    code, out = _bot(fake, tmp_path, "comment", "--lint", str(FIXTURES / "findings.json"),
                     env_extra={"GITHUB_EVENT_PATH": str(event)})
    assert code == 0 and f"PR #{fake.number} comment created" in out
    assert len(fake.calls("list_pulls")) == 2  # followed rel="next"


# ---------------------------------------------------------------------------------------------- faults


def test_502_then_success(fake_dotcom, clock):
    fake_dotcom.fail("list_comments", Fault(502))
    gh = make_client(fake_dotcom, clock)
    assert ops.post_sticky(gh, _target(fake_dotcom), "github-actions[bot]", MARKER + "\nhello") == "created"
    assert len(clock.sleeps) == 1 and clock.sleeps[0] == pytest.approx(1.0)  # backoff 1 s x jitter (0.5 + 0.5)
    assert len(fake_dotcom.comments) == 1


def test_5xx_gives_up_after_bounded_retries(fake_dotcom, clock):
    fake_dotcom.fail("list_comments", *[Fault(503) for _ in range(10)])
    gh = make_client(fake_dotcom, clock)
    with pytest.raises(GitHubError, match="after 5 attempts") as info:
        ops.find_stickies(gh, _target(fake_dotcom), "github-actions[bot]")
    assert TOKEN not in str(info.value) and len(clock.sleeps) == 4
    assert clock.sleeps == sorted(clock.sleeps)  # exponential


def test_secondary_rate_limit_with_retry_after(fake_dotcom, clock):
    fake_dotcom.fail("create_comment", Fault(403, {"retry-after": "7"},
                                             {"message": "You have exceeded a secondary rate limit."}))
    gh = make_client(fake_dotcom, clock)
    ops.post_sticky(gh, _target(fake_dotcom), "github-actions[bot]", MARKER + "\nhello")
    assert clock.sleeps == [7.0] and len(fake_dotcom.comments) == 1


def test_secondary_rate_limit_without_retry_after_waits_a_minute_then_doubles(fake_dotcom, clock):
    limited = Fault(403, {}, {"message": "You have exceeded a secondary rate limit. Please wait."})
    fake_dotcom.fail("list_comments", limited, limited)
    gh = make_client(fake_dotcom, clock)
    ops.find_stickies(gh, _target(fake_dotcom), "github-actions[bot]")
    assert clock.sleeps == [60.0, 120.0]


def test_primary_rate_limit_waits_until_reset(fake_dotcom, clock):
    reset = int(clock.now) + 42
    fake_dotcom.fail("list_comments", Fault(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
                                            {"message": "API rate limit exceeded"}))
    gh = make_client(fake_dotcom, clock)
    ops.find_stickies(gh, _target(fake_dotcom), "github-actions[bot]")
    assert clock.sleeps == [43.0] and clock.now >= reset


def test_primary_rate_limit_too_far_away_fails_clearly(fake_dotcom, clock):
    reset = int(clock.now) + 3 * 3600
    fake_dotcom.fail("list_comments", Fault(429, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
                                            {"message": "API rate limit exceeded"}))
    with pytest.raises(GitHubError, match="gave up: rate limit .* wait of 10801 s, and only 240 s") as info:
        ops.find_stickies(make_client(fake_dotcom, clock), _target(fake_dotcom), "github-actions[bot]")
    assert clock.sleeps == [] and not info.value.is_permission


def test_connection_reset_mid_post_creates_no_second_comment(fake_dotcom, clock):
    """The comment is created, then the connection drops before the answer: the retry finds it, posts nothing."""
    fake_dotcom.fail("create_comment", Fault(None, after_handling=True))
    gh = make_client(fake_dotcom, clock)
    assert ops.post_sticky(gh, _target(fake_dotcom), "github-actions[bot]", MARKER + "\nhello") == "created"
    assert len(fake_dotcom.comments) == 1
    assert len(fake_dotcom.calls("create_comment")) == 1


def test_connection_reset_before_post_lands_is_retried(fake_dotcom, clock):
    fake_dotcom.fail("create_comment", Fault(None))
    gh = make_client(fake_dotcom, clock)
    ops.post_sticky(gh, _target(fake_dotcom), "github-actions[bot]", MARKER + "\nhello")
    assert len(fake_dotcom.comments) == 1 and len(fake_dotcom.calls("create_comment")) == 2


def test_oversized_report_is_trimmed_with_note(fake_dotcom, tmp_path):
    patch = "@@ -0,0 +1,400 @@\n" + "".join(f"+x = {n}\n" for n in range(1, 401))
    fake_dotcom.files = [{"filename": "src/big.py", "status": "added", "patch": patch}]
    findings = [{"code": "GPL101", "name": "n", "message": "m" * 1000, "severity": "info", "path": "src/big.py",
                 "line": n, "column": 1, "end_line": n, "end_column": 5, "fix": None, "url": ""} for n in range(1, 400)]
    lint = tmp_path / "big.json"
    lint.write_text(json.dumps(findings))
    code, _ = _bot(fake_dotcom, tmp_path, "comment", "--lint", str(lint))
    (body,) = [c["body"] for c in fake_dotcom.comments.values()]
    assert code == 0 and len(body) <= COMMENT_LIMIT
    assert "less severe findings left out to fit GitHub's size limit" in body


def test_pagination_link_to_another_host_is_refused(fake_dotcom, clock):
    gh = make_client(fake_dotcom, clock)
    with pytest.raises(GitHubError, match="another host"):
        list(gh.paginate("https://evil.example/steal"))


def test_token_never_in_output_or_errors(fake_dotcom, clock, capsys):
    logs: list[str] = []
    fake_dotcom.fail("list_comments", Fault(502), Fault(403, {}, {"message": "Forbidden"}))
    gh = make_client(fake_dotcom, clock, logs)
    with pytest.raises(GitHubError) as info:
        ops.find_stickies(gh, _target(fake_dotcom), "x")
    captured = capsys.readouterr()
    for text in (str(info.value), repr(gh), captured.out, captured.err, *logs):
        assert TOKEN not in text


def test_missing_token_is_one_clear_line(tmp_path):
    from gpulint.cli import UsageError

    parser = argparse.ArgumentParser()
    add_bot_arguments(parser)
    args = parser.parse_args(["comment", "--lint", str(FIXTURES / "findings.json"), "--repo", "o/r", "--pr", "1"])
    with pytest.raises(UsageError, match="no GitHub token"):
        commands.run(args, _load_inputs, env={})


def test_api_failure_after_retries_is_one_line_exit_2(fake_dotcom, tmp_path, capsys):
    """Not a permission problem (a 422 on the comment): `gpulint bot` says so in one line and exits 2."""
    from gpulint.cli import main

    fake_dotcom.files = [{"filename": "examples/train.py", "status": "modified", "patch": PATCH}]
    fake_dotcom.fail("create_comment", Fault(422, {}, {"message": "Validation Failed", "errors": ["body is too long"]}))
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": fake_dotcom.number, "head": {"sha": fake_dotcom.head_sha}}}))
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake_dotcom.base_url, "GITHUB_EVENT_PATH": str(event),
           "GITHUB_REPOSITORY": f"{fake_dotcom.owner}/{fake_dotcom.repo}"}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        code = main(["bot", "comment", "--lint", str(FIXTURES / "findings.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines()[-1].startswith("gpulint: error: GitHub API POST")
    assert "Validation Failed: body is too long" in err and "Traceback" not in err and TOKEN not in err


def test_review_without_findings_is_refused_not_a_mass_delete():
    from gpulint.cli import UsageError

    parser = argparse.ArgumentParser()
    add_bot_arguments(parser)
    args = parser.parse_args(["review", "--plan", str(FIXTURES / "plan.json"), "--repo", "o/r", "--pr", "1"])
    with pytest.raises(UsageError, match="needs --lint"):
        commands.run(args, _load_inputs, env={"GITHUB_TOKEN": TOKEN})


def test_a_clean_pr_gets_no_comment_but_a_stale_one_is_cleared(fake, tmp_path):
    fake.files = [{"filename": "examples/train.py", "status": "modified", "patch": PATCH}]
    clean = tmp_path / "clean.json"
    clean.write_text("[]")
    code, out = _bot(fake, tmp_path, "comment", "--lint", str(clean))
    assert code == 0 and fake.comments == {} and "nothing to report" in out
    _bot(fake, tmp_path, "comment", "--lint", str(FIXTURES / "findings.json"))
    _bot(fake, tmp_path, "comment", "--lint", str(clean))  # the findings were fixed
    (body,) = [c["body"] for c in fake.comments.values()]
    assert "No findings on changed lines" in body and "GPL401" not in body


def test_review_and_check_through_the_cli(fake_dotcom, tmp_path):
    fake_dotcom.files = [{"filename": "examples/train.py", "status": "modified", "patch": PATCH}]
    lint = str(FIXTURES / "findings.json")
    code, out = _bot(fake_dotcom, tmp_path, "review", "--lint", lint)
    assert code == 0 and "review: 1 new" in out  # GPL401 on line 57; the others are outside the added lines
    code, out = _bot(fake_dotcom, tmp_path, "check", "--lint", lint, "--plan", str(FIXTURES / "plan.json"))
    assert code == 0 and "neutral with 1 annotations" in out
    runs = {r["name"]: r for r in fake_dotcom.check_runs.values()}
    run = runs["gpulint"]
    assert run["head_sha"] == fake_dotcom.head_sha and "Peak memory" in run["output"]["summary"]
    assert runs["gpulint/memory"]["conclusion"] == "success"  # the plan fits its budget; no base to compare with
