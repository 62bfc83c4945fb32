"""Every chart gpulint draws: SVG line/point charts (HTML reports, frontier.svg) and Mermaid charts (PR comment).

A chart is a list of named `Series` plus optional reference lines (`Rule`: the budget), so a caller adds a series
(a base branch's plan) without touching the drawing. Every chart has a title, axes with their units, ticks, a legend
that lies outside the data, and colours that read on a light and on a dark background: each colour of `PALETTE` has
a contrast of at least 3:1 against both GitHub's white and its dark background (#0d1117), and an SVG chart switches
its own background, text and grid with `prefers-color-scheme`. Values come in the unit the axis names (the caller
scales bytes to MiB, seconds to ms): this module draws, units.py formats.

    svg = svg_chart([Series("today", [(0, 10.0), (50, 40.0), (100, 12.0)])], title="Memory over one step",
                    x_label="progress through the step (%)", y_label="live memory (MiB)",
                    rules=[Rule("budget 32 MiB", 32.0)], y_from_zero=True)
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpulint.units import SCALE, format_bytes, format_time


@dataclass(frozen=True)
class Colour:
    hex: str
    emoji: str  # the square of that colour: the legend of a Mermaid chart, which has none of its own
    name: str


RED = Colour("#e5534b", "🟥", "red")
BLUE = Colour("#1f6feb", "🟦", "blue")
PURPLE = Colour("#8957e5", "🟪", "purple")
ORANGE = Colour("#db6d28", "🟧", "orange")
YELLOW = Colour("#bf8700", "🟨", "yellow")
GREY = Colour("#6e7781", "⬛", "grey")
GREEN = Colour("#2da44e", "🟩", "green")  # reference lines (the budget)
PALETTE = (RED, BLUE, PURPLE, ORANGE, YELLOW, GREY)  # series, in order, unless a series names its own
BACKGROUNDS = {"light": "#ffffff", "dark": "#0d1117"}  # GitHub's page backgrounds: every colour reads on both


@dataclass(frozen=True)
class Series:
    name: str  # its legend label
    points: Sequence[tuple[float, float]]  # (x, y) in the axes' units
    colour: Colour | None = None  # None: the next colour of PALETTE
    line: bool = True
    markers: bool = False
    notes: Sequence[str] = ()  # a tooltip per point (SVG), e.g. "budget 200 MiB: peak 199 MiB, 1.95 ms"


@dataclass(frozen=True)
class Rule:
    """A reference line across the plot: horizontal at y = value (axis "y") or vertical at x = value (axis "x")."""

    name: str
    value: float
    axis: str = "y"
    colour: Colour = GREEN


def colours(series: Sequence[Series]) -> list[Colour]:
    """Each series' colour: its own, else the palette's next one not taken by another series."""
    taken = {s.colour for s in series if s.colour is not None}
    free = iter([c for c in PALETTE if c not in taken] + list(PALETTE))
    return [s.colour if s.colour is not None else next(free) for s in series]


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]: the smallest step of 1, 2, 2.5 or 5 times a power of ten that makes at
    most 1.5 * `count` intervals (0, 50, ..., 350 for 0..303, rather than 0..400 by hundreds)."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    power = 10 ** math.floor(math.log10((hi - lo) / max(1, count)))
    steps = [m * power * scale for scale in (0.1, 1, 10) for m in (1, 2, 2.5, 5)]
    step = next(s for s in steps if math.ceil(hi / s - 1e-9) - math.floor(lo / s + 1e-9) <= round(1.5 * count))
    first = math.floor(lo / step + 1e-9) * step
    ticks = []
    k = 0
    while not ticks or ticks[-1] < hi - step * 1e-9:
        ticks.append(round(first + k * step, 12))
        k += 1
    return ticks


def tick_label(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.6g}"


# ---------------------------------------------------------------------------------------------- SVG

_STYLE = """
.gl-chart { --gl-bg: #ffffff; --gl-fg: #1f2328; --gl-muted: #57606a; --gl-grid: #d8dee4; }
@media (prefers-color-scheme: dark) {
  .gl-chart { --gl-bg: #0d1117; --gl-fg: #e6edf3; --gl-muted: #8d96a0; --gl-grid: #30363d; }
}
.gl-chart .gl-bg { fill: var(--gl-bg); }
.gl-chart text { fill: var(--gl-fg); font: 12px -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
.gl-chart .gl-title { font-size: 14px; font-weight: 600; }
.gl-chart .gl-tick { fill: var(--gl-muted); font-size: 11px; }
.gl-chart .gl-grid { stroke: var(--gl-grid); stroke-width: 1; }
.gl-chart .gl-axis { stroke: var(--gl-muted); stroke-width: 1; }
"""


@dataclass(frozen=True)
class _Box:
    left: float
    right: float
    top: float
    bottom: float


def svg_chart(series: Sequence[Series], *, title: str, x_label: str, y_label: str, rules: Sequence[Rule] = (),
              y_from_zero: bool = False, x_from_zero: bool = False, width: int = 720, height: int = 380) -> str:
    """A standalone SVG (also fit to inline in HTML): title, legend band under it, then the plot with its axes."""
    esc = html.escape
    drawn = [s for s in series if s.points]
    xs = [x for s in drawn for x, _ in s.points] + [r.value for r in rules if r.axis == "x"]
    ys = [y for s in drawn for _, y in s.points] + [r.value for r in rules if r.axis == "y"]
    if not xs or not ys:
        return ""
    x_ticks = nice_ticks(*_padded(xs, x_from_zero))
    y_ticks = nice_ticks(*_padded(ys, y_from_zero))
    legend, legend_rows = _svg_legend(drawn, rules, 74, width - 24, 50)
    box = _Box(left=74, right=width - 24, top=50 + 20 * legend_rows + 8, bottom=height - 52)
    sx = _scale(x_ticks[0], x_ticks[-1], box.left, box.right)
    sy = _scale(y_ticks[0], y_ticks[-1], box.bottom, box.top)
    out = [
        (f'<svg xmlns="http://www.w3.org/2000/svg" class="gl-chart" viewBox="0 0 {width} {height}" width="{width}" '
         f'height="{height}" role="img" aria-label="{esc(title)}">'),
        f"<style>{_STYLE}</style>",
        f'<rect class="gl-bg" x="0" y="0" width="{width}" height="{height}"/>',
        f'<text class="gl-title" x="{box.left}" y="24">{esc(title)}</text>',
    ]
    for t in y_ticks:
        y = sy(t)
        out.append(f'<line class="gl-grid" x1="{box.left}" x2="{box.right}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(f'<text class="gl-tick" x="{box.left - 8}" y="{y:.1f}" text-anchor="end" '
                   f'dominant-baseline="middle">{tick_label(t)}</text>')
    for t in x_ticks:
        x = sx(t)
        out.append(f'<line class="gl-axis" x1="{x:.1f}" x2="{x:.1f}" y1="{box.bottom}" y2="{box.bottom + 5}"/>')
        out.append(f'<text class="gl-tick" x="{x:.1f}" y="{box.bottom + 18}" text-anchor="middle">'
                   f"{tick_label(t)}</text>")
    out += [
        f'<line class="gl-axis" x1="{box.left}" x2="{box.right}" y1="{box.bottom}" y2="{box.bottom}"/>',
        f'<line class="gl-axis" x1="{box.left}" x2="{box.left}" y1="{box.top}" y2="{box.bottom}"/>',
        f'<text x="{(box.left + box.right) / 2:.1f}" y="{height - 12}" text-anchor="middle">{esc(x_label)}</text>',
        (f'<text x="16" y="{(box.top + box.bottom) / 2:.1f}" text-anchor="middle" '
         f'transform="rotate(-90 16 {(box.top + box.bottom) / 2:.1f})">{esc(y_label)}</text>'),
    ]
    for rule in rules:
        if rule.axis == "x":
            x = sx(rule.value)
            end = f'x1="{x:.1f}" x2="{x:.1f}" y1="{box.top}" y2="{box.bottom}"'
        else:
            y = sy(rule.value)
            end = f'x1="{box.left}" x2="{box.right}" y1="{y:.1f}" y2="{y:.1f}"'
        out.append(f'<line {end} stroke="{rule.colour.hex}" stroke-width="2" stroke-dasharray="7 5"/>')
    for s, colour in zip(drawn, colours(drawn)):
        pts = sorted(s.points) if s.markers and s.line else list(s.points)
        if s.line and len(pts) >= 2:
            coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
            out.append(f'<polyline fill="none" stroke="{colour.hex}" stroke-width="2.5" '
                       f'stroke-linejoin="round" points="{coords}"/>')
        if s.markers:
            notes = list(s.notes) + [""] * len(s.points)
            for (x, y), note in zip(s.points, notes):
                tip = f"<title>{esc(note)}</title>" if note else ""
                out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="5" fill="{colour.hex}" '
                           f'stroke="var(--gl-bg)" stroke-width="1.5">{tip}</circle>')
    out += legend
    out.append("</svg>\n")
    return "\n".join(out)


def _svg_legend(series: Sequence[Series], rules: Sequence[Rule], left: float, right: float,
                top: float) -> tuple[list[str], int]:
    """Swatches and names in rows between the title and the plot, never over the data: (elements, rows)."""
    out = []
    items = [(s.name, c, s.line, s.markers, False) for s, c in zip(series, colours(series))]
    items += [(r.name, r.colour, True, False, True) for r in rules]
    x, y, rows = left, top, 1
    for name, colour, line, marker, dashed in items:
        width = 30 + 6.5 * len(name) + 24  # about 6.5 px a character at 12 px
        if x > left and x + width > right:
            x, y, rows = left, y + 20, rows + 1
        if line:
            dash = ' stroke-dasharray="7 5"' if dashed else ""
            out.append(f'<line x1="{x:.1f}" x2="{x + 24:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{colour.hex}" '
                       f'stroke-width="3"{dash}/>')
        if marker:
            out.append(f'<circle cx="{x + 12:.1f}" cy="{y:.1f}" r="5" fill="{colour.hex}"/>')
        out.append(f'<text x="{x + 30:.1f}" y="{y:.1f}" dominant-baseline="middle">{html.escape(name)}</text>')
        x += width
    return out, rows


def _padded(values: list[float], from_zero: bool) -> tuple[float, float]:
    """The range to draw: from 0 to the data's top when asked (memory over a step, in percent of it), else the
    data's range widened by 4% so that no point sits on an axis."""
    lo, hi = min(values), max(values)
    if from_zero:
        return 0.0, hi
    margin = 0.04 * ((hi - lo) or abs(hi) or 1.0)
    return lo - margin, hi + margin


def _scale(lo: float, hi: float, a: float, b: float):
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


# ---------------------------------------------------------------------------------------------- Mermaid


def mermaid_line_chart(series: Sequence[Series], *, title: str, x_label: str, y_label: str,
                       rules: Sequence[Rule] = (), x_from_zero: bool = True) -> str:
    """A Mermaid `xychart-beta` of line series over shared x positions (GitHub renders it in the PR comment), its
    colours pinned by an init directive so they read in GitHub's light and dark themes, followed by a legend line
    (Mermaid's xychart draws none): `🟥 today · 🟦 with the plan · 🟩 budget 200 MiB`. Horizontal rules only."""
    drawn = [s for s in series if s.points]
    palette = [c for c in colours(drawn)] + [r.colour for r in rules]
    xs = [x for x, _ in drawn[0].points] if drawn else []
    top = max([y for s in drawn for _, y in s.points] + [r.value for r in rules] + [0])
    y_max = nice_ticks(0, top * 1.05)[-1] if top else 1
    lines = [
        "```mermaid",
        '%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "' + ", ".join(c.hex for c in palette)
        + '"}}}}%%',
        "xychart-beta",
        f'    title "{_quoted(title)}"',
        f'    x-axis "{_quoted(x_label)}" [{", ".join(tick_label(round(x)) for x in xs)}]',
        f'    y-axis "{_quoted(y_label)}" 0 --> {tick_label(y_max)}',
    ]
    lines += [f"    line [{', '.join(_value(y) for _, y in s.points)}]" for s in drawn]
    lines += [f"    line [{', '.join(_value(r.value) for _ in xs)}]" for r in rules]
    lines += ["```", "", legend_markdown(drawn, rules)]
    return "\n".join(lines) + "\n"


def legend_markdown(series: Sequence[Series], rules: Sequence[Rule] = ()) -> str:
    items = [f"{c.emoji} {s.name}" for s, c in zip(series, colours(series))]
    items += [f"{r.colour.emoji} {r.name}" for r in rules]
    return " · ".join(items)


def _quoted(text: str) -> str:
    """Text inside a Mermaid string: no quotes or line breaks to end it early."""
    return " ".join(text.replace('"', "'").split())


def _value(v: float) -> str:
    """A plain decimal (Mermaid reads no exponents), to a thousandth of the axis unit."""
    return f"{v:.3f}".rstrip("0").rstrip(".") or "0"


# ---------------------------------------------------------------------------------------------- gpulint's charts


def budget_rules(budget_bytes: float | None, unit: str, axis: str = "y") -> list[Rule]:
    """The budget as a dashed reference line, labelled in the budget's unit."""
    if not budget_bytes:
        return []
    return [Rule(f"budget {format_bytes(budget_bytes, unit)}", budget_bytes / SCALE[unit], axis)]


def timeline_series(named: Sequence[tuple[str, Sequence[float], Colour | None]], unit: str) -> list[Series]:
    """Memory samples over one step (bytes) as series in `unit`, x in percent of the step."""
    out = []
    for name, values, colour in named:
        if len(values) >= 2:
            out.append(Series(name, [(100 * i / (len(values) - 1), v / SCALE[unit]) for i, v in enumerate(values)],
                              colour))
    return out


def timeline_svg(series: Sequence[Series], budget_bytes: float | None, unit: str) -> str:
    return svg_chart(series, title="Memory over one training step", x_label="progress through the step (%)",
                     y_label=f"live memory ({unit})", rules=budget_rules(budget_bytes, unit), y_from_zero=True,
                     x_from_zero=True)


@dataclass(frozen=True)
class FrontierPoint:
    budget_bytes: float
    peak_bytes: float
    step_time_s: float
    feasible: bool = True


def frontier_svg(points: Sequence[FrontierPoint], today: tuple[float, float] | None, budget_bytes: float | None,
                 unit: str, title: str = "Peak memory against step time, one plan per budget") -> str:
    """frontier.svg: predicted step time (ms) against predicted peak, a point per budget (its tooltip says which),
    today's step, and the budget as a vertical line when it lies near the points (a device's whole memory, the
    budget when none was given, would squash them)."""
    if not points:
        return ""
    scale = SCALE[unit]
    notes = [f"budget {format_bytes(p.budget_bytes, unit)}: peak {format_bytes(p.peak_bytes, unit)}, "
             f"step {format_time(p.step_time_s)}{'' if p.feasible else ' (does not fit)'}" for p in points]
    series = [Series("a plan per budget (compiled form)", [(p.peak_bytes / scale, p.step_time_s * 1e3) for p in points],
                     BLUE, markers=True, notes=notes)]
    if today is not None:
        series.append(Series("today", [(today[0] / scale, today[1] * 1e3)], RED, line=False, markers=True,
                             notes=[f"today: peak {format_bytes(today[0], unit)}, step {format_time(today[1])}"]))
    largest = max([p.peak_bytes for p in points] + ([today[0]] if today else []))
    near = budget_bytes is not None and budget_bytes <= 1.5 * largest
    return svg_chart(series, title=title, x_label=f"predicted peak memory ({unit})", y_label="predicted step time (ms)",
                     rules=budget_rules(budget_bytes, unit, "x") if near else [])
