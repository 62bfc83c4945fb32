from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpulint.bot import markdown as md
from gpulint.bot.data import BotInputError, load_findings, load_plan
from gpulint.bot.report import (
    COMMENT_LIMIT,
    MARKER,
    ReportInput,
    apply_edits,
    render_html,
    render_markdown,
)
from gpulint.cli import UsageError

FIXTURES = Path(__file__).parent / "fixtures"

HOSTILE = (
    "<!-- gpulint:report --> @octocat please see #12 | col ``` fence ` tick <script>alert(1)</script> "
    "[x](javascript:alert(1)) $x$ **bold**"
)


def _finding(**over) -> dict:
    base = {
        "code": "GPL401", "name": "scalar-sync-in-step", "message": "`loss.item()` syncs", "severity": "warning",
        "path": "src/train.py", "line": 12, "column": 9, "end_line": 12, "end_column": 20, "fix": None,
        "url": "https://example.org/GPL401",
    }
    base.update(over)
    return base


def _write(tmp_path: Path, name: str, data) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_fixture_report_has_every_section():
    data = ReportInput(load_findings(FIXTURES / "findings.json"), load_plan(FIXTURES / "plan.json"),
                       link_base="https://github.com/o/r/blob/abc/")
    body = render_markdown(data)
    assert body.startswith(MARKER + "\n")
    assert "**4 findings**" in body
    # One statement of which form fits, then the figures, all in the budget's unit (GB: 24e9 bytes).
    assert "Budget 24.00 GB: compiled (`gpulint.planner.compile`) fits at 22.06 GB." in body
    assert "**Peak memory 31.60 GB → 22.06 GB**" in body
    assert "```mermaid\n%%{init:" in body and "\nxychart-beta\n" in body
    assert "🟥 today · 🟦 with the plan (compiled form) · 🟩 budget 24.00 GB" in body  # the chart's legend
    assert "| Step progress | Today | Planned |" in body
    assert "[`examples/train.py:57`](https://github.com/o/r/blob/abc/examples/train.py#L57)" in body
    assert "### Suggested patches" in body and "<details>" in body
    # most severe first
    assert body.index("GPL301") < body.index("GPL101") < body.index("GPL501")


def test_hostile_repository_text_is_neutralised(tmp_path):
    findings = _write(tmp_path, "f.json", [
        _finding(message=HOSTILE, name=HOSTILE, path="src/@octocat|x.py", url="javascript:alert(1)",
                 fix={"applicability": "safe", "edits": [
                     {"line": 12, "column": 1, "end_line": 12, "end_column": 5, "content": "````\n@octocat\n" + MARKER}]}),
    ])
    plan = json.loads((FIXTURES / "plan.json").read_text())
    plan["model"] = HOSTILE
    plan["decisions"][1]["module"] = HOSTILE
    plan["decisions"][1]["op"] = HOSTILE
    data = ReportInput(load_findings(findings), load_plan(_write(tmp_path, "p.json", plan)))
    body = render_markdown(data)
    assert body.startswith(MARKER)
    outside_code = re.sub(r"^(`{3,})[^`\n]*\n.*?\n\1$", "", body, flags=re.DOTALL | re.MULTILINE)  # drop fenced blocks
    outside_code = re.sub(r"(`+)(?:(?!\1).)+?\1", "", outside_code)  # drop code spans
    assert "@octocat" not in outside_code
    assert outside_code.count(MARKER) == 1  # a quoted marker survives only as code, which is not a comment
    assert "<!--" not in outside_code.replace(MARKER, "", 1)
    assert "<script>" not in outside_code
    assert not re.search(r"(?<!\\)\]\(javascript:", outside_code)  # an escaped ] is no link
    # every table row still has exactly its 4 columns: no unescaped | from the message
    for row in [ln for ln in body.splitlines() if ln.startswith("| ⚠️")]:
        assert len(re.findall(r"(?<!\\)\|", re.sub(r"(`+)(?:(?!\1).)+?\1", "", row))) == 5
    # the patch fence is longer than the backtick run inside it
    assert "`````\n# src/@octocat|x.py" in body


def test_html_is_escaped_and_self_contained(tmp_path):
    findings = _write(tmp_path, "f.json", [_finding(message=HOSTILE)])
    data = ReportInput(load_findings(findings), load_plan(FIXTURES / "plan.json"))
    html = render_html(data)
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert "<svg" in html and "<polyline" in html  # timeline
    assert html.count("<title>budget ") == 9  # frontier: a point per budget of the sweep
    assert "src=\"http" not in html and "<link " not in html  # nothing loaded from outside


def test_oversized_report_is_trimmed_least_severe_first(tmp_path):
    many = [_finding(line=i, severity="info", message="x" * 900) for i in range(1, 200)]
    many.append(_finding(line=500, severity="error", message="the one that matters"))
    data = ReportInput(load_findings(_write(tmp_path, "f.json", many)), full_report="the job summary")
    body = render_markdown(data)
    assert len(body) <= COMMENT_LIMIT
    assert "the one that matters" in body
    left_out = int(re.search(r"(\d+) less severe findings? left out", body).group(1))
    shown = body.count("| ℹ️ |")
    assert left_out > 0 and shown + left_out == 199
    assert "the full list is in the job summary" in body


def test_markdown_helpers():
    assert md.code("a`b") == "``a`b``"
    assert md.code("`x") == "`` `x ``"
    assert md.fence("```\n").startswith("````\n")
    assert md.fence("x").startswith("```\n")
    assert md.link(md.text("x"), "javascript:alert(1)") == "x"
    assert md.text("@me #1 <!--") == "@\u200bme #\u200b1 &lt;\\!--"
    assert md.message("use `a|b` now") == "use `a\\|b` now"


def test_apply_edits_multiline():
    lines = ["for p in ps:", "    clip(p)", "done()"]
    from gpulint.bot.data import Edit

    out = apply_edits(lines, [Edit(1, 1, 2, 12, "clip_all(ps)")])
    assert out == ["clip_all(ps)", "done()"]


@pytest.mark.parametrize(
    "content, fragment",
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"a": 1}), "must be a JSON list"),
        (json.dumps([{"code": "GPL1"}]), "findings[0].line: missing"),
        (json.dumps([_finding(line="3")]), "findings[0].line: expected an integer, got str"),
    ],
)
def test_bad_findings_name_the_field(tmp_path, content, fragment):
    path = tmp_path / "f.json"
    path.write_text(content)
    with pytest.raises(BotInputError, match=re.escape(fragment)) as info:
        load_findings(path)
    assert isinstance(info.value, UsageError) and str(path) in str(info.value)


def test_bad_plan_names_the_field(tmp_path):
    plan = json.loads((FIXTURES / "plan.json").read_text())
    plan["schema"] = "gpulint.plan/9"
    with pytest.raises(BotInputError, match="schema: expected 'gpulint.plan/1'"):
        load_plan(_write(tmp_path, "p.json", plan))
    plan["schema"] = "gpulint.plan/1"
    plan["decisions"][0]["action"] = "drop"
    with pytest.raises(BotInputError, match=r"decisions\[0\].action"):
        load_plan(_write(tmp_path, "p.json", plan))


def test_report_cli_writes_files_and_rejects_bad_input(tmp_path, capsys):
    import argparse

    from gpulint.bot.cli import add_report_arguments, run_report

    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    for fmt in ("md", "html", "summary"):
        out = tmp_path / "out" / f"r.{fmt}"
        args = parser.parse_args(["--lint", str(FIXTURES / "findings.json"), "--plan", str(FIXTURES / "plan.json"),
                                  "--format", fmt, "--output", str(out)])
        assert run_report(args) == 0
        assert out.stat().st_size > 1000
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["r.html", "r.md", "r.summary"]  # no temp left
    with pytest.raises(UsageError, match="missing.json"):
        run_report(parser.parse_args(["--lint", str(tmp_path / "missing.json")]))
    with pytest.raises(UsageError, match="nothing to report"):
        run_report(parser.parse_args([]))


def test_plan_without_budget_and_planner_timeline_pairs(tmp_path):
    """The planner writes `budget_bytes: null` when no budget was given, and its timeline as [index, bytes] pairs."""
    plan = json.loads((FIXTURES / "plan.json").read_text())
    plan["budget_bytes"] = None
    plan["timeline"] = {k: [[i, v] for i, v in enumerate(vs)] for k, vs in plan["timeline"].items()}
    data = ReportInput(plan=load_plan(_write(tmp_path, "p.json", plan)))
    body = render_markdown(data)
    assert "No budget: each form recomputes down to its lowest peak" in body and "| Budget |" not in body
    assert "line [8.95, 11.212," in body  # GiB: with no budget, binary units
    assert body.count("    line [") == 2  # no budget line in the chart
    assert "stroke-dasharray" not in render_html(data)


def test_missing_openapi_description_fails_with_the_install_command(tmp_path, monkeypatch):
    from .fakegithub import SPEC_DIR_ENV, spec_dir

    monkeypatch.setenv(SPEC_DIR_ENV, str(tmp_path))
    with pytest.raises(RuntimeError, match="npm install --prefix .cache/octokit @octokit/openapi"):
        spec_dir()


def test_report_against_a_local_git_diff(tmp_path):
    """`--diff-base REF` keeps the findings on lines changed since REF, read from `git diff`."""
    import argparse
    import subprocess

    from gpulint.bot.cli import add_report_arguments, run_report

    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (repo / "src/train.py").write_text("".join(f"line{n}\n" for n in range(1, 21)))
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "base"], check=True)
    lines = [f"line{n}\n" for n in range(1, 21)]
    lines[9] = "changed10\n"
    (repo / "src/train.py").write_text("".join(lines))
    subprocess.run([*git, "commit", "-q", "-am", "change"], check=True)
    findings = _write(tmp_path, "f.json", [_finding(line=10, message="on the change"),
                                           _finding(line=2, message="old code")])
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    out = tmp_path / "r.md"
    args = parser.parse_args(["--lint", str(findings), "--diff-base", "HEAD~1", "--source-root", str(repo),
                              "--output", str(out)])
    assert run_report(args) == 0
    body = out.read_text()
    assert "on the change" in body and "old code" not in body
    assert "**1 finding on changed lines**" in body and "2 in the files scanned" in body
    with pytest.raises(UsageError, match="--diff-base nope"):
        run_report(parser.parse_args(["--lint", str(findings), "--diff-base", "nope", "--source-root", str(repo)]))


def test_a_huge_patch_is_left_out_before_any_finding(tmp_path):
    """One 72 kB fix must not empty the findings table: findings come first, patches are trimmed before them."""
    items = [_finding(line=i, severity="info", message=f"small {i}") for i in range(1, 11)]
    items.append(_finding(line=50, severity="error", message="the only error", fix={"applicability": "safe", "edits": [
        {"line": 50, "column": 1, "end_line": 50, "end_column": 5, "content": "x = 1\n" * 12_000}]}))
    items.append(_finding(line=60, severity="warning", message="small fix", fix={"applicability": "safe", "edits": [
        {"line": 60, "column": 1, "end_line": 60, "end_column": 5, "content": "y = 2"}]}))
    body = render_markdown(ReportInput(load_findings(_write(tmp_path, "f.json", items)), full_report="the artifact"))
    assert len(body) <= COMMENT_LIMIT
    assert "left out to fit" in body and "less severe finding" not in body
    assert "the only error" in body and all(f"small {i}" in body for i in range(1, 11))
    assert "1 suggested patch left out to fit GitHub's size limit (the findings come first); see the artifact" in body
    assert "y = 2" in body  # the patch that fits is still shown


def test_rendering_stops_at_the_size_limit(tmp_path, monkeypatch):
    """Each finding's row is rendered at most once, and none past the size limit (20,000 findings took ~20 s when
    every trimming step rendered the table again)."""
    many = [_finding(line=i, severity="info", message="x" * 300) for i in range(1, 2001)]
    data = ReportInput(load_findings(_write(tmp_path, "f.json", many)))
    calls = []
    real = md.message
    monkeypatch.setattr(md, "message", lambda v: calls.append(v) or real(v))
    from gpulint.bot import report

    report._environment.cache_clear()
    try:
        body = render_markdown(data)
    finally:
        report._environment.cache_clear()
    assert len(body) <= COMMENT_LIMIT
    left_out = int(re.search(r"(\d+) less severe findings left out", body).group(1))
    shown = body.count("| ℹ️ |")
    assert shown + left_out == len(many)
    assert len(calls) <= shown + COMMENT_LIMIT // 300  # the rows shown, and a limit's worth past them at most


def _report(argv: list[str], capsys) -> str:
    import argparse

    from gpulint.bot.cli import add_report_arguments, run_report

    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    assert run_report(parser.parse_args(argv)) == 0
    return capsys.readouterr().out


def _planner_plan(tmp_path, **changes) -> Path:
    """The fixture plan as the planner writes it now: with its eager form and the budget's unit."""
    plan = json.loads((FIXTURES / "plan.json").read_text())
    plan.update({"budget_unit": "GB", "eager": {"peak_bytes": 23_100_000_000, "step_time_s": 0.470,
                                                "recompute_time_s": 0.058, "fits_budget": True,
                                                "layers": ["h.0", "h.1", "h.2"]}}, **changes)
    return _write(tmp_path, "planner.json", plan)


def test_a_report_without_lint_says_nothing_about_findings(tmp_path, capsys):
    for fmt in ("md", "html", "summary"):
        text = _report(["--plan", str(FIXTURES / "plan.json"), "--format", fmt], capsys)
        assert "No findings" not in text and "finding" not in text.split("Memory plan")[0], fmt
    assert "No findings" in _report(["--lint", _write(tmp_path, "none.json", []).as_posix(),
                                     "--plan", str(FIXTURES / "plan.json")], capsys)


def test_markdown_and_html_reports_show_the_eager_form_in_the_budget_unit(tmp_path, capsys):
    plan = _planner_plan(tmp_path)
    markdown = _report(["--plan", str(plan)], capsys)
    assert ("Budget 24.00 GB: both forms fit: eager (`gpulint.apply`) at 23.10 GB, compiled "
            "(`gpulint.planner.compile`) at 22.06 GB.") in markdown
    assert "Apply the eager form: `gpulint.apply(model, plan)`." in markdown
    assert "**Peak memory 31.60 GB → 23.10 GB**" in markdown  # the recommended (eager) form's figures
    assert "| Eager form (`gpulint.apply`, 3 layers checkpointed) ✅ | 23.10 GB | 470.00 ms (+14.1%) | 58.00 ms |" \
        in markdown
    html = _report(["--plan", str(plan), "--format", "html"], capsys)
    assert "Eager form (<code>gpulint.apply</code>, 3 layers checkpointed)" in html and "23.10 GB" in html
    assert "470.00 ms" in html and "Budget 24.00 GB: both forms fit" in html


def test_no_form_fitting_is_said_first_and_no_form_is_recommended(tmp_path, capsys):
    plan = _planner_plan(tmp_path, feasible=False, lowest_peak_bytes=25_000_000_000,
                         planned={"peak_bytes": 25_000_000_000, "step_time_s": 0.5, "recompute_time_s": 0.09},
                         eager={"peak_bytes": 26_000_000_000, "step_time_s": 0.5, "fits_budget": False})
    markdown = _report(["--plan", str(plan)], capsys)
    assert "🛑 Budget 24.00 GB is NOT met: no form fits" in markdown
    assert "Apply the" not in markdown and "No form to apply" in markdown
