"""The bot as an attacker would try it: text that pings or links, a token that leaks, a PR that is not the one."""

from __future__ import annotations

import argparse
import io
import json
import re

import pytest

from gpulint.bot import commands
from gpulint.bot import github as ops
from gpulint.bot.cli import _load_inputs, add_bot_arguments
from gpulint.bot.client import GitHub, GitHubConfigError, GitHubError
from gpulint.bot.data import load_findings
from gpulint.bot.report import ReportInput, render_html, render_markdown
from gpulint.errors import UsageError
from gpulint.linter.finding import rule_url

from .fakegithub import TOKEN, Fault, make_client

ZW = "\u200b"
PATCH = "@@ -0,0 +1,20 @@\n" + "".join(f"+line {n}\n" for n in range(1, 21))


def _finding(**over) -> dict:
    base = {"code": "GPL401", "name": "scalar-sync-in-step", "message": "`loss.item()` syncs", "severity": "warning",
            "path": "src/train.py", "line": 12, "column": 9, "end_line": 12, "end_column": 20, "fix": None,
            "url": "https://github.com/gpulint/gpulint/blob/main/docs/rules.md#gpl401-scalar-sync-in-step"}
    return {**base, **over}


def _body(tmp_path, **over) -> str:
    path = tmp_path / "f.json"
    path.write_text(json.dumps([_finding(**over)]))
    return render_markdown(ReportInput(load_findings(path), link_base="https://github.com/o/r/blob/abc/"))


def _outside_code(body: str) -> str:
    body = re.sub(r"^(`{3,})[^`\n]*\n.*?\n\1$", "", body, flags=re.DOTALL | re.MULTILINE)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", body)


# What GitHub would turn into a notification or a cross-reference, in every form the issue lists.
PINGS = [
    (r"(?<![\w`])@[A-Za-z0-9][\w-]*", "a mention"),
    (r"(?<![\w`])@[\w-]+/[\w-]+", "a team mention"),
    (r"(?<![\w&])#\d+", "an issue reference"),
    (r"(?i)\bGH-\d+", "a GH- reference"),
    (r"[\w.-]+/[\w.-]+#\d+", "a cross-repository reference"),
    (r"\b[0-9a-f]{7,40}\b", "a commit SHA"),
    (r"&#(?:64|35|x40|x23);", "a character reference GitHub decodes before matching"),
]


def test_mentions_references_and_shas_are_neutralised_but_readable(tmp_path):
    hostile = ("ping @octocat and @org/team, see #123, GH-45 and org/repo#9, commit 6dcb09b5b57875f334f61aebed69 "
               "and org/repo@6dcb09b")
    body = _body(tmp_path, message=hostile, name="x-@octocat-#1")
    text = _outside_code(body)
    for pattern, what in PINGS:
        assert not re.search(pattern, text), f"{what} survives: {re.search(pattern, text).group(0)!r}"
    # The reader sees the same text: only zero-width spaces were added.
    assert hostile in text.replace(ZW, "")


def test_text_in_code_spans_is_left_as_written(tmp_path):
    body = _body(tmp_path, message="use `@torch.no_grad()` on `step#2`")
    assert "`@torch.no_grad()`" in body and "`step#2`" in body


def test_rule_links_point_only_to_gpulint_docs(tmp_path):
    for url in ("https://evil.example/phish", "http://github.com/gpulint/gpulint.evil/x", "javascript:alert(1)"):
        body = _body(tmp_path, url=url)
        assert "evil" not in body and "javascript" not in body
        assert f"]({rule_url('GPL401', 'scalar-sync-in-step')})" in body
    # a code or name that is not gpulint's shape gets no link at all
    body = _body(tmp_path, code="GPL401](https://evil.example)", name="x")
    assert "https://evil.example" not in _outside_code(body)  # only inside the code span of the rule's code


def test_bare_urls_in_messages_are_code_not_links(tmp_path):
    body = _body(tmp_path, message="see https://evil.example/a?b=c and www.evil.example now")
    assert "`https://evil.example/a?b=c`" in body and "`www.evil.example`" in body
    assert "https://evil.example" not in _outside_code(body) and "www.evil" not in _outside_code(body)


def test_html_report_links_only_known_urls(tmp_path):
    path = tmp_path / "f.json"
    path.write_text(json.dumps([_finding(url="https://evil.example/x")]))
    html = render_html(ReportInput(load_findings(path)))
    assert "evil.example" not in html and rule_url("GPL401", "scalar-sync-in-step") in html


def test_review_comment_is_neutralised_too(tmp_path):
    path = tmp_path / "f.json"
    path.write_text(json.dumps([_finding(message="@octocat fixes #3", url="https://evil.example")]))
    (f,) = load_findings(path)
    body = ops.review_comment(f, None).body
    assert "@octocat" not in body and "#3" not in body and "evil" not in body


# ---------------------------------------------------------------------------------------------- the token


def test_token_with_a_trailing_newline_works_and_is_never_shown(fake_dotcom, clock):
    gh = GitHub(token=TOKEN + "\n", api_url=fake_dotcom.base_url, sleep=clock.sleep, clock=clock.time)
    target = ops.Target(f"{fake_dotcom.owner}/{fake_dotcom.repo}", fake_dotcom.number, fake_dotcom.head_sha)
    assert ops.find_stickies(gh, target, "github-actions[bot]") == []  # the header carried the stripped token


@pytest.mark.parametrize("token", ["ghs_abc def", "ghs_abc\nsecond", "ghs_\u00e9t\u00e9", "ghs_abc\x00"])
def test_a_malformed_token_is_one_line_without_the_token(token):
    with pytest.raises(GitHubConfigError) as info:
        GitHub(token=token)
    assert token.strip() not in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("status", [422, 500])
def test_error_bodies_that_echo_the_token_are_redacted(fake_dotcom, clock, status, capsys):
    echo = {"message": f"Bad credentials Bearer {TOKEN}", "errors": [f"header {TOKEN} rejected"]}
    fake_dotcom.fail("list_comments", *[Fault(status, {}, echo)] * 5)
    logs: list[str] = []
    gh = make_client(fake_dotcom, clock, logs)
    with pytest.raises(GitHubError) as info:
        ops.find_stickies(gh, ops.Target(f"{fake_dotcom.owner}/{fake_dotcom.repo}", 7, "a" * 40), "x")
    shown = [str(info.value), *logs, *capsys.readouterr()]
    assert all(TOKEN not in text for text in shown)
    assert "***" in str(info.value)


def test_cli_with_a_newline_token_prints_no_traceback_and_no_token(fake_dotcom, tmp_path, capsys, monkeypatch):
    from gpulint.cli import main

    fake_dotcom.files = [{"filename": "src/train.py", "status": "added", "patch": PATCH}]
    lint = tmp_path / "f.json"
    lint.write_text(json.dumps([_finding()]))
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "head": {"sha": fake_dotcom.head_sha}}}))
    for k, v in {"GITHUB_TOKEN": TOKEN + "\n", "GITHUB_API_URL": fake_dotcom.base_url, "GITHUB_EVENT_PATH": str(event),
                 "GITHUB_REPOSITORY": f"{fake_dotcom.owner}/{fake_dotcom.repo}"}.items():
        monkeypatch.setenv(k, v)
    assert main(["bot", "comment", "--lint", str(lint)]) == 0
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_two words")
    assert main(["bot", "comment", "--lint", str(lint)]) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "ghs_" not in out + err
    assert err.strip().splitlines()[-1].startswith("gpulint: error: the GitHub token holds spaces")


# ---------------------------------------------------------------------------------------------- the wrong PR


def _run_bot(fake, tmp_path, event: dict, *extra) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    add_bot_arguments(parser)
    lint = tmp_path / "f.json"
    lint.write_text(json.dumps([_finding()]))
    args = parser.parse_args(["comment", "--lint", str(lint), *extra])
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.base_url, "GITHUB_REPOSITORY": f"{fake.owner}/{fake.repo}",
           "GITHUB_EVENT_PATH": str(path)}
    out = io.StringIO()
    code = commands.run(args, _load_inputs, env=env, out=out)
    return code, out.getvalue()


def test_a_forks_same_named_repository_is_not_this_one(fake_dotcom, tmp_path):
    """`workflow_run.pull_requests` lists PR #3 of `evil/train`: a PR of another repository that has the same name.
    The bot must find PR #7 from the head SHA instead of commenting on this repository's #3."""
    fake_dotcom.files = [{"filename": "src/train.py", "status": "added", "patch": PATCH}]
    event = {
        "repository": {"id": fake_dotcom.repo_id, "full_name": f"{fake_dotcom.owner}/{fake_dotcom.repo}"},
        "workflow_run": {"head_sha": fake_dotcom.head_sha, "pull_requests": [
            {"number": 3, "base": {"repo": {"id": 999, "name": fake_dotcom.repo,
                                            "url": f"https://api.github.com/repos/evil/{fake_dotcom.repo}"}}}]},
    }
    code, out = _run_bot(fake_dotcom, tmp_path, event)
    assert code == 0 and "PR #7 comment created" in out
    assert not any("/pulls/3" in path or "/issues/3/" in path for _, path, _ in fake_dotcom.log)


def test_the_events_own_pr_is_matched_by_repository_id(fake_dotcom, tmp_path):
    fake_dotcom.files = [{"filename": "src/train.py", "status": "added", "patch": PATCH}]
    event = {
        "repository": {"id": fake_dotcom.repo_id, "full_name": f"{fake_dotcom.owner}/{fake_dotcom.repo}"},
        "workflow_run": {"head_sha": fake_dotcom.head_sha, "pull_requests": [
            {"number": 7, "base": {"repo": {"id": fake_dotcom.repo_id, "name": fake_dotcom.repo}}}]},
    }
    code, out = _run_bot(fake_dotcom, tmp_path, event)
    assert code == 0 and "PR #7 comment created" in out
    assert not fake_dotcom.calls("list_pulls")  # no search needed


def test_two_open_prs_with_one_head_sha_is_an_error_not_a_guess(fake_dotcom, tmp_path, capsys):
    fake_dotcom.other_pulls = [{"number": 3, "sha": fake_dotcom.head_sha, "ref": fake_dotcom.head_ref,
                                "repo": fake_dotcom.head_repo}]
    event = {"workflow_run": {"head_sha": fake_dotcom.head_sha, "pull_requests": []}}
    with pytest.raises(UsageError, match=r"PRs #3, #7 all have head 6dcb09b5b578: the run's PR is ambiguous"):
        _run_bot(fake_dotcom, tmp_path, event)
    assert fake_dotcom.comments == {}


def test_same_head_sha_in_a_strangers_fork_is_told_apart_by_the_runs_head_repository(fake_dotcom, tmp_path):
    """Someone opened PR #3 from their fork with the very same commit; the run's own head repository decides."""
    fake_dotcom.head_repo = "contributor/train"
    fake_dotcom.files = [{"filename": "src/train.py", "status": "added", "patch": PATCH}]
    fake_dotcom.other_pulls = [{"number": 3, "sha": fake_dotcom.head_sha, "ref": "main", "repo": "mallory/train"}]
    event = {"workflow_run": {"head_sha": fake_dotcom.head_sha, "head_branch": fake_dotcom.head_ref,
                              "head_repository": {"full_name": "contributor/train"}, "pull_requests": []}}
    code, out = _run_bot(fake_dotcom, tmp_path, event)
    assert code == 0 and "PR #7 comment created" in out
