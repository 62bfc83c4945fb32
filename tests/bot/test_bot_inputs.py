"""Artifacts are untrusted: whatever is in them, `report`, `bot review` and `bot check` answer with one line and exit 2,
or read them right (paths written three ways, the linter's optional `confidence` and `chain`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpulint.bot.data import BotInputError, load_findings, load_plan, normalise_path
from gpulint.bot.report import ReportInput, render_html, render_markdown

from .fakegithub import TOKEN

FIXTURES = Path(__file__).parent / "fixtures"
GOOD = {"code": "GPL401", "name": "scalar-sync-in-step", "message": "`loss.item()` syncs", "severity": "warning",
        "path": "src/train.py", "line": 12, "column": 9, "end_line": 12, "end_column": 20, "fix": None}


def _findings_text(kind: str) -> str:
    if kind == "deep nesting":
        return "[" * 100_000 + "]" * 100_000
    if kind == "5000-digit integer":
        return json.dumps([GOOD])[:-2] + ', "column": ' + "9" * 5000 + "}]"
    if kind == "lone surrogate":
        return json.dumps([{**GOOD, "message": "MARK"}]).replace("MARK", "\\ud800 sync")
    raise AssertionError(kind)


def _plan_text(kind: str) -> str:
    plan = (FIXTURES / "plan.json").read_text()
    if kind == "bytes of 10^400":
        return re.sub(r'"peak_bytes": [0-9.e+]+', '"peak_bytes": 1' + "0" * 400, plan, count=1)
    if kind == "deep nesting":
        return '{"schema": "gpulint.plan/1", "model": ' + "[" * 100_000 + "]" * 100_000 + "}"
    raise AssertionError(kind)


CASES = [("findings", k) for k in ("deep nesting", "5000-digit integer", "lone surrogate")] + [
    ("plan", k) for k in ("bytes of 10^400", "deep nesting")]


def _command(action: str, flag: str, path: Path) -> list[str]:
    if action == "report":
        return ["report", flag, str(path), "--format", "md"]
    return ["bot", action, flag, str(path), "--repo", "o/r", "--pr", "1"]


@pytest.mark.parametrize("action", ["report", "review", "check"])
@pytest.mark.parametrize("which, kind", CASES)
def test_hostile_artifacts_are_one_line_and_exit_2(tmp_path, capsys, monkeypatch, action, which, kind):
    from gpulint.cli import main

    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", "http://127.0.0.1:9")  # never reached: the input is refused first
    path = tmp_path / f"{which}.json"
    path.write_text(_findings_text(kind) if which == "findings" else _plan_text(kind))
    argv = _command(action, "--lint" if which == "findings" else "--plan", path)
    if action == "review" and which == "plan":
        argv += ["--lint", str(FIXTURES / "findings.json")]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in err and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"gpulint: error: {path}: ") and len(line) < 400


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("peak_bytes", -5e9, r"planned.peak_bytes: -5000000000.0 is out of range \(0 to 1.15292e\+18\)"),
        ("peak_bytes", 1e300, r"planned.peak_bytes: 1e\+300 is out of range"),
        ("peak_bytes", float("nan"), r"planned.peak_bytes: expected a finite number, got nan"),
        ("step_time_s", -1.0, r"planned.step_time_s: -1.0 is out of range"),
    ],
)
def test_plan_numbers_are_range_checked(tmp_path, field, value, message):
    plan = json.loads((FIXTURES / "plan.json").read_text())
    plan["planned"][field] = value
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))  # json writes NaN as the literal `NaN`, which Python's reader accepts
    with pytest.raises(BotInputError, match=message):
        load_plan(path)


def test_timeline_points_are_range_checked_so_no_chart_gets_nan(tmp_path):
    plan = json.loads((FIXTURES / "plan.json").read_text())
    plan["timeline"]["planned"][3] = -1
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    with pytest.raises(BotInputError, match=r"timeline.planned.\[3\]: -1 is out of range"):
        load_plan(path)
    plan = json.loads((FIXTURES / "plan.json").read_text())
    path.write_text(json.dumps(plan))
    assert not re.search(r"\bnan\b", render_html(ReportInput(plan=load_plan(path))), re.IGNORECASE)


# ---------------------------------------------------------------------------------------------- paths


@pytest.mark.parametrize(
    "raw, root, expected",
    [
        ("/home/runner/work/r/r/src/train.py", "/home/runner/work/r/r", "src/train.py"),
        ("/home/runner/work/r/r/src/train.py", "/home/runner/work/r/r/", "src/train.py"),
        ("./src/train.py", None, "src/train.py"),
        ("src\\train.py", None, "src/train.py"),
        ("D:\\a\\r\\r\\src\\train.py", "D:\\a\\r\\r", "src/train.py"),
        ("src//./train.py", None, "src/train.py"),
        ("/elsewhere/train.py", "/home/runner/work/r/r", "/elsewhere/train.py"),
        ("../outside.py", None, "../outside.py"),
    ],
)
def test_paths_are_normalised_against_the_workspace(raw, root, expected):
    assert normalise_path(raw, root) == expected


def test_report_matches_absolute_dot_and_backslash_paths_to_the_diff(tmp_path):
    """`gpulint report --diff-base`: findings written three ways all land on the changed line; one that matches no
    changed file is counted, with its path."""
    import argparse
    import subprocess

    from gpulint.bot.cli import add_report_arguments, run_report

    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (repo / "src/train.py").write_text("".join(f"line{n}\n" for n in range(1, 11)))
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "base"], check=True)
    (repo / "src/train.py").write_text("".join(f"changed{n}\n" for n in range(1, 11)))
    subprocess.run([*git, "commit", "-q", "-am", "change"], check=True)
    items = [{**GOOD, "line": 3, "path": str(repo / "src/train.py")}, {**GOOD, "line": 4, "path": "./src/train.py"},
             {**GOOD, "line": 5, "path": "src\\train.py"}, {**GOOD, "line": 6, "path": "/tmp/else/where.py"}]
    lint = tmp_path / "f.json"
    lint.write_text(json.dumps(items))
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    out = tmp_path / "r.md"
    assert run_report(parser.parse_args(["--lint", str(lint), "--diff-base", "HEAD~1", "--source-root", str(repo),
                                         "--output", str(out)])) == 0
    body = out.read_text()
    assert "**3 findings on changed lines**" in body
    assert "1 in files this pull request does not change (e.g. `/tmp/else/where.py`)" in body


# ---------------------------------------------------------------------------------------------- chain, confidence

CHAIN = [{"path": "train.py", "line": 120, "name": "loop over train_loader"},
         {"path": "trainer.py", "line": 88, "name": "step()"},
         {"path": "logging.py", "line": 40, "name": "log_metrics()"}]


def _load(tmp_path, items):
    path = tmp_path / "f.json"
    path.write_text(json.dumps(items))
    return load_findings(path)


def test_confidence_and_chain_are_optional(tmp_path):
    (plain,) = _load(tmp_path, [GOOD])
    assert plain.confidence == "certain" and plain.chain == ()
    (rich,) = _load(tmp_path, [{**GOOD, "confidence": "likely", "chain": CHAIN}])
    assert rich.confidence == "likely" and [(f.path, f.line, f.name) for f in rich.chain] == [
        ("train.py", 120, "loop over train_loader"), ("trainer.py", 88, "step()"), ("logging.py", 40, "log_metrics()")]
    (wide,) = _load(tmp_path, [{**GOOD, "confidence": "possible"}])  # `gpulint check --confidence possible`
    assert wide.confidence == "possible"


@pytest.mark.parametrize(
    "over, message",
    [
        ({"confidence": "maybe"}, r"findings\[0\].confidence: expected 'certain', 'likely' or 'possible', got 'maybe'"),
        ({"confidence": 1}, r"findings\[0\].confidence: expected a string, got int"),
        ({"chain": {"path": "a.py"}}, r"findings\[0\].chain: expected a list, got dict"),
        ({"chain": [{"path": "a.py", "name": "f()"}]}, r"findings\[0\].chain\[0\].line: missing"),
        ({"chain": [{"path": "a.py", "line": 0, "name": "f()"}]}, r"findings\[0\].chain\[0\].line: 0 is out of range"),
        ({"chain": [{"path": "a.py", "line": 3, "name": "\ud800"}]}, r"chain\[0\].name: not valid text"),
        ({"chain": [CHAIN[0], "train.py:3"]}, r"findings\[0\].chain\[1\]: expected an object"),
    ],
)
def test_bad_confidence_or_chain_names_the_field(tmp_path, over, message):
    path = tmp_path / "f.json"
    path.write_text(json.dumps([{**GOOD, **over}]))
    with pytest.raises(BotInputError, match=message):
        load_findings(path)


def test_a_long_chain_keeps_its_ends_and_says_what_is_left_out(tmp_path):
    frames = [{"path": f"m{n}.py", "line": n, "name": f"f{n}()"} for n in range(1, 41)]
    (f,) = _load(tmp_path, [{**GOOD, "chain": frames}])
    assert len(f.chain) == 16 and f.chain_elided == 24
    assert f.chain[0].name == "f1()" and f.chain[-1].name == "f40()"
    body = render_markdown(ReportInput([f]))
    assert "per step via `m1.py:1` f1() → `m2.py:2` f2() → … 35 more … → `m38.py:38` f38()" in body


def test_chain_and_likely_show_in_the_comment_with_links(tmp_path):
    items = [{**GOOD, "confidence": "likely", "path": "/ws/logging.py",
              "chain": [{**CHAIN[0], "path": "/ws/train.py"}, CHAIN[1], {**CHAIN[2], "name": "@octocat #5 https://x.y"}]}]
    path = tmp_path / "f.json"
    path.write_text(json.dumps(items))
    findings = load_findings(path, root="/ws")
    body = render_markdown(ReportInput(findings, link_base="https://github.com/o/r/blob/abc/"))
    (row,) = [ln for ln in body.splitlines() if ln.startswith("| ⚠️")]
    assert "scalar-sync-in-step · *likely*" in row
    assert ("<br><sub>per step via [`train.py:120`](https://github.com/o/r/blob/abc/train.py#L120) loop over "
            "train\\_loader → [`trainer.py:88`](https://github.com/o/r/blob/abc/trainer.py#L88) step() → "
            "[`logging.py:40`](https://github.com/o/r/blob/abc/logging.py#L40) @\u200boctocat #\u200b5 "
            "`https://x.y`</sub> |") in row
    assert row.count("|") - row.count("\\|") == 5  # still four cells
    html = render_html(ReportInput(findings, link_base="https://github.com/o/r/blob/abc/"))
    assert "<em>(likely)</em>" in html and 'href="https://github.com/o/r/blob/abc/trainer.py#L88"' in html
