"""The plan as a patch: the diff `gpulint plan --patch` prints, read as untrusted data and offered in the PR.

The comment shows it under "Suggested patches" with the figures it buys; `gpulint bot review` offers each of its
changes as a `suggestion` block where it touches lines the pull request added (a suggestion can only replace lines
of the PR's diff). The file comes from the analysis run's artifact: its size, its text and its paths are checked,
and only the shape of a unified diff is accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from gpulint.bot.data import MAX_PATH, BotInputError
from gpulint.bot.diff import FileDiff

MAX_PATCH_BYTES = 1024 * 1024  # `gpulint plan --patch` writes a few lines per file
MAX_FILES = 20
MAX_HUNKS = 200
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_PLAIN_PATH = re.compile(r"[\w.@+=,~ -]+(?:/[\w.@+=,~ -]+)*")


@dataclass(frozen=True)
class Hunk:
    old_start: int  # 1-based; a hunk that only adds lines to an empty file has 0
    old: tuple[str, ...]  # context and removed lines, in order
    new: tuple[str, ...]  # context and added lines, in order


@dataclass
class FilePatch:
    path: str
    hunks: list[Hunk] = field(default_factory=list)


@dataclass
class PlanPatch:
    text: str
    files: list[FilePatch]


def _path(header: str, where: str) -> str:
    name = header.split("\t", 1)[0].strip()
    if name.startswith(("a/", "b/")):
        name = name[2:]
    if len(name) > MAX_PATH or not _PLAIN_PATH.fullmatch(name) or ".." in name.split("/"):
        raise BotInputError(f"{where}: {name[:80]!r} is not a plain relative path")
    return name


def parse(text: str, where: str) -> list[FilePatch]:
    files: list[FilePatch] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- "):
            if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
                raise BotInputError(f"{where}: line {i + 1}: '---' without a '+++' line after it")
            files.append(FilePatch(_path(lines[i + 1][4:], f"{where}: line {i + 2}")))
            if len(files) > MAX_FILES:
                raise BotInputError(f"{where}: more than {MAX_FILES} files")
            i += 2
            continue
        m = _HUNK.match(line)
        if m:
            if not files:
                raise BotInputError(f"{where}: line {i + 1}: a hunk before any file header")
            old_count = int(m.group(2)) if m.group(2) is not None else 1
            new_count = int(m.group(4)) if m.group(4) is not None else 1
            old, new = [], []
            i += 1
            while i < len(lines) and (len(old) < old_count or len(new) < new_count):
                body = lines[i]
                if body.startswith("\\"):  # "\ No newline at end of file"
                    i += 1
                    continue
                kind, content = body[:1], body[1:]
                if kind not in (" ", "-", "+"):
                    raise BotInputError(f"{where}: line {i + 1}: the hunk ends before its {old_count} old and "
                                        f"{new_count} new lines")
                if kind in (" ", "-"):
                    old.append(content)
                if kind in (" ", "+"):
                    new.append(content)
                i += 1
            if len(old) != old_count or len(new) != new_count:
                raise BotInputError(f"{where}: the hunk at line {m.group(0)!r} is cut short")
            files[-1].hunks.append(Hunk(int(m.group(1)), tuple(old), tuple(new)))
            if sum(len(f.hunks) for f in files) > MAX_HUNKS:
                raise BotInputError(f"{where}: more than {MAX_HUNKS} hunks")
            continue
        i += 1  # `diff --git`, `index`, blank lines between files
    if not any(f.hunks for f in files):
        raise BotInputError(f"{where}: no hunk: not the output of `gpulint plan --patch`")
    return files


def load(path: str | Path) -> PlanPatch:
    p = Path(path)
    where = f"{p}: plan patch"
    try:
        size = p.stat().st_size
        if size > MAX_PATCH_BYTES:
            raise BotInputError(f"{where} is {size} bytes, over the {MAX_PATCH_BYTES} byte limit")
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise BotInputError(f"{where} is not UTF-8 text") from None
    except OSError as exc:
        raise BotInputError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    if "\0" in text:
        raise BotInputError(f"{where} is not text (it holds a NUL byte)")
    return PlanPatch(text.replace("\r\n", "\n"), parse(text.replace("\r\n", "\n"), where))


@dataclass(frozen=True)
class Suggestion:
    path: str
    start_line: int
    line: int
    replacement: str


def _core(hunk: Hunk) -> tuple[int, int, list[str]] | None:
    """(first old line, last old line, their replacement) of a hunk without its unchanged edges; a pure insertion
    is anchored on the line above it (a suggestion replaces at least one line)."""
    old, new = list(hunk.old), list(hunk.new)
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    first = hunk.old_start + head
    last = hunk.old_start + len(old) - tail - 1
    replacement = new[head:len(new) - tail]
    if last < first:  # nothing removed: keep the line above and insert after it
        if head == 0:
            return None
        first = last = first - 1
        replacement = [old[head - 1], *replacement]
    return first, last, replacement


def suggestions(patch: PlanPatch, files: dict[str, FileDiff]) -> list[Suggestion]:
    """The patch's changes that touch lines the PR added, as suggestions on the PR's new file: every line they
    replace must be in one hunk of the PR's diff, and read there exactly as the patch expects."""
    out = []
    for fp in patch.files:
        fd = files.get(fp.path)
        if fd is None:
            continue
        for hunk in fp.hunks:
            core = _core(hunk)
            if core is None:
                continue
            first, last, replacement = core
            if not fd.in_hunk(first, last) or not any(n in fd.added for n in range(first, last + 1)):
                continue
            offset = first - hunk.old_start
            expected = hunk.old[offset:offset + last - first + 1]
            if tuple(fd.text.get(n) for n in range(first, last + 1)) != expected:
                continue  # the PR's file is not the one the patch was made from
            out.append(Suggestion(fp.path, first, last, "\n".join(replacement)))
    return out
