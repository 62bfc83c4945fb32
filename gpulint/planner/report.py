"""A plan (planfile.Plan) as text, markdown or HTML for people, and its charts as SVG.

Every report opens with one statement of which form holds the budget (verdict.py), and shows the budget and every
peak in the unit the budget was written in (units.py); activation sizes use the same family of units.
"""

from __future__ import annotations

import html

from gpulint import charts, units
from gpulint.planner.planfile import Decision, EagerForm, Measured, Plan
from gpulint.units import format_time
from gpulint.verdict import Verdict


def verdict(plan: Plan) -> Verdict:
    """Which form fits the budget (and `gpulint plan`'s exit code)."""
    eager = plan.eager
    return Verdict.of(plan.budget_bytes, unit(plan), compiled_peak=plan.planned.peak_bytes,
                      compiled_fits=plan.feasible, lowest_peak_bytes=plan.lowest_peak_bytes,
                      eager=(eager.peak_bytes, eager.fits_budget, eager.error) if eager is not None else None)


def unit(plan: Plan) -> str:
    """The unit of this plan's budget and peaks: the budget's own, else one that suits today's peak."""
    return units.display_unit(plan.budget_unit, plan.budget_bytes, plan.baseline.peak_bytes if plan.baseline else None)


class _Figures:
    """The plan's byte formatter: peaks and budget in the plan's unit, activation sizes in that family."""

    def __init__(self, plan: Plan) -> None:
        self.unit = unit(plan)

    def peak(self, n: float | None) -> str:
        return units.format_bytes(n, self.unit)

    def size(self, n: float | None) -> str:
        return units.format_bytes(n, like=self.unit)


def _recomputed(plan: Plan, top: int) -> list[Decision]:
    return plan.recomputed()[:top]


def _where(d: Decision) -> str:
    return f"{d.source.path}:{d.source.line}" if d.source else "-"


def _plain(text: str) -> str:
    """A statement's `code spans` as plain text, for the terminal."""
    return text.replace("`", "")


def render_text(plan: Plan, top: int = 10) -> str:
    fig = _Figures(plan)
    said = verdict(plan)
    lines = [
        f"gpulint plan: {plan.model} on {plan.hardware}, {plan.dtype}",
        _plain(said.statement()),
        _plain(said.advice()),
        "",
        f"  {'':10}{'peak memory':>14}{'step time':>14}{'recompute':>14}",
        (f"  {'today':10}{fig.peak(plan.baseline.peak_bytes):>14}"
         f"{format_time(plan.baseline.step_time_s):>14}{'-':>14}  (the step as it runs now)"),
    ]
    lines += _eager_rows(plan, fig)
    lines.append(
        f"  {'compiled':10}{fig.peak(plan.planned.peak_bytes):>14}{format_time(plan.planned.step_time_s):>14}"
        f"{format_time(plan.planned.recompute_time_s):>14}  (gpulint.planner.compile, gpulint_backend)"
    )
    lines += _measured_row(plan.measured, fig)
    lines.append("")
    if plan.eager and not plan.eager.error and plan.eager.unapplied:
        unapplied = plan.eager.unapplied
        lines.append(f"eager mode leaves out {len(unapplied)} decision(s), e.g. {unapplied[0]}")
    lines.append(f"floor (parameters, gradients, optimizer state, batch): {fig.peak(plan.floor_bytes)}")
    rows = _recomputed(plan, top)
    n_re = sum(d.action == "recompute" for d in plan.decisions)
    lines.append("")
    if rows:
        lines.append(f"top recomputed activations of the compiled form ({n_re} of {len(plan.decisions)} saved "
                     "tensors recomputed):")
        for d in rows:
            lines.append(f"  {fig.size(d.bytes):>11}  {d.op:<40} {d.module or '-':<20} {_where(d)}")
    else:
        lines.append("nothing recomputed: today's step already fits")
    if plan.excluded:
        reasons: dict[str, int] = {}
        for e in plan.excluded:
            reasons[e.reason] = reasons.get(e.reason, 0) + 1
        lines.append("never recomputed: " + "; ".join(f"{c} x {r}" for r, c in sorted(reasons.items())))
    lines += _data_dependent_lines(plan, said)
    for row in plan.sweep:
        if row is plan.sweep[0]:
            lines += ["", "sweep of the compiled form:",
                      f"  {'budget':>12}{'peak':>14}{'step time':>14}{'recompute':>14}  fits"]
        lines.append(
            f"  {fig.peak(row.budget_bytes):>12}{fig.peak(row.peak_bytes):>14}"
            f"{format_time(row.step_time_s):>14}{format_time(row.recompute_time_s):>14}  "
            f"{'yes' if row.feasible else 'no'}"
        )
    return "\n".join(lines) + "\n"


def _measured_row(measured: Measured | None, fig: _Figures) -> list[str]:
    """A form's measured step under its predicted one (or why it could not run)."""
    if measured is None:
        return []
    if measured.error:
        return [f"  {'  measured':10}  could not run: {measured.error}"]
    today = (f", today measured {fig.peak(measured.baseline_peak_bytes)}"
             if measured.baseline_peak_bytes is not None else "")
    return [(f"  {'  measured':10}{fig.peak(measured.peak_bytes):>14}{format_time(measured.step_time_s):>14}"
             f"{'':>14}  ({measured.device}; predicted there {fig.peak(measured.predicted_peak_bytes)}{today})")]


def _eager_rows(plan: Plan, fig: _Figures) -> list[str]:
    """The eager form's predicted (and measured) step under `gpulint.apply(model, plan)`, as table rows."""
    figures = plan.eager
    if not figures:
        return []
    if figures.error:
        return [f"  {'eager':10}  could not be planned: {figures.error}"]
    rows = [(
        f"  {'eager':10}{fig.peak(figures.peak_bytes):>14}{format_time(figures.step_time_s):>14}"
        f"{format_time(figures.recompute_time_s):>14}  (gpulint.apply: {_layers(figures)})"
    )]
    return rows + _measured_row(figures.measured, fig)


def _layers(figures: EagerForm) -> str:
    layers = figures.layers
    if not layers:
        return "no layer checkpointed"
    shown = ", ".join(layers[:3]) + (f" and {len(layers) - 3} more" if len(layers) > 3 else "")
    return f"{len(layers)} layer{'s' if len(layers) != 1 else ''} checkpointed: {shown}"


def _data_dependent_lines(plan: Plan, said: Verdict) -> list[str]:
    reads = plan.data_dependent
    if not reads:
        return []
    lines = ["", f"the step depends on tensor values in {len(reads)} place(s) (torch.compile breaks its graph there):"]
    lines += [f"  {r.path}:{r.line}  {r.op}" for r in reads]
    lines.append("planned as one step with the values and sizes of the sample batch (its branches, its masked rows); "
                 + _value_read_advice(said))
    return lines


def _value_read_advice(said: Verdict) -> str:
    """Eager mode reads the values as it runs; it is advised only when it holds the budget."""
    eager = next((f for f in said.forms if f.name == "eager"), None)
    if eager is not None and eager.fits and eager.error is None:
        return "apply it in eager mode, which checks the plan on the first forward"
    return "one compiled graph cannot run it as planned"


def render_markdown(plan: Plan, top: int = 10) -> str:
    fig = _Figures(plan)
    said = verdict(plan)
    out = [
        f"### gpulint plan: `{plan.model}` on {plan.hardware} ({plan.dtype})",
        "",
        f"{said.statement()} {said.advice()}",
        "",
        "| | peak memory | step time | recompute |",
        "|---|---:|---:|---:|",
        f"| today | {fig.peak(plan.baseline.peak_bytes)} | {format_time(plan.baseline.step_time_s)} | - |",
    ]
    figures = plan.eager
    if figures and not figures.error:
        out.append(f"| eager (`gpulint.apply`) | {fig.peak(figures.peak_bytes)} | {format_time(figures.step_time_s)} "
                   f"| {format_time(figures.recompute_time_s)} |")
        out += _markdown_measured("eager measured", figures.measured, fig)
    out.append(f"| compiled (`gpulint.planner.compile`) | {fig.peak(plan.planned.peak_bytes)} | "
               f"{format_time(plan.planned.step_time_s)} | {format_time(plan.planned.recompute_time_s)} |")
    out += _markdown_measured("compiled measured", plan.measured, fig)
    out.append("")
    if figures and figures.error:
        out.append(f"Eager mode could not be planned: {figures.error}.")
    elif figures:
        out.append(f"Eager mode: {_layers(figures)}.")
        if figures.unapplied:
            out.append(f"Eager mode leaves out {len(figures.unapplied)} decision(s), e.g. {figures.unapplied[0]}.")
    reads = plan.data_dependent
    if reads:
        out.append("The step depends on tensor values (graph breaks) at " +
                   ", ".join(f"`{r.path}:{r.line}` ({r.op})" for r in reads) +
                   f"; planned with the sample batch's values and sizes: {_value_read_advice(said)}.")
    rows = _recomputed(plan, top)
    if rows:
        out += ["", "| recomputed (compiled) | op | module | source |", "|---:|---|---|---|"]
        out += [f"| {fig.size(d.bytes)} | `{d.op}` | `{d.module}` | `{_where(d)}` |" for d in rows]
    return "\n".join(out) + "\n"


def _markdown_measured(label: str, measured: Measured | None, fig: _Figures) -> list[str]:
    if measured is None:
        return []
    if measured.error:
        return [f"| {label} | could not run: {measured.error} | | |"]
    return [(f"| {label} ({measured.device}) | {fig.peak(measured.peak_bytes)} | "
             f"{format_time(measured.step_time_s)} | |")]


def render_html(plan: Plan, top: int = 20) -> str:
    esc = html.escape
    fig = _Figures(plan)
    said = verdict(plan)
    rows = "".join(
        f"<tr><td>{esc(fig.size(d.bytes))}</td><td><code>{esc(d.op)}</code></td>"
        f"<td>{esc(d.module)}</td><td>{esc(_where(d))}</td></tr>"
        for d in _recomputed(plan, top)
    )
    forms = [("today", plan.baseline.peak_bytes, plan.baseline.step_time_s, None)]
    if plan.eager and not plan.eager.error:
        forms.append(("eager (gpulint.apply)", plan.eager.peak_bytes, plan.eager.step_time_s,
                      plan.eager.recompute_time_s))
    forms.append(("compiled (gpulint.planner.compile)", plan.planned.peak_bytes, plan.planned.step_time_s,
                  plan.planned.recompute_time_s))
    table = "".join(
        f"<tr><td>{esc(name)}</td><td>{esc(fig.peak(peak))}</td><td>{esc(format_time(t))}</td>"
        f"<td>{esc(format_time(r)) if r is not None else '-'}</td></tr>"
        for name, peak, t, r in forms
    )
    frontier = sweep_svg(plan)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>gpulint plan</title>"
        "<style>@media (prefers-color-scheme: dark) { body { background: #0d1117; color: #e6edf3; } }</style>"
        "</head><body>"
        f"<h1>gpulint plan: {esc(plan.model)} on {esc(plan.hardware)} ({esc(plan.dtype)})</h1>"
        f"<p>{esc(_plain(said.statement()))} {esc(_plain(said.advice()))}</p>"
        "<table border='1'><tr><th></th><th>peak memory</th><th>step time</th><th>recompute</th></tr>"
        f"{table}</table>"
        f"<h2>Memory over the step</h2>{timeline_svg(plan)}"
        + (f"<h2>Frontier</h2>{frontier}" if frontier else "")
        + f"<h2>Top recomputed activations (compiled form)</h2><table border='1'><tr><th>bytes</th><th>op</th>"
        f"<th>module</th><th>source</th></tr>{rows}</table></body></html>\n"
    )


def timeline_svg(plan: Plan) -> str:
    """Live memory over the step, today and with the compiled form's plan, against the budget."""
    shown = unit(plan)
    series = charts.timeline_series([("today", [b for _x, b in plan.timeline.baseline], charts.RED),
                                     ("with the plan (compiled form)", [b for _x, b in plan.timeline.planned],
                                      charts.BLUE)], shown)
    return charts.timeline_svg(series, plan.budget_bytes, shown)


def sweep_svg(plan: Plan) -> str:
    """The frontier of a sweep (frontier.svg); empty without a sweep."""
    points = [charts.FrontierPoint(r.budget_bytes, r.peak_bytes, r.step_time_s, r.feasible) for r in plan.sweep]
    today = (plan.baseline.peak_bytes, plan.baseline.step_time_s) if plan.baseline else None
    return charts.frontier_svg(points, today, plan.budget_bytes, unit(plan),
                               title=f"Peak memory against step time, one plan per budget: {plan.model}")
