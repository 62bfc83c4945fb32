"""Suppressions: `# noqa: GPL401,GPL402` (bare `# noqa` silences all) on any line a finding spans, and a file-level
`# gpulint: noqa` (optionally `: GPL4`) on a line of its own. Codes match by prefix, as in `select`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_CODES = r"(?P<codes>[A-Za-z]+[0-9]*(?:\s*,\s*[A-Za-z]+[0-9]*)*)"
LINE_NOQA = re.compile(r"#\s*noqa(?::\s*" + _CODES + r")?", re.IGNORECASE)
FILE_NOQA = re.compile(r"^\s*#\s*gpulint:\s*noqa(?::\s*" + _CODES + r")?\s*$", re.IGNORECASE | re.MULTILINE)
ALL = frozenset({"*"})


def parse_codes(text: str | None) -> frozenset[str]:
    if not text:
        return ALL
    return frozenset(c.strip().upper() for c in text.split(",") if c.strip())


def matches(code: str, codes: frozenset[str]) -> bool:
    return codes is ALL or "*" in codes or any(code.startswith(c) for c in codes)


@dataclass
class Suppressions:
    by_line: dict[int, frozenset[str]] = field(default_factory=dict)
    file_codes: frozenset[str] | None = None  # None: no file-level suppression

    @classmethod
    def from_text(cls, text: str) -> "Suppressions":
        result = cls()
        if "noqa" not in text and "NOQA" not in text:
            return result
        file_match = FILE_NOQA.search(text)
        if file_match:
            result.file_codes = parse_codes(file_match.group("codes"))
        for number, line in enumerate(text.splitlines(), start=1):
            if "#" in line:
                match = LINE_NOQA.search(line)
                if match and not FILE_NOQA.match(line):
                    result.by_line[number] = parse_codes(match.group("codes"))
        return result

    def suppressed(self, code: str, line: int, end_line: int) -> bool:
        if self.file_codes is not None and matches(code, self.file_codes):
            return True
        return any(matches(code, self.by_line[n]) for n in range(line, end_line + 1) if n in self.by_line)


def add_noqa(text: str, items: list[tuple[int, str]]) -> tuple[str, int]:
    """Add `# noqa: CODE` (merged with an existing noqa list) at the end of each (line, code). Lines that end inside a
    multi-line string cannot take a comment and are left alone. Returns the new text and how many lines changed."""
    wanted: dict[int, set[str]] = {}
    for line, code in items:
        wanted.setdefault(line, set()).add(code)
    blocked = _lines_inside_strings(text)
    lines = text.splitlines(keepends=True)
    changed = 0
    for number, codes in sorted(wanted.items()):
        if number in blocked or not 0 < number <= len(lines):
            continue
        raw = lines[number - 1]
        body = raw.rstrip("\r\n")
        ending = raw[len(body):]
        match = LINE_NOQA.search(body)
        if match:
            existing = parse_codes(match.group("codes"))
            if existing is ALL or codes <= existing:
                continue
            merged = ", ".join(sorted(existing | codes))
            body = body[: match.start()] + f"# noqa: {merged}" + body[match.end():]
        else:
            body = f"{body}  # noqa: {', '.join(sorted(codes))}"
        lines[number - 1] = body + ending
        changed += 1
    return "".join(lines), changed


def _lines_inside_strings(text: str) -> set[int]:
    import io
    import tokenize

    blocked: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.STRING and token.end[0] > token.start[0]:
                blocked.update(range(token.start[0], token.end[0]))
            elif token.type == getattr(tokenize, "FSTRING_MIDDLE", -1) and token.end[0] > token.start[0]:
                blocked.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        pass
    return blocked
