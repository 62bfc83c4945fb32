"""What the bot does on a pull request: find it, post the sticky comment, the review, the check run.

Each operation reads the current state first (comments, review comments, check runs) so that running it again changes
nothing that is already right: one sticky comment per PR, one review comment per finding (by fingerprint). Runs may
overlap (two pushes in quick succession): each tidies up after itself, keeping the oldest copy of what it owns and
deleting the others, so concurrent runs converge on one comment. A review thread that someone answered is never
deleted: it is marked outdated instead.
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
from gpulint.bot.delta import CHECK_NAME as MEMORY_CHECK_NAME
from gpulint.bot.delta import Gate
from gpulint.bot.diff import FileDiff, PullDiff, from_pr_files
from gpulint.bot.planpatch import Suggestion
from gpulint.bot.report import (
    CHECK_SUMMARY_LIMIT,
    COMMENT_LIMIT,
    MARKER,
    ReportInput,
    apply_edits,
    chain_markdown,
    render_markdown,
)

ACTIONS_LOGIN = "github-actions[bot]"  # who a workflow's GITHUB_TOKEN comments as
FINGERPRINT = re.compile(r"^<!-- gpulint:fp=([0-9a-f]{16}) -->")
OUTDATED = "<!-- gpulint:outdated -->"
REVIEW_MARKER = "<!-- gpulint:review"
MAX_REVIEW_COMMENTS = 30
ANNOTATIONS_PER_REQUEST = 50
MAX_ANNOTATIONS = 1_000  # the most severe; 20 requests. GitHub shows them one by one in the diff: more helps nobody
CHECK_NAME = "gpulint"
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_SHA = re.compile(r"^[0-9a-f]{40}$")


class NothingToPost(Exception):
    """The run has nothing to post, for a reason worth one line (a newer push, a closed PR): exit 0."""


@dataclass
class Target:
    repo: str  # owner/name
    number: int
    head_sha: str
    changed_files: int | None = None  # as the PR says; GitHub lists at most 3,000 of them

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
    except (OSError, ValueError, RecursionError) as exc:
        raise GitHubConfigError(f"GITHUB_EVENT_PATH {path}: cannot read the event ({type(exc).__name__})") from None
    return event if isinstance(event, dict) else {}


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _is_this_repo(candidate: dict, event: dict, repo: str) -> bool:
    """Whether a `workflow_run.pull_requests` entry targets this repository: by id (the event's own repository), or
    by the API URL of its base repository. A fork's repository of the same name is another repository."""
    base = _dict(_dict(candidate.get("base")).get("repo"))
    here = _dict(event.get("repository"))
    if str(here.get("full_name", "")).lower() == repo.lower() and base.get("id") is not None:
        return base.get("id") == here.get("id")
    return urlsplit(str(base.get("url", ""))).path.lower().endswith(f"/repos/{repo.lower()}")


def resolve_target(gh: GitHub, env: dict, repo: str | None, number: int | None, head_sha: str | None) -> Target:
    """The repository and PR from flags, else from the Actions event; for `workflow_run` (where `pull_requests` is
    empty for fork PRs) the PR is found through the API from the run's head. A run whose head is no longer the PR's
    head has nothing to post: its results would overwrite a newer run's."""
    repo = repo or env.get("GITHUB_REPOSITORY")
    if not repo or not _REPO.match(repo):
        raise GitHubConfigError(f"repository {repo!r}: give --repo OWNER/NAME or set GITHUB_REPOSITORY")
    event = read_event(env)
    pr = _dict(event.get("pull_request"))
    run = _dict(event.get("workflow_run"))
    if number is None and isinstance(pr.get("number"), int):
        number = pr["number"]
        head_sha = head_sha or _dict(pr.get("head")).get("sha")
    if number is None and run:
        head_sha = head_sha or run.get("head_sha")
        number = _pr_of_run(gh, repo, event, run, head_sha)
    if number is None:
        raise GitHubConfigError("no pull request: give --pr N, or run on a pull_request or workflow_run event")
    pull = gh.json("GET", f"repos/{repo}/pulls/{number}")
    current = _dict(_dict(pull).get("head")).get("sha")
    if not isinstance(current, str) or not _SHA.match(current):
        raise GitHubError("GET", f"repos/{repo}/pulls/{number}", None, "the answer has no head SHA")
    if head_sha and head_sha != current:
        raise NothingToPost(f"PR #{number} has moved on to {current[:12]} since this run's {str(head_sha)[:12]}: "
                            "nothing posted (the run for the new head will post)")
    changed = pull.get("changed_files")
    return Target(repo, int(number), current, changed if isinstance(changed, int) else None)


def _pr_of_run(gh: GitHub, repo: str, event: dict, run: dict, head_sha: str | None) -> int | None:
    """The PR a `workflow_run` ran for. Never a guess: two candidates are an error that says so."""
    own = [c for c in run.get("pull_requests") or [] if isinstance(c, dict) and _is_this_repo(c, event, repo)]
    numbers = sorted({c.get("number") for c in own if isinstance(c.get("number"), int)})
    if len(numbers) > 1:
        raise GitHubConfigError(f"the run belongs to PRs {', '.join(f'#{n}' for n in numbers)}: give --pr N")
    if numbers:
        return numbers[0]
    head_repo = str(_dict(run.get("head_repository")).get("full_name", ""))
    head_branch = str(run.get("head_branch") or "")
    if head_sha:
        found = _open_pulls(gh, repo, {}, lambda p: _head(p).get("sha") == head_sha)
        if len(found) > 1 and head_repo:  # the same commit in two PRs: the run's own head repository decides
            found = [p for p in found if _head_repo(p).lower() == head_repo.lower()
                     and (not head_branch or _head(p).get("ref") == head_branch)]
        if len(found) > 1:
            numbers = ", ".join(f"#{p['number']}" for p in found)
            raise GitHubConfigError(f"PRs {numbers} all have head "
                                    f"{head_sha[:12]}: the run's PR is ambiguous, give --pr N")
        if found:
            return found[0]["number"]
    if head_repo and head_branch:  # the PR moved on since this run: find it by its branch
        owner = head_repo.split("/")[0]
        found = _open_pulls(gh, repo, {"head": f"{owner}:{head_branch}"},
                            lambda p: _head_repo(p).lower() == head_repo.lower())
        if len(found) == 1:
            return found[0]["number"]
    raise NothingToPost(f"no open pull request has this run's head {str(head_sha)[:12]} (closed, or pushed to since): "
                        "nothing posted")


def _head(pull: dict) -> dict:
    return _dict(pull.get("head"))


def _head_repo(pull: dict) -> str:
    return str(_dict(_head(pull).get("repo")).get("full_name", ""))


def _open_pulls(gh: GitHub, repo: str, params: dict, keep) -> list[dict]:
    pulls = gh.paginate(f"repos/{repo}/pulls", {"state": "open", "sort": "updated", "direction": "desc", **params})
    return [p for p in pulls if isinstance(p, dict) and isinstance(p.get("number"), int) and keep(p)]


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
    files = list(gh.paginate(f"{target.pull}/files"))
    diff = from_pr_files(files)
    if target.changed_files is not None and len(files) < target.changed_files:
        diff.listed = (len(files), target.changed_files)
    return diff


def link_base(api_url: str, env: dict, target: Target) -> str:
    server = env.get("GITHUB_SERVER_URL")
    if not server:
        parts = urlsplit(api_url)
        host = parts.netloc.removeprefix("api.")
        server = f"{parts.scheme}://{host}{parts.path.removesuffix('/api/v3')}"
    return f"{server.rstrip('/')}/{target.repo}/blob/{target.head_sha}/"


def _by(comment: dict, login: str) -> bool:
    return _dict(comment.get("user")).get("login") == login


def _delete(gh: GitHub, path: str) -> None:
    """Delete what may already be gone (a concurrent run tidied it): 404 is done too."""
    try:
        gh.request("DELETE", path)
    except GitHubError as exc:
        if exc.status != 404:
            raise


# ---------------------------------------------------------------------------------------------- sticky comment


def _is_sticky(comment: dict, login: str) -> bool:
    # The marker must open the body AND the author must be us: a human quoting the marker is never ours.
    return _by(comment, login) and str(comment.get("body") or "").startswith(MARKER)


def find_stickies(gh: GitHub, target: Target, login: str) -> list[dict]:
    """Our sticky comments, oldest first (normally one; concurrent runs may have made more)."""
    found = [c for c in gh.paginate(f"{target.issue}/comments") if isinstance(c, dict) and _is_sticky(c, login)]
    return sorted(found, key=lambda c: c["id"])


def post_sticky(gh: GitHub, target: Target, login: str, body: str, mode: str = "update", create: bool = True) -> str:
    """Create or update the one gpulint comment; returns what happened. With `create=False` (nothing to report) an
    existing comment is still updated, so that it stops showing fixed findings, but no new one is posted."""
    if mode == "off":
        return "off"
    stickies = find_stickies(gh, target, login)
    if not stickies and not create:
        return "not needed (nothing to report)"
    if stickies and mode == "recreate":
        # Post first, then delete: a failure in between leaves two comments (tidied next run), never none.
        _create_sticky(gh, target, login, body, known={c["id"] for c in stickies})
        for c in stickies:
            _delete(gh, f"repos/{target.repo}/issues/comments/{c['id']}")
        return "recreated"
    removed = 0
    for c in stickies[1:]:  # copies left by runs that overlapped: the oldest is the one people have seen
        _delete(gh, f"repos/{target.repo}/issues/comments/{c['id']}")
        removed += 1
    what = _update_or_create(gh, target, login, body, stickies[:1])
    if what == "created":  # a run that overlaps this one may have created one too
        removed += _tidy_stickies(gh, target, login, body)
    return what + (f" ({removed} duplicate{'s' if removed != 1 else ''} removed)" if removed else "")


def _update_or_create(gh: GitHub, target: Target, login: str, body: str, stickies: list[dict]) -> str:
    for _ in range(3):  # the comment may vanish between listing and editing (deleted by a person or a tidy-up)
        if not stickies:
            _create_sticky(gh, target, login, body, known=set())
            return "created"
        keep = stickies[0]
        if keep.get("body") == body:
            return "unchanged"
        try:
            gh.request("PATCH", f"repos/{target.repo}/issues/comments/{keep['id']}", json={"body": body})
            return "updated"
        except GitHubError as exc:
            if exc.status != 404:
                raise
        stickies = find_stickies(gh, target, login)
    raise GitHubError("PATCH", f"{target.issue}/comments", 404, "the comment kept disappearing while it was edited")


def _create_sticky(gh: GitHub, target: Target, login: str, body: str, known: set[int]) -> None:
    def recover():  # a POST that failed without an answer may have created the comment: look before posting again
        return next((c for c in find_stickies(gh, target, login) if c["id"] not in known and c.get("body") == body),
                    None)

    gh.request("POST", f"{target.issue}/comments", json={"body": body}, recover=recover)


def _tidy_stickies(gh: GitHub, target: Target, login: str, body: str) -> int:
    """After creating one: keep the oldest of our sticky comments (with this run's body), delete the others."""
    stickies = find_stickies(gh, target, login)
    for c in stickies[1:]:
        _delete(gh, f"repos/{target.repo}/issues/comments/{c['id']}")
    if len(stickies) > 1 and stickies[0].get("body") != body:
        _update_or_create(gh, target, login, body, stickies[:1])
    return max(0, len(stickies) - 1)


# ---------------------------------------------------------------------------------------------- review


@dataclass
class ReviewComment:
    fingerprint: str
    finding: Finding | None  # None: a change of the plan's patch
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
    """Stable across pushes that move the line: rule, file, message, the text of the line and the place in it, and
    the fix; not the line's number. Two findings on one line differ by column or fix, so both are posted."""
    line_text = (fd.text.get(finding.line) if fd else None) or f"#{finding.line}"
    fix = "\0".join(f"{e.line - finding.line}:{e.column}:{e.end_line - finding.line}:{e.end_column}:{e.content}"
                    for e in finding.edits)
    key = "\0".join([finding.code, finding.path, finding.message, line_text.strip(), str(finding.column), fix])
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _suggestion(finding: Finding, fd: FileDiff | None) -> tuple[int, int, str] | None:
    """(first line, last line, replacement) when the fix's lines are all visible in one hunk of the diff."""
    if not finding.edits or fd is None:
        return None
    first = min(e.line for e in finding.edits)
    last = max(e.end_line for e in finding.edits)
    if not fd.in_hunk(first, last):
        return None
    original = [fd.text[n] for n in range(first, last + 1)]
    shifted = [type(e)(e.line - first + 1, e.column, e.end_line - first + 1, e.end_column, e.content)
               for e in finding.edits]
    return first, last, "\n".join(apply_edits(original, shifted))


def review_comment(finding: Finding, fd: FileDiff | None, base: str | None = None) -> ReviewComment:
    fp = fingerprint(finding, fd)
    title = f"{md.link(md.code(finding.code), finding.url)} {md.text(finding.name)}".strip()
    confidence = f" *({finding.confidence})*" if finding.confidence != "certain" else ""
    body = [f"<!-- gpulint:fp={fp} -->", f"**{title}**{confidence}: {md.message(finding.message)}"]
    chain = chain_markdown(finding, base)
    if chain:
        body.append(f"<sub>{chain}</sub>")
    # A finding that runs past its hunk is anchored on the part inside it: GitHub refuses a range over two hunks.
    start, end = finding.line, finding.line
    if fd is not None:
        end = min(finding.end_line, fd.hunk_end(finding.line) or finding.line)
    suggestion = _suggestion(finding, fd)
    if suggestion:
        kind = "Safe fix" if finding.fix_applicability == "safe" else "Possible fix (check the behaviour)"
        block = ["", f"{kind}:", md.fence(suggestion[2], "suggestion")]
        if len("\n".join(body + block)) <= COMMENT_LIMIT:  # a huge fix is left to the sticky comment's patches
            start, end = suggestion[:2]
            body += block
    return ReviewComment(fp, finding, finding.path, start, end, "\n".join(body))


def plan_patch_comment(s: Suggestion, buys: str | None) -> ReviewComment:
    """The memory plan's change to lines the PR added, as a one-click suggestion; fingerprinted by what it changes,
    so a re-run with the same patch posts nothing new."""
    key = "\0".join(["plan-patch", s.path, s.replacement])
    fp = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    figures = f" ({md.text(buys)})" if buys else ""
    body = "\n".join([f"<!-- gpulint:fp={fp} -->",
                      f"**gpulint memory plan**{figures}: apply the plan here (from `gpulint plan --patch`).",
                      "", md.fence(s.replacement, "suggestion")])
    return ReviewComment(fp, None, s.path, s.start_line, s.line, body)


@dataclass
class _Existing:
    ids: dict[str, list[int]]  # fingerprint -> our comments carrying it, oldest first
    bodies: dict[int, str]
    answered: set[int]  # our comments that someone replied to


def _own_review_comments(gh: GitHub, target: Target, login: str) -> _Existing:
    found = _Existing({}, {}, set())
    replies_to = set()
    for c in gh.paginate(f"{target.pull}/comments"):
        if not isinstance(c, dict):
            continue
        if c.get("in_reply_to_id"):
            replies_to.add(c["in_reply_to_id"])
        m = FINGERPRINT.match(str(c.get("body") or ""))
        if m and _by(c, login):
            found.ids.setdefault(m.group(1), []).append(c["id"])
            found.bodies[c["id"]] = c.get("body") or ""
    for ids in found.ids.values():
        ids.sort()
    found.answered = {cid for ids in found.ids.values() for cid in ids if cid in replies_to}
    return found


def _retire(gh: GitHub, target: Target, existing: _Existing, cid: int) -> str:
    """A comment whose finding is gone: deleted, unless someone replied; then it stays, marked outdated (its thread
    is the maintainer's record)."""
    if cid not in existing.answered:
        _delete(gh, f"repos/{target.repo}/pulls/comments/{cid}")
        return "deleted"
    old = FINGERPRINT.sub("", existing.bodies[cid], count=1).lstrip("\n")
    note = (f"{OUTDATED}\n**Outdated**: gpulint no longer reports this here (fixed, or the code moved). "
            "Kept for its replies.\n\n")
    try:
        gh.request("PATCH", f"repos/{target.repo}/pulls/comments/{cid}",
                   json={"body": (note + old)[:COMMENT_LIMIT]})
    except GitHubError as exc:
        if exc.status != 404:
            raise
    return "kept"


def post_review(gh: GitHub, target: Target, login: str, findings: list[Finding], diff: PullDiff,
                base: str | None = None, extra: list[ReviewComment] = ()) -> dict:
    """One review with the new inline comments (at most 30) on lines the PR added; comments whose finding is gone
    are deleted (or marked outdated when answered); copies left by a concurrent run are removed. `extra` comments
    (the plan's patch as suggestions) come first."""
    wanted: dict[str, ReviewComment] = {c.fingerprint: c for c in extra}
    off_added = 0
    for f in findings:
        fd = diff.files.get(f.path)
        if fd is None or f.line not in fd.added:  # inline comments only on what the PR added, whatever the filter
            off_added += 1
            continue
        c = review_comment(f, fd, base)
        wanted.setdefault(c.fingerprint, c)
    existing = _own_review_comments(gh, target, login)
    result = {"posted": 0, "deleted": 0, "kept": 0, "dropped": off_added,
              "already": sum(1 for fp in wanted if fp in existing.ids)}
    for fp, ids in existing.ids.items():
        for cid in ids if fp not in wanted else ids[1:]:  # a finding gone, or a second copy of one still here
            result["deleted" if _retire(gh, target, existing, cid) == "deleted" else "kept"] += 1
    new = [c for fp, c in wanted.items() if fp not in existing.ids][:MAX_REVIEW_COMMENTS]
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
        kept = [c for c in new if (fd := fresh.files.get(c.path)) is not None and fd.in_hunk(c.start_line, c.line)]
        if len(kept) == len(new):
            raise
        result["dropped"] += len(new) - len(kept)
        if kept:
            _create_review(gh, target, login, kept)
        new = kept
    result["posted"] = len(new)
    # A concurrent run may have posted the same comments: keep the oldest copy of each.
    after = _own_review_comments(gh, target, login)
    for ids in after.ids.values():
        for cid in ids[1:]:
            _retire(gh, target, after, cid)
    return result


def _create_review(gh: GitHub, target: Target, login: str, comments: list[ReviewComment]) -> None:
    run_id = hashlib.sha256("".join(sorted(c.fingerprint for c in comments)).encode()).hexdigest()[:16]
    n = len(comments)
    body = f"{REVIEW_MARKER} run={run_id} -->\n**gpulint**: {n} suggestion{'s' if n != 1 else ''} on changed lines."

    def recover():
        for review in gh.paginate(f"{target.pull}/reviews"):
            if _by(review, login) and str(review.get("body") or "").startswith(f"{REVIEW_MARKER} run={run_id} -->"):
                return review
        return None

    gh.request("POST", f"{target.pull}/reviews", recover=recover, json={
        "commit_id": target.head_sha, "body": body, "event": "COMMENT",
        "comments": [c.payload() for c in comments],
    })


# ---------------------------------------------------------------------------------------------- check run

_LEVEL = {"error": "failure", "warning": "warning", "info": "notice"}


def chain_text(f: Finding) -> str:
    """The call chain in plain text (annotations are not Markdown)."""
    frames = [f"{fr.path}:{fr.line} {fr.name}".strip() for fr in f.chain]
    if f.chain_elided:
        half = len(frames) // 2
        frames = frames[:half] + [f"… {f.chain_elided} more …"] + frames[half:]
    return "per step via " + " → ".join(frames) if frames else ""


def annotation(f: Finding) -> dict:
    title = f"{f.code} {f.name}".strip() + (f" ({f.confidence})" if f.confidence != "certain" else "")
    out = {
        "path": f.path, "start_line": f.line, "end_line": f.end_line,
        "annotation_level": _LEVEL.get(f.severity, "warning"),
        "message": f.message[:64_000], "title": title[:255],
    }
    if f.chain:
        out["raw_details"] = chain_text(f)[:64_000]
    if f.line == f.end_line and f.end_column > f.column:  # columns only on one line, as GitHub requires
        out.update(start_column=f.column, end_column=f.end_column)
    return out


def post_check(gh: GitHub, target: Target, findings: list[Finding], data: ReportInput) -> dict:
    """A completed check run; annotations (the MAX_ANNOTATIONS most severe) go 50 per request: the create, then
    updates."""
    summary = render_markdown(data, "job_summary.md.j2", CHECK_SUMMARY_LIMIT)
    errors = sum(1 for f in findings if f.severity == "error")
    conclusion = "failure" if errors else "neutral" if findings else "success"
    title = f"{len(findings)} finding{'s' if len(findings) != 1 else ''}" if findings else "No findings"
    notes = [annotation(f) for f in findings[:MAX_ANNOTATIONS]]
    chunks = [notes[i:i + ANNOTATIONS_PER_REQUEST] for i in range(0, len(notes), ANNOTATIONS_PER_REQUEST)] or [[]]
    external_id = hashlib.sha256((target.head_sha + summary).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    output = {"title": title, "summary": summary}
    if len(findings) > len(notes):
        output["text"] = (f"Annotations mark the {len(notes)} most severe of the {len(findings)} findings; "
                          f"every finding is in {data.full_report}.")

    created = _create_check_run(gh, target, CHECK_NAME, external_id, conclusion,
                                {**output, "annotations": chunks[0]})
    for chunk in chunks[1:]:
        gh.request("PATCH", f"repos/{target.repo}/check-runs/{created['id']}",
                   json={"output": {**output, "annotations": chunk}})
    return {"id": created["id"], "annotations": len(notes), "requests": len(chunks), "conclusion": conclusion,
            "left_out": len(findings) - len(notes)}


def post_memory_check(gh: GitHub, target: Target, gate: Gate, data: ReportInput) -> dict:
    """The `gpulint/memory` check run: its conclusion is the gate's, its title the one line that says why."""
    summary = render_markdown(data, "job_summary.md.j2", CHECK_SUMMARY_LIMIT)
    title = gate.reason[:1].upper() + gate.reason[1:]
    external_id = hashlib.sha256((target.head_sha + gate.conclusion + gate.reason).encode("utf-8", "surrogatepass"))
    external_id = external_id.hexdigest()[:32]

    created = _create_check_run(gh, target, MEMORY_CHECK_NAME, external_id, gate.conclusion,
                                {"title": title[:255], "summary": summary})
    return {"id": created["id"], "conclusion": gate.conclusion, "reason": gate.reason}


def _create_check_run(gh: GitHub, target: Target, name: str, external_id: str, conclusion: str, output: dict) -> dict:
    """POST a completed check run; when the answer is lost, the run that was made is found again by `external_id`
    (a retried POST would make a second one)."""

    def recover():
        runs = gh.json("GET", f"repos/{target.repo}/commits/{target.head_sha}/check-runs", params={"check_name": name})
        return next((r for r in _dict(runs).get("check_runs", []) if r.get("external_id") == external_id), None)

    return gh.json("POST", f"repos/{target.repo}/check-runs", recover=recover, json={
        "name": name, "head_sha": target.head_sha, "external_id": external_id, "status": "completed",
        "conclusion": conclusion, "output": output,
    })


# ---------------------------------------------------------------------------------------------- fallback


def escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(s: str) -> str:
    return escape_data(s).replace(":", "%3A").replace(",", "%2C")


def workflow_command(f: Finding) -> str:
    """`::warning file=..,line=..::message` for one finding; escaping keeps repository text on one line, so it cannot
    start a command of its own."""
    level = {"error": "error", "warning": "warning"}.get(f.severity, "notice")
    props = f"file={_escape_property(f.path)},line={f.line},endLine={f.end_line},col={f.column}"
    props += f",title={_escape_property(f'{f.code} {f.name}'.strip())}"
    return f"::{level} {props}::{escape_data(f.message)}"


def fallback(findings: list[Finding], summary: str, reason: str, env: dict, out) -> None:
    """The token cannot write here (a fork PR, a read-only token): annotations through workflow commands and the
    report in the job summary instead."""
    print(f"::warning title=gpulint::{escape_data(reason)}; findings are shown as annotations and in the job summary",
          file=out)
    for f in findings[:ANNOTATIONS_PER_REQUEST]:
        print(workflow_command(f), file=out)
    summary_path = env.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        with open(summary_path, "a", encoding="utf-8") as fh:
            fh.write(summary + "\n")
