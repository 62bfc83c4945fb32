"""A plan as data (the gpulint.plan/1 JSON the bot renders) and as text, markdown or HTML for people."""

from __future__ import annotations

import html
import os
from typing import Any

from gpulint.planner.config import format_bytes
from gpulint.planner.graph import FWD, JointGraph
from gpulint.planner.greedy import PlanResult

SCHEMA = "gpulint.plan/1"
TIMELINE_POINTS = 200


def _source(graph_node: Any) -> dict[str, Any] | None:
    if not graph_node.source:
        return None
    path, line = graph_node.source
    try:
        rel = os.path.relpath(path)
        path = path if rel.startswith("..") else rel
    except ValueError:
        pass
    return {"path": path, "line": int(line)}


def _sample(timeline: Any, points: int = TIMELINE_POINTS) -> list[list[int]]:
    """[position, bytes] pairs; each bucket keeps its maximum so the peak survives the sampling."""
    n = len(timeline)
    step = max(1, -(-n // points))
    return [[i, int(timeline[i:i + step].max())] for i in range(0, n, step)]


def _eager_addresses(graph: JointGraph, order: list[int]) -> dict[int, dict[str, Any]]:
    """Where eager mode finds each saved node (a view or getitem is addressed by the op that made its storage)."""
    from gpulint.planner.eager import (
        plan_addresses,  # the apply engineer's; torch is loaded by now
    )

    return dict(zip(order, plan_addresses(graph, order)))


def plan_dict(
    graph: JointGraph, result: PlanResult, *, hardware: str, trace_seconds: float = 0.0, floor_bytes: int = 0
) -> dict[str, Any]:
    nodes = graph.nodes
    baseline_saved = result.baseline.saved
    chosen = result.chosen.saved
    decisions = []
    static = graph.static_storages
    by_storage = graph._tensors_by_storage()
    creator = {st: n.index for n in nodes for st in n.creates}
    kept = {nodes[i].storages[0] for i in chosen if nodes[i].is_tensor and nodes[i].storages}
    seen: set[int] = set()
    for i in sorted(baseline_saved | chosen):
        n = nodes[i]
        if n.kind != FWD or not n.is_tensor or not n.storages or n.storages[0] in static:
            continue  # views of parameters or the batch cost nothing either way
        storage = n.storages[0]
        if storage in seen:
            continue
        seen.add(storage)
        rep = nodes[by_storage[storage][0]]  # the first tensor on this storage: the backend saves it (and views)
        if rep.excluded:
            continue  # listed under "excluded"
        # Eager address: the forward op that allocated the storage (a layer norm for its getitem outputs).
        maker = nodes[creator.get(storage, rep.index)]
        decisions.append({
            "id": rep.name, "op": maker.op, "bytes": int(graph.storage_bytes[storage]),
            "action": "save" if storage in kept else "recompute",
            "module": maker.module, "call_index": maker.call_index, "source": _source(maker),
        })
    excluded = [
        {"id": n.name, "op": n.op, "reason": n.excluded, "source": _source(n), "module": n.module,
         "call_index": n.call_index}
        for n in nodes if n.kind == FWD and n.excluded
    ]
    return {
        "schema": SCHEMA,
        "model": graph.model,
        "hardware": hardware,
        "dtype": graph.dtype,
        "budget_bytes": result.budget,
        "feasible": result.feasible,
        "floor_bytes": floor_bytes,
        "lowest_peak_bytes": result.lowest_peak,
        "baseline": {"peak_bytes": result.baseline.peak, "step_time_s": result.baseline.step_time_s},
        "planned": {
            "peak_bytes": result.chosen.peak,
            "step_time_s": result.chosen.step_time_s,
            "recompute_time_s": result.chosen.recompute_time_s,
        },
        "decisions": decisions,
        "excluded": excluded,
        "timeline": {
            "baseline": _sample(result.baseline_simulation.timeline),
            "planned": _sample(result.simulation.timeline),
        },
        "stats": {"ops": len(nodes), "trace_seconds": round(trace_seconds, 3),
                  "plan_seconds": round(result.plan_seconds, 3), "greedy_steps": len(result.path) - 1},
    }


def _recomputed(plan: dict[str, Any], top: int) -> list[dict[str, Any]]:
    rows = [d for d in plan["decisions"] if d["action"] == "recompute"]
    return sorted(rows, key=lambda d: -d["bytes"])[:top]


def _where(d: dict[str, Any]) -> str:
    src = d.get("source")
    return f"{src['path']}:{src['line']}" if src else "-"


def _time(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.3f} s"


def render_text(plan: dict[str, Any], top: int = 10) -> str:
    budget = plan["budget_bytes"]
    lines = [
        (f"gpulint plan: {plan['model']} on {plan['hardware']}, {plan['dtype']}, "
         f"budget {format_bytes(budget) if budget else 'none'}"),
        "",
        f"  {'':10}{'peak memory':>14}{'step time':>14}{'recompute':>14}",
        (f"  {'today':10}{format_bytes(plan['baseline']['peak_bytes']):>14}"
         f"{_time(plan['baseline']['step_time_s']):>14}{'-':>14}"),
        (f"  {'planned':10}{format_bytes(plan['planned']['peak_bytes']):>14}"
         f"{_time(plan['planned']['step_time_s']):>14}{_time(plan['planned']['recompute_time_s']):>14}"),
    ]
    measured = plan.get("measured")
    if measured:
        lines.append(
            f"  {'measured':10}{format_bytes(measured['peak_bytes']):>14}{_time(measured['step_time_s']):>14}"
            f"{'':>14}  ({measured['device']}; predicted there {format_bytes(measured['predicted_peak_bytes'])}, "
            f"today measured {format_bytes(measured['baseline_peak_bytes'])})"
        )
    lines += _eager_rows(plan)
    lines.append("")
    if budget is None:
        lines.append("no budget: the plan recomputes down to the lowest reachable peak")
    elif plan["feasible"]:
        lines.append(f"fits the budget ({format_bytes(budget)})")
    else:
        lines.append(
            f"does NOT fit the budget ({format_bytes(budget)}): the lowest peak reachable is "
            f"{format_bytes(plan['lowest_peak_bytes'])}"
        )
    lines.append(f"floor (parameters, gradients, optimizer state, batch): {format_bytes(plan['floor_bytes'])}")
    rows = _recomputed(plan, top)
    n_re = sum(d["action"] == "recompute" for d in plan["decisions"])
    lines.append("")
    if rows:
        lines.append(f"top recomputed activations ({n_re} of {len(plan['decisions'])} saved tensors recomputed):")
        for d in rows:
            lines.append(f"  {format_bytes(d['bytes']):>11}  {d['op']:<40} {d['module'] or '-':<20} {_where(d)}")
    else:
        lines.append("nothing recomputed: today's step already fits")
    if plan["excluded"]:
        reasons: dict[str, int] = {}
        for e in plan["excluded"]:
            reasons[e["reason"]] = reasons.get(e["reason"], 0) + 1
        lines.append("never recomputed: " + "; ".join(f"{c} x {r}" for r, c in sorted(reasons.items())))
    lines += _eager_notes(plan)
    lines += _data_dependent_lines(plan)
    for row in plan.get("sweep", []):
        if row is plan["sweep"][0]:
            lines += ["", f"  {'budget':>12}{'peak':>14}{'step time':>14}{'recompute':>14}  fits"]
        lines.append(
            f"  {format_bytes(row['budget_bytes']):>12}{format_bytes(row['peak_bytes']):>14}"
            f"{_time(row['step_time_s']):>14}{_time(row['recompute_time_s']):>14}  {'yes' if row['feasible'] else 'no'}"
        )
    return "\n".join(lines) + "\n"


def _eager_rows(plan: dict[str, Any]) -> list[str]:
    """The eager path's predicted (and measured) step under `gpulint.apply(model, plan)`, as table rows."""
    figures = plan.get("eager")
    if not figures:
        return []
    rows = [(
        f"  {'eager':10}{format_bytes(figures['peak_bytes']):>14}{_time(figures['step_time_s']):>14}"
        f"{_time(figures['recompute_time_s']):>14}  (gpulint.apply: {_layers(figures)})"
    )]
    measured = figures.get("measured")
    if measured:
        rows.append(
            f"  {'  measured':10}{format_bytes(measured['peak_bytes']):>14}{_time(measured['step_time_s']):>14}"
            f"{'':>14}  ({measured['device']}; predicted there {format_bytes(measured['predicted_peak_bytes'])})"
        )
    return rows


def _layers(figures: dict[str, Any]) -> str:
    layers = figures.get("layers") or []
    if not layers:
        return "no layer checkpointed"
    shown = ", ".join(layers[:3]) + (f" and {len(layers) - 3} more" if len(layers) > 3 else "")
    return f"{len(layers)} layer{'s' if len(layers) != 1 else ''} checkpointed: {shown}"


def _eager_notes(plan: dict[str, Any]) -> list[str]:
    """Why the eager figures differ from the compiled plan, and whether they hold the budget."""
    figures = plan.get("eager")
    if not figures:
        return []
    notes = []
    if "planned_for_bytes" in figures:
        notes.append(
            f"eager mode keeps each checkpointed layer's inputs and recomputes whole layers, so it applies the "
            f"plan made for {format_bytes(figures['planned_for_bytes'])} (its own decisions, in the plan file)"
        )
    if not figures.get("fits_budget", True):
        notes.append(f"eager mode does NOT fit the budget ({format_bytes(plan['budget_bytes'])}): "
                     "apply the plan with the compiled backend, or raise the budget")
    return notes


def _data_dependent_lines(plan: dict[str, Any]) -> list[str]:
    reads = plan.get("data_dependent") or []
    if not reads:
        return []
    lines = ["", f"the step depends on tensor values in {len(reads)} place(s) (torch.compile breaks its graph there):"]
    lines += [f"  {r['path']}:{r['line']}  {r['op']}" for r in reads]
    lines.append("planned as one step with the values and sizes of the sample batch (its branches, its masked rows); "
                 "apply it in eager mode, which checks the plan on the first forward")
    return lines


def render_markdown(plan: dict[str, Any], top: int = 10) -> str:
    budget = plan["budget_bytes"]
    out = [
        f"### gpulint plan: `{plan['model']}` on {plan['hardware']} ({plan['dtype']})",
        "",
        "| | peak memory | step time | recompute |",
        "|---|---:|---:|---:|",
        f"| today | {format_bytes(plan['baseline']['peak_bytes'])} | {_time(plan['baseline']['step_time_s'])} | - |",
        (f"| planned | {format_bytes(plan['planned']['peak_bytes'])} | {_time(plan['planned']['step_time_s'])} "
         f"| {_time(plan['planned']['recompute_time_s'])} |"),
    ]
    if plan.get("measured"):
        m = plan["measured"]
        out.append(f"| measured ({m['device']}) | {format_bytes(m['peak_bytes'])} | {_time(m['step_time_s'])} | |")
    figures = plan.get("eager")
    if figures:
        out.append(f"| eager (`gpulint.apply`) | {format_bytes(figures['peak_bytes'])} | {_time(figures['step_time_s'])} "
                   f"| {_time(figures['recompute_time_s'])} |")
        if figures.get("measured"):
            m = figures["measured"]
            out.append(f"| eager measured ({m['device']}) | {format_bytes(m['peak_bytes'])} | "
                       f"{_time(m['step_time_s'])} | |")
    out.append("")
    if budget is not None:
        verdict = "fits" if plan["feasible"] else f"does **not** fit (lowest reachable {format_bytes(plan['lowest_peak_bytes'])})"
        out.append(f"Budget {format_bytes(budget)}: {verdict}.")
    if figures:
        out.append(f"Eager mode: {_layers(figures)}.")
    out += [line.strip() for line in _eager_notes(plan)]
    reads = plan.get("data_dependent") or []
    if reads:
        out.append("The step depends on tensor values (graph breaks) at " +
                   ", ".join(f"`{r['path']}:{r['line']}` ({r['op']})" for r in reads) +
                   "; planned with the sample batch's values and sizes, apply it in eager mode.")
    rows = _recomputed(plan, top)
    if rows:
        out += ["", "| recomputed | op | module | source |", "|---:|---|---|---|"]
        out += [f"| {format_bytes(d['bytes'])} | `{d['op']}` | `{d['module']}` | `{_where(d)}` |" for d in rows]
    return "\n".join(out) + "\n"


def render_html(plan: dict[str, Any], top: int = 20) -> str:
    esc = html.escape
    rows = "".join(
        f"<tr><td>{esc(format_bytes(d['bytes']))}</td><td><code>{esc(d['op'])}</code></td>"
        f"<td>{esc(d['module'])}</td><td>{esc(_where(d))}</td></tr>"
        for d in _recomputed(plan, top)
    )
    verdict = "fits" if plan["feasible"] else "does not fit"
    budget = format_bytes(plan["budget_bytes"]) if plan["budget_bytes"] else "none"
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>gpulint plan</title></head><body>"
        f"<h1>gpulint plan: {esc(plan['model'])} on {esc(plan['hardware'])} ({esc(plan['dtype'])})</h1>"
        f"<p>Budget {esc(budget)}: {verdict}.</p>"
        "<table border='1'><tr><th></th><th>peak memory</th><th>step time</th><th>recompute</th></tr>"
        f"<tr><td>today</td><td>{esc(format_bytes(plan['baseline']['peak_bytes']))}</td>"
        f"<td>{esc(_time(plan['baseline']['step_time_s']))}</td><td>-</td></tr>"
        f"<tr><td>planned</td><td>{esc(format_bytes(plan['planned']['peak_bytes']))}</td>"
        f"<td>{esc(_time(plan['planned']['step_time_s']))}</td>"
        f"<td>{esc(_time(plan['planned']['recompute_time_s']))}</td></tr></table>"
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


def frontier_svg_timeline(plan: dict[str, Any], w: int = 640, h: int = 240, pad: int = 30) -> str:
    """Live memory over the step, today (grey) and planned (blue), as an inline SVG."""
    series = [plan["timeline"]["baseline"], plan["timeline"]["planned"]]
    ys = [p[1] for s in series for p in s] or [0]
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}'>"]
    for s, color in zip(series, ("#999", "#1f6feb")):
        norm = [(p[0] / (max(x for x, _ in s) or 1), p[1]) for p in s]
        pts = _polyline(norm, 0, 1, 0, max(ys), w, h, pad)
        parts.append(f"<polyline fill='none' stroke='{color}' stroke-width='2' points='{pts}'/>")
    parts.append(f"<text x='{pad}' y='15' font-size='12'>peak {html.escape(format_bytes(max(ys)))}</text></svg>")
    return "".join(parts)


def sweep_svg(rows: list[dict[str, Any]], w: int = 640, h: int = 400, pad: int = 50) -> str:
    """The frontier of a sweep: predicted step time against predicted peak."""
    pts = [(r["peak_bytes"] / 2**20, r["step_time_s"]) for r in rows]
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
