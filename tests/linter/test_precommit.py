"""The real pre-commit, with this repository as a hook source, fails on a bad file and passes on a good one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import CLEAN, TRAIN

ROOT = Path(__file__).resolve().parents[2]


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.slow
def test_pre_commit_hook(tmp_path):
    pre_commit = shutil.which("pre-commit") or str(Path(sys.executable).parent / "pre-commit")
    # The hook source must be a git repository at a commit: snapshot the working tree (committed or not).
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv*", ".cache", "out", "*.egg-info",
                                                                "__pycache__", ".gpulint_cache", "node_modules"))
    _git(source, "init", "-q")
    _git(source, "add", "-A")
    _git(source, "commit", "-q", "-m", "snapshot")
    rev = _git(source, "rev-parse", "HEAD")

    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q")
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {source}\n  rev: {rev}\n  hooks:\n  - id: gpulint\n"
    )
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

    (project / "train.py").write_text(TRAIN)
    _git(project, "add", "-A")
    bad = subprocess.run([pre_commit, "run", "--all-files"], cwd=project, env=env, capture_output=True, text=True,
                         timeout=900)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "GPL401" in bad.stdout

    (project / "train.py").write_text(CLEAN)
    _git(project, "add", "-A")
    good = subprocess.run([pre_commit, "run", "--all-files"], cwd=project, env=env, capture_output=True, text=True,
                          timeout=900)
    assert good.returncode == 0, good.stdout + good.stderr
    # The hook's own environment must not have pulled PyTorch in.
    envs = list((tmp_path / "cache").rglob("site-packages/torch"))
    assert envs == []


@pytest.mark.slow
def test_the_readme_pre_commit_block_runs_as_written(tmp_path):
    """The README's snippet works today (no release tag exists for a `rev:` to name): with the gpulint installed
    from source on PATH, it fails on a bad file and passes on a good one."""
    import re

    pre_commit = shutil.which("pre-commit") or str(Path(sys.executable).parent / "pre-commit")
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### pre-commit", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL).group(1)
    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q")
    (project / ".pre-commit-config.yaml").write_text(block)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for text, expected in ((TRAIN, 1), (CLEAN, 0)):
        (project / "train.py").write_text(text)
        _git(project, "add", "-A")
        done = subprocess.run([pre_commit, "run", "--all-files"], cwd=project, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == expected, done.stdout + done.stderr
        assert ("GPL401" in done.stdout) == (expected == 1)
