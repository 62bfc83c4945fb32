"""Suppressions: `# noqa: GPL401,GPL402` (bare `# noqa` silences all) on any line a finding spans, and a file-level
`# gpulint: noqa` (optionally `: GPL4`) on a line of its own. Codes match by prefix, as in `select`.

A line inside a multi-line string (a triple-quoted f-string holding `{loss.item()}`) cannot take a comment, so a
`# noqa` on the line where that string ends covers the findings inside it (as in ruff).

The directives themselves are checked too (GPL003): a GPL code that names no rule, or one that suppressed nothing in
this run, is reported with a fix that removes it. Codes of other tools (`E501`) and bare `# noqa` are left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulint.linter.finding import Edit, Finding, Fix, rule_url

# A code is a word (`GPL401`, `E501`; a mistyped `GPL4O1` stays one unknown code rather than `GPL4` and a tail).
_CODES = r"(?P<codes>[A-Za-z][A-Za-z0-9]*(?:\s*,\s*[A-Za-z][A-Za-z0-9]*)*)"
LINE_NOQA = re.compile(r"#\s*noqa(?::\s*" + _CODES + r")?", re.IGNORECASE)
FILE_NOQA = re.compile(r"^\s*#\s*gpulint:\s*noqa(?::\s*" + _CODES + r")?\s*$", re.IGNORECASE | re.MULTILINE)
ALL = frozenset({"*"})
UNUSED_NOQA_CODE, UNUSED_NOQA_NAME = "GPL003", "unused-noqa"
OWN_PREFIX = "GPL"


def parse_codes(text: str | None) -> frozenset[str]:
    if not text:
        return ALL
    return frozenset(c.strip().upper() for c in text.split(",") if c.strip())


def matches(code: str, codes: frozenset[str]) -> bool:
    return codes is ALL or "*" in codes or any(code.startswith(c) for c in codes)


@dataclass
class Directive:
    """One `# noqa` comment: where it is (1-based line, 0-based [start, end) columns) and the codes it lists in order
    (empty for a bare `# noqa`)."""

    line: int
    start: int
    end: int
    codes: tuple[str, ...]
    used: set[str] = field(default_factory=set)  # the listed codes that suppressed a finding


@dataclass
class Suppressions:
    directives: dict[int, Directive] = field(default_factory=dict)
    file_codes: frozenset[str] | None = None  # None: no file-level suppression
    text: str = ""
    _tokens: tuple[dict[int, int], dict[int, int]] | None = None  # `_scan(text)`, made on first need

    @classmethod
    def from_text(cls, text: str) -> "Suppressions":
        result = cls(text=text)
        if "noqa" not in text and "NOQA" not in text:
            return result
        file_match = FILE_NOQA.search(text)
        if file_match:
            result.file_codes = parse_codes(file_match.group("codes"))
        for number, line in enumerate(text.splitlines(), start=1):
            if "#" in line:
                match = LINE_NOQA.search(line)
                if match and not FILE_NOQA.match(line):
                    codes = match.group("codes")
                    listed = tuple(c.strip().upper() for c in codes.split(",") if c.strip()) if codes else ()
                    result.directives[number] = Directive(number, match.start(), match.end(), listed)
        return result

    def suppressed(self, code: str, line: int, end_line: int) -> bool:
        """Is a finding of `code` over lines [line, end_line] suppressed? Marks the directive codes that matched."""
        if self.file_codes is not None and matches(code, self.file_codes):
            return True
        if not self.directives:
            return False
        lines = [n for n in range(line, end_line + 1) if n in self.directives]
        if max(self.directives) > end_line:  # a directive below could close a string the finding is inside
            string_end = self._scanned()[0].get(end_line)
            if string_end is not None and string_end in self.directives:
                lines.append(string_end)
        hit = False
        for number in lines:
            directive = self.directives[number]
            if not directive.codes:
                hit = True
                continue
            for listed in directive.codes:
                if code.startswith(listed):
                    directive.used.add(listed)
                    hit = True
        return hit

    def is_comment(self, directive: Directive) -> bool:
        """Is the directive in a comment (not in a string that happens to say `# noqa`)?"""
        comment_start = self._scanned()[1].get(directive.line)
        return comment_start is not None and comment_start <= directive.start

    def _scanned(self) -> tuple[dict[int, int], dict[int, int]]:
        if self._tokens is None:
            self._tokens = _scan(self.text)
        return self._tokens


def check_directives(path: str, findings: list[Finding], suppressions: Suppressions, enabled: set[str]) -> list[Finding]:
    """`findings` with GPL003's added when that rule is enabled (nothing is judged in a file that did not parse)."""
    if UNUSED_NOQA_CODE not in enabled or any(f.code == "GPL001" for f in findings):
        return findings
    if not any(c.startswith(OWN_PREFIX) for d in suppressions.directives.values() for c in d.codes):
        return findings  # most `# noqa` comments are other tools' (`E501`): no need to tokenize the file
    from gpulint.linter.rule import rules_by_code

    extra = unused_directives(path, suppressions, enabled, set(rules_by_code()))
    return sorted(findings + extra, key=Finding.sort_key) if extra else findings


def unused_directives(path: str, suppressions: Suppressions, enabled: set[str], known: set[str]) -> list[Finding]:
    """GPL003 findings for the `# noqa` directives of a linted file: GPL codes that name no rule, and codes whose every
    rule ran on the file and that suppressed nothing. Codes of other tools, bare `# noqa`, and codes covering a rule
    that did not run (or an engine code, GPL0xx) are never judged."""
    findings = []
    lines = suppressions.text.splitlines()
    for directive in suppressions.directives.values():
        if not suppressions.is_comment(directive) or any(UNUSED_NOQA_CODE.startswith(c) for c in directive.codes):
            continue  # the directive suppresses this very rule
        unknown, unused = [], []
        for listed in directive.codes:
            if not listed.startswith(OWN_PREFIX) or listed in directive.used:
                continue
            covered = {c for c in known if c.startswith(listed)}
            if not covered:
                unknown.append(listed)
            elif covered <= enabled and not any(c.startswith("GPL0") for c in covered):
                unused.append(listed)
        if unknown or unused:
            findings.append(_unused_finding(path, lines[directive.line - 1], directive, unknown, unused))
    return findings


def _unused_finding(path: str, line: str, directive: Directive, unknown: list[str], unused: list[str]) -> Finding:
    parts = []
    if unused:
        parts.append("suppresses nothing: " + ", ".join(f"`{c}`" for c in unused))
    if unknown:
        parts.append("unknown rule code" + "s" * (len(unknown) > 1) + ": " + ", ".join(f"`{c}`" for c in unknown))
    keep = [c for c in directive.codes if c not in unknown and c not in unused]
    return Finding(
        code=UNUSED_NOQA_CODE,
        name=UNUSED_NOQA_NAME,
        message=f"`noqa` directive {'; '.join(parts)}",
        severity="warning",
        path=path,
        line=directive.line,
        column=directive.start + 1,
        end_line=directive.line,
        end_column=directive.end + 1,
        fix=Fix("safe", (_directive_edit(line, directive, keep),)),
        url=rule_url(UNUSED_NOQA_CODE, UNUSED_NOQA_NAME),
    )


def _directive_edit(line: str, directive: Directive, keep: list[str]) -> Edit:
    """The edit that leaves only `keep` in the directive, or removes the directive when nothing is left."""
    if keep:
        return Edit(directive.line, directive.start + 1, directive.line, directive.end + 1, f"# noqa: {', '.join(keep)}")
    body = line.rstrip("\r\n")
    start = len(body[: directive.start].rstrip())
    tail = body[directive.end:]
    # Text after the directive that is not a comment of its own was the directive's explanation: it goes too.
    end = len(body) if tail.strip() and not tail.lstrip().startswith("#") else directive.end
    return Edit(directive.line, start + 1, directive.line, end + 1, "")


def add_noqa(text: str, items: list[tuple[int, str]]) -> tuple[str, int, dict[int, list[str]]]:
    """Add `# noqa: CODE` (merged with an existing noqa list) at the end of each (line, code). A finding on a line
    inside a multi-line string gets its comment where the string ends, which covers it (see `Suppressions`). Returns
    the new text, how many lines changed, and the lines that could take no comment, with the codes left unsuppressed
    there (a multi-line string ends on a line where another begins)."""
    ends, _ = _scan(text)
    wanted: dict[int, set[str]] = {}
    for line, code in items:
        wanted.setdefault(ends.get(line, line), set()).add(code)
    lines = text.splitlines(keepends=True)
    changed, skipped = 0, {}
    for number, codes in sorted(wanted.items()):
        if not 0 < number <= len(lines):
            continue
        if number in ends:
            skipped[number] = sorted(codes)
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
    return "".join(lines), changed, skipped


def _scan(text: str) -> tuple[dict[int, int], dict[int, int]]:
    """(string ends, comments). For each line that ends inside a multi-line string (and so cannot take a comment), the
    line where the outermost such string ends; and for each line with a comment, the column where it starts. Python
    3.12 splits an f-string into FSTRING_START ... FSTRING_END tokens; earlier versions give one STRING token."""
    import io
    import tokenize

    fstring_start = getattr(tokenize, "FSTRING_START", None)
    fstring_end = getattr(tokenize, "FSTRING_END", None)
    ends: dict[int, int] = {}
    comments: dict[int, int] = {}
    opened: list[int] = []  # start lines of the f-strings we are inside
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == fstring_start:
                opened.append(token.start[0])
            elif token.type == fstring_end and opened:
                start = opened.pop()
                if not opened:
                    ends.update((n, token.end[0]) for n in range(start, token.end[0]))
            elif token.type == tokenize.STRING and not opened:
                ends.update((n, token.end[0]) for n in range(token.start[0], token.end[0]))
            elif token.type == tokenize.COMMENT:
                comments[token.start[0]] = token.start[1]
    except (tokenize.TokenError, SyntaxError):
        pass
    return ends, comments
