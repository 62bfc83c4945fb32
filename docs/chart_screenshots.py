"""Render gpulint's charts in headless Chromium and screenshot them: the README's picture of the PR comment's chart,
and the slow test that checks every chart shows what it claims (tests/test_charts_browser.py).

    python docs/chart_screenshots.py [--plan out/plan.json] [--out docs/images/pr-comment-chart.png]
    python docs/chart_screenshots.py --plan out/head/plan.json --base-plan out/plan.json \
        --out docs/images/pr-delta-chart.png      # the chart of what a PR does to memory (base, head, budget)

Needs Debian's `chromium` and Mermaid's bundle (`make mermaid` puts it under .cache/mermaid); nothing is downloaded
at run time. The plan defaults to the one `make demo` writes.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MERMAID_JS = ROOT / ".cache" / "mermaid" / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]
THEMES = {"light": ("#ffffff", "#1f2328", "default"), "dark": ("#0d1117", "#e6edf3", "dark")}  # GitHub's pages


def chromium() -> str | None:
    return os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(page: Path, png: Path, width: int, height: int, theme: str = "light", wait_ms: int = 0) -> None:
    """`page` (an SVG or HTML file) as `png`, in a fresh profile; `theme` sets prefers-color-scheme."""
    browser = chromium()
    if browser is None:
        raise RuntimeError("chromium is not installed (Debian: apt-get install chromium)")
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpulint-chromium-") as profile:
        command = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                   f"--screenshot={png}"]
        if theme == "dark":
            command.append("--force-dark-mode")
        if wait_ms:
            command.append(f"--virtual-time-budget={wait_ms}")  # let scripts (Mermaid) finish drawing
        subprocess.run([*command, page.resolve().as_uri()], check=True, capture_output=True, timeout=120)
    if not png.is_file():
        raise RuntimeError(f"chromium wrote no screenshot of {page}")


def mermaid_block(markdown: str) -> tuple[str, str]:
    """The PR comment's Mermaid chart and the legend line under it."""
    match = re.search(r"```mermaid\n(.*?)\n```\n\n([^\n]+)\n", markdown, re.DOTALL)
    if match is None:
        raise ValueError("the comment has no Mermaid chart")
    return match.group(1), match.group(2)


def pr_chart_page(markdown: str, theme: str) -> str:
    """An HTML page that draws the comment's chart with Mermaid as GitHub does (its light or dark theme, GitHub's
    page colours), with the legend line under it."""
    chart, legend = mermaid_block(markdown)
    background, text, mermaid_theme = THEMES[theme]
    return f"""<!doctype html><html><head><meta charset="utf-8">
<style>body {{ margin: 0; padding: 16px; background: {background}; color: {text};
  font: 14px -apple-system, "Segoe UI", Helvetica, Arial, sans-serif, "Noto Color Emoji"; }}
.mermaid {{ width: 760px; }} p {{ margin: 8px 0 0 0; }}</style>
<script src="{MERMAID_JS.as_uri()}"></script></head><body>
<pre class="mermaid">{html.escape(chart, quote=False)}</pre>
<p id="legend">{html.escape(legend, quote=False)}</p>
<script>mermaid.initialize({{startOnLoad: true, theme: "{mermaid_theme}"}});</script>
</body></html>
"""


def render_pr_chart(markdown: str, png: Path, theme: str = "light") -> None:
    if not MERMAID_JS.is_file():
        raise RuntimeError(f"Mermaid's bundle is missing ({MERMAID_JS}): run `make mermaid`")
    with tempfile.TemporaryDirectory(prefix="gpulint-chart-") as folder:
        page = Path(folder) / "chart.html"
        page.write_text(pr_chart_page(markdown, theme), encoding="utf-8")
        screenshot(page, png, 800, 600, theme, wait_ms=10_000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default=str(ROOT / "out" / "plan.json"), help="a plan (`make demo` writes one)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "images" / "pr-comment-chart.png"))
    parser.add_argument("--base-plan", help="the PR base's plan: the delta's chart (base, head, budget) is drawn")
    parser.add_argument("--theme", choices=sorted(THEMES), default="light")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from gpulint.bot.data import load_plan
    from gpulint.bot.report import ReportInput, render_markdown

    report = ReportInput(plan=load_plan(args.plan), linted=False,
                         base_plan=load_plan(args.base_plan) if args.base_plan else None)
    report.compare_plans()
    markdown = render_markdown(report)  # with a base plan, the delta's chart comes first
    render_pr_chart(markdown, Path(args.out), args.theme)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
