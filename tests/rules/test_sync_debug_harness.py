"""bench/sync_debug_check.py, the CUDA harness that runs every GPL4xx example under PyTorch's sync debug mode: what it
does on a machine without CUDA."""

from __future__ import annotations

import pytest


def _harness():
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "sync_debug_check.py"
    spec = importlib.util.spec_from_file_location("sync_debug_check", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_sync_debug_check_says_so_without_cuda(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the real check runs instead")
    assert _harness().main([]) == 2
    assert "no CUDA device" in capsys.readouterr().out


@pytest.mark.slow
def test_sync_debug_check_runs_every_example_on_cpu(capsys, monkeypatch, tmp_path):
    """The harness can supply and run every GPL4xx example (CUDA-only calls are skipped on CPU)."""
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)  # examples save checkpoints (`torch.save(..., "model.pt")`) into the working folder
    assert _harness().main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "error:" not in out
    assert out.count("clean") > 60
