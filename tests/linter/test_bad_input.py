"""Bad input: each becomes one clear message (a GPL001/GPL002 finding with its location), the other files are still
linted, and no traceback is printed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .conftest import TRAIN


def _check(run, folder: Path, *paths: str):
    code, out, err = run(folder, "check", *paths, "--no-cache", "--format", "json")
    assert "Traceback" not in err
    return code, json.loads(out), err


def _by_path(findings):
    result = {}
    for f in findings:
        result.setdefault(f["path"], []).append(f)
    return result


BAD_FILES = {
    "syntax.py": (b"import torch\ndef train_step(batch:\n    return batch.item()\n", "syntax error", 2),
    "py2.py": (b"import torch\nprint 'loss', loss.item()\n", "syntax error", 2),
    "latin.py": ("# caf\xe9 loss.item()\n".encode("latin-1"), "cannot decode as utf-8", 1),
    "nul.py": (b"x = 1\ny = t.item()\x00\n", "NUL byte", 2),
}


def test_bad_files_report_and_the_rest_is_linted(run, tmp_path):
    for name, (data, _, _) in BAD_FILES.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "good.py").write_text(TRAIN)
    code, findings, err = _check(run, tmp_path, ".")
    by_path = _by_path(findings)
    assert code == 1
    assert [f["code"] for f in by_path["good.py"]] == ["GPL401"]
    for name, (_, message, line) in BAD_FILES.items():
        (finding,) = by_path[name]
        assert finding["code"] == "GPL001" and message in finding["message"] and finding["line"] == line, finding


def test_declared_encoding_is_honoured(run, tmp_path):
    source = "# -*- coding: latin-1 -*-\n" + TRAIN.replace("value = loss.item()", "value = loss.item()  # caf\xe9")
    (tmp_path / "enc.py").write_bytes(source.encode("latin-1"))
    code, findings, _ = _check(run, tmp_path, "enc.py")
    assert [f["code"] for f in findings] == ["GPL401"]


def test_bom_and_crlf(run, tmp_path):
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + TRAIN.replace("\n", "\r\n").encode())
    code, findings, _ = _check(run, tmp_path, "bom.py")
    assert [(f["code"], f["line"], f["column"]) for f in findings] == [("GPL401", 8, 17)]


def test_empty_file(run, tmp_path):
    (tmp_path / "empty.py").write_bytes(b"")
    assert _check(run, tmp_path, "empty.py")[:2] == (0, [])


def test_large_generated_file(run, tmp_path):
    # Generated modules (protobuf descriptors, embedded tables) carry megabytes of literal data beside real code.
    blob = "".join(f"    b'{'%064x' % (i * 2654435761)}',\n" for i in range(70_000))
    data = ("import torch\n\nDESCRIPTOR = (\n" + blob + ")\n\n" + TRAIN.split("\n", 1)[1]).encode()
    assert len(data) > 5_000_000
    (tmp_path / "big_pb2.py").write_bytes(data)
    code, findings, _ = _check(run, tmp_path, "big_pb2.py")
    assert [(f["code"], f["line"]) for f in findings] == [("GPL401", 70_012)]


def test_deeply_nested_expression(run, tmp_path):
    (tmp_path / "deep.py").write_text("x = " + "(" * 3000 + "t.item()" + ")" * 3000 + "\n")
    (tmp_path / "good.py").write_text(TRAIN)
    code, findings, _ = _check(run, tmp_path, ".")
    by_path = _by_path(findings)
    assert by_path["deep.py"][0]["code"] == "GPL001" and "nested" in by_path["deep.py"][0]["message"]
    assert by_path["good.py"][0]["code"] == "GPL401"


def test_unreadable_file(run, tmp_path, monkeypatch):
    (tmp_path / "locked.py").write_text(TRAIN)
    (tmp_path / "good.py").write_text(TRAIN)
    real = Path.read_bytes

    def read_bytes(self):
        if self.name == "locked.py":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    code, findings, _ = _check(run, tmp_path, ".")
    by_path = _by_path(findings)
    assert by_path["locked.py"][0]["code"] == "GPL002" and "Permission denied" in by_path["locked.py"][0]["message"]
    assert by_path["good.py"][0]["code"] == "GPL401"


def test_broken_symlink_and_missing_path(run, tmp_path):
    (tmp_path / "good.py").write_text(TRAIN)
    os.symlink(tmp_path / "nowhere.py", tmp_path / "dangling.py")
    code, findings, _ = _check(run, tmp_path, "dangling.py", "missing.py", "good.py")
    messages = {f["path"]: f["message"] for f in findings if f["code"] == "GPL002"}
    assert "broken symbolic link" in messages["dangling.py"]
    assert "no such file" in messages["missing.py"]
    assert any(f["code"] == "GPL401" for f in findings)


def test_directory_named_like_a_file(run, tmp_path):
    (tmp_path / "pkg.py").mkdir()
    (tmp_path / "pkg.py" / "inner.py").write_text(TRAIN)
    code, findings, _ = _check(run, tmp_path, "pkg.py")
    assert [f["path"] for f in findings] == ["pkg.py/inner.py"]


@pytest.mark.parametrize("flag", ["--fix", "--diff"])
def test_fix_never_writes_what_it_cannot_parse(run, tmp_path, flag):
    (tmp_path / "syntax.py").write_bytes(BAD_FILES["syntax.py"][0])
    code, out, err = run(tmp_path, "check", "syntax.py", "--no-cache", flag)
    assert (tmp_path / "syntax.py").read_bytes() == BAD_FILES["syntax.py"][0]
    assert "Traceback" not in err


def test_positions_after_decorators_comments_and_semicolons(run, tmp_path):
    body = TRAIN.split("\n", 1)[1]
    source = (
        "import torch\n# a comment\n\n\n@decorator\n@other(1)\nclass Trainer:\n    x = 1; y = 2\n\n"
        + body.replace("\ndef train", "\n@decorator\ndef train")
    )
    (tmp_path / "t.py").write_text(source)
    code, findings, _ = _check(run, tmp_path, "t.py")
    line = source.splitlines().index("        value = loss.item()") + 1
    assert [(f["line"], f["column"]) for f in findings] == [(line, 17)]


def test_a_rule_that_fails_on_a_file_is_left_out_and_the_others_still_report(capsys):
    """A bug in one rule (GPL104's fix builder once raised on `[len(c) - c.sum().item() for c in chunks]`) costs
    that rule's findings on that file, with a one-line warning naming it, not the run."""
    import libcst as cst

    from gpulint.linter.engine import lint_text
    from gpulint.linter.rule import Invalid, Rule, RuleDocs, rules_by_code

    class Broken(Rule):
        code = "GPL998"
        name = "broken"
        message = "broken"
        triggers = ("item",)
        docs = RuleDocs("-", "-", "-", "-")
        invalid = (Invalid("x.item()"),)

        def visit_Call(self, node: cst.Call) -> None:
            raise AttributeError("'BinaryOperation' object has no attribute 'func'")

    found = lint_text("train.py", TRAIN, [Broken, rules_by_code()["GPL401"]])
    assert [f.code for f in found] and {f.code for f in found} == {"GPL401"}
    err = capsys.readouterr().err
    assert "rule GPL998 failed on train.py (AttributeError" in err and err.count("\n") == 1
