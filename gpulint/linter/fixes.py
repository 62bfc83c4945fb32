"""Applying fixes: text edits from findings, repeated until stable, re-parsed before anything is written."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable, Sequence

import libcst as cst

from gpulint.linter.finding import Edit, Finding

MAX_PASSES = 10


def line_offsets(text: str) -> list[int]:
    """Offset of the start of each line (index 0 is line 1)."""
    offsets = [0]
    for index, char in enumerate(text):
        if char == "\n":
            offsets.append(index + 1)
    return offsets


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """Apply non-overlapping edits (1-based, end-exclusive). Overlapping edits after the first are skipped; the next
    pass re-lints and picks them up if they still apply."""
    offsets = line_offsets(text)

    def offset(line: int, column: int) -> int:
        return offsets[line - 1] + column - 1

    spans = sorted(((offset(e.line, e.column), offset(e.end_line, e.end_column), e.content) for e in edits))
    out, cursor = [], 0
    for start, end, content in spans:
        if start < cursor:
            continue
        out.append(text[cursor:start])
        out.append(content)
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


def fixable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (unsafe or finding.fix.applicability == "safe")


def fix_text(
    text: str, lint: Callable[[str], Sequence[Finding]], unsafe: bool, newline: str = "\n"
) -> tuple[str, list[str]]:
    """Lint and apply fixes until nothing fixable is left or MAX_PASSES is reached.

    Returns the new text and the codes of the fixes applied (one per fix). A pass whose result does not parse is discarded, and fixing
    stops there: gpulint never writes code it cannot parse.
    """
    applied: list[str] = []
    for _ in range(MAX_PASSES):
        findings = [f for f in lint(text) if fixable(f, unsafe)]
        if not findings:
            break
        edits, codes = _first_fix_per_region(findings)
        if newline != "\n":  # keep the file's newline style in inserted lines
            edits = [replace(e, content=e.content.replace("\r\n", "\n").replace("\n", newline)) for e in edits]
        new_text = apply_edits(text, edits)
        if new_text == text or not parses(new_text):
            break
        applied += codes
        text = new_text
    return text, applied


def _first_fix_per_region(findings: Sequence[Finding]) -> tuple[list[Edit], list[str]]:
    """Edits of whole fixes that do not overlap an earlier fix (a fix is applied completely or not at all), and the
    codes of the findings they fix."""
    taken: list[tuple[int, int, int, int]] = []
    chosen: list[Edit] = []
    codes: list[str] = []
    for finding in sorted(findings, key=Finding.sort_key):
        edits = finding.fix.edits  # type: ignore[union-attr]
        spans = [(e.line, e.column, e.end_line, e.end_column) for e in edits]
        if any(_overlaps(s, t) for s in spans for t in taken):
            continue
        taken.extend(spans)
        chosen.extend(edits)
        codes.append(finding.code)
    return chosen, codes


def _overlaps(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    a_start, a_end = (a[0], a[1]), (a[2], a[3])
    b_start, b_end = (b[0], b[1]), (b[2], b[3])
    if a_start == a_end or b_start == b_end:  # insertions collide only when at the same point
        return a_start == b_start
    return a_start < b_end and b_start < a_end


def parses(text: str) -> bool:
    try:
        cst.parse_module(text)
    except Exception:
        return False
    return True
