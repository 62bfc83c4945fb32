"""Projects the model must read without losing the run: import cycles, a module beside a package of the same name,
`sys.path` tricks, star imports, generated files, and a monorepo of ten thousand files."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from gpulint.cli import main
from gpulint.project import Project, outline
from gpulint.project.facts import PER_STEP

LOOP = """
    import torch
    {imports}

    def train(model, loader, opt):
        model.cuda()
        for batch in loader:
            loss = model(batch)
            loss.backward()
            opt.step()
            {call}
"""
REPORT = "def report(loss):\n    print(loss.item())\n"


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def findings(root: Path, monkeypatch, capsys) -> list[tuple[str, int, str]]:
    monkeypatch.chdir(root)
    code = main(["check", ".", "--format", "json", "--no-cache", "--exit-zero"])
    out = capsys.readouterr()
    assert code == 0 and "Traceback" not in out.err
    return [(f["path"], f["line"], f["code"]) for f in json.loads(out.out)]


def train(imports: str, call: str) -> str:
    return textwrap.dedent(LOOP).format(imports=imports, call=call)


def test_import_cycles(tmp_path, monkeypatch, capsys):
    write(tmp_path, {
        "train.py": train("from a import ping", "ping(loss, 3)"),
        "a.py": "from b import pong\nfrom b import *\n\ndef ping(loss, n):\n    return pong(loss, n - 1)\n",
        "b.py": "from a import ping\nfrom a import *\n\ndef pong(loss, n):\n    print(loss.item())\n    return ping(loss, n) if n else 0\n",
    })
    assert findings(tmp_path, monkeypatch, capsys) == [("b.py", 5, "GPL401")]


def test_a_package_and_a_module_of_the_same_name(tmp_path, monkeypatch, capsys):
    # Python imports the package (the folder) when both `utils/` and `utils.py` sit on the same path entry.
    write(tmp_path, {
        "train.py": train("from utils import report", "report(loss)"),
        "utils.py": "def report(loss):\n    return loss\n",
        "utils/__init__.py": REPORT,
    })
    assert findings(tmp_path, monkeypatch, capsys) == [("utils/__init__.py", 2, "GPL401")]


def test_modules_found_through_sys_path_tricks(tmp_path, monkeypatch, capsys):
    write(tmp_path, {
        "scripts/train.py": train(
            "import sys, os\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))\n"
            "from metrics import report", "report(loss)",
        ),
        "lib/metrics.py": REPORT,
    })
    assert findings(tmp_path, monkeypatch, capsys) == [("lib/metrics.py", 2, "GPL401")]


def test_star_imports_through_a_package(tmp_path):
    write(tmp_path, {
        "train.py": train("from helpers import *", "report(loss)"),
        "helpers/__init__.py": "from .logging import *\n",
        "helpers/logging.py": "__all__ = ['report']\n\n" + REPORT,
    })
    files = ["train.py", "helpers/__init__.py", "helpers/logging.py"]
    project = Project(outline(name, (tmp_path / name).read_text()) for name in files)
    assert project.reach[("helpers/logging.py", "report")].rank == PER_STEP


def test_generated_files_do_not_stop_the_run(tmp_path, monkeypatch, capsys):
    # A generated table (a 20,000-entry literal), a protobuf-style module with one very long line, and a file that
    # is not valid Python: each is read or reported alone, and the training script is still linted.
    table = "TABLE = {\n" + "".join(f"    'k{i}': [{i}, {i + 1}, ({i}, {i})],\n" for i in range(20000)) + "}\n"
    long_line = "DESCRIPTOR = b'" + "\\x00" * 200000 + "'\n"
    write(tmp_path, {
        "train.py": train("from helpers import report", "report(loss)"),
        "helpers.py": REPORT,
        "generated/table.py": table,
        "generated/model_pb2.py": long_line,
        "generated/broken.py": "def f(:\n",
    })
    found = findings(tmp_path, monkeypatch, capsys)
    assert ("helpers.py", 2, "GPL401") in found and ("generated/broken.py", 1, "GPL001") in found


@pytest.mark.slow
def test_a_monorepo_of_ten_thousand_files(tmp_path, monkeypatch, capsys):
    for package in range(100):
        folder = tmp_path / f"pkg{package}"
        folder.mkdir()
        (folder / "__init__.py").write_text("")
        for module in range(100):
            (folder / f"m{module}.py").write_text(f"def f{module}(x):\n    return x + {module}\n")
    write(tmp_path, {"train.py": train("from pkg7.m3 import f3\nfrom helpers import report", "report(f3(loss))"),
                     "helpers.py": REPORT})
    assert findings(tmp_path, monkeypatch, capsys) == [("helpers.py", 2, "GPL401")]
