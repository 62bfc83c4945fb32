"""The project model between runs: stored outlines and facts, and cached findings that follow other files' changes."""

from __future__ import annotations

import json
import textwrap

from gpulint.cli import main

TRAIN = """
    import torch
    from helpers import report

    def train(model, loader, opt):
        model.cuda()
        for batch in loader:
            loss = model(batch)
            loss.backward()
            opt.step()
            report(loss)
"""
HELPERS = """
    def report(loss):
        print(loss.item())
"""


def lint(root, monkeypatch, capsys) -> list[tuple[str, int]]:
    monkeypatch.chdir(root)
    main(["check", ".", "--format", "json", "--exit-zero"])
    return [(f["path"], f["line"]) for f in json.loads(capsys.readouterr().out)]


def test_a_cached_file_follows_a_change_in_its_caller(tmp_path, monkeypatch, capsys):
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    (tmp_path / "helpers.py").write_text(textwrap.dedent(HELPERS))
    assert lint(tmp_path, monkeypatch, capsys) == [("helpers.py", 3)]
    assert lint(tmp_path, monkeypatch, capsys) == [("helpers.py", 3)]  # warm: all from the cache
    # helpers.py is unchanged, but no step calls `report` any more: its cached finding must go.
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN).replace("        report(loss)\n", ""))
    assert lint(tmp_path, monkeypatch, capsys) == []
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    assert lint(tmp_path, monkeypatch, capsys) == [("helpers.py", 3)]


def test_unchanged_files_come_from_the_stored_outlines(tmp_path, monkeypatch, capsys):
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    (tmp_path / "helpers.py").write_text(textwrap.dedent(HELPERS))
    lint(tmp_path, monkeypatch, capsys)
    import gpulint.linter.runner as runner

    read = []
    real = runner.outline
    monkeypatch.setattr(runner, "outline", lambda path, text: read.append(path) or real(path, text))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN) + "\n# changed\n")
    assert lint(tmp_path, monkeypatch, capsys) == [("helpers.py", 3)]
    assert read == ["train.py"]
    read.clear()
    assert lint(tmp_path, monkeypatch, capsys) == [("helpers.py", 3)]
    assert read == []  # nothing changed: the stored facts serve as they are


def test_a_broken_project_store_is_read_anew(tmp_path, monkeypatch, capsys):
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    (tmp_path / "helpers.py").write_text(textwrap.dedent(HELPERS))
    lint(tmp_path, monkeypatch, capsys)
    for file in (tmp_path / ".gpulint_cache").rglob("project-*.json"):
        file.write_text('{"format": "gpulint.project/1", "files": {"helpers.py": {"hash": "x", "index": 5}}}')
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN) + "\n# changed\n")
    assert lint(tmp_path, monkeypatch, capsys) == [("helpers.py", 3)]
