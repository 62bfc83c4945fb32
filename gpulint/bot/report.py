"""Render findings and a plan as the PR comment (Markdown), the job summary, or a self-contained HTML report."""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import markupsafe

from gpulint import charts, units
from gpulint.bot import delta as delta_mod
from gpulint.bot import markdown as md
from gpulint.bot.data import Finding, Frame, Plan
from gpulint.bot.delta import Delta, Gate
from gpulint.bot.diff import PullDiff
from gpulint.bot.planpatch import PlanPatch
from gpulint.verdict import Verdict

MARKER = "<!-- gpulint:report -->"
COMMENT_LIMIT = 65_536  # issue comment and review bodies
CHECK_SUMMARY_LIMIT = 65_535
JOB_SUMMARY_LIMIT = 1024 * 1024
CHART_POINTS = 24
TOP_DECISIONS = 10
TOP_DELTA = 10  # changed activations listed in the delta section
TOP_LAYERS = 5
PLAN_PATCH_SHOWN = 16_000  # characters of the plan's diff shown in a comment; a longer one is named, not shown
MAX_PATCHES = 20
CHAIN_SHOWN = 6  # frames of a call chain shown in a comment: the first two and the last three around an ellipsis
SEVERITY_ICON = {"error": "🛑", "warning": "⚠️", "info": "ℹ️"}
DEFAULT_FULL_REPORT = "the workflow run's job summary and its `gpulint-report` artifact"


@dataclass
class ReportInput:
    findings: list[Finding] = field(default_factory=list)
    plan: Plan | None = None
    linted: bool = True  # False when no findings file was given: the report says nothing about findings
    changed_only: bool = False  # True when `findings` were filtered to the PR's changed lines
    total_findings: int | None = None  # before that filter
    link_base: str | None = None  # https://github.com/o/r/blob/<sha>/ ; no links when None
    source_root: Path | None = None  # where to read files for patch previews (None: show replacements)
    full_report: str = DEFAULT_FULL_REPORT
    unmatched: int = 0  # findings in no file the PR changes (with changed_only)
    unmatched_example: str = ""
    files_listed: tuple[int, int] | None = None  # (listed, changed) when GitHub listed only part of the PR's files
    base_plan: Plan | None = None
    threshold_percent: float = delta_mod.DEFAULT_THRESHOLD_PERCENT  # how much today's peak may grow (the gate)
    delta: Delta | None = None  # the base's plan against the head's (`plan`): made by `compare_plans`
    gate: Gate | None = None  # the memory gate: the delta's, or the head plan's alone when there is no base
    plan_patch: PlanPatch | None = None  # `gpulint plan --patch` output, shown first under "Suggested patches"

    def compare_plans(self, diff: PullDiff | None = None) -> None:
        """The delta (when there is a base plan) and the memory gate (when there is a plan), activations on lines
        `diff` added first."""
        if self.plan is None:
            return
        if self.base_plan is not None:
            self.delta = delta_mod.compare(self.base_plan, self.plan, self.threshold_percent, diff)
            self.gate = self.delta.gate
        else:
            self.gate = delta_mod.memory_gate(self.plan, None, self.threshold_percent)

    def note_unmatched(self, elsewhere: list[Finding]) -> None:
        """Count the findings in no changed file (shown with one example path when only changed lines count)."""
        if elsewhere and self.changed_only:
            self.unmatched, self.unmatched_example = len(elsewhere), elsewhere[0].path


# ---------------------------------------------------------------------------------------------- formatting


def signed_bytes(n: float, unit: str | None = None) -> str:
    """A change in bytes with its sign: +8.00 MiB, −2.10 MiB, 0 B."""
    return ("+" if n > 0 else "−" if n < 0 else "") + units.format_bytes(abs(n), unit)


def percent_change(before: float, after: float) -> str:
    if not before:
        return ""
    return f"{(after - before) / before * 100:+.1f}%"


def downsample(values: list[float], points: int) -> list[float]:
    """At most `points` samples, each the max of its bucket so that no peak disappears from the chart."""
    if len(values) <= points:
        return list(values)
    out = []
    for i in range(points):
        lo, hi = i * len(values) // points, (i + 1) * len(values) // points
        out.append(max(values[lo:max(hi, lo + 1)]))
    return out


def source_link(base: str | None, path: str, line: int | None) -> str | None:
    """A link to a line of the repository: only for a plain relative path (no scheme, no `..`, no query)."""
    if not base or not re.fullmatch(r"[\w.@+=,~ -]+(?:/[\w.@+=,~ -]+)*", path) or ".." in path.split("/"):
        return None
    return f"{base.rstrip('/')}/{path.replace(' ', '%20')}" + (f"#L{line}" if line else "")


def chain_markdown(f: Finding, base: str | None) -> md.Md | None:
    """`per step via train.py:120 loop over train_loader → trainer.py:88 step()`, each place linked to its line."""
    if not f.chain:
        return None
    frames: list[Frame | None] = list(f.chain)
    hidden = f.chain_elided
    if len(frames) > CHAIN_SHOWN:
        hidden += len(frames) - 5
        frames = frames[:2] + [None] + frames[-3:]
    elif hidden:
        half = len(frames) // 2
        frames = frames[:half] + [None] + frames[half:]
    parts = []
    for fr in frames:
        if fr is None:
            parts.append(md.text(f"… {hidden} more …"))
        else:
            where = md.link(md.code(f"{fr.path}:{fr.line}"), source_link(base, fr.path, fr.line))
            parts.append(md.Md(f"{where} {md.text(fr.name)}".rstrip()))
    return md.Md("per step via " + " → ".join(parts))


# ---------------------------------------------------------------------------------------------- patches


def apply_edits(lines: list[str], edits) -> list[str]:
    """Apply 1-based line/column edits (end exclusive) to a list of lines (without newlines), last edit first."""
    text = "\n".join(lines)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln) + 1)

    def offset(line: int, col: int) -> int:
        line = min(max(line, 1), len(lines) + 1)
        return min(starts[line - 1] + col - 1, len(text))

    for e in sorted(edits, key=lambda e: (e.line, e.column), reverse=True):
        a, b = offset(e.line, e.column), offset(e.end_line, e.end_column)
        text = text[:a] + e.content + text[b:]
    return text.split("\n")


def patch_preview(finding: Finding, root: Path | None) -> tuple[str, str]:
    """(kind, body): a unified diff when the file can be read, else the replacement text of each edit."""
    if root is not None:
        path = (root / finding.path).resolve()
        try:
            inside = path.is_relative_to(root.resolve())
            original = path.read_text(encoding="utf-8").splitlines() if inside else None
        except (OSError, UnicodeDecodeError):
            original = None
        if original is not None:
            patched = apply_edits(original, finding.edits)
            diff = difflib.unified_diff(original, patched, f"a/{finding.path}", f"b/{finding.path}", n=2, lineterm="")
            return "diff", "\n".join(diff)
    parts = []
    for e in finding.edits:
        parts.append(f"# {finding.path}:{e.line}:{e.column}-{e.end_line}:{e.end_column} becomes:\n{e.content}")
    return "text", "\n".join(parts)


# ---------------------------------------------------------------------------------------------- rendering


@functools.cache
def _environment(markdown: bool) -> jinja2.Environment:
    loader = jinja2.PackageLoader("gpulint", "templates")
    if markdown:
        # Anything a Markdown template prints is escaped unless a filter already made it safe Markdown.
        env = jinja2.Environment(
            loader=loader,
            autoescape=False,
            finalize=lambda v: v if isinstance(v, md.Md) else md.text(v),
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
        )
        env.filters.update(
            text=md.text,
            message=md.message,
            html=md.html,
            code=md.code,
            fence=md.fence,
            link=lambda label, url: md.link(label if isinstance(label, md.Md) else md.text(label), url),
            raw=md.Md,  # only for strings built by this module (numbers, chart data)
        )
    else:
        env = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined)
        env.filters["message"] = html_message
    # bytes(unit): a peak or budget in the plan's one unit; size(unit): an activation's size in that unit's family.
    figures = {
        "bytes": lambda n, unit=None: units.format_bytes(n, unit),
        "size": lambda n, unit=None: units.format_bytes(n, like=unit),
        "signed_bytes": signed_bytes,
        "time": units.format_time,
        "change": percent_change,
    }
    if markdown:  # our own figures: digits and units, nothing to escape
        figures = {name: _safe_markdown(f) for name, f in figures.items()}
    env.filters.update(figures)
    return env


def _safe_markdown(format_figure):
    return lambda *args: md.Md(format_figure(*args))


def html_message(value: str) -> markupsafe.Markup:
    """A rule's message in HTML: its `code spans` as <code>, everything escaped."""
    parts = re.split(r"(`+)(.+?)\1", value)
    out = []
    for i in range(0, len(parts), 3):  # text, ticks, code, text, ...
        out.append(markupsafe.escape(parts[i]))
        if i + 2 < len(parts):
            out.append(markupsafe.Markup("<code>%s</code>") % parts[i + 2])
    return markupsafe.Markup("").join(out)


@dataclass
class _Blocks:
    """The report's parts that grow with the input, each rendered once: trimming only chooses how many to show.
    Rows are rendered in order until they fill the size limit: a row past it could never be shown."""

    rows: list[md.Md]  # the first findings' rows (all of them when they fit the limit)
    patches: list[tuple[int, md.Md]]  # (index of the finding, block)


def _row(data: ReportInput, f: Finding) -> dict:
    return {
        "f": f,
        "icon": SEVERITY_ICON.get(f.severity, "•"),
        "where": f"{f.path}:{f.line}",
        "where_url": source_link(data.link_base, f.path, f.line),
        "chain_links": [(fr, source_link(data.link_base, fr.path, fr.line)) for fr in f.chain],
    }


def _patch_items(data: ReportInput) -> list[tuple[int, dict]]:
    """(index of the finding, patch) for the first MAX_PATCHES findings that carry a fix."""
    out = []
    for i, f in enumerate(data.findings):
        if f.edits and len(out) < MAX_PATCHES:
            kind, body = patch_preview(f, data.source_root)
            out.append((i, {"f": f, "kind": kind, "body": body}))
    return out


def finding_costs(data: ReportInput) -> list[str]:
    """Each finding's estimated cost per step (`~1.2 ms per step (34%)`; empty when unpriced), in the findings'
    order, when the plan carries the step's launch profile (linter/pricing.py says how each is estimated)."""
    launch = data.plan.launch if data.plan is not None else None
    if launch is None:
        return [""] * len(data.findings)
    from gpulint.linter.pricing import cost_text, costs

    return [cost_text(cost) for cost in costs(data.findings, launch)]


def _blocks(data: ReportInput, limit: int) -> _Blocks:
    macros = _environment(markdown=True).get_template("_blocks.md.j2").module
    rows, used = [], 0
    for f, cost in zip(data.findings, finding_costs(data)):
        if used > limit:
            break
        rows.append(md.Md(macros.row({**_row(data, f), "chain": chain_markdown(f, data.link_base), "cost": cost})))
        used += len(rows[-1]) + 1
    patches = [(i, md.Md(macros.patch(p))) for i, p in _patch_items(data)]
    return _Blocks(rows, patches)


def _context(data: ReportInput, blocks: _Blocks, shown: int, picked: list[int]) -> dict:
    """The template's variables with the first `shown` findings and the patches `picked` (indices into
    blocks.patches)."""
    plan = data.plan
    counts = {s: 0 for s in ("error", "warning", "info")}
    for f in data.findings:
        if f.severity in counts:
            counts[f.severity] += 1
    patches = [blocks.patches[k][1] for k in picked]
    patches_possible = sum(1 for i, _ in blocks.patches if i < shown)
    ctx = {
        "marker": md.Md(MARKER),
        "rows": blocks.rows[:shown],
        "patches": patches,
        "patches_omitted": patches_possible - len(patches),
        "counts": counts,
        "total": len(data.findings),
        "scan_total": data.total_findings if data.total_findings is not None else len(data.findings),
        "changed_only": data.changed_only,
        "omitted": len(data.findings) - shown,
        "full_report": md.Md(data.full_report),
        "unmatched": data.unmatched,
        "unmatched_example": data.unmatched_example,
        "files_listed": data.files_listed,
        "linted": data.linted,
        "plan": plan,
    }
    if plan is not None:
        ctx.update(_plan_context(data, plan))
    ctx.update(_delta_context(data))
    ctx["gate"] = data.gate
    ctx["plan_patch"] = _plan_patch_context(data)
    return ctx


def plan_patch_figures(plan: Plan | None) -> str | None:
    """What applying the plan buys, from the head's plan: "peak 21.4 GB → 17.9 GB, +6.0% step time"."""
    if plan is None:
        return None
    change = percent_change(plan.baseline.step_time_s, plan.planned.step_time_s) or "+0.0%"
    unit = verdict(plan).unit
    return (f"peak {units.format_bytes(plan.baseline.peak_bytes, unit)} → "
            f"{units.format_bytes(plan.planned.peak_bytes, unit)}, {change} step time")


def _plan_patch_context(data: ReportInput) -> dict | None:
    if data.plan_patch is None:
        return None
    text = data.plan_patch.text
    return {"text": text if len(text) <= PLAN_PATCH_SHOWN else None, "chars": len(text),
            "buys": plan_patch_figures(data.plan)}


def _delta_context(data: ReportInput) -> dict:
    delta = data.delta
    if delta is None:
        return {"delta": None}
    b, h = delta.base, delta.head
    rows = []
    for a in delta.activations[:TOP_DELTA]:
        url = source_link(data.link_base, a.path, a.line) if a.path and a.status != "gone" else None
        rows.append({"a": a, "url": url, "where": f"{a.path}:{a.line}" if a.path else None})

    def fits(p: Plan) -> str:
        if not p.budget_bytes:
            return "no budget"
        return "fits ✅" if p.feasible else "does not fit 🛑"

    return {
        "delta": delta,
        "delta_rows": rows,
        "delta_more": max(0, len(delta.activations) - TOP_DELTA),
        "delta_layers": delta.contributors[:TOP_LAYERS],
        "delta_verdicts": (fits(b), fits(h)),
        "delta_chart": _delta_chart(delta),
        "delta_unit": verdict(h).unit,  # the head's budget's unit, as the head's plan report
    }


def _delta_series(delta: Delta, unit: str, points: int | None = None) -> list[charts.Series]:
    """Today's memory over the step at the base (purple) and at the head (red), in `unit`."""
    thin = (lambda values: downsample(values, points)) if points else list
    return charts.timeline_series([("base", thin(delta.base.timeline_baseline), charts.PURPLE),
                                   ("head", thin(delta.head.timeline_baseline), charts.RED)], unit)


def _delta_chart(delta: Delta) -> md.Md | None:
    """The comment's Mermaid chart of the base and the head over the step, with the budget and its legend line."""
    unit = verdict(delta.head).unit
    series = _delta_series(delta, unit, CHART_POINTS)
    if not series:
        return None
    return md.Md(charts.mermaid_line_chart(
        series, title=f"Memory over one training step ({unit}): base and head", x_label="progress through the step (%)",
        y_label=unit, rules=charts.budget_rules(delta.head.budget_bytes, unit)))


def verdict(plan: Plan) -> Verdict:
    """Which form fits the budget, as the planner's own reports say it."""
    eager = plan.eager
    unit = units.display_unit(plan.budget_unit, plan.budget_bytes, plan.baseline.peak_bytes)
    return Verdict.of(plan.budget_bytes, unit,
                      compiled_peak=plan.planned.peak_bytes, compiled_fits=plan.feasible,
                      lowest_peak_bytes=plan.lowest_peak_bytes,
                      eager=(eager.peak_bytes, eager.fits_budget, eager.error) if eager is not None else None)


def _plan_context(data: ReportInput, plan: Plan) -> dict:
    top = [
        {"d": d, "url": source_link(data.link_base, d.path, d.line) if d.path else None}
        for d in plan.recomputed[:TOP_DECISIONS]
    ]
    said = verdict(plan)
    # The headline's "today -> planned" figures: the recommended form's, else the compiled form's (the lowest peak).
    eager_shown = plan.eager is not None and said.recommended is not None and said.recommended.name == "eager"
    headline = plan.eager if eager_shown else plan.planned
    return {
        "top": top,
        "more_decisions": max(0, len(plan.recomputed) - TOP_DECISIONS),
        "unit": said.unit,
        "verdict": said,
        "headline": {"form": "eager" if eager_shown else "compiled", "peak_bytes": headline.peak_bytes,
                     "step_time_s": headline.step_time_s},
        "chart": mermaid_timeline(plan, said.unit),
        "chart_rows": _chart_rows(plan),
    }


def _timeline_series(plan: Plan, unit: str, points: int | None = None) -> list[charts.Series]:
    """Today's and the compiled plan's memory over the step (at most `points` samples each)."""
    thin = (lambda values: downsample(values, points)) if points else list
    return charts.timeline_series([("today", thin(plan.timeline_baseline), charts.RED),
                                   ("with the plan (compiled form)", thin(plan.timeline_planned), charts.BLUE)], unit)


def mermaid_timeline(plan: Plan, unit: str) -> md.Md | None:
    """The PR comment's chart of memory over the step (Mermaid, with its legend line), or None without a timeline."""
    series = _timeline_series(plan, unit, CHART_POINTS)
    if not series:
        return None
    return md.Md(charts.mermaid_line_chart(
        series, title=f"Memory over one training step ({unit})", x_label="progress through the step (%)",
        y_label=unit, rules=charts.budget_rules(plan.budget_bytes, unit)))


def _chart_rows(plan: Plan) -> list[tuple[int, float | None, float | None]]:
    """The chart's figures as a table (for readers who cannot see the chart): eight points along the step."""
    base = downsample(plan.timeline_baseline, CHART_POINTS)
    planned = downsample(plan.timeline_planned, CHART_POINTS)
    n = max(len(base), len(planned))
    if n < 2:
        return []
    return [(round(i * 100 / (n - 1)), base[i] if i < len(base) else None, planned[i] if i < len(planned) else None)
            for i in range(0, n, max(1, n // 8))]


def render_markdown(data: ReportInput, template: str = "pr_comment.md.j2", limit: int = COMMENT_LIMIT) -> str:
    """The PR comment (or job summary) under `limit` characters. Findings come first: patches are left out before
    any finding is, then the least severe findings (they are sorted most severe first). Each row and patch is rendered
    at most once, and no row past the limit is rendered at all: the time grows with the limit, not with the number of
    findings left out."""
    tpl = _environment(markdown=True).get_template(template)
    blocks = _blocks(data, limit)
    n = len(blocks.rows)
    if n == len(data.findings):
        body = tpl.render(_context(data, blocks, n, list(range(len(blocks.patches)))))
        if len(body) <= limit:
            return body
    # The fixed parts, with the notes about what was left out at their longest.
    room = limit - len(tpl.render(_context(data, blocks, 0, []))) - 200
    shown, used = 0, 0
    while shown < n and used + len(blocks.rows[shown]) + 1 <= room:
        used += len(blocks.rows[shown]) + 1
        shown += 1
    picked = []
    for k, (i, block) in enumerate(blocks.patches):  # every patch that still fits, in the findings' order
        if i < shown and used + len(block) + 2 <= room:
            used += len(block) + 2
            picked.append(k)
    body = tpl.render(_context(data, blocks, shown, picked))
    while len(body) > limit and (picked or shown):  # the estimate was short (never expected)
        if picked:
            picked.pop()
        else:
            shown -= 1
        body = tpl.render(_context(data, blocks, shown, picked))
    if len(body) > limit:  # the plan section alone is too long (never expected): cut hard but keep the marker
        note = "\n\n… report cut to fit GitHub's size limit; see " + data.full_report + "\n"
        body = body[: limit - len(note)] + note
    return body


def render_html(data: ReportInput) -> str:
    ctx = _context(data, _Blocks([], []), len(data.findings), [])
    ctx["rows"] = [_row(data, f) for f in data.findings]
    ctx["patches"] = [p for _, p in _patch_items(data)]
    ctx["svg_timeline"] = svg_timeline(data.plan) if data.plan else None
    ctx["svg_frontier"] = svg_frontier(data.plan) if data.plan else None
    ctx["svg_delta"] = svg_delta(data.delta) if data.delta else None
    return _environment(markdown=False).get_template("report.html.j2").render(ctx)


# ---------------------------------------------------------------------------------------------- SVG charts


def svg_timeline(plan: Plan) -> markupsafe.Markup | None:
    """Memory over the step, today and with the plan, against the budget (charts.svg_chart escapes every text)."""
    unit = verdict(plan).unit
    series = _timeline_series(plan, unit)
    return markupsafe.Markup(charts.timeline_svg(series, plan.budget_bytes, unit)) if series else None


def svg_delta(delta: Delta) -> markupsafe.Markup | None:
    """Today's memory over the step at the base and at the head (each over the whole width), and the budget."""
    unit = verdict(delta.head).unit
    series = _delta_series(delta, unit)
    if len(series) < 2:
        return None
    return markupsafe.Markup(charts.timeline_svg(series, delta.head.budget_bytes, unit))


def svg_frontier(plan: Plan) -> markupsafe.Markup | None:
    """The frontier of a sweep: a point per budget, today's step and the budget."""
    if len(plan.sweep) < 2:
        return None
    points = [charts.FrontierPoint(p.budget_bytes, p.peak_bytes, p.step_time_s, p.feasible) for p in plan.sweep]
    today = (plan.baseline.peak_bytes, plan.baseline.step_time_s)
    return markupsafe.Markup(charts.frontier_svg(points, today, plan.budget_bytes, verdict(plan).unit))
