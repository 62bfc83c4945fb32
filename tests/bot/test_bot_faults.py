"""The bot under faults: lost answers, vanishing comments, lasting rate limits, overlapping and stale runs, big PRs.
Nothing is lost, nothing is posted twice, and "cannot write" means only that the token may not write."""

from __future__ import annotations

import argparse
import io
import json

import pytest

from gpulint.bot import commands
from gpulint.bot import github as ops
from gpulint.bot.cli import _load_inputs, add_bot_arguments
from gpulint.bot.report import MARKER

from .fakegithub import DENIED, TOKEN, Fault, make_client

LOGIN = "github-actions[bot]"
PATCH = "@@ -0,0 +1,20 @@\n" + "".join(f"+line {n}\n" for n in range(1, 21))


def finding(line=5, path="src/train.py", **over) -> dict:
    return {"code": "GPL401", "name": "scalar-sync-in-step", "message": f"`loss.item()` at {line}", "severity":
            "warning", "path": path, "line": line, "column": 5, "end_line": line, "end_column": 16, "fix": None,
            "url": "", **over}


def _bot(fake, tmp_path, action, findings, *extra, event=None, env_extra=None) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    add_bot_arguments(parser)
    lint = tmp_path / "findings.json"
    lint.write_text(json.dumps(findings))
    args = parser.parse_args([action, "--lint", str(lint), *extra])
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event or {"pull_request": {"number": fake.number, "head": {"sha": fake.head_sha}}}))
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.base_url, "GITHUB_REPOSITORY": f"{fake.owner}/{fake.repo}",
           "GITHUB_EVENT_PATH": str(path), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), **(env_extra or {})}
    out = io.StringIO()
    code = commands.run(args, _load_inputs, env=env, out=out)
    return code, out.getvalue()


def _main(fake, tmp_path, monkeypatch, capsys, *argv) -> tuple[int, str, str]:
    """`gpulint ...` as a user runs it, in an Actions-like environment."""
    from gpulint.cli import main

    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": fake.number, "head": {"sha": fake.head_sha}}}))
    for k, v in {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.base_url, "GITHUB_EVENT_PATH": str(event),
                 "GITHUB_REPOSITORY": f"{fake.owner}/{fake.repo}"}.items():
        monkeypatch.setenv(k, v)
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _stickies(fake) -> list[dict]:
    return [c for c in fake.comments.values() if c["login"] == LOGIN and c["body"].startswith(MARKER)]


@pytest.fixture
def pr(fake_dotcom):
    fake_dotcom.files = [{"filename": "src/train.py", "status": "modified", "patch": PATCH}]
    return fake_dotcom


# ---------------------------------------------------------------------------------------------- data loss


def test_recreate_whose_delete_answer_is_lost_keeps_a_comment(pr, tmp_path):
    """The DELETE lands but its answer is lost (502): the retry's 404 means done, and the new comment is there."""
    old = pr.add_comment(MARKER + "\nold report", LOGIN)
    pr.fail("delete_comment", Fault(502, after_handling=True))
    code, out = _bot(pr, tmp_path, "comment", [finding()], "--mode", "recreate")
    assert code == 0 and "comment recreated" in out and "cannot write" not in out
    (sticky,) = _stickies(pr)
    assert sticky["id"] != old["id"] and "GPL401" in sticky["body"]
    assert len(pr.calls("delete_comment")) == 2


def test_a_delete_whose_answer_was_dropped_is_done(pr, clock):
    c = pr.add_comment("x", LOGIN)
    pr.fail("delete_comment", Fault.dropped())
    gh = make_client(pr, clock)
    gh.request("DELETE", f"repos/{pr.owner}/{pr.repo}/issues/comments/{c['id']}")
    assert pr.comments == {} and len(pr.calls("delete_comment")) == 2


def test_a_review_thread_with_a_maintainers_reply_is_kept_and_marked_outdated(pr, tmp_path):
    _bot(pr, tmp_path, "review", [finding(5), finding(6)])
    ours = {c["line"]: c for c in pr.review_comments.values()}
    reply = pr.add_review_comment("Good catch, but this is intended here.", "maintainer", line=5,
                                  in_reply_to=ours[5]["id"])
    code, out = _bot(pr, tmp_path, "review", [])  # both findings fixed
    assert code == 0 and "1 removed, 1 outdated kept for their replies" in out
    assert ours[6]["id"] not in pr.review_comments  # no reply: deleted
    kept = pr.review_comments[ours[5]["id"]]
    assert kept["body"].startswith(ops.OUTDATED) and "no longer reports" in kept["body"]
    assert "loss.item()" in kept["body"]  # what it said stays readable
    assert pr.review_comments[reply["id"]]["body"] == "Good catch, but this is intended here."
    _bot(pr, tmp_path, "review", [])
    assert len(pr.calls("update_review_comment")) == 1  # marked once, then left alone


def test_the_sticky_comment_deleted_between_listing_and_editing_is_posted_anew(pr, tmp_path):
    _bot(pr, tmp_path, "comment", [finding(5)])
    pr.meanwhile("update_comment", pr.comments.clear)  # a maintainer deletes it while the bot is at work
    code, out = _bot(pr, tmp_path, "comment", [finding(6)])
    assert code == 0 and "comment created" in out and "cannot write" not in out
    (sticky,) = _stickies(pr)
    assert "src/train.py:6" in sticky["body"]


# ---------------------------------------------------------------------------------------------- "cannot write"


def test_a_lasting_secondary_rate_limit_is_not_a_permission_problem(pr, tmp_path, monkeypatch, capsys):
    lint = tmp_path / "f.json"
    lint.write_text(json.dumps([finding()]))
    pr.fail("create_comment", *[Fault.secondary_limit("0")] * 5)
    code, out, err = _main(pr, tmp_path, monkeypatch, capsys, "bot", "comment", "--lint", str(lint))
    assert code == 2 and "cannot write" not in out + err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("gpulint: error: GitHub API POST")
    assert "still rate limited after 5 attempts" in err


def test_retry_after_past_the_deadline_gives_up_in_one_line(pr, tmp_path, monkeypatch, capsys):
    lint = tmp_path / "f.json"
    lint.write_text(json.dumps([finding()]))
    pr.fail_nth(3, Fault.secondary_limit("1200"))  # the third request of the run, whichever it is
    code, out, err = _main(pr, tmp_path, monkeypatch, capsys, "bot", "comment", "--lint", str(lint))
    assert code == 2 and "cannot write" not in out + err and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert "gave up" in line and "wait of 1200 s" in line and "240 s deadline (--deadline)" in line


def test_deadline_flag_bounds_the_waiting(pr, tmp_path, monkeypatch, capsys):
    lint = tmp_path / "f.json"
    lint.write_text(json.dumps([finding()]))
    pr.fail("list_comments", Fault.secondary_limit("90"))
    code, _, err = _main(pr, tmp_path, monkeypatch, capsys, "bot", "comment", "--lint", str(lint), "--deadline", "60")
    assert code == 2 and "wait of 90 s" in err and "60 s deadline" in err
    assert pr.comments == {}


def test_only_a_real_denial_falls_back(pr, tmp_path):
    pr.deny_writes = DENIED
    code, out = _bot(pr, tmp_path, "comment", [finding()])
    assert code == 0 and "cannot write to this pull request (403)" in out


# ---------------------------------------------------------------------------------------------- overlapping runs


def test_an_overlapping_run_leaves_one_sticky_comment(pr, tmp_path):
    """Another run posts its comment while this one is posting: the oldest stays, with this run's report."""
    pr.meanwhile("create_comment", lambda: pr.add_comment(MARKER + "\nfrom the other run", LOGIN))
    code, out = _bot(pr, tmp_path, "comment", [finding(5)])
    assert code == 0 and "(1 duplicate removed)" in out
    (sticky,) = _stickies(pr)
    assert sticky["body"].startswith(MARKER) and "src/train.py:5" in sticky["body"]


def test_copies_left_by_earlier_runs_are_tidied_keeping_the_oldest(pr, tmp_path):
    pr.page_sizes["list_comments"] = 1  # one comment a page: the copies are on different pages
    first = pr.add_comment(MARKER + "\nrun 1", LOGIN)
    pr.add_comment("a person's remark", "octocat")
    pr.add_comment(MARKER + "\nrun 2", LOGIN)
    code, out = _bot(pr, tmp_path, "comment", [finding(5)])
    assert code == 0 and "updated (1 duplicate removed)" in out
    assert [c["id"] for c in _stickies(pr)] == [first["id"]] and len(pr.comments) == 2


def test_overlapping_reviews_leave_one_comment_per_finding(pr, tmp_path):
    _bot(pr, tmp_path, "review", [finding(5)])
    (mine,) = pr.review_comments.values()
    pr.meanwhile("create_review", lambda: pr.add_review_comment(mine["body"], LOGIN, line=5))  # the other run's copy
    _bot(pr, tmp_path, "review", [finding(5), finding(6)])
    lines = sorted(c["line"] for c in pr.review_comments.values())
    assert lines == [5, 6] and mine["id"] in pr.review_comments


# ---------------------------------------------------------------------------------------------- stale runs


def test_workflow_run_for_an_old_head_skips_saying_why(pr, tmp_path):
    event = {"workflow_run": {"head_sha": "a" * 40, "head_branch": pr.head_ref,
                              "head_repository": {"full_name": pr.head_repo}, "pull_requests": []}}
    code, out = _bot(pr, tmp_path, "comment", [finding()], event=event)
    assert code == 0 and "PR #7 has moved on to 6dcb09b5b578 since this run's aaaaaaaaaaaa: nothing posted" in out
    assert pr.comments == {}


def test_workflow_run_whose_pr_is_gone_posts_nothing(pr, tmp_path):
    event = {"workflow_run": {"head_sha": "a" * 40, "head_branch": "deleted-branch",
                              "head_repository": {"full_name": pr.head_repo}, "pull_requests": []}}
    code, out = _bot(pr, tmp_path, "comment", [finding()], event=event)
    assert code == 0 and "no open pull request has this run's head aaaaaaaaaaaa" in out and pr.comments == {}


@pytest.mark.parametrize("action", ["comment", "review", "check"])
def test_a_pull_request_run_for_an_old_head_does_not_overwrite_newer_results(pr, tmp_path, action):
    _bot(pr, tmp_path, "comment", [finding(5)])  # the newer run's comment
    before = {cid: dict(c) for cid, c in pr.comments.items()}
    event = {"pull_request": {"number": pr.number, "head": {"sha": "b" * 40}}}
    code, out = _bot(pr, tmp_path, action, [finding(9)], event=event)
    assert code == 0 and "has moved on" in out
    assert pr.comments == before and pr.review_comments == {} and pr.check_runs == {}


# ---------------------------------------------------------------------------------------------- big inputs


def test_a_finding_past_githubs_3000_file_listing_is_noted(pr, tmp_path):
    pr.files = [{"filename": f"src/m{n:04d}.py", "status": "added", "patch": "@@ -0,0 +1,3 @@\n+a\n+b\n+c\n"}
                for n in range(1, 3202)]
    pr.page_sizes["list_files"] = 100
    code, out = _bot(pr, tmp_path, "comment", [finding(2, path="src/m3201.py"), finding(2, path="src/m0001.py")])
    assert code == 0 and "GitHub lists only 3000 of the PR's 3201 changed files" in out
    (sticky,) = _stickies(pr)
    assert "GitHub lists only 3000 of the 3201 files this pull request changes" in sticky["body"]
    assert "src/m0001.py:2" in sticky["body"] and len(pr.calls("list_files")) == 30


def test_20000_findings_make_at_most_20_check_run_requests(pr, tmp_path):
    findings = [finding(1 + n % 20, message=f"m{n}", severity="error" if n < 10 else "info") for n in range(20_000)]
    code, out = _bot(pr, tmp_path, "check", findings)
    writes = pr.calls("create_check_run") + pr.calls("update_check_run")
    assert code == 0 and len(writes) == 20
    assert "with 1000 annotations (19000 less severe left out)" in out
    (run,) = pr.check_runs.values()
    assert sum(a["annotation_level"] == "failure" for a in run["annotations"]) == 10  # the errors made it
    assert "1000 most severe of the 20000 findings" in writes[0][2]["output"]["text"]
