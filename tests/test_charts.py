"""gpulint/charts.py: every chart has a title, axes with units, ticks, a legend off the data, a point per budget,
the budget line, and colours that read on light and dark backgrounds. tests/test_charts_browser.py renders them."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

from gpulint import charts
from gpulint.planner import planfile
from gpulint.planner.report import sweep_svg, timeline_svg

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_PLAN = ROOT / "tests" / "bot" / "fixtures" / "plan.json"
SVG = "{http://www.w3.org/2000/svg}"


def _contrast(a: str, b: str) -> float:
    def luminance(colour: str) -> float:
        rgb = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_every_colour_reads_on_githubs_light_and_dark_backgrounds():
    for colour in (*charts.PALETTE, charts.GREEN):
        for background in charts.BACKGROUNDS.values():
            assert _contrast(colour.hex, background) >= 3.0, (colour.name, background)


def _plan(**changes) -> planfile.Plan:
    plan = planfile.load(FIXTURE_PLAN)
    for key, value in changes.items():
        setattr(plan, key, value)
    return plan


def _parts(svg: str):
    root = ElementTree.fromstring(svg)
    texts = {t.text: t for t in root.iter(f"{SVG}text")}
    return root, texts


def _plot_top(root) -> float:
    """The top of the plot: the y axis line's upper end."""
    axes = [line for line in root.iter(f"{SVG}line") if line.get("class") == "gl-axis"
            and line.get("x1") == line.get("x2") and float(line.get("y2")) - float(line.get("y1")) > 100]
    return float(axes[0].get("y1"))


def test_frontier_svg_has_axes_units_ticks_a_point_per_budget_the_budget_line_and_a_legend_off_the_data():
    plan = _plan(budget_bytes=24e9, budget_unit="GB")
    root, texts = _parts(sweep_svg(plan))
    assert "predicted peak memory (GB)" in texts and "predicted step time (ms)" in texts  # ms, not seconds
    assert {"a plan per budget (compiled form)", "today", "budget 24.00 GB"} <= texts.keys()  # the legend
    ticks = [t for t in root.iter(f"{SVG}text") if t.get("class") == "gl-tick"]
    assert len(ticks) >= 8 and all(re.fullmatch(r"[\d,.]+", t.text) for t in ticks)
    tips = [c.find(f"{SVG}title").text for c in root.iter(f"{SVG}circle") if c.find(f"{SVG}title") is not None]
    assert len([t for t in tips if t.startswith("budget ")]) == len(plan.sweep) == 9  # a point per budget
    assert tips[0] == "budget 14.00 GB: peak 13.72 GB, step 476.74 ms"
    dashed = [line for line in root.iter(f"{SVG}line") if line.get("stroke-dasharray")]
    assert any(line.get("x1") == line.get("x2") for line in dashed)  # the budget: a vertical line on this chart
    top = _plot_top(root)
    legend = [t for t in root.iter(f"{SVG}text") if t.text in ("today", "budget 24.00 GB")]
    assert all(float(t.get("y")) < top for t in legend)  # legend above the plot, never over the data
    points = [float(c.get("cy")) for c in root.iter(f"{SVG}circle") if c.find(f"{SVG}title") is not None]
    assert all(y > top for y in points)


def test_timeline_svg_has_both_series_and_the_budget_in_its_unit():
    root, texts = _parts(timeline_svg(_plan(budget_unit="GB")))
    assert {"today", "with the plan (compiled form)", "budget 24.00 GB", "live memory (GB)",
            "progress through the step (%)"} <= texts.keys()
    assert len(list(root.iter(f"{SVG}polyline"))) == 2
    colours = {p.get("stroke") for p in root.iter(f"{SVG}polyline")}
    assert colours == {charts.RED.hex, charts.BLUE.hex}


def test_svg_text_from_data_is_escaped():
    svg = charts.svg_chart([charts.Series("<script>x</script>", [(0, 1), (1, 2)])], title="a & b", x_label="x",
                           y_label="y")
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "a &amp; b" in svg
    ElementTree.fromstring(svg)


def test_mermaid_chart_pins_its_colours_and_has_a_legend_line():
    series = [charts.Series("today", [(0, 1.5), (50, 3.25), (100, 2.0)], charts.RED),
              charts.Series("base", [(0, 1.0), (50, 2.0), (100, 1.0)], charts.PURPLE)]
    text = charts.mermaid_line_chart(series, title='Memory "now"', x_label="progress (%)", y_label="GB",
                                     rules=[charts.Rule("budget 3.00 GB", 3.0)])
    assert '"plotColorPalette": "#e5534b, #8957e5, #2da44e"' in text  # in the order of the lines
    assert "title \"Memory 'now'\"" in text and "x-axis \"progress (%)\" [0, 50, 100]" in text
    assert "line [1.5, 3.25, 2]" in text and "line [3, 3, 3]" in text and "y-axis \"GB\" 0 --> 3.5" in text
    assert text.rstrip().endswith("🟥 today · 🟪 base · 🟩 budget 3.00 GB")


def test_nice_ticks():
    assert charts.nice_ticks(0, 303.6) == [0, 50, 100, 150, 200, 250, 300, 350]
    assert charts.nice_ticks(1.76, 2.2) == [1.7, 1.8, 1.9, 2.0, 2.1, 2.2]


def test_benchmark_frontier_plot_keeps_its_legend_off_the_data(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("planner_frontier", ROOT / "bench" / "planner_frontier.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    svg = bench.svg({"none": [(100, 0.010)], "full checkpointing": [(60, 0.014)], "torch dp": [(70, 0.012)],
                            "torch ilp": [(65, 0.0125)], "gpulint": [(61, 0.0128), (90, 0.0105)]}, "gpt2")
    root, texts = _parts(svg)
    names = {"none", "full checkpointing", "torch dp", "torch ilp", "gpulint"}
    assert names | {"predicted step time (ms)"} <= texts.keys()
    top = _plot_top(root)
    assert all(float(texts[name].get("y")) < top for name in names)  # every legend entry above the plot
