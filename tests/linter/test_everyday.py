"""What a ruff user reaches for, and no silence where something is wrong: every flag of `gpulint check` beyond the
basics, progress on a terminal, unused `# noqa`, `gpulint clean`."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from .conftest import TRAIN
from .test_fix import SAFE, UNSAFE

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


# ---- silence where something is wrong ----

def test_an_empty_folder_or_one_without_python_warns(run, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text("# notes\n")
    for folder in ("empty", "docs"):
        code, out, err = run(tmp_path, "check", folder, "--no-cache")
        assert code == 0 and "All checks passed" not in out and out == "No Python files were checked.\n"
        assert err == "gpulint: warning: no Python files found under the given paths\n"
    assert run(tmp_path, "check", "empty", "--no-cache", "-q")[1:] == ("", "")


def test_an_unknown_code_in_noqa_is_reported_and_fixed(run, tmp_path):
    (tmp_path / "t.py").write_text("x = 1  # noqa: GPL999\ny = 2  # noqa: E501,GPL4O1\n")
    code, out, _ = run(tmp_path, "check", "t.py", "--no-cache", "--output-format", "concise")
    assert code == 1
    assert "t.py:1:8: GPL003 [*] `noqa` directive unknown rule code: `GPL999`" in out
    assert "t.py:2:8: GPL003 [*] `noqa` directive unknown rule code: `GPL4O1`" in out
    assert run(tmp_path, "check", "t.py", "--no-cache", "--fix")[0] == 0
    assert (tmp_path / "t.py").read_text() == "x = 1\ny = 2  # noqa: E501\n"


def test_a_stale_noqa_is_reported_and_its_fix_removes_it(run, tmp_path):
    source = TRAIN.replace("loss.backward()", "loss.backward()  # noqa: GPL401, E501 - was a sync once")
    (tmp_path / "t.py").write_text(source.replace("value = loss.item()", "value = loss.item()  # noqa: GPL401"))
    code, out, _ = run(tmp_path, "check", "t.py", "--no-cache")
    assert code == 1 and "t.py:6:26: GPL003 [*] `noqa` directive suppresses nothing: `GPL401`" in out
    assert "GPL401 " not in out.replace("`GPL401`", "")  # the used directive on line 8 still works
    run(tmp_path, "check", "t.py", "--no-cache", "--fix")
    assert "        loss.backward()  # noqa: E501 - was a sync once\n" in (tmp_path / "t.py").read_text()


def test_noqa_of_rules_that_did_not_run_or_in_strings_is_not_judged(run, tmp_path):
    (tmp_path / "t.py").write_text(
        TRAIN.replace("loss.backward()", "loss.backward()  # noqa: GPL503")
        + 'DOC = """an example: value = loss.item()  # noqa: GPL999"""\n'
    )
    assert "GPL003" not in run(tmp_path, "check", "t.py", "--no-cache", "--select", "GPL4")[1]
    code, out, _ = run(tmp_path, "check", "t.py", "--no-cache", "--output-format", "concise")
    assert [line.split()[1] for line in out.splitlines()[:-1]] == ["GPL003", "GPL401"]


def test_ignore_noqa_reports_what_noqa_hides_and_is_cached_apart(run, tmp_path):
    (tmp_path / "t.py").write_text(TRAIN.replace("value = loss.item()", "value = loss.item()  # noqa: GPL401"))
    assert run(tmp_path, "check", "t.py")[0] == 0
    code, out, _ = run(tmp_path, "check", "t.py", "--ignore-noqa")
    assert code == 1 and "GPL401" in out and "GPL003" not in out
    assert run(tmp_path, "check", "t.py")[0] == 0


def test_diff_with_only_unsafe_fixes_says_so(run, tmp_path):
    (tmp_path / "a.py").write_text(UNSAFE)
    code, out, err = run(tmp_path, "check", "a.py", "--no-cache", "--diff", "--select", "GPL301")
    assert (code, out) == (0, "") and err == "No fixes would be applied (1 more with --unsafe-fixes).\n"
    code, out, err = run(tmp_path, "check", "a.py", "--no-cache", "--diff", "--unsafe-fixes", "--select", "GPL301")
    assert code == 1 and "+enc = tokenizer(texts, padding=True" in out and "1 fix would be applied" in err


MULTILINE_FSTRING = TRAIN.replace(
    "        value = loss.item()\n", '        print(f"""step {step}\nloss {loss.item()}\n""")\n'
)


def test_add_noqa_covers_a_finding_inside_a_multiline_fstring(run, tmp_path):
    (tmp_path / "t.py").write_text(MULTILINE_FSTRING)
    assert "t.py:9:7: GPL401" in run(tmp_path, "check", "t.py", "--no-cache")[1]
    code, _, err = run(tmp_path, "check", "t.py", "--no-cache", "--add-noqa")
    assert code == 0 and err == "Added 1 noqa comment.\n"
    assert '\n""")  # noqa: GPL401\n' in (tmp_path / "t.py").read_text()
    assert run(tmp_path, "check", "t.py", "--no-cache") == (0, "All checks passed.\n", "")


def test_add_noqa_says_when_no_line_can_take_the_comment(run, tmp_path):
    source = MULTILINE_FSTRING.replace('\n""")\n', '\n""", f"""and\n""")\n')
    (tmp_path / "t.py").write_text(source)
    code, _, err = run(tmp_path, "check", "t.py", "--no-cache", "--add-noqa")
    assert (tmp_path / "t.py").read_text() == source
    assert err == (
        "gpulint: warning: t.py:10: cannot add a noqa comment there (a multi-line string ends on a line where another "
        "begins); GPL401 still reported\nAdded 0 noqa comments.\n"
    )


# ---- progress ----

def _many(folder: Path, count: int = 40) -> None:
    for i in range(count):
        (folder / f"f{i:02d}.py").write_text(TRAIN if i % 4 == 0 else "import torch\nx = 1\n")


def test_progress_on_a_terminal_only(monkeypatch, tmp_path):
    from gpulint.cli import main

    _many(tmp_path)
    monkeypatch.chdir(tmp_path)
    for args, shown in (((), True), (("-q",), False), (("--fix",), True)):
        terminal = Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        monkeypatch.setattr(sys, "stdout", io.StringIO())
        main(["check", ".", "--no-cache", "--jobs", "2", *args])
        written = terminal.getvalue()
        assert ("40/40 files (100%)" in written) == shown, (args, written)
        if shown:
            label = "fixing" if args else "checking"
            assert f"\r{label} 40/40 files (100%)" in written and written.endswith("\r")
            assert written.strip(" \r").count("\n") == 0
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal: nothing but the report
    main(["check", ".", "--no-cache"])
    assert sys.stderr.getvalue() == ""


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals")
def test_progress_through_a_real_pseudo_terminal(tmp_path):
    from tests.terminal import stderr_on_terminal

    _many(tmp_path)
    code, seen = stderr_on_terminal([sys.executable, "-m", "gpulint", "check", ".", "--no-cache"], 60, cwd=tmp_path,
                                    env=ENV)
    assert code == 1
    assert b"checking 40/40 files (100%)" in seen


# ---- the flags ruff users reach for ----

def test_statistics(run, tmp_path):
    (tmp_path / "a.py").write_text(SAFE + UNSAFE)
    (tmp_path / "b.py").write_text(SAFE)
    code, out, _ = run(tmp_path, "check", ".", "--no-cache", "--statistics", "--select", "GPL504,GPL301")
    assert code == 1
    assert out == "2  GPL504  [*] tensor-created-then-moved\n1  GPL301      pad-to-max-length\n"
    _, out, _ = run(tmp_path, "check", ".", "--no-cache", "--statistics", "--output-format", "json",
                    "--select", "GPL504,GPL301")
    assert json.loads(out)[0] == {"code": "GPL504", "name": "tensor-created-then-moved", "count": 2, "fixable": True}


def test_show_fixes(run, tmp_path):
    (tmp_path / "a.py").write_text(SAFE + UNSAFE)
    code, out, _ = run(tmp_path, "check", "a.py", "--no-cache", "--fix", "--show-fixes", "--select", "GPL504,GPL301")
    assert code == 1
    assert out.endswith("Fixed 1 finding:\n- a.py:\n    1 × GPL504 (tensor-created-then-moved)\n")


def test_show_files_and_show_settings(run, project):
    (project / "pyproject.toml").write_text('[tool.gpulint]\nignore = ["GPL401"]\nexclude = ["skip.py"]\n')
    (project / "skip.py").write_text(TRAIN)
    assert run(project, "check", "--show-files") == (0, "clean.py\ntrain.py\n", "")
    code, out, _ = run(project, "check", "--show-settings")
    assert code == 0 and f"# settings from {project / 'pyproject.toml'}\n" in out
    assert 'ignore = ["GPL401"]\n' in out and 'exclude = ["skip.py"]\n' in out
    assert "GPL401" not in out.split("# enabled rules")[1].split("\n")[0] and "GPL402" in out


def test_concise_junit_and_the_old_format_flag(run, project):
    code, out, _ = run(project, "check", ".", "--no-cache", "--output-format", "concise")
    assert code == 1 and out.startswith("train.py:8:17: GPL401 `.item()` copies") and out.endswith("\nFound 1 finding.\n")
    assert "|" not in out
    assert run(project, "check", ".", "--no-cache", "--format", "concise")[1] == out
    assert run(project, "check", ".", "--no-cache", "--output-format", "full")[1] == run(project, "check", ".", "--no-cache")[1]
    _, out, _ = run(project, "check", ".", "--no-cache", "--output-format", "junit")
    suites = ElementTree.fromstring(out)
    assert suites.get("failures") == "1"
    (case,) = suites.iter("testcase")
    assert case.get("name") == "GPL401 scalar-sync-in-step" and case.get("line") == "8" and case.get("file") == "train.py"
    assert case.find("failure").get("message").startswith("`.item()` copies")
    _, out, _ = run(project, "check", "clean.py", "--no-cache", "--output-format", "junit")
    assert ElementTree.fromstring(out).get("failures") == "0"


def test_stdin_with_a_file_name(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint.per-file-ignores]\n"tests/*" = ["GPL4"]\n')

    def check(*args: str, data: str = TRAIN):
        return subprocess.run([sys.executable, "-m", "gpulint", "check", *args], cwd=tmp_path, env=ENV,
                              input=data, capture_output=True, text=True)

    done = check("-", "--stdin-filename", "train.py")
    assert done.returncode == 1 and "train.py:8:17: GPL401" in done.stdout and "8 |         value = loss.item()" in done.stdout
    assert check("--stdin-filename", "train.py").stdout == done.stdout
    assert check("-", "--stdin-filename", "tests/train.py").returncode == 0  # its per-file ignores apply
    assert check("-").stdout.startswith("-:8:17: GPL401")
    fixed = check("-", "--stdin-filename", "a.py", "--fix", "--select", "GPL504", data=SAFE)
    assert fixed.returncode == 0 and fixed.stdout == SAFE.replace("torch.ones(8, 8).cuda()", 'torch.ones(8, 8, device="cuda")')
    assert "Fixed 1 finding." in fixed.stderr
    mixed = check("-", "other.py")
    assert mixed.returncode == 2 and mixed.stderr == "gpulint: error: `-` (standard input) cannot be combined with other paths\n"


def test_quiet_and_verbose(run, project):
    code, out, err = run(project, "check", ".", "--no-cache", "-q")
    assert code == 1 and "GPL401" in out and "Found" not in out and err == ""
    assert run(project, "check", "clean.py", "--no-cache", "-q") == (0, "", "")
    code, out, err = run(project, "check", ".", "--no-cache", "-v")
    assert "Found 1 finding." in out and "gpulint: settings from the defaults; 2 files checked in " in err


def test_exit_non_zero_on_fix_and_fix_only(run, tmp_path):
    (tmp_path / "a.py").write_text(SAFE)
    assert run(tmp_path, "check", "a.py", "--no-cache", "--fix", "--select", "GPL504")[0] == 0
    (tmp_path / "a.py").write_text(SAFE)
    assert run(tmp_path, "check", "a.py", "--no-cache", "--fix", "--select", "GPL504", "--exit-non-zero-on-fix")[0] == 1
    (tmp_path / "a.py").write_text(SAFE + UNSAFE)
    code, out, _ = run(tmp_path, "check", "a.py", "--no-cache", "--fix-only", "--select", "GPL504,GPL301")
    assert (code, out) == (0, "Fixed 1 finding.\n") and ".cuda()" not in (tmp_path / "a.py").read_text()
    assert run(tmp_path, "check", "a.py", "--no-cache", "--fix-only", "--select", "GPL504,GPL301") == (0, "Fixed 0 findings.\n", "")


def test_exclude_and_extend_exclude(run, project):
    (project / "pyproject.toml").write_text('[tool.gpulint]\nexclude = ["clean.py"]\n')
    assert run(project, "check", "--show-files")[1] == "train.py\n"
    assert run(project, "check", "--show-files", "--exclude", "train.py")[1] == "clean.py\n"
    assert run(project, "check", "--show-files", "--extend-exclude", "train.py")[1] == ""
    assert run(project, "check", ".", "--no-cache", "--extend-exclude", "train.py,other.py")[0] == 0


def test_force_color(run, project, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\033[" in run(project, "check", ".", "--no-cache")[1]
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\033[" in run(project, "check", ".", "--no-cache")[1]  # forcing wins
    assert "\033[" not in run(project, "check", ".", "--no-cache", "--color", "never")[1]
    assert "\033[" not in run(project, "check", ".", "--no-cache", "--output-file", "r.txt")[1] + (project / "r.txt").read_text()
    monkeypatch.setenv("FORCE_COLOR", "")
    assert "\033[" not in run(project, "check", ".", "--no-cache")[1]


def test_watch_checks_again_when_a_file_changes(tmp_path):
    import queue
    import threading

    (tmp_path / "t.py").write_text(TRAIN)
    proc = subprocess.Popen([sys.executable, "-m", "gpulint", "check", ".", "--watch", "--no-cache"], cwd=tmp_path,
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()

    def until_watching() -> str:
        """stdout up to the next `Watching for file changes` line (at most 60 s)."""
        seen = []
        while not seen or "Watching for file changes" not in seen[-1]:
            try:
                seen.append(lines.get(timeout=60))
            except queue.Empty:
                raise AssertionError(f"no new report in 60 s: {''.join(seen)!r}") from None
        return "".join(seen)

    try:
        assert "t.py:8:17: GPL401" in until_watching()
        (tmp_path / "t.py").write_text(TRAIN.replace("value = loss.item()", "value = loss.detach()"))
        assert "All checks passed." in until_watching()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_watch_refuses_what_it_cannot_repeat(run, project):
    code, _, err = run(project, "check", "--watch", "--add-noqa")
    assert code == 2 and "--watch cannot be combined" in err


def test_clean_removes_only_gpulint_caches(run, project):
    run(project, "check", ".")
    (project / "sub").mkdir()
    run(project / "sub", "check", ".")
    (project / "other" / ".gpulint_cache").mkdir(parents=True)  # not made by gpulint: kept
    code, out, _ = run(project, "clean")
    assert code == 0 and out == "Removed .gpulint_cache\n"
    assert not (project / ".gpulint_cache").exists() and (project / "other" / ".gpulint_cache").exists()
    assert run(project, "clean") == (0, "No gpulint cache found.\n", "")


def test_server_without_pygls_is_one_line(run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pygls", None)
    monkeypatch.delitem(sys.modules, "gpulint.server.lsp", raising=False)
    code, out, err = run(tmp_path, "server")
    assert code == 2 and err.startswith("gpulint: error: the language server needs pygls") and "gpulint[server]" in err


# ---- a finding's message is one line ----

def test_a_finding_on_a_multi_line_expression_has_a_one_line_message(run, tmp_path):
    (tmp_path / "train.py").write_text(
        "def train(model, loader, optimizer, device):\n"
        "    running_loss = 0.0\n"
        "    for batch in loader:\n"
        "        model(batch).loss.backward()\n"
        "        optimizer.step()\n"
        "        running_loss += model(\n"
        "            batch,\n"
        "            labels=batch,\n"
        "        ).loss.item()\n"
    )
    _, out, _ = run(tmp_path, "check", ".", "--no-cache", "--output-format", "json")
    finding = next(f for f in json.loads(out) if f["code"] == "GPL201")
    assert finding["message"].startswith("accumulating `model(batch, labels=batch).loss.item()` on the host")
    assert (finding["line"], finding["end_line"]) == (6, 9)  # the span still covers the whole expression
    from gpulint.linter.finding import one_line

    assert one_line("`f(\n    a,\n    b,\n)` and\n  more") == "`f(a, b)` and more"
