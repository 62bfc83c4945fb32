from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpulint.cli import main

TRAIN = textwrap.dedent(
    """\
    import torch

    def train(model, loader, optimizer, device="cuda"):
        for step, batch in enumerate(loader):
            loss = model(batch)
            loss.backward()
            optimizer.step()
            value = loss.item()
    """
)
CLEAN = "import torch\n\nx = torch.zeros(3)\n"


@pytest.fixture
def run(monkeypatch, capsys):
    """Run the CLI in-process in a folder; returns (exit code, stdout, stderr)."""

    def _run(folder: Path, *args: str):
        monkeypatch.chdir(folder)
        code = main(list(args))
        out = capsys.readouterr()
        return code, out.out, out.err

    return _run


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path
