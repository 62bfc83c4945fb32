"""`gpulint check` end to end: formats, exit codes, config, suppressions, fixes, cache, jobs."""

from __future__ import annotations

import json
import os
from pathlib import Path

from gpulint.linter.finding import Finding
from gpulint.linter.formats import github_command

from .conftest import TRAIN


def test_text_format_has_code_frame_and_summary(run, project):
    code, out, err = run(project, "check", ".", "--no-cache")
    assert code == 1 and err == ""
    assert "train.py:8:17: GPL401" in out
    assert "8 |         value = loss.item()" in out
    assert "^^^^^^^^^^^" in out
    assert "Found 1 finding." in out
    assert "\033[" not in out  # not a tty: no colour


def test_color_always_and_no_color(run, project, monkeypatch):
    _, out, _ = run(project, "check", ".", "--no-cache", "--color", "always")
    assert "\033[" in out
    monkeypatch.setenv("NO_COLOR", "1")
    _, out, _ = run(project, "check", ".", "--no-cache")
    assert "\033[" not in out


def test_exit_codes(run, project):
    assert run(project, "check", "clean.py", "--no-cache")[0] == 0
    assert run(project, "check", "train.py", "--no-cache")[0] == 1
    assert run(project, "check", "train.py", "--no-cache", "--exit-zero")[0] == 0
    code, _, err = run(project, "check", ".", "--select", "NOPE")
    assert code == 2 and err.count("\n") == 1 and "NOPE" in err


def test_json_is_sorted_and_one_based(run, project):
    (project / "b.py").write_text(TRAIN)
    code, out, _ = run(project, "check", ".", "--no-cache", "--format", "json")
    data = json.loads(out)
    assert [(d["path"], d["line"]) for d in data] == sorted((d["path"], d["line"]) for d in data)
    first = data[0]
    assert set(first) == {"code", "name", "message", "severity", "path", "line", "column", "end_line", "end_column", "fix", "url", "confidence", "chain"}
    assert first["column"] == 17 and first["end_column"] == 28  # 1-based, end exclusive


def test_sarif_has_rules_and_results(run, project):
    _, out, _ = run(project, "check", ".", "--no-cache", "--format", "sarif")
    sarif = json.loads(out)
    assert sarif["version"] == "2.1.0"
    driver = sarif["runs"][0]["tool"]["driver"]
    ids = [r["id"] for r in driver["rules"]]
    result = sarif["runs"][0]["results"][0]
    assert result["ruleId"] == "GPL401" and ids[result["ruleIndex"]] == "GPL401"
    assert driver["rules"][result["ruleIndex"]]["helpUri"].startswith("https://")
    assert result["locations"][0]["physicalLocation"]["region"]["startColumn"] == 17


def test_github_format_escapes():
    finding = Finding("GPL401", "n", "100% bad\nreally", "warning", "a,b:c.py", 3, 4, 3, 9)
    line = github_command(finding)
    assert line.startswith("::warning file=a%2Cb%3Ac.py,line=3,col=4,endLine=3,endColumn=9,title=GPL401 n::")
    assert line.endswith("GPL401 100%25 bad%0Areally")


def test_gitlab_format(run, project):
    _, out, _ = run(project, "check", ".", "--no-cache", "--format", "gitlab")
    issue = json.loads(out)[0]
    assert issue["location"]["path"] == "train.py" and issue["severity"] == "major" and len(issue["fingerprint"]) == 32


def test_output_file(run, project):
    code, out, _ = run(project, "check", ".", "--no-cache", "--format", "json", "--output-file", "report.json")
    assert code == 1 and out == ""
    assert json.loads((project / "report.json").read_text())[0]["code"] == "GPL401"


def test_noqa_line_codes_prefix_and_bare(run, tmp_path):
    for comment, suppressed in (("# noqa: GPL401", True), ("# noqa: GPL4", True), ("# noqa", True),
                                ("# noqa: GPL410", False), ("# NOQA:E501,GPL401", True)):
        (tmp_path / "t.py").write_text(TRAIN.replace("value = loss.item()", f"value = loss.item()  {comment}"))
        code, _, _ = run(tmp_path, "check", "t.py", "--no-cache")
        assert code == (0 if suppressed else 1), comment


def test_noqa_on_any_spanned_line(run, tmp_path):
    source = TRAIN.replace("value = loss.item()", "value = (\n            loss.item()  # noqa: GPL401\n        )")
    (tmp_path / "t.py").write_text(source)
    assert run(tmp_path, "check", "t.py", "--no-cache")[0] == 0


def test_file_level_noqa(run, tmp_path):
    (tmp_path / "t.py").write_text("# gpulint: noqa\n" + TRAIN)
    assert run(tmp_path, "check", "t.py", "--no-cache")[0] == 0
    (tmp_path / "t.py").write_text("# gpulint: noqa: GPL3\n" + TRAIN)
    assert run(tmp_path, "check", "t.py", "--no-cache")[0] == 1


def test_add_noqa_then_clean(run, project):
    code, _, err = run(project, "check", ".", "--no-cache", "--add-noqa")
    assert code == 0 and "Added 1 noqa comment." in err
    assert "value = loss.item()  # noqa: GPL401" in (project / "train.py").read_text()
    assert run(project, "check", ".", "--no-cache")[0] == 0


def test_config_select_ignore_per_file(run, project):
    (project / "pyproject.toml").write_text('[tool.gpulint]\nignore = ["GPL401"]\n')
    assert run(project, "check", ".", "--no-cache")[0] == 0
    (project / "pyproject.toml").write_text('[tool.gpulint]\nselect = ["GPL3"]\n')
    assert run(project, "check", ".", "--no-cache")[0] == 0
    (project / "pyproject.toml").write_text('[tool.gpulint.per-file-ignores]\n"train.py" = ["GPL4"]\n')
    assert run(project, "check", ".", "--no-cache")[0] == 0
    (project / "pyproject.toml").write_text('[tool.gpulint]\nexclude = ["train.py"]\n')
    assert run(project, "check", ".", "--no-cache")[0] == 0
    # A file named explicitly is linted anyway, unless --force-exclude (pre-commit).
    assert run(project, "check", "train.py", "--no-cache")[0] == 1
    assert run(project, "check", "train.py", "--no-cache", "--force-exclude")[0] == 0


def test_config_errors_are_one_line(run, project):
    cases = {
        '[tool.gpulint]\nselectt = ["GPL4"]\n': "unknown key `selectt`",
        '[tool.gpulint]\nselect = ["GPL999"]\n': "unknown rule code `GPL999`",
        '[tool.gpulint]\nselect = "GPL4\n': "malformed TOML",
        '[tool.gpulint]\nunsafe-fixes = "yes"\n': "`unsafe-fixes` must be true or false",
    }
    for text, message in cases.items():
        (project / "pyproject.toml").write_text(text)
        code, out, err = run(project, "check", ".", "--no-cache")
        assert code == 2 and out == "" and message in err and err.count("\n") == 1, (text, err)
        assert "Traceback" not in err
    code, _, err = run(project, "check", ".", "--config", "missing.toml")
    assert code == 2 and "missing.toml" in err


def test_config_hot_functions_and_log_gates(run, tmp_path):
    (tmp_path / "t.py").write_text(
        "import torch\n\ndef my_update(model, batch):\n    loss = model(batch.cuda(non_blocking=True))\n    value = loss.item()\n"
    )
    assert run(tmp_path, "check", "t.py", "--no-cache")[0] == 0
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\nhot-functions = ["my_update"]\n')
    assert run(tmp_path, "check", "t.py", "--no-cache")[0] == 1
    (tmp_path / "t.py").write_text(TRAIN.replace("        value = loss.item()", "        if chatty:\n            value = loss.item()"))
    assert run(tmp_path, "check", "t.py", "--no-cache")[0] == 1
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\nlog-gates = ["chatty"]\n')
    assert run(tmp_path, "check", "t.py", "--no-cache")[0] == 0


def test_cache_hit_and_invalidation(run, project):
    first = run(project, "check", ".", "--format", "json")
    cache_files = list((project / ".gpulint_cache").rglob("*.json*"))
    assert sorted(f.name.startswith("project-") for f in cache_files) == [False, True]  # results, project model
    assert run(project, "check", ".", "--format", "json") == first
    (project / "train.py").write_text(TRAIN + "\n# changed\n")
    assert run(project, "check", ".", "--format", "json")[0] == 1
    (project / "train.py").write_text("x = 1\n")
    assert run(project, "check", ".")[0] == 0


def test_broken_cache_warns_once_and_still_lints(run, project):
    run(project, "check", ".")
    for file in (project / ".gpulint_cache").rglob("*.json*"):
        file.write_text("{not json")
    code, out, err = run(project, "check", ".")
    assert code == 1 and "GPL401" in out and err.count("warning: cannot read cache") == 1


def test_parallel_jobs_give_the_same_findings(run, tmp_path):
    for i in range(40):
        (tmp_path / f"f{i:02d}.py").write_text(TRAIN if i % 3 == 0 else "import torch\nx = 1\n# item( \n")
    serial = run(tmp_path, "check", ".", "--no-cache", "--format", "json", "--jobs", "1")
    parallel = run(tmp_path, "check", ".", "--no-cache", "--format", "json", "--jobs", "2")
    assert serial == parallel and len(json.loads(serial[1])) == 14


def test_rules_list_and_rule_docs(run, tmp_path):
    code, out, _ = run(tmp_path, "rules")
    assert code == 0 and "GPL401" in out and "scalar-sync-in-step" in out
    code, out, _ = run(tmp_path, "rule", "GPL401")
    for section in ("What it does", "Why it is slow", "Example", "Use instead", "Fix safety", "Known false positives"):
        assert f"## {section}" in out
    code, _, err = run(tmp_path, "rule", "GPL999")
    assert code == 2 and "GPL999" in err


def test_version(capsys):
    import pytest

    from gpulint import __version__
    from gpulint.cli import main

    with pytest.raises(SystemExit):
        main(["--version"])
    assert __version__ in capsys.readouterr().out


def test_python_dash_m(tmp_path):
    import subprocess
    import sys

    (tmp_path / "t.py").write_text(TRAIN)
    proc = subprocess.run([sys.executable, "-m", "gpulint", "check", "t.py", "--no-cache"], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert proc.returncode == 1 and "GPL401" in proc.stdout


def test_a_warm_run_imports_neither_the_rules_nor_libcst(run, project):
    import subprocess
    import sys

    first = run(project, "check", ".", "--format", "json")
    probe = (
        "import sys\nfrom gpulint.cli import main\ncode = main(['check', '.', '--format', 'json'])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('libcst', 'gpulint.rules'))), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=project, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == first[:2]
    assert done.stderr.strip() == "[]"


def test_codes_are_still_checked_when_a_cache_exists(run, project):
    assert run(project, "check", ".")[0] == 1  # fills the cache for the default settings
    code, _, err = run(project, "check", ".", "--ignore", "GPL9")
    assert code == 2 and "GPL9" in err
    (project / "pyproject.toml").write_text('[tool.gpulint]\nselect = ["GPL4", "NOPE1"]\n')
    code, _, err = run(project, "check", ".")
    assert code == 2 and "NOPE1" in err and err.count("\n") == 1


def test_a_project_checked_from_outside_gives_the_findings_it_gives_from_inside(run, tmp_path):
    # The project sits in a folder named `tests`: read with the folders above it, every file would look like a test.
    # The model reads paths within the project; reports show the paths given.
    repo = tmp_path / "tests" / "repo"
    (repo / "src").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (repo / "src" / "__init__.py").write_text("")
    (repo / "src" / "helpers.py").write_text("def log_loss(loss):\n    print(loss.item())\n")
    (repo / "src" / "train.py").write_text(
        "import torch\nfrom src.helpers import log_loss\n\n"
        "def train(model, loader, optimizer, device='cuda'):\n"
        "    for batch in loader:\n"
        "        loss = model(batch.to(device, non_blocking=True))\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        "        log_loss(loss)\n"
    )

    def seen(folder, *args, prefix=""):
        found = json.loads(run(folder, "check", *args, "--no-cache", "--format", "json", "--exit-zero")[1])
        assert all(f["path"].startswith(prefix) for f in found)
        return [(f["code"], f["path"].removeprefix(prefix), f["line"],
                 [(c["path"].removeprefix(prefix), c["line"]) for c in f["chain"]]) for f in found]

    inside = seen(repo, ".")
    assert ("GPL401", "src/helpers.py", 2, [("src/train.py", 5), ("src/helpers.py", 1)]) in inside
    assert seen(tmp_path / "elsewhere", str(repo), prefix=f"{repo.as_posix()}/") == inside
    assert seen(repo / "src", "train.py", "helpers.py") == []  # the model cannot tell that `src` is a package
    (repo / "pyproject.toml").write_text("[project]\nname = 'repo'\n")  # now it can: the project's top is marked
    assert seen(tmp_path, "tests/repo", prefix="tests/repo/") == inside
    assert seen(repo / "src", "train.py", "helpers.py") == [
        (code, path.removeprefix("src/"), line, [(p.removeprefix("src/"), n) for p, n in chain])
        for code, path, line, chain in inside
    ]
