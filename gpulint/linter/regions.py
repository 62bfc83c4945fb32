"""Which functions of a file the rules need to see, decided on the text before anything is parsed.

Parsing with libcst is most of a lint's cost, and most of a large file cannot hold a finding: a model file is mostly
`__init__`s, docstrings and helpers that no trigger word appears in. So the engine parses a *pruned* copy of the
file, in which every top-level function or class, and every member of a top-level class, that is not needed is
replaced by an empty string literal spanning the same lines. Line numbers and columns are unchanged, so findings,
fixes and `noqa` comments line up with the real file.

A function (or method) is needed when an enabled rule may report in it (`Rule.may_report_in`: by default, when its
code, docstrings and comments removed, holds the rule's trigger words), when it holds a fact a rule reads elsewhere,
when the project model says it runs in the training step (it, or a function nested in it, is reached from a step
loop, or holds one), and when it sets an attribute that needed code reads (`self.mask = torch.zeros(...)`: the rules
learn there that `self.mask` is a tensor). Module-level statements are always kept.

The cut is made on lines, not on a parse: a definition starts at a line that begins with `def`, `async def`, `class`
or `@` at the indentation of its body, and ends before the next line at that indentation or less. Lines inside a
triple-quoted string (a multi-line f-string's text at column 0) neither start nor end a definition. Text that still
fools this either keeps more than needed, which is harmless, or leaves a string unterminated, which the engine
detects (the pruned text does not parse) and then parses the whole file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import takewhile
from typing import Callable

_DEFINITION = re.compile(r"@|def\s|async\s+def\s|class\s")  # used with match(line, indent)
_NAME = re.compile(r"^\s*(?:async\s+def|def|class)\s+(\w+)")
_MEMBER_INDENT = re.compile(r"^([ \t]+)(?:@|def\s|async\s+def\s|class\s)")
# No leading `\b` (it would stop the regex engine from skipping ahead to `self.`): `myself.x` counting is harmless.
_ATTRIBUTE_READ = re.compile(r"self\.(\w+)")
_ATTRIBUTE_SET = re.compile(r"self\.(\w+)\s*(?::[^=\n]*)?=(?!=)|register_(?:buffer|parameter)\(\s*[\"'](\w+)")
# Docstrings and other triple-quoted strings, then comments: trigger words there say nothing about the code.
_NOT_CODE = re.compile(r"(\"\"\"|''')[\s\S]*?\1|#[^\n]*")


@dataclass
class Cut:
    """What the engine parses (`kept`: the lines, each unneeded definition replaced by a string literal over its
    lines), and what it only checks for syntax errors (`left_out`: those definitions, with the headers of their
    classes; the rest blank). Both have the file's lines, so line and column numbers stay the file's."""

    kept: list[str]
    left_out: list[str]


@dataclass
class Unit:
    """A definition's lines [start, end) (0-based, decorators included), its name, and its class's index."""

    start: int
    end: int
    name: str
    owner: int | None = None  # index of the class unit this is a member of
    is_class: bool = False
    needed: bool = False


def code_of(text: str) -> str:
    """`text` without docstrings and comments (an approximation made for trigger matching only)."""
    return _NOT_CODE.sub(" ", text)


def prune(
    text: str,
    needs: Callable[[str, str, str], bool],
    hot: Callable[[str], bool],
    named: set[str] = frozenset(),
) -> Cut | None:
    """The file cut into what to parse (every unneeded definition stood in for) and what was left out, or None when
    every definition is needed.

    `needs(code, name, class_name)` says whether a rule looks at a definition, from its own code (docstrings and
    comments removed), its name and its class's name; `hot(qualname)` whether the project model says it (or a
    function nested in it) runs in the training step; `named` are definitions needed by name (`collate_fn=pad_batch`).
    A method setting an attribute needed code reads is needed too.
    """
    lines = text.split("\n")
    units = split_units(text, lines)
    if not units:
        return None
    codes = [code_of("\n".join(lines[u.start:u.end])) if not u.is_class else "" for u in units]
    class_names = [units[u.owner].name if u.owner is not None else "" for u in units]
    for unit, code, class_name in zip(units, codes, class_names):
        qualname = f"{class_name}.{unit.name}" if class_name else unit.name
        unit.needed = not unit.is_class and (
            hot(qualname) or unit.name in named or needs(code, unit.name, class_name)
        )
    _add_attribute_makers(units, codes)
    classes_needed = {unit.owner for unit in units if unit.needed}
    kept = list(lines)
    left_out = [""] * len(lines)
    blanked = False
    for index, unit in enumerate(units):
        if unit.is_class and index in classes_needed or unit.owner is not None and unit.owner not in classes_needed:
            continue  # a class some member of which is needed stays (its other members go), else it goes whole
        if not unit.needed:
            kept[unit.start:unit.end] = stand_in(lines[unit.start], unit.end - unit.start)
            left_out[unit.start:unit.end] = lines[unit.start:unit.end]
            blanked = True
    if not blanked:
        return None
    for index in classes_needed - {None}:  # members left out need their class's header (up to the first member)
        members = list(takewhile(lambda unit: unit.owner == index, units[index + 1:]))  # listed right after it
        if not all(member.needed for member in members):
            start, first = units[index].start, members[0].start
            left_out[start:first] = lines[start:first]
    return Cut(kept, left_out)


def stand_in(first_line: str, count: int) -> list[str]:
    """What replaces a definition's `count` lines: an empty string literal spanning them, at the definition's own
    indentation. The parser reads it as one token, where blank lines would each become a node (an eighth of a
    parse), and lines stay where they were."""
    if count < 2:
        return [""] * count
    indent = first_line[: len(first_line) - len(first_line.lstrip())]
    return [indent + '"""', *[""] * (count - 2), '"""']


def split_units(text: str, lines: list[str]) -> list[Unit]:
    """Top-level definitions, and the members of top-level classes (each class listed right before its members)."""
    units: list[Unit] = []
    in_string = _lines_in_strings(text, len(lines))
    for start, header, end in _blocks(lines, in_string, "", 0, len(lines)):
        name = _name_of(lines[header])
        is_class = lines[header].lstrip().startswith("class")
        members = _members(lines, in_string, header + 1, end) if is_class else []
        if not members:
            units.append(Unit(start, end, name, is_class=is_class))  # (`class DPOTrainer(Paired): pass`: a class)
            continue
        owner = len(units)
        units.append(Unit(start, end, name, is_class=True))
        units.extend(Unit(s, e, _name_of(lines[h]), owner=owner) for s, h, e in members)
    return units


# A triple quote; or what may hold one without opening a string: a comment, a one-line string.
_QUOTE = re.compile(r"(\"\"\"|\'\'\')|#[^\n]*|\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'")


def _lines_in_strings(text: str, count: int) -> bytearray:
    """For each line, 1 when it starts inside a triple-quoted string (the lines after the opening quote's, up to
    the closing quote's), else 0."""
    inside = bytearray(count)
    position = line = counted = 0
    while (match := _QUOTE.search(text, position)) is not None:
        quote = match.group(1)
        if quote is None:
            position = match.end()
            continue
        start = match.start()
        end = text.find(quote, match.end())
        while end != -1 and text[end - 1] == "\\":  # an escaped quote does not close the string
            end = text.find(quote, end + 1)
        if end == -1:
            break
        line += text.count("\n", counted, start)
        spanned = text.count("\n", start, end)
        inside[line + 1 : line + spanned + 1] = b"\x01" * spanned
        line, counted, position = line + spanned, end, end + 3
    return inside


def _members(lines: list[str], in_string: bytearray, start: int, end: int) -> list[tuple[int, int, int]]:
    for number in range(start, end):
        match = None if in_string[number] else _MEMBER_INDENT.match(lines[number])
        if match:
            return _blocks(lines, in_string, match.group(1), number, end)
    return []


def _blocks(lines: list[str], in_string: bytearray, indent: str, start: int, end: int) -> list[tuple[int, int, int]]:
    """(start, header line, end) of each definition at exactly `indent` within lines[start:end], `end` excluded."""
    blocks = []
    number = start
    width = len(indent)
    while number < end:
        line = lines[number]
        if line.startswith(indent) and not in_string[number] and _DEFINITION.match(line, width):
            first, header = number, _header_line(lines, number, end)
            number = header + 1
            while number < end and (in_string[number] or not _ends_block(lines[number], width)):
                number += 1
            blocks.append((first, header, number))
        else:
            number += 1
    return blocks


def _ends_block(line: str, width: int) -> bool:
    """Does this line, after a definition's header, start something outside its body?"""
    stripped = line.lstrip()
    if not stripped or stripped[0] == "#":
        return False
    if stripped[0] in ")]}":  # a bracket closed at the definition's own indentation still belongs to it
        return False
    return len(line) - len(stripped) <= width


def _header_line(lines: list[str], start: int, end: int) -> int:
    """The `def`/`class` line of a definition, past its decorators (a decorator may span lines)."""
    number = start
    while number < end - 1 and not _NAME.match(lines[number]):
        number += 1
    return number


def _name_of(header: str) -> str:
    match = _NAME.match(header)
    return match.group(1) if match else ""


def _add_attribute_makers(units: list[Unit], codes: list[str]) -> None:
    """Keep the methods that set an attribute needed code reads: the rules learn there what `self.mask` holds (a
    tensor made with torch, a buffer, a constant length such as `self.max_len = 512`)."""
    read = {name for unit, code in zip(units, codes) if unit.needed for name in _ATTRIBUTE_READ.findall(code)}
    if not read:
        return
    for unit, code in zip(units, codes):
        if not unit.needed and not unit.is_class and "self" in code:
            made = {plain or registered for plain, registered in _ATTRIBUTE_SET.findall(code)}
            unit.needed = bool(made & read)
