"""Which lines a pull request changed, from the PR files API or from `git diff`, and the filter modes built on it.

Modes (as in reviewdog): `added` (default) keeps findings that start on an added line; `diff_context` keeps findings
inside a hunk (added or context lines); `file` keeps findings in a changed file; `nofilter` keeps everything.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field

from gpulint.bot.data import Finding
from gpulint.errors import UsageError

FILTER_MODES = ("added", "diff_context", "file", "nofilter")
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


@dataclass
class FileDiff:
    path: str
    added: set[int] = field(default_factory=set)
    hunks: list[tuple[int, int]] = field(default_factory=list)  # inclusive new-file line ranges
    text: dict[int, str] = field(default_factory=dict)  # new-file line -> content, for added and context lines

    def in_hunk(self, start: int, end: int) -> bool:
        """Both ends inside the same hunk (a review comment may not span two)."""
        return any(lo <= start and end <= hi for lo, hi in self.hunks)

    def hunk_end(self, line: int) -> int | None:
        """The last line of the hunk holding `line`."""
        return next((hi for lo, hi in self.hunks if lo <= line <= hi), None)


@dataclass
class PullDiff:
    files: dict[str, FileDiff] = field(default_factory=dict)
    listed: tuple[int, int] | None = None  # (files listed, files changed) when GitHub listed only some

    def unmatched(self, findings: list[Finding]) -> list[Finding]:
        """Findings in no file this diff changes (a path the PR does not touch, or written differently)."""
        return [f for f in findings if f.path not in self.files]

    def keep(self, finding: Finding, mode: str) -> bool:
        if mode == "nofilter":
            return True
        fd = self.files.get(finding.path)
        if fd is None:
            return False
        if mode == "file":
            return True
        if mode == "diff_context":
            return fd.in_hunk(finding.line, finding.line)
        return finding.line in fd.added

    def filter(self, findings: list[Finding], mode: str) -> list[Finding]:
        if mode not in FILTER_MODES:
            raise UsageError(f"--filter-mode: expected one of {', '.join(FILTER_MODES)}, got {mode!r}")
        return [f for f in findings if self.keep(f, mode)]


def parse_patch(path: str, patch: str) -> FileDiff:
    """One file's unified diff hunks (the `patch` field of the PR files API, or a section of `git diff`)."""
    fd = FileDiff(path)
    new_line = None
    for raw in patch.splitlines():
        m = _HUNK.match(raw)
        if m:
            start = int(m.group(1))
            count = int(m.group(2)) if m.group(2) is not None else 1
            if count:
                fd.hunks.append((start, start + count - 1))
            new_line = start
            continue
        if new_line is None or raw.startswith("\\"):  # "\ No newline at end of file"
            continue
        if raw.startswith("+"):
            fd.added.add(new_line)
            fd.text[new_line] = raw[1:]
            new_line += 1
        elif raw.startswith(" ") or raw == "":
            fd.text[new_line] = raw[1:]
            new_line += 1
        # "-" lines exist only in the old file
    return fd


def from_pr_files(files: list[dict]) -> PullDiff:
    """From GET /repos/{owner}/{repo}/pulls/{n}/files. Files without a patch (binary, too large) count as changed
    files with no known lines; removed files are left out."""
    diff = PullDiff()
    for f in files:
        if f.get("status") == "removed":
            continue
        diff.files[f["filename"]] = parse_patch(f["filename"], f.get("patch") or "")
    return diff


def from_git(base: str, cwd: str | None = None) -> PullDiff:
    """Changed lines between `base` and the working tree's HEAD (`git diff base...HEAD`), for local runs."""
    try:
        out = subprocess.run(
            ["git", "diff", "--no-color", "--no-ext-diff", "--unified=3", f"{base}...HEAD"],
            cwd=cwd, capture_output=True, text=True, check=True,
        ).stdout
    except FileNotFoundError:
        raise UsageError("--diff-base: git is not installed") from None
    except subprocess.CalledProcessError as exc:
        raise UsageError(f"--diff-base {base}: git diff failed: {exc.stderr.strip()[:200]}") from None
    diff = PullDiff()
    for section in re.split(r"^(?=diff --git )", out, flags=re.MULTILINE):
        m = re.search(r"^\+\+\+ b/(.+)$", section, flags=re.MULTILINE)
        if m:
            diff.files[m.group(1)] = parse_patch(m.group(1), section.split("\n+++ ", 1)[1])
    return diff
