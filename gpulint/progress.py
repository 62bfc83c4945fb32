"""A one-line progress counter for long work, on a terminal only.

`checking 1,200/3,255 files (37%), about 40 s left` is redrawn in place on stderr at most ten times a second and
erased when the work is done, so that the report that follows starts on a clean line. Where stderr is not a terminal
(a pipe, a CI log, a file), or with `-q`, it prints nothing at all.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO

REDRAW_EVERY_S = 0.1
ETA_AFTER_S = 1.0  # an estimate from the first instants of a run is noise


class Progress:
    def __init__(
        self,
        label: str,
        total: int,
        unit: str = "files",
        enabled: bool = True,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = sys.stderr if stream is None else stream
        self.active = enabled and total > 0 and _is_terminal(self.stream)
        self.clock = clock
        self.started = clock()
        self.drawn_at: float | None = None
        self.done = 0
        self.width = 0  # of the last line drawn, to erase it

    def advance(self, count: int = 1) -> None:
        self.done += count
        if not self.active:
            return
        now = self.clock()
        if self.drawn_at is None or now - self.drawn_at >= REDRAW_EVERY_S or self.done >= self.total:
            self._draw(now)

    def close(self) -> None:
        """Erase the line (the report follows on a clean line)."""
        if self.active and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _draw(self, now: float) -> None:
        line = f"{self.label} {self.done:,}/{self.total:,} {self.unit} ({100 * self.done // self.total}%)"
        elapsed = now - self.started
        if elapsed >= ETA_AFTER_S and 0 < self.done < self.total:
            line += f", about {_duration(elapsed / self.done * (self.total - self.done))} left"
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)
        self.drawn_at = now


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
