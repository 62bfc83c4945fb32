"""What the bot does on a pull request: find it, post the sticky comment, the review, the check run.

Each operation reads the current state first (comments, review comments, check runs) so that running it again changes
nothing that is already right: one sticky comment per PR, one review comment per finding (by fingerprint).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from gpulint.bot import markdown as md
from gpulint.bot.client import GitHub, GitHubConfigError, GitHubError
from gpulint.bot.data import Finding
from gpulint.bot.diff import FileDiff, PullDiff, from_pr_files
from gpulint.bot.report import (
    CHECK_SUMMARY_LIMIT,
    COMMENT_LIMIT,
    MARKER,
    ReportInput,
    apply_edits,
    render_markdown,
)

ACTIONS_LOGIN = "github-actions[bot]"  # who a workflow's GITHUB_TOKEN comments as
FINGERPRINT = re.compile(r"^<!-- gpulint:fp=([0-9a-f]{16}) -->")
REVIEW_MARKER = "<!-- gpulint:review"
MAX_REVIEW_COMMENTS = 30
ANNOTATIONS_PER_REQUEST = 50
CHECK_NAME = "gpulint"
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


@dataclass
class Target:
    repo: str  # owner/name
    number: int
    head_sha: str

    @property
    def issue(self) -> str:
        return f"repos/{self.repo}/issues/{self.number}"

    @property
    def pull(self) -> str:
        return f"repos/{self.repo}/pulls/{self.number}"


# ---------------------------------------------------------------------------------------------- finding the PR


def read_event(env: dict) -> dict:
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GitHubConfigError(f"GITHUB_EVENT_PATH {path}: cannot read the event ({exc})") from None
    return event if isinstance(event, dict) else {}


def resolve_target(gh: GitHub, env: dict, repo: str | None, number: int | None, head_sha: str | None) -> Target:
    """The repository and PR from flags, else from the Actions event; for `workflow_run` (where
    `pull_requests` is empty for fork PRs) the PR is found through the API from the run's head SHA."""
    repo = repo or env.get("GITHUB_REPOSITORY")
    if not repo or not _REPO.match(repo):
        raise GitHubConfigError(f"repository {repo!r}: give --repo OWNER/NAME or set GITHUB_REPOSITORY")
    event = read_event(env)
    pr = event.get("pull_request") or {}
    run = event.get("workflow_run") or {}
    if number is None and isinstance(pr.get("number"), int):
        number = pr["number"]
        head_sha = head_sha or (pr.get("head") or {}).get("sha")
    head_sha = head_sha or run.get("head_sha")
    if number is None and run:
        for candidate in run.get("pull_requests") or []:
            if (candidate.get("base") or {}).get("repo", {}).get("name") == repo.split("/")[1]:
                number = candidate.get("number")
                break
    if number is None and head_sha:
        number = find_pr_by_head_sha(gh, repo, head_sha)
    if number is None:
        raise GitHubConfigError("no pull request: give --pr N, or run on a pull_request or workflow_run event")
    if not head_sha:
        head_sha = gh.json("GET", f"repos/{repo}/pulls/{number}")["head"]["sha"]
    return Target(repo, int(number), head_sha)


def find_pr_by_head_sha(gh: GitHub, repo: str, sha: str) -> int | None:
    for pull in gh.paginate(f"repos/{repo}/pulls", {"state": "open", "sort": "updated", "direction": "desc"}):
        if (pull.get("head") or {}).get("sha") == sha:
            return pull["number"]
    return None


def own_login(gh: GitHub, configured: str | None) -> str:
    """Whose comments are ours. An Actions GITHUB_TOKEN (and an App installation token) cannot read /user: its
    comments are by github-actions[bot]; an App's bot login must then be configured (--login / GPULINT_BOT_LOGIN)."""
    if configured:
        return configured
    try:
        return gh.json("GET", "user")["login"]
    except GitHubError as exc:
        if exc.status in (401, 403, 404):
            return ACTIONS_LOGIN
        raise


def pull_diff(gh: GitHub, target: Target) -> PullDiff:
    return from_pr_files(list(gh.paginate(f"{target.pull}/files")))


def link_base(api_url: str, env: dict, target: Target) -> str:
    server = env.get("GITHUB_SERVER_URL")
    if not server:
        parts = urlsplit(api_url)
        host = parts.netloc.removeprefix("api.")
        server = f"{parts.scheme}://{host}{parts.path.removesuffix('/api/v3')}"
    return f"{server.rstrip('/')}/{target.repo}/blob/{target.head_sha}/"


# ---------------------------------------------------------------------------------------------- sticky comment


def _is_sticky(comment: dict, login: str) -> bool:
    # The marker must open the body AND the author must be us: a human quoting the marker is never ours.
    return (comment.get("user") or {}).get("login") == login and (comment.get("body") or "").startswith(MARKER)


def find_sticky(gh: GitHub, target: Target, login: str) -> dict | None:
    for comment in gh.paginate(f"{target.issue}/comments"):
        if _is_sticky(comment, login):
            return comment
    return None


def post_sticky(gh: GitHub, target: Target, login: str, body: str, mode: str = "update", create: bool = True) -> str:
    """Create or update the one gpulint comment; returns what happened. With `create=False` (nothing to report) an
    existing comment is still updated, so that it stops showing fixed findings, but no new one is posted."""
    if mode == "off":
        return "off"
    existing = find_sticky(gh, target, login)
    if existing is None and not create:
        return "not needed (nothing to report)"
    if existing and mode == "update":
        if existing.get("body") == body:
            return "unchanged"
        gh.request("PATCH", f"repos/{target.repo}/issues/comments/{existing['id']}", json={"body": body})
        return "updated"
    if existing and mode == "recreate":
        gh.request("DELETE", f"repos/{target.repo}/issues/comments/{existing['id']}")
    # A POST that failed without an answer may have created the comment: look before posting again.
    gh.request("POST", f"{target.issue}/comments", json={"body": body},
               recover=lambda: find_sticky(gh, target, login))
    return "recreated" if existing else "created"


# ---------------------------------------------------------------------------------------------- review


@dataclass
class ReviewComment:
    fingerprint: str
    finding: Finding
    path: str
    start_line: int
    line: int
    body: str

    def payload(self) -> dict:
        out = {"path": self.path, "line": self.line, "side": "RIGHT", "body": self.body}
        if self.start_line < self.line:  # GitHub rejects start_line == line
            out.update(start_line=self.start_line, start_side="RIGHT")
        return out


def fingerprint(finding: Finding, fd: FileDiff | None) -> str:
    """Stable across pushes that move the line: rule, file, message and the text of the line, not its number."""
    line_text = (fd.text.get(finding.line) if fd else None) or f"#{finding.line}"
    key = f"{finding.code}\0{finding.path}\0{finding.message}\0{line_text.strip()}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _suggestion(finding: Finding, fd: FileDiff | None) -> tuple[int, int, str] | None:
    """(first line, last line, replacement) when the fix's lines are all visible in the diff."""
    if not finding.edits or fd is None:
        return None
    first = min(e.line for e in finding.edits)
    last = max(e.end_line for e in finding.edits)
    if not all(n in fd.text for n in range(first, last + 1)):
        return None
    original = [fd.text[n] for n in range(first, last + 1)]
    shifted = [type(e)(e.line - first + 1, e.column, e.end_line - first + 1, e.end_column, e.content)
               for e in finding.edits]
    return first, last, "\n".join(apply_edits(original, shifted))


def review_comment(finding: Finding, fd: FileDiff | None) -> ReviewComment:
    fp = fingerprint(finding, fd)
    title = f"{md.link(md.code(finding.code), finding.url)} {md.text(finding.name)}".strip()
    body = [f"<!-- gpulint:fp={fp} -->", f"**{title}**: {md.message(finding.message)}"]
    start, end = finding.line, finding.end_line
    suggestion = _suggestion(finding, fd)
    if suggestion:
        kind = "Safe fix" if finding.fix_applicability == "safe" else "Possible fix (check the behaviour)"
        block = ["", f"{kind}:", md.fence(suggestion[2], "suggestion")]
        if len("\n".join(body + block)) <= COMMENT_LIMIT:  # a huge fix is left to the sticky comment's patches
            start, end = suggestion[:2]
            body += block
    return ReviewComment(fp, finding, finding.path, start, end, "\n".join(body))


def _own_review_comments(gh: GitHub, target: Target, login: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for c in gh.paginate(f"{target.pull}/comments"):
        m = FINGERPRINT.match(c.get("body") or "")
        if m and (c.get("user") or {}).get("login") == login:
            found.setdefault(m.group(1), []).append(c["id"])
    return found


def _fits_diff(c: ReviewComment, diff: PullDiff) -> bool:
    fd = diff.files.get(c.path)
    return fd is not None and fd.in_hunk(c.start_line, c.line)


def post_review(gh: GitHub, target: Target, login: str, findings: list[Finding], diff: PullDiff) -> dict:
    """One review with the new inline comments (at most 30); comments whose finding is gone are deleted."""
    wanted = {}
    for f in findings:
        c = review_comment(f, diff.files.get(f.path))
        wanted.setdefault(c.fingerprint, c)
    existing = _own_review_comments(gh, target, login)
    stale = [cid for fp, ids in existing.items() if fp not in wanted for cid in ids]
    for cid in stale:
        gh.request("DELETE", f"repos/{target.repo}/pulls/comments/{cid}")
    new = [c for fp, c in wanted.items() if fp not in existing][:MAX_REVIEW_COMMENTS]
    result = {"posted": 0, "deleted": len(stale), "dropped": 0, "already": sum(1 for fp in wanted if fp in existing)}
    if not new:
        return result
    try:
        _create_review(gh, target, login, new)
    except GitHubError as exc:
        if exc.status != 422:
            raise
        # "pull_request_review_thread.line must be part of the diff" rejects the whole review: the diff may have
        # moved since it was read. Re-read it, drop what no longer fits, and try once more.
        fresh = pull_diff(gh, target)
        kept = [c for c in new if _fits_diff(c, fresh)]
        if len(kept) == len(new):
            raise
        result["dropped"] = len(new) - len(kept)
        if kept:
            _create_review(gh, target, login, kept)
        new = kept
    result["posted"] = len(new)
    return result


def _create_review(gh: GitHub, target: Target, login: str, comments: list[ReviewComment]) -> None:
    run_id = hashlib.sha256("".join(sorted(c.fingerprint for c in comments)).encode()).hexdigest()[:16]
    n = len(comments)
    body = f"{REVIEW_MARKER} run={run_id} -->\n**gpulint**: {n} suggestion{'s' if n != 1 else ''} on changed lines."

    def recover():
        for review in gh.paginate(f"{target.pull}/reviews"):
            if (review.get("user") or {}).get("login") == login and (review.get("body") or "").startswith(
                    f"{REVIEW_MARKER} run={run_id} -->"):
                return review
        return None

    gh.request("POST", f"{target.pull}/reviews", recover=recover, json={
        "commit_id": target.head_sha, "body": body, "event": "COMMENT",
        "comments": [c.payload() for c in comments],
    })


# ---------------------------------------------------------------------------------------------- check run

_LEVEL = {"error": "failure", "warning": "warning", "info": "notice"}


def annotation(f: Finding) -> dict:
    out = {
        "path": f.path, "start_line": f.line, "end_line": f.end_line,
        "annotation_level": _LEVEL.get(f.severity, "warning"),
        "message": f.message[:64_000], "title": f"{f.code} {f.name}".strip()[:255],
    }
    if f.line == f.end_line and f.end_column > f.column:  # columns only on one line, as GitHub requires
        out.update(start_column=f.column, end_column=f.end_column)
    return out


def post_check(gh: GitHub, target: Target, findings: list[Finding], data: ReportInput) -> dict:
    """A completed check run; annotations go 50 per request (the create, then updates)."""
    summary = render_markdown(data, "job_summary.md.j2", CHECK_SUMMARY_LIMIT)
    errors = sum(1 for f in findings if f.severity == "error")
    conclusion = "failure" if errors else "neutral" if findings else "success"
    title = f"{len(findings)} finding{'s' if len(findings) != 1 else ''}" if findings else "No findings"
    notes = [annotation(f) for f in findings]
    chunks = [notes[i:i + ANNOTATIONS_PER_REQUEST] for i in range(0, len(notes), ANNOTATIONS_PER_REQUEST)] or [[]]
    external_id = hashlib.sha256((target.head_sha + summary).encode()).hexdigest()[:32]

    def recover():
        runs = gh.json("GET", f"repos/{target.repo}/commits/{target.head_sha}/check-runs",
                       params={"check_name": CHECK_NAME})
        return next((r for r in runs.get("check_runs", []) if r.get("external_id") == external_id), None)

    output = {"title": title, "summary": summary}
    created = gh.json("POST", f"repos/{target.repo}/check-runs", recover=recover, json={
        "name": CHECK_NAME, "head_sha": target.head_sha, "external_id": external_id, "status": "completed",
        "conclusion": conclusion, "output": {**output, "annotations": chunks[0]},
    })
    for chunk in chunks[1:]:
        gh.request("PATCH", f"repos/{target.repo}/check-runs/{created['id']}",
                   json={"output": {**output, "annotations": chunk}})
    return {"id": created["id"], "annotations": len(notes), "requests": len(chunks), "conclusion": conclusion}


# ---------------------------------------------------------------------------------------------- fallback


def _escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def workflow_command(f: Finding) -> str:
    """`::warning file=..,line=..::message` for one finding; escaping keeps repository text on one line, so it cannot
    start a command of its own."""
    level = {"error": "error", "warning": "warning"}.get(f.severity, "notice")
    props = f"file={_escape_property(f.path)},line={f.line},endLine={f.end_line},col={f.column}"
    props += f",title={_escape_property(f'{f.code} {f.name}'.strip())}"
    return f"::{level} {props}::{_escape_data(f.message)}"


def fallback(findings: list[Finding], summary: str, reason: str, env: dict, out) -> None:
    """The token cannot write here (a fork PR, a read-only token): annotations through workflow commands and the
    report in the job summary instead."""
    print(f"::warning title=gpulint::{_escape_data(reason)}; findings are shown as annotations and in the job summary",
          file=out)
    for f in findings[:ANNOTATIONS_PER_REQUEST]:
        print(workflow_command(f), file=out)
    summary_path = env.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        with open(summary_path, "a", encoding="utf-8") as fh:
            fh.write(summary + "\n")
