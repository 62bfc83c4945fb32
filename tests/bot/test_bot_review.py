"""Review suggestions, check runs and the OpenAPI oracle itself."""

from __future__ import annotations

import json

import pytest

from gpulint.bot import github as ops
from gpulint.bot.client import GitHubError
from gpulint.bot.data import load_findings
from gpulint.bot.diff import from_pr_files, parse_patch
from gpulint.bot.report import ReportInput

from .fakegithub import Fault, make_client

LOGIN = "github-actions[bot]"
SOURCE = {n: f"    value_{n} = compute({n})" for n in range(1, 121)}
SOURCE[57] = "    running += loss.item()"
SOURCE[63] = "    for p in model.parameters():"
SOURCE[64] = "        clip(p)"
# Lines 55-66 were added; 50-54 and 67-69 are context.
PATCH = "@@ -50,8 +50,20 @@ def train(model, loader):\n" + "".join(
    (f"+{SOURCE[n]}\n" if 55 <= n <= 66 else f" {SOURCE[n]}\n") for n in range(50, 70)
) + "-    removed_line()\n"


def finding(line, end_line=None, code="GPL401", severity="warning", fix=None, message=None) -> dict:
    return {"code": code, "name": "scalar-sync-in-step", "message": message or f"sync at {line} with `.item()`",
            "severity": severity, "path": "src/train.py", "line": line, "column": 5,
            "end_line": end_line or line, "end_column": 20, "fix": fix, "url": "https://example.org/r"}


ITEM_FIX = {"applicability": "unsafe", "edits": [{"line": 57, "column": 16, "end_line": 57, "end_column": 27,
                                                    "content": "loss.detach()"}]}
LOOP_FIX = {"applicability": "safe", "edits": [{"line": 63, "column": 5, "end_line": 64, "end_column": 16,
                                                 "content": "torch._foreach_clip(list(model.parameters()))"}]}


def _load(tmp_path, items):
    p = tmp_path / "findings.json"
    p.write_text(json.dumps(items))
    return load_findings(p)


def _setup(fake):
    fake.files = [{"filename": "src/train.py", "status": "modified", "patch": PATCH}]
    return ops.Target(f"{fake.owner}/{fake.repo}", fake.number, fake.head_sha)


def _review(fake, clock, findings, mode="added"):
    gh = make_client(fake, clock)
    target = ops.Target(f"{fake.owner}/{fake.repo}", fake.number, fake.head_sha)
    diff = ops.pull_diff(gh, target)
    return ops.post_review(gh, target, LOGIN, diff.filter(findings, mode), diff)


def test_patch_parsing_tracks_new_line_numbers():
    fd = parse_patch("src/train.py", PATCH)
    assert fd.added == set(range(55, 67))
    assert fd.hunks == [(50, 69)]
    assert fd.text[57] == SOURCE[57] and fd.text[69] == SOURCE[69]
    diff = from_pr_files([{"filename": "a.py", "status": "removed", "patch": ""},
                          {"filename": "b.bin", "status": "modified"}])
    assert list(diff.files) == ["b.bin"] and diff.files["b.bin"].added == set()


def test_filter_modes(tmp_path):
    fs = _load(tmp_path, [finding(52), finding(57), finding(90)] + [{**finding(3), "path": "other.py"}])
    diff = from_pr_files([{"filename": "src/train.py", "status": "modified", "patch": PATCH}])
    assert [f.line for f in diff.filter(fs, "added")] == [57]
    assert [f.line for f in diff.filter(fs, "diff_context")] == [52, 57]
    assert [f.line for f in diff.filter(fs, "file")] == [52, 57, 90]
    assert len(diff.filter(fs, "nofilter")) == 4


def test_review_three_times_posts_each_comment_once(fake, clock, tmp_path):
    _setup(fake)
    fs = _load(tmp_path, [finding(57, fix=ITEM_FIX), finding(63, 64, code="GPL501", fix=LOOP_FIX), finding(60)])
    results = [_review(fake, clock, fs) for _ in range(3)]
    assert [r["posted"] for r in results] == [3, 0, 0]
    assert results[2]["already"] == 3
    assert len(fake.calls("create_review")) == 1 and len(fake.review_comments) == 3
    payload = fake.calls("create_review")[0][2]
    assert payload["event"] == "COMMENT" and payload["commit_id"] == fake.head_sha
    by_line = {c["line"]: c for c in payload["comments"]}
    # single-line comment: no start_line; two-line fix: start_line below line
    assert "start_line" not in by_line[57] and by_line[64]["start_line"] == 63
    assert "```suggestion\n    running += loss.detach()\n```" in by_line[57]["body"]
    assert "```suggestion\n    torch._foreach_clip(list(model.parameters()))\n```" in by_line[64]["body"]
    assert "suggestion" not in by_line[60]["body"]


def test_fixed_findings_are_removed_and_new_ones_added(fake, clock, tmp_path):
    _setup(fake)
    _review(fake, clock, _load(tmp_path, [finding(57), finding(60)]))
    r = _review(fake, clock, _load(tmp_path, [finding(57), finding(61)]))
    assert (r["posted"], r["deleted"], r["already"]) == (1, 1, 1)
    assert sorted(c["line"] for c in fake.review_comments.values()) == [57, 61]


def test_human_review_comment_with_a_fingerprint_is_left_alone(fake_dotcom, clock, tmp_path):
    _setup(fake_dotcom)
    _review(fake_dotcom, clock, _load(tmp_path, [finding(57)]))
    (ours,) = fake_dotcom.review_comments.values()
    fake_dotcom.review_comments[1] = {**ours, "id": 1, "login": "octocat"}  # a human quoting our comment
    _review(fake_dotcom, clock, _load(tmp_path, []))
    assert list(fake_dotcom.review_comments) == [1]


def test_at_most_30_comments_per_review_most_severe_first(fake_dotcom, clock, tmp_path):
    _setup(fake_dotcom)
    items = [finding(n, code="GPL101", message=f"m{n}", severity="info") for n in range(55, 67)]
    items += [finding(n, code=f"GPL4{n:02d}", message=f"e{n}", severity="error") for n in range(55, 67)]
    items += [finding(n, code=f"GPL2{n:02d}", message=f"w{n}", severity="warning") for n in range(55, 67)]
    r = _review(fake_dotcom, clock, _load(tmp_path, items))
    assert r["posted"] == 30
    bodies = [c["body"] for c in fake_dotcom.calls("create_review")[0][2]["comments"]]
    assert sum("GPL4" in b for b in bodies) == 12 and sum("GPL2" in b for b in bodies) == 12
    assert _review(fake_dotcom, clock, _load(tmp_path, items))["posted"] == 6  # the rest on the next run


def test_422_outside_the_diff_retries_without_it(fake, clock, tmp_path):
    """The PR was pushed to between reading its diff and posting: GitHub refuses the whole review (422), the bot
    re-reads the diff, drops the comment that no longer fits and posts the rest."""
    _setup(fake)
    gh = make_client(fake, clock)
    target = ops.Target(f"{fake.owner}/{fake.repo}", fake.number, fake.head_sha)
    diff = ops.pull_diff(gh, target)
    fs = _load(tmp_path, [finding(57), finding(60)])
    fake.files = [{"filename": "src/train.py", "status": "modified",
                   "patch": "@@ -55,2 +55,3 @@\n" + "".join(f"+{SOURCE[n]}\n" for n in (55, 56, 57))}]
    r = ops.post_review(gh, target, LOGIN, diff.filter(fs, "added"), diff)
    assert (r["posted"], r["dropped"]) == (1, 1)
    assert len(fake.calls("create_review")) == 2
    assert [c["line"] for c in fake.review_comments.values()] == [57]


def test_422_for_another_reason_is_reported(fake_dotcom, clock, tmp_path):
    _setup(fake_dotcom)
    fake_dotcom.fail("create_review", Fault(422, {}, {"message": "Validation Failed"}))
    with pytest.raises(GitHubError, match="422"):
        _review(fake_dotcom, clock, _load(tmp_path, [finding(57)]))


def test_review_post_lost_in_a_reset_is_not_posted_twice(fake_dotcom, clock, tmp_path):
    _setup(fake_dotcom)
    fake_dotcom.fail("create_review", Fault(None, after_handling=True))
    _review(fake_dotcom, clock, _load(tmp_path, [finding(57), finding(58)]))
    assert len(fake_dotcom.reviews) == 1 and len(fake_dotcom.review_comments) == 2


def test_suggestion_fence_outlasts_backticks_in_the_fix(fake_dotcom, clock, tmp_path):
    _setup(fake_dotcom)
    fix = {"applicability": "safe", "edits": [{"line": 57, "column": 5, "end_line": 57, "end_column": 27,
                                               "content": 'doc = """```python\nx```"""'}]}
    _review(fake_dotcom, clock, _load(tmp_path, [finding(57, fix=fix)]))
    (c,) = fake_dotcom.review_comments.values()
    assert "````suggestion\n" in c["body"] and c["body"].endswith("\n````")


def test_check_run_sends_annotations_in_chunks_of_50(fake, clock, tmp_path):
    _setup(fake)
    items = [finding(n, severity="error" if n == 5 else "warning", message=f"m{n}") for n in range(1, 121)]
    fs = _load(tmp_path, items)
    gh = make_client(fake, clock)
    target = ops.Target(f"{fake.owner}/{fake.repo}", fake.number, fake.head_sha)
    r = ops.post_check(gh, target, fs, ReportInput(findings=fs))
    assert (r["annotations"], r["requests"], r["conclusion"]) == (120, 3, "failure")
    (run,) = fake.check_runs.values()
    assert len(run["annotations"]) == 120 and len(fake.calls("update_check_run")) == 2
    assert all(len(c[2]["output"].get("annotations", [])) <= 50 for c in fake.calls("update_check_run"))
    assert len(run["output"]["summary"]) <= 65_535


def test_check_run_create_lost_in_a_reset_is_found_not_duplicated(fake_dotcom, clock, tmp_path):
    _setup(fake_dotcom)
    fake_dotcom.fail("create_check_run", Fault(None, after_handling=True))
    fs = _load(tmp_path, [finding(57)])
    target = ops.Target(f"{fake_dotcom.owner}/{fake_dotcom.repo}", fake_dotcom.number, fake_dotcom.head_sha)
    ops.post_check(make_client(fake_dotcom, clock), target, fs, ReportInput(findings=fs))
    assert len(fake_dotcom.check_runs) == 1


def test_the_oracle_rejects_a_request_github_would_not_accept(fake_dotcom, clock):
    """The loopback server is only worth something if it can fail: a misspelt field and a bad enum are refused."""
    gh = make_client(fake_dotcom, clock)
    pull = f"repos/{fake_dotcom.owner}/{fake_dotcom.repo}/pulls/{fake_dotcom.number}"
    with pytest.raises(GitHubError):
        gh.request("POST", f"{pull}/reviews", json={"event": "COMMENT", "body": "x",
                                                    "comments": [{"path": "a.py", "line": 1, "bodyy": "typo"}]})
    with pytest.raises(GitHubError):
        gh.request("POST", f"{pull}/reviews", json={"event": "SHOUT", "body": "x"})
    with pytest.raises(GitHubError):
        gh.request("PATCH", f"repos/{fake_dotcom.owner}/{fake_dotcom.repo}/issues/comments/1", json={"text": "x"})
    assert len(fake_dotcom.request_errors) == 3
    assert "bodyy" in fake_dotcom.request_errors[0] or "additional" in fake_dotcom.request_errors[0].lower()
    fake_dotcom.request_errors.clear()  # expected here; any other test fails on them at teardown


def test_a_fix_too_large_for_a_review_comment_is_left_out(tmp_path):
    from gpulint.bot.report import COMMENT_LIMIT

    fd = parse_patch("src/train.py", PATCH)
    huge = {"applicability": "safe", "edits": [{"line": 57, "column": 5, "end_line": 57, "end_column": 27,
                                                "content": "x = 1\n" * 12_000}]}
    (f,) = _load(tmp_path, [finding(57, fix=huge)])
    c = ops.review_comment(f, fd)
    assert len(c.body) <= COMMENT_LIMIT and "suggestion" not in c.body and (c.start_line, c.line) == (57, 57)
    (small,) = _load(tmp_path, [finding(57, fix=ITEM_FIX)])
    assert "```suggestion" in ops.review_comment(small, fd).body


def test_two_findings_with_one_message_on_one_line_are_both_posted(fake_dotcom, clock, tmp_path):
    _setup(fake_dotcom)
    first = {"applicability": "safe", "edits": [{"line": 57, "column": 5, "end_line": 57, "end_column": 12,
                                                 "content": "total"}]}
    second = {"applicability": "safe", "edits": [{"line": 57, "column": 16, "end_line": 57, "end_column": 27,
                                                  "content": "loss.detach()"}]}
    items = [{**finding(57, fix=first, message="same words"), "column": 5},
             {**finding(57, fix=second, message="same words"), "column": 16}]
    r = _review(fake_dotcom, clock, _load(tmp_path, items))
    assert r["posted"] == 2
    bodies = sorted(c["body"] for c in fake_dotcom.review_comments.values())
    assert "    total += loss.item()" in bodies[0] + bodies[1]
    assert "    running += loss.detach()" in bodies[0] + bodies[1]


def test_a_finding_running_past_its_hunk_is_anchored_inside_it(fake_dotcom, clock, tmp_path):
    """Starts on added line 66, ends on 75, past the hunk (50-69): commented on 66-69, not dropped."""
    _setup(fake_dotcom)
    r = _review(fake_dotcom, clock, _load(tmp_path, [finding(66, end_line=75)]))
    assert (r["posted"], r["dropped"]) == (1, 0)
    (c,) = fake_dotcom.calls("create_review")[0][2]["comments"]
    assert (c["start_line"], c["line"]) == (66, 69)


def test_diff_context_mode_still_comments_only_on_added_lines(fake_dotcom, clock, tmp_path):
    _setup(fake_dotcom)
    r = _review(fake_dotcom, clock, _load(tmp_path, [finding(52), finding(57)]), mode="diff_context")
    assert (r["posted"], r["dropped"]) == (1, 1)
    assert [c["line"] for c in fake_dotcom.review_comments.values()] == [57]


def test_chain_and_likely_in_the_inline_comment(tmp_path):
    fd = parse_patch("src/train.py", PATCH)
    chain = [{"path": "train.py", "line": 120, "name": "loop over train_loader"},
             {"path": "src/train.py", "line": 57, "name": "step()"}]
    (f,) = _load(tmp_path, [{**finding(57), "confidence": "likely", "chain": chain}])
    body = ops.review_comment(f, fd, "https://github.com/o/r/blob/abc/").body
    assert "scalar-sync-in-step** *(likely)*:" in body
    assert ("<sub>per step via [`train.py:120`](https://github.com/o/r/blob/abc/train.py#L120) loop over "
            "train\\_loader → [`src/train.py:57`](https://github.com/o/r/blob/abc/src/train.py#L57) step()</sub>") in body
    annotation = ops.annotation(f)
    assert annotation["title"].endswith("(likely)")
    (wide,) = _load(tmp_path, [{**finding(57), "confidence": "possible", "chain": chain}])
    body = ops.review_comment(wide, fd, "https://github.com/o/r/blob/abc/").body
    assert "scalar-sync-in-step** *(possible)*:" in body
    assert ops.annotation(wide)["title"].endswith("(possible)")
    assert annotation["raw_details"] == "per step via train.py:120 loop over train_loader → src/train.py:57 step()"
