"""One-line progress for long work, on a terminal only: a counter of files (Progress), numbered phases (Phases).

`checking 1,200/3,255 files (37%), about 40 s left` is redrawn in place on stderr at most ten times a second and
erased when the work is done, so that the report that follows starts on a clean line. Where stderr is not a terminal
(a pipe, a CI log, a file), or with `-q`, it prints nothing at all.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, TextIO

REDRAW_EVERY_S = 0.1
ETA_AFTER_S = 1.0  # an estimate from the first instants of a run is noise


class _RedrawnLine:
    """One line of a terminal, drawn over itself in place and erased at the end (what Progress and Phases share)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.width = 0  # of the last text drawn, to erase it

    def draw(self, text: str) -> None:
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)

    def erase(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


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
        self._line = _RedrawnLine(self.stream)

    def advance(self, count: int = 1) -> None:
        self.done += count
        if not self.active:
            return
        now = self.clock()
        if self.drawn_at is None or now - self.drawn_at >= REDRAW_EVERY_S or self.done >= self.total:
            self._draw(now)

    def close(self) -> None:
        """Erase the line (the report follows on a clean line)."""
        if self.active:
            self._line.erase()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _draw(self, now: float) -> None:
        line = f"{self.label} {self.done:,}/{self.total:,} {self.unit} ({100 * self.done // self.total}%)"
        elapsed = now - self.started
        if elapsed >= ETA_AFTER_S and 0 < self.done < self.total:
            line += f", about {_duration(elapsed / self.done * (self.total - self.done))} left"
        self._line.draw(line)
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


class Phases:
    """Numbered phases of one long job on one redrawn line, on a terminal only (as Progress):

        [3/5] planning the compiled form: peak 250 of 289 MiB, goal 200 MiB (62%, about 12 s left)

    `start(name)` begins the next phase; `update(fraction, detail)` gives how much of the phase is done (0..1, when
    it can be known: then the percentage and, after the first second, an estimate of what is left) and what it is
    doing now. A phase with no known fraction (tracing) shows its elapsed time, redrawn twice a second by a
    background thread, so that the line never looks stuck. Where stderr is not a terminal, or with `-q`, it prints
    nothing at all and starts no thread.
    """

    TICK_S = 0.5

    def __init__(self, total: int, enabled: bool = True, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        self.active = enabled and _is_terminal(self.stream)
        self.clock = clock
        self.index = 0
        self.name = ""
        self.fraction: float | None = None
        self.detail = ""
        self.started = clock()
        self.drawn_at: float | None = None
        self._line = _RedrawnLine(self.stream)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def start(self, name: str) -> None:
        with self._lock:
            self.index = min(self.index + 1, self.total)
            self.name, self.fraction, self.detail = name, None, ""
            self.started = self.clock()
            self._draw()
        if self.active and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="gpulint-progress", daemon=True)
            self._ticker.start()

    def skip(self) -> None:
        """A phase that will not run (the eager step could not be recorded): the count still ends at the total."""
        self.index = min(self.index + 1, self.total)

    def update(self, fraction: float | None = None, detail: str | None = None) -> None:
        with self._lock:
            if fraction is not None:
                self.fraction = min(max(fraction, 0.0), 1.0)
            if detail is not None:
                self.detail = detail
            if self.drawn_at is None or self.clock() - self.drawn_at >= REDRAW_EVERY_S:
                self._draw()

    def line(self) -> str:
        line = f"[{self.index}/{self.total}] {self.name}"
        if self.detail:
            line += f": {self.detail}"
        elapsed = self.clock() - self.started
        if self.fraction is not None:
            eta = ""
            if elapsed >= ETA_AFTER_S and 0 < self.fraction < 1:
                eta = f", about {_duration(elapsed / self.fraction * (1 - self.fraction))} left"
            return line + f" ({100 * self.fraction:.0f}%{eta})"
        if elapsed >= ETA_AFTER_S:
            return line + f" ({_duration(elapsed)} so far)"
        return line

    def close(self) -> None:
        """Stop the ticker and erase the line (the report follows on a clean line)."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        with self._lock:
            if self.active:
                self._line.erase()

    def __enter__(self) -> "Phases":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _draw(self) -> None:
        if not self.active or not self.name:
            return
        self._line.draw(self.line())
        self.drawn_at = self.clock()

    def _tick(self) -> None:
        while not self._stop.wait(self.TICK_S):
            with self._lock:
                self._draw()
