"""Which files to lint: Python files under the given paths, minus version-control and virtualenv folders, `exclude`
globs, and (inside a git work tree) what .gitignore ignores.

A file named explicitly on the command line is linted even when excluded, unless `force_exclude` is set: pre-commit
passes every staged file by name, and `--force-exclude` makes the config's exclusions hold for them too.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from gpulint.config import DEFAULT_EXCLUDE, LintConfig
from gpulint.project.configs import DEPENDENCY_SUFFIXES, is_dependency_file

PYTHON_SUFFIXES = (".py", ".pyi")
# Configurations, scripts and READMEs: read by the project model for the classes they build by name (`target:
# pkg.mod.Class`) and the intervals they set (`--logging_steps 1`), not linted.
CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".jsonnet", ".libsonnet", ".sh", ".md")
# ... and dependency files, for the PyTorch they pin (`requirements.txt`, `pyproject.toml`, `setup.cfg`): read by
# name among the files of `DEPENDENCY_SUFFIXES` (a `.txt` file is most often data).


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (path, one-line reason)
    configs: list[Path] = field(default_factory=list)  # config and dependency files under the given folders


def relative_to_root(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def discover(paths: list[str], config: LintConfig, force_exclude: bool = False) -> Discovery:
    found = Discovery()
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_symlink() and not path.exists():
            found.errors.append((raw, "broken symbolic link"))
            continue
        if not path.exists():
            found.errors.append((raw, "no such file or directory"))
            continue
        if path.is_dir():
            files, configs = _walk(path, config)
            for file in files:
                _add(found, seen, file)
            found.configs += configs
            continue
        if force_exclude and excluded(path, config):
            continue
        _add(found, seen, path)
    return found


def _add(found: Discovery, seen: set[Path], path: Path) -> None:
    key = path.resolve()
    if key not in seen:
        seen.add(key)
        found.files.append(path)


def excluded(path: Path, config: LintConfig) -> bool:
    """Does the config exclude `path` (by its globs, or a default folder such as .venv on its way)?"""
    relative = relative_to_root(path, config.root)
    parts = Path(relative).parts[:-1]
    return config.is_excluded(relative) or any(part in DEFAULT_EXCLUDE for part in parts)


def _walk(folder: Path, config: LintConfig) -> tuple[list[Path], list[Path]]:
    """The Python files under `folder`, and its configuration files, that are not excluded or ignored."""
    tracked = _git_visible_files(folder)
    result: list[Path] = []
    configs: list[Path] = []
    for current, dirs, files in os.walk(folder):
        here = Path(current)
        keep = []
        for name in sorted(dirs):
            sub = here / name
            if name in DEFAULT_EXCLUDE or (sub / "pyvenv.cfg").exists() or config.is_excluded(relative_to_root(sub, config.root)):
                continue
            keep.append(name)
        dirs[:] = keep
        for name in sorted(files):
            python = name.endswith(PYTHON_SUFFIXES)
            file = here / name
            if not python and not name.endswith(CONFIG_SUFFIXES) and not (
                    name.endswith(DEPENDENCY_SUFFIXES) and is_dependency_file(relative_to_root(file, config.root))):
                continue
            if tracked is not None and file.resolve() not in tracked:
                continue
            if config.is_excluded(relative_to_root(file, config.root)):
                continue
            (result if python else configs).append(file)
    return result, configs


def _git_visible_files(folder: Path) -> set[Path] | None:
    """Files under `folder` that git does not ignore (tracked or untracked), or None outside a git work tree."""
    try:
        top = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--show-toplevel"], capture_output=True, text=True, timeout=30
        )
        if top.returncode != 0:
            return None
        # A folder git ignores as a whole (a virtualenv's site-packages passed on purpose) is linted as a plain folder.
        if subprocess.run(["git", "-C", str(folder), "check-ignore", "-q", "."], capture_output=True, timeout=30).returncode == 0:
            return None
        listing = subprocess.run(
            ["git", "-C", str(folder), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listing.returncode != 0:
        return None
    base = folder.resolve()
    return {(base / name).resolve() for name in listing.stdout.decode("utf-8", "surrogateescape").split("\0") if name}
