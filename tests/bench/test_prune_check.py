"""bench/prune_check.py compares pruned and whole-file lints and checks positions (on a tiny folder here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "prune_check.py"

TRAIN_PY = """\
import torch


def describe(model):
    return sum(p.numel() for p in model.parameters())


def train(model, loader, opt, device):
    for x, y in loader:
        loss = model(x.to(device), y.to(device))
        loss.backward()
        opt.step()
        print(loss.item())
"""


def load():
    spec = importlib.util.spec_from_file_location("prune_check", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_compare_and_positions_on_a_small_folder(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN_PY)
    (tmp_path / "broken.py").write_bytes(b"\xff\xfe not utf-8")
    prune_check = load()
    files = sorted(tmp_path.rglob("*.py"))
    facts = prune_check.project_facts([tmp_path])
    count, findings, differ, _, _ = prune_check.compare(files, facts)
    assert count == 2 and findings >= 3 and differ == []
    checked, wrong = prune_check.check_positions(files, facts)
    assert checked >= 3 and wrong == []


def test_a_difference_is_reported(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(TRAIN_PY)
    prune_check = load()
    real = prune_check.lint_text
    # A broken pruning (drops every finding) must show up as a difference.
    monkeypatch.setattr(prune_check, "lint_text", lambda p, t, r, o, f: real(p, t, r, o, f) if not o.prune else [])
    _, _, differ, _, _ = prune_check.compare([tmp_path / "train.py"], prune_check.project_facts([tmp_path]))
    assert len(differ) == 1


def test_a_cut_that_does_not_parse_is_reported(tmp_path):
    # A class no member of which is needed goes whole; its members must not also get stand-ins of their own (the
    # nested string literals would not parse, and the engine would silently parse the whole file).
    source = (
        "import torch\n\n\nclass Helper:\n    def a(self):\n        return 1\n\n    def b(self):\n        return 2\n\n\n"
        + TRAIN_PY.replace("import torch\n", "")
    )
    (tmp_path / "train.py").write_text(source)
    prune_check = load()
    assert prune_check.cuts_that_fail([tmp_path / "train.py"], prune_check.project_facts([tmp_path])) == []
    (tmp_path / "fooled.py").write_text('import torch\n\nT = "\\\ndef f():\\\n  x"\n\n\n' + TRAIN_PY.replace("import torch\n", ""))
    assert len(prune_check.cuts_that_fail([tmp_path / "fooled.py"], prune_check.project_facts([tmp_path]))) == 1
