"""The README's walk-through on the bundled example, as a user runs it: plan, `git apply`, and the example's own
output shows the same losses at a lower peak."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(cwd: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.slow
def test_walk_through_same_losses_lower_peak(tmp_path):
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("gpulint-plan.json"))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    _run(tmp_path, *git, "init", "-q")
    _run(tmp_path, *git, "add", "-A")
    _run(tmp_path, *git, "commit", "-q", "-m", "example")
    train = [sys.executable, "examples/train.py", "--steps", "3", "--log-every", "1"]

    before = _run(tmp_path, *train)
    diff = _run(tmp_path, sys.executable, "-m", "gpulint", "plan", "examples/gpulint.yaml", "--budget", "200MB", "--patch")
    (tmp_path / "plan.diff").write_text(diff)
    _run(tmp_path, *git, "apply", "plan.diff")
    after = _run(tmp_path, *train)

    def losses(output: str) -> list[str]:
        return re.findall(r"loss (\d+\.\d+)", output)

    def peak(output: str) -> float:
        return float(re.search(r"peak memory of a training step: ([\d.]+) MiB", output).group(1))

    assert len(losses(before)) == 4 and losses(after) == losses(before)
    assert peak(after) < peak(before)
    assert peak(before) - peak(after) > 50  # the plan removes about 100 MiB of saved activations


@pytest.mark.slow
def test_make_demo_writes_the_delta_and_the_plan_patch(tmp_path):
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("gpulint-plan.json"))
    bin_dir = Path(sys.executable).parent  # this environment's gpulint, instead of the Makefile's .venv
    done = subprocess.run(["make", "-f", str(ROOT / "Makefile"), "demo", "STAMP=", f"BIN={bin_dir}"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    comment = (tmp_path / "out" / "pr-comment.md").read_text()
    assert comment.index("### Memory: base → head") < comment.index("### Suggested patches")
    assert "**Saved activations behind the change, by layer**: `h.4` " in comment and "`h.5` " in comment
    assert "The memory plan: peak " in comment and "+    gpulint.apply(model" in comment
    assert "diff --git a/examples/train.py b/examples/train.py" in comment
    assert not (tmp_path / "examples" / "gpulint-plan.json").exists()  # the base is planned, not patched
