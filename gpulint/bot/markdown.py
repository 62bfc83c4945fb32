"""Escaping for GitHub-flavoured Markdown: text from the repository must render as text.

What it prevents: a forged hidden marker (`<!-- gpulint:report -->` in a message), HTML injection, a `|` that breaks a
table row, backticks that close a code fence early, links under the bot's name, and notifications: @mentions, team
mentions, issue references (`#12`, `GH-12`, `org/repo#12`) and commit SHAs.

GitHub decodes character references before it looks for mentions and references, so `&#64;` would still ping. The
bots that quote foreign text (Dependabot, Renovate) insert a zero-width space where GitHub's matcher stops: after `@`
and `#`, after `GH-`, and inside any run of 7 or more hex digits (a SHA needs 7 in a row). The text reads the same.
URLs are shown as code, which GitHub neither autolinks nor scans: a link under the bot's name goes only where gpulint
itself points (its rule docs, the repository's own lines). Text inside code spans is code and is left as written.

Every function returns `Md`, a str that the Markdown templates print as is; any other value they print is escaped.
"""

from __future__ import annotations

import re


class Md(str):
    """Markdown that is already safe to print."""


ZWSP = "\u200b"
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_BACKSLASHED = set("\\`*_[]!|~$")
_LONGEST_BACKTICKS = re.compile(r"`+")
# Where GitHub would see a mention, a reference or a SHA: break each right where its matcher stops.
_REFERENCE = re.compile(r"[@#]|(?<![A-Za-z0-9])GH-(?=\d)|[0-9A-Fa-f]{7,}", re.IGNORECASE)
# What GitHub autolinks in text: a scheme or `www.` up to the next space (trailing punctuation included: harmless).
_URL = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*://|www\.)[^\s<>`]+", re.IGNORECASE)


def _break_reference(m: re.Match) -> str:
    found = m.group(0)
    if found in "@#" or found.upper() == "GH-":
        return found + ZWSP
    return ZWSP.join(found[i:i + 6] for i in range(0, len(found), 6))  # no 7 hex digits in a row


def neutralise(value: str) -> str:
    """Plain text that pings nobody and references nothing (no other change)."""
    return _REFERENCE.sub(_break_reference, value)


def _escape(chunk: str) -> str:
    out = []
    for ch in neutralise(chunk):
        if ch in _ENTITIES:
            out.append(_ENTITIES[ch])
        elif ch in _BACKSLASHED:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def text(value: object) -> Md:
    """Inline text: one line, every Markdown meaning removed (safe in a table cell too); URLs become code."""
    flat = re.sub(r"\s+", " ", str(value))
    out, pos = [], 0
    for m in _URL.finditer(flat):
        out += [_escape(flat[pos : m.start()]), code(m.group(0))]
        pos = m.end()
    out.append(_escape(flat[pos:]))
    return Md("".join(out))


_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def message(value: object) -> Md:
    """A rule's message: its `code spans` stay code (a span cannot carry a mention or a marker), the rest is text."""
    flat = " ".join(str(value).split())
    out, pos = [], 0
    for m in _CODE_SPAN.finditer(flat):
        out += [text(flat[pos : m.start()]), code(m.group(2))]
        pos = m.end()
    out.append(text(flat[pos:]))
    return Md("".join(out))


def html(value: object) -> Md:
    """Text inside an HTML block (a <summary> line), where Markdown is not parsed: entities only."""
    flat = neutralise(re.sub(r"\s+", " ", str(value)))
    return Md("".join(_ENTITIES.get(ch, ch) for ch in flat).replace('"', "&quot;"))


def _fence_length(content: str, minimum: int) -> int:
    runs = [len(m) for m in _LONGEST_BACKTICKS.findall(content)]
    return max([minimum - 1, *runs]) + 1


def code(value: object) -> Md:
    """An inline code span that no backtick inside can close; `|` escaped so it is safe in a table cell."""
    content = " ".join(str(value).split())
    ticks = "`" * _fence_length(content, 1)
    pad = " " if content.startswith("`") or content.endswith("`") or not content.strip() else ""
    return Md(f"{ticks}{pad}{content.replace('|', chr(92) + '|')}{pad}{ticks}")


def fence(content: str, info: str = "") -> Md:
    """A fenced code block longer than any backtick run inside it (a ```suggestion block, a diff)."""
    ticks = "`" * _fence_length(content, 3)
    body = content if content.endswith("\n") or not content else content + "\n"
    return Md(f"{ticks}{info}\n{body}{ticks}")


def link(label: Md, url: str | None) -> Md:
    """[label](url) for http(s) URLs only; anything else (javascript:, relative junk) gives just the label. Only
    URLs that gpulint builds itself reach here (rule docs, lines of the repository)."""
    if not url or not re.match(r"^https?://[^\s()<>]+$", url):
        return label
    return Md(f"[{label}]({url})")
