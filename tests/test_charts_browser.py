"""Every chart rendered in a real headless browser (Debian's Chromium), light and dark, and its screenshot checked
for what the chart claims: each series' colour is drawn, in the plot and in the legend, the budget line is there,
and the background is the theme's. Screenshots are written under out/charts/.

Needs `chromium` (and `fonts-noto-color-emoji` for the PR comment's legend squares) and Mermaid's bundle (`make
mermaid`); .ci/run installs them. Missing, the test is skipped on a developer's machine and fails in CI."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from gpulint import charts

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "out" / "charts"
FIXTURE_PLAN = ROOT / "tests" / "bot" / "fixtures" / "plan.json"
THEMES = ("light", "dark")


def _screenshots_module():
    spec = importlib.util.spec_from_file_location("chart_screenshots", ROOT / "docs" / "chart_screenshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


shots = _screenshots_module()


def _need(ready: bool, what: str) -> None:
    if not ready:
        if os.environ.get("CI"):
            pytest.fail(f"{what} is missing: .ci/run installs it")
        pytest.skip(f"{what} is not installed")


@pytest.fixture(scope="module")
def image():
    Image = pytest.importorskip("PIL.Image")
    _need(shots.chromium() is not None, "chromium (apt-get install chromium)")
    return Image


def _pixels(img, box: tuple[int, int, int, int] | None = None) -> list[tuple[int, int, int]]:
    """The (R, G, B) pixels inside `box` (left, top, right, bottom), or of the whole image."""
    data = (img.convert("RGB").crop(box) if box else img.convert("RGB")).tobytes()
    return list(zip(data[0::3], data[1::3], data[2::3]))


def _count(img, colour: str, box: tuple[int, int, int, int] | None = None, tolerance: int = 60) -> int:
    """Pixels within `tolerance` (summed over R, G, B) of `colour` inside `box`."""
    target = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    return sum(1 for px in _pixels(img, box) if sum(abs(a - b) for a, b in zip(px, target)) <= tolerance)


def _hue(img, box, name: str) -> int:
    """Pixels of a clearly red, blue or green hue (the emoji squares of the Mermaid chart's legend)."""
    test = {"red": lambda r, g, b: r > 170 and g < 110 and b < 110,
            "blue": lambda r, g, b: b > 170 and r < 110 and g < 190,
            "green": lambda r, g, b: g > 140 and r < 140 and b < 140,
            "purple": lambda r, g, b: r > 110 and b > 150 and g < 110}[name]
    return sum(1 for px in _pixels(img, box) if test(*px))


def _assert_background(img, theme: str) -> None:
    expected = shots.THEMES[theme][0]
    assert _count(img, expected, (0, 0, 4, 4), tolerance=12) == 16, f"{theme}: {img.convert('RGB').getpixel((1, 1))}"


def _check_svg_chart(image, svg: str, name: str, series: list[charts.Colour], legend_rows: int = 1) -> None:
    """An SVG chart of gpulint/charts.py: plot below the legend band, which starts at y = 40."""
    page = OUT / f"{name}.svg"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(svg, encoding="utf-8")
    plot_top = 50 + 20 * legend_rows + 8
    for theme in THEMES:
        png = OUT / f"{name}-{theme}.png"
        shots.screenshot(page, png, 720, 380, theme)
        img = image.open(png)
        _assert_background(img, theme)
        for colour in series:
            assert _count(img, colour.hex, (74, plot_top, 696, 328)) >= 20, (name, theme, colour.name, "plot")
            assert _count(img, colour.hex, (74, 40, 696, plot_top - 4)) >= 10, (name, theme, colour.name, "legend")
        # Axes and ticks: text in the left and bottom margins, in the theme's text colour.
        text = shots.THEMES[theme][1]
        assert _count(img, text, (0, plot_top, 74, 380), tolerance=200) >= 30, (name, theme, "y axis")
        assert _count(img, text, (74, 330, 720, 380), tolerance=200) >= 30, (name, theme, "x axis")


def _planner_plan():
    from gpulint.planner import planfile

    plan = planfile.load(FIXTURE_PLAN)
    plan.budget_unit = "GB"
    plan.budget_bytes = 20e9  # inside the sweep's range: the budget line lies among the points
    return plan


def test_frontier_svg_in_a_browser(image):
    from gpulint.planner.report import sweep_svg

    _check_svg_chart(image, sweep_svg(_planner_plan()), "frontier", [charts.BLUE, charts.RED, charts.GREEN])


def test_memory_timeline_svg_in_a_browser(image):
    from gpulint.planner.report import timeline_svg

    _check_svg_chart(image, timeline_svg(_planner_plan()), "timeline", [charts.RED, charts.BLUE, charts.GREEN])


def test_benchmark_frontier_plot_in_a_browser(image, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("planner_frontier", ROOT / "bench" / "planner_frontier.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    svg = bench.svg({"none": [(100, 0.010)], "full checkpointing": [(60, 0.014)],
                     "torch dp": [(70, 0.012), (80, 0.011)],
                     "torch ilp": [(65, 0.0125)], "gpulint": [(61, 0.0128), (75, 0.0115), (90, 0.0105)]}, "gpt2")
    _check_svg_chart(image, svg, "bench-frontier", [charts.GREY, charts.YELLOW, charts.RED, charts.ORANGE, charts.BLUE])


def test_html_report_charts_in_a_browser(image, tmp_path):
    from gpulint.bot.data import load_plan
    from gpulint.bot.report import ReportInput, render_html

    plan = json.loads(FIXTURE_PLAN.read_text())
    plan.update(budget_unit="GB", budget_bytes=20e9)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    page = OUT / "report.html"
    page.write_text(render_html(ReportInput(plan=load_plan(tmp_path / "plan.json"), linted=False)), encoding="utf-8")
    for theme in THEMES:
        png = OUT / f"report-{theme}.png"
        shots.screenshot(page, png, 1100, 1400, theme)
        img = image.open(png)
        _assert_background(img, theme)
        for colour in (charts.RED, charts.BLUE, charts.GREEN):
            assert _count(img, colour.hex) >= 100, (theme, colour.name)


def test_pr_comment_mermaid_chart_in_a_browser(image):
    _need(shots.MERMAID_JS.is_file(), f"Mermaid's bundle ({shots.MERMAID_JS}; make mermaid)")
    from gpulint.bot.data import load_plan
    from gpulint.bot.report import ReportInput, render_markdown

    markdown = render_markdown(ReportInput(plan=load_plan(FIXTURE_PLAN), linted=False))
    for theme in THEMES:
        png = OUT / f"pr-comment-chart-{theme}.png"
        shots.render_pr_chart(markdown, png, theme)
        img = image.open(png)
        _assert_background(img, theme)
        width, height = img.size
        # The chart: each line in its pinned colour (the "today" line is no pale lavender in either theme).
        for colour in (charts.RED, charts.BLUE, charts.GREEN):
            assert _count(img, colour.hex, (0, 0, width, height - 60), tolerance=45) >= 50, (theme, colour.name)
        # The legend line under it: a red, a blue and a green square, and its text.
        legend = (0, height - 70, width, height)
        for hue in ("red", "blue", "green"):
            assert _hue(img, legend, hue) >= 30, (theme, hue)
