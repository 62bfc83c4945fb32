"""Escaping for GitHub-flavoured Markdown: text from the repository must render as text.

What it prevents: a forged hidden marker (`<!-- gpulint:report -->` in a message), @mentions and #references that
would notify people, HTML injection, a `|` that breaks a table row, and backticks that close a code fence early.
Every function returns `Md`, a str that the Markdown templates print as is; any other value they print is escaped.
"""

from __future__ import annotations

import re


class Md(str):
    """Markdown that is already safe to print."""


# Characters with a meaning in Markdown (or in GitHub's autolinking) are backslash-escaped; the ones a backslash
# does not neutralise everywhere (HTML, mentions, issue references) become numeric character references.
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "@": "&#64;", "#": "&#35;", "\u200b": ""}
_BACKSLASHED = set("\\`*_[]!|~$")
_LONGEST_BACKTICKS = re.compile(r"`+")


def text(value: object) -> Md:
    """Inline text: one line, every Markdown meaning removed (safe in a table cell too)."""
    out = []
    for ch in re.sub(r"\s+", " ", str(value)):
        if ch in _ENTITIES:
            out.append(_ENTITIES[ch])
        elif ch in _BACKSLASHED:
            out.append("\\" + ch)
        else:
            out.append(ch)
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
    return Md("".join(_ENTITIES.get(ch, ch) for ch in re.sub(r"\s+", " ", str(value))).replace('"', "&quot;"))


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
    """[label](url) for http(s) URLs only; anything else (javascript:, relative junk) gives just the label."""
    if not url or not re.match(r"^https?://[^\s()<>]+$", url):
        return label
    return Md(f"[{label}]({url})")
