"""progress.Phases: numbered phases with their totals and an estimate of what is left, on a terminal only."""

from __future__ import annotations

import io

from gpulint.progress import Phases


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_phases_show_their_number_the_total_and_what_is_left():
    terminal, clock = Terminal(), Clock()
    with Phases(4, stream=terminal, clock=clock) as phases:
        phases.TICK_S = 60  # no redraw from the ticker thread during the test
        phases.start("tracing")
        assert terminal.getvalue().endswith("[1/4] tracing")
        clock.now = 5.0
        phases.update(detail="running the step once on cpu")
        assert terminal.getvalue().endswith("[1/4] tracing: running the step once on cpu (5 s so far)")
        phases.start("planning the compiled form")
        clock.now = 7.0
        phases.update(0.25, "peak 250 of 289 MiB")
        assert terminal.getvalue().endswith(
            "[2/4] planning the compiled form: peak 250 of 289 MiB (25%, about 6 s left)")
        phases.skip()
        phases.start("measuring")
        assert terminal.getvalue().rstrip(" ").endswith("\r[4/4] measuring")  # padded over the longer line
    assert terminal.getvalue().endswith("\r")  # the line is erased: the report starts on a clean line


def test_nothing_when_not_a_terminal_or_quiet():
    for stream, enabled in ((io.StringIO(), True), (Terminal(), False)):
        with Phases(3, enabled=enabled, stream=stream) as phases:
            phases.start("tracing")
            phases.update(0.5, "half")
        assert stream.getvalue() == "" and phases._ticker is None
