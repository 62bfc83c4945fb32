"""A plan (planfile.Plan) as text, markdown or HTML for people, and its charts as SVG."""

from __future__ import annotations

import html

from gpulint.planner.config import format_bytes
from gpulint.planner.planfile import Decision, EagerForm, Measured, Plan, SweepPoint


def _recomputed(plan: Plan, top: int) -> list[Decision]:
    return plan.recomputed()[:top]


def _where(d: Decision) -> str:
    return f"{d.source.path}:{d.source.line}" if d.source else "-"


def _time(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.3f} s"


def render_text(plan: Plan, top: int = 10) -> str:
    budget = plan.budget_bytes
    lines = [
        (f"gpulint plan: {plan.model} on {plan.hardware}, {plan.dtype}, "
         f"budget {format_bytes(budget) if budget else 'none'}"),
        "",
        f"  {'':10}{'peak memory':>14}{'step time':>14}{'recompute':>14}",
        (f"  {'today':10}{format_bytes(plan.baseline.peak_bytes):>14}"
         f"{_time(plan.baseline.step_time_s):>14}{'-':>14}  (the step as it runs now)"),
        (f"  {'compiled':10}{format_bytes(plan.planned.peak_bytes):>14}"
         f"{_time(plan.planned.step_time_s):>14}{_time(plan.planned.recompute_time_s):>14}"
         "  (gpulint.planner.compile, gpulint_backend)"),
    ]
    lines += _measured_row(plan.measured)
    lines += _eager_rows(plan)
    lines.append("")
    if budget is None:
        lines.append("no budget: the plan recomputes down to the lowest reachable peak")
    elif plan.feasible:
        lines.append(f"compiled: fits the budget ({format_bytes(budget)})")
    else:
        lines.append(
            f"compiled: does NOT fit the budget ({format_bytes(budget)}): the lowest peak reachable is "
            f"{format_bytes(plan.lowest_peak_bytes)}"
        )
    lines += _eager_notes(plan)
    lines.append(f"floor (parameters, gradients, optimizer state, batch): {format_bytes(plan.floor_bytes)}")
    rows = _recomputed(plan, top)
    n_re = sum(d.action == "recompute" for d in plan.decisions)
    lines.append("")
    if rows:
        lines.append(f"top recomputed activations ({n_re} of {len(plan.decisions)} saved tensors recomputed):")
        for d in rows:
            lines.append(f"  {format_bytes(d.bytes):>11}  {d.op:<40} {d.module or '-':<20} {_where(d)}")
    else:
        lines.append("nothing recomputed: today's step already fits")
    if plan.excluded:
        reasons: dict[str, int] = {}
        for e in plan.excluded:
            reasons[e.reason] = reasons.get(e.reason, 0) + 1
        lines.append("never recomputed: " + "; ".join(f"{c} x {r}" for r, c in sorted(reasons.items())))
    lines += _data_dependent_lines(plan)
    for row in plan.sweep:
        if row is plan.sweep[0]:
            lines += ["", f"  {'budget':>12}{'peak':>14}{'step time':>14}{'recompute':>14}  fits"]
        lines.append(
            f"  {format_bytes(row.budget_bytes):>12}{format_bytes(row.peak_bytes):>14}"
            f"{_time(row.step_time_s):>14}{_time(row.recompute_time_s):>14}  {'yes' if row.feasible else 'no'}"
        )
    return "\n".join(lines) + "\n"


def _measured_row(measured: Measured | None) -> list[str]:
    """A form's measured step under its predicted one (or why it could not run)."""
    if measured is None:
        return []
    if measured.error:
        return [f"  {'  measured':10}  could not run: {measured.error}"]
    today = (f", today measured {format_bytes(measured.baseline_peak_bytes)}"
             if measured.baseline_peak_bytes is not None else "")
    return [(f"  {'  measured':10}{format_bytes(measured.peak_bytes):>14}{_time(measured.step_time_s):>14}"
             f"{'':>14}  ({measured.device}; predicted there {format_bytes(measured.predicted_peak_bytes)}{today})")]


def _eager_rows(plan: Plan) -> list[str]:
    """The eager form's predicted (and measured) step under `gpulint.apply(model, plan)`, as table rows."""
    figures = plan.eager
    if not figures:
        return []
    if figures.error:
        return [f"  {'eager':10}  could not be planned: {figures.error}"]
    rows = [(
        f"  {'eager':10}{format_bytes(figures.peak_bytes):>14}{_time(figures.step_time_s):>14}"
        f"{_time(figures.recompute_time_s):>14}  (gpulint.apply: {_layers(figures)})"
    )]
    return rows + _measured_row(figures.measured)


def _layers(figures: EagerForm) -> str:
    layers = figures.layers
    if not layers:
        return "no layer checkpointed"
    shown = ", ".join(layers[:3]) + (f" and {len(layers) - 3} more" if len(layers) > 3 else "")
    return f"{len(layers)} layer{'s' if len(layers) != 1 else ''} checkpointed: {shown}"


def _eager_notes(plan: Plan) -> list[str]:
    """Whether the eager form holds the budget, and what it leaves out."""
    figures = plan.eager
    if not figures or figures.error:
        return []
    notes = []
    if plan.budget_bytes is not None:
        verdict = "fits" if figures.fits_budget else "does NOT fit"
        notes.append(f"eager: {verdict} the budget ({format_bytes(plan.budget_bytes)})")
    if figures.unapplied:
        notes.append(f"eager mode leaves out {len(figures.unapplied)} decision(s), e.g. {figures.unapplied[0]}")
    return notes


def _data_dependent_lines(plan: Plan) -> list[str]:
    reads = plan.data_dependent
    if not reads:
        return []
    lines = ["", f"the step depends on tensor values in {len(reads)} place(s) (torch.compile breaks its graph there):"]
    lines += [f"  {r.path}:{r.line}  {r.op}" for r in reads]
    lines.append("planned as one step with the values and sizes of the sample batch (its branches, its masked rows); "
                 "apply it in eager mode, which checks the plan on the first forward")
    return lines


def render_markdown(plan: Plan, top: int = 10) -> str:
    budget = plan.budget_bytes
    out = [
        f"### gpulint plan: `{plan.model}` on {plan.hardware} ({plan.dtype})",
        "",
        "| | peak memory | step time | recompute |",
        "|---|---:|---:|---:|",
        f"| today | {format_bytes(plan.baseline.peak_bytes)} | {_time(plan.baseline.step_time_s)} | - |",
        (f"| compiled (`gpulint.planner.compile`) | {format_bytes(plan.planned.peak_bytes)} | "
         f"{_time(plan.planned.step_time_s)} | {_time(plan.planned.recompute_time_s)} |"),
    ]
    out += _markdown_measured("compiled measured", plan.measured)
    figures = plan.eager
    if figures and not figures.error:
        out.append(f"| eager (`gpulint.apply`) | {format_bytes(figures.peak_bytes)} | {_time(figures.step_time_s)} "
                   f"| {_time(figures.recompute_time_s)} |")
        out += _markdown_measured("eager measured", figures.measured)
    out.append("")
    if budget is not None:
        verdict = "fits" if plan.feasible else f"does **not** fit (lowest reachable {format_bytes(plan.lowest_peak_bytes)})"
        out.append(f"Budget {format_bytes(budget)}: compiled {verdict}.")
    if figures and figures.error:
        out.append(f"Eager mode could not be planned: {figures.error}.")
    elif figures:
        out.append(f"Eager mode: {_layers(figures)}.")
    out += [note[0].upper() + note[1:] + "." for note in _eager_notes(plan)]
    reads = plan.data_dependent
    if reads:
        out.append("The step depends on tensor values (graph breaks) at " +
                   ", ".join(f"`{r.path}:{r.line}` ({r.op})" for r in reads) +
                   "; planned with the sample batch's values and sizes, apply it in eager mode.")
    rows = _recomputed(plan, top)
    if rows:
        out += ["", "| recomputed | op | module | source |", "|---:|---|---|---|"]
        out += [f"| {format_bytes(d.bytes)} | `{d.op}` | `{d.module}` | `{_where(d)}` |" for d in rows]
    return "\n".join(out) + "\n"


def _markdown_measured(label: str, measured: Measured | None) -> list[str]:
    if measured is None:
        return []
    if measured.error:
        return [f"| {label} | could not run: {measured.error} | | |"]
    return [f"| {label} ({measured.device}) | {format_bytes(measured.peak_bytes)} | {_time(measured.step_time_s)} | |"]


def render_html(plan: Plan, top: int = 20) -> str:
    esc = html.escape
    rows = "".join(
        f"<tr><td>{esc(format_bytes(d.bytes))}</td><td><code>{esc(d.op)}</code></td>"
        f"<td>{esc(d.module)}</td><td>{esc(_where(d))}</td></tr>"
        for d in _recomputed(plan, top)
    )
    verdict = "fits" if plan.feasible else "does not fit"
    budget = format_bytes(plan.budget_bytes) if plan.budget_bytes else "none"
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>gpulint plan</title></head><body>"
        f"<h1>gpulint plan: {esc(plan.model)} on {esc(plan.hardware)} ({esc(plan.dtype)})</h1>"
        f"<p>Budget {esc(budget)}: {verdict}.</p>"
        "<table border='1'><tr><th></th><th>peak memory</th><th>step time</th><th>recompute</th></tr>"
        f"<tr><td>today</td><td>{esc(format_bytes(plan.baseline.peak_bytes))}</td>"
        f"<td>{esc(_time(plan.baseline.step_time_s))}</td><td>-</td></tr>"
        f"<tr><td>compiled</td><td>{esc(format_bytes(plan.planned.peak_bytes))}</td>"
        f"<td>{esc(_time(plan.planned.step_time_s))}</td>"
        f"<td>{esc(_time(plan.planned.recompute_time_s))}</td></tr></table>"
        f"<h2>Memory over the step</h2>{frontier_svg_timeline(plan)}"
        f"<h2>Top recomputed activations</h2><table border='1'><tr><th>bytes</th><th>op</th><th>module</th>"
        f"<th>source</th></tr>{rows}</table></body></html>\n"
    )


def _polyline(points: list[tuple[float, float]], x0: float, x1: float, y0: float, y1: float,
              w: int, h: int, pad: int) -> str:
    def sx(x: float) -> float:
        return pad + (x - x0) / ((x1 - x0) or 1) * (w - 2 * pad)

    def sy(y: float) -> float:
        return h - pad - (y - y0) / ((y1 - y0) or 1) * (h - 2 * pad)

    return " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)


def frontier_svg_timeline(plan: Plan, w: int = 640, h: int = 240, pad: int = 30) -> str:
    """Live memory over the step, today (grey) and planned (blue), as an inline SVG."""
    series = [plan.timeline.baseline, plan.timeline.planned]
    ys = [p[1] for s in series for p in s] or [0]
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}'>"]
    for s, color in zip(series, ("#999", "#1f6feb")):
        norm = [(p[0] / (max(x for x, _ in s) or 1), p[1]) for p in s]
        pts = _polyline(norm, 0, 1, 0, max(ys), w, h, pad)
        parts.append(f"<polyline fill='none' stroke='{color}' stroke-width='2' points='{pts}'/>")
    parts.append(f"<text x='{pad}' y='15' font-size='12'>peak {html.escape(format_bytes(max(ys)))}</text></svg>")
    return "".join(parts)


def sweep_svg(rows: list[SweepPoint], w: int = 640, h: int = 400, pad: int = 50) -> str:
    """The frontier of a sweep: predicted step time against predicted peak."""
    pts = [(r.peak_bytes / 2**20, r.step_time_s) for r in rows]
    if not pts:
        return ""
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    poly = _polyline(sorted(pts), x0, x1, y0, y1, w, h, pad)
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}'>"
        f"<polyline fill='none' stroke='#1f6feb' stroke-width='2' points='{poly}'/>"
        f"<text x='{pad}' y='{h - 10}' font-size='12'>peak MiB {x0:.1f} .. {x1:.1f}</text>"
        f"<text x='5' y='20' font-size='12'>step time s {y0:.4f} .. {y1:.4f}</text></svg>\n"
    )
