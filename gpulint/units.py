"""Bytes and times as people write and read them: the one size parser and the one formatter.

Every figure gpulint shows (the CLI's text, the plan reports, the PR comment, the HTML report, the charts) is
formatted here, so one peak prints the same everywhere.

Sizes are read in either family, upper or lower case, with or without a space:

    24GB  24 GB  24G  24g  24gb   = 24 * 10**9 bytes     (decimal: kB/K, MB/M, GB/G, TB/T)
    24GiB 24 GiB 24Gi 24gi        = 24 * 2**30 bytes     (binary: KiB/Ki, MiB/Mi, GiB/Gi, TiB/Ti)
    2.4e10  24000000000           = bytes

A bare `G` (`M`, `K`, `T`) is read as decimal, as Kubernetes reads it: of the two readings it is the smaller, so a
plan made for `24G` fits whichever the writer meant. Write `24GiB` (or `24Gi`) for 24 * 2**30 bytes.

A size remembers the unit it was written in (`Size.unit`, canonical: `G` and `gb` become `GB`), so a budget is shown
the way its user wrote it, with the peaks beside it in the same unit (`display_unit`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

DECIMAL = ("B", "kB", "MB", "GB", "TB")
BINARY = ("B", "KiB", "MiB", "GiB", "TiB")
SCALE = {"B": 1, "kB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
         "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
UNITS = tuple(SCALE)
# What a user may write (lower-cased) -> the canonical unit.
_SPELLINGS = {
    "": "B", "b": "B",
    "k": "kB", "kb": "kB", "m": "MB", "mb": "MB", "g": "GB", "gb": "GB", "t": "TB", "tb": "TB",
    "ki": "KiB", "kib": "KiB", "mi": "MiB", "mib": "MiB", "gi": "GiB", "gib": "GiB", "ti": "TiB", "tib": "TiB",
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")
NONE = "–"  # what a missing figure shows


@dataclass(frozen=True)
class Size:
    """A byte count and the unit it was written in (`B` for a plain number)."""

    bytes: int
    unit: str


def parse_size(value: object) -> Size:
    """`24GB`, `24 GB`, `24G`, `24g` -> 24e9 bytes; `24GiB`, `24Gi` -> 24 * 2**30; `1.5e9` -> 1.5e9 bytes.

    Raises ValueError with a message fit to follow the name of the field (`plan.budget: <message>`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a size such as 24GB or 24GiB, got {value!r}")  # noqa: TRY004 - one type
    match = _SIZE.match(repr(value) if isinstance(value, float) else str(value))
    unit = _SPELLINGS.get(match.group(2).lower()) if match else None
    if unit is None:
        raise ValueError(f"cannot read {value!r}; write a size such as 24GB (24e9 B), 24GiB (24 * 2^30 B) or 512MiB")
    nbytes = int(float(match.group(1)) * SCALE[unit])
    if nbytes <= 0:
        raise ValueError(f"must be positive, got {value!r}")
    return Size(nbytes, unit)


def canonical_unit(unit: str | None) -> str | None:
    """The canonical name of a unit as written (`G` -> `GB`), or None when it is no unit."""
    if unit is None:
        return None
    return unit if unit in SCALE else _SPELLINGS.get(unit.lower())


def auto_unit(n: float, family: tuple[str, ...] = BINARY) -> str:
    """The largest unit of `family` in which `n` is at least 1."""
    for unit in reversed(family):
        if abs(n) >= SCALE[unit]:
            return unit
    return "B"


def display_unit(budget_unit: str | None, budget_bytes: float | None = None, *values: float | None) -> str:
    """The one unit a report shows its budget and peaks in: the budget's own, as its user wrote it; for a plan that
    does not record it, the unit the budget reads best in (`written_unit`); with no budget, the binary unit that
    suits the largest value."""
    unit = canonical_unit(budget_unit)
    if unit is not None and unit != "B":
        return unit
    if budget_bytes:
        return written_unit(budget_bytes)
    return auto_unit(max((abs(v) for v in values if v is not None), default=0))


def written_unit(n: float) -> str:
    """The largest unit in which `n` bytes is a number of at most two decimals (24e9 -> GB, 200 * 2**20 -> MiB,
    1.5e9 -> GB): the unit a size was most likely written in, for plans that did not record it."""
    for unit in ("TiB", "TB", "GiB", "GB", "MiB", "MB", "KiB", "kB"):
        value = n / SCALE[unit]
        if value >= 1 and abs(value * 100 - round(value * 100)) < 1e-6:
            return unit
    return auto_unit(n)


def family(unit: str | None) -> tuple[str, ...]:
    """DECIMAL for kB/MB/GB/TB, else BINARY (the default of PyTorch's memory reports and nvidia-smi)."""
    return DECIMAL if canonical_unit(unit) in DECIMAL[1:] else BINARY


def format_bytes(n: float | None, unit: str | None = None, *, like: str | None = None) -> str:
    """`n` bytes in `unit` (`289.19 MiB`), or, without one, in the largest unit of `like`'s family (binary by
    default) in which it is at least 1. Two decimals from 1 up, three significant digits below 1."""
    if n is None:
        return NONE
    unit = canonical_unit(unit) or auto_unit(n, family(like))
    if unit == "B":
        return f"{round(n):,} B"
    return f"{number(n / SCALE[unit])} {unit}"


def format_time(seconds: float | None) -> str:
    """Milliseconds from 10 µs to 10 s (`1.77 ms`, `0.0450 ms`, `2,450.00 ms`: step times compare in one unit),
    seconds above (`12.50 s`), microseconds below (`4.50 µs`: a kernel launch)."""
    if seconds is None:
        return NONE
    if abs(seconds) >= 10:
        return f"{number(seconds)} s"
    if 0 < abs(seconds) < 1e-5:
        return f"{number(seconds * 1e6)} µs"
    return f"{number(seconds * 1e3)} ms"


def number(x: float) -> str:
    """Two decimals from 1 up (`289.19`, `1,024.00`), three significant digits below 1 (`0.0450`), `0` for 0."""
    if x == 0:
        return "0"
    if abs(x) >= 1:
        return f"{x:,.2f}"
    decimals = min(9, 2 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"
