"""The project model: what runs every training step, across the modules of a project (see model.py).

It reads Python's `ast` (never libcst) and imports nothing else heavy, so that it can run before the rules, in the
main process, for every file of a project.
"""

from __future__ import annotations

from typing import Iterable

from gpulint.project.facts import FileFacts
from gpulint.project.index import outline
from gpulint.project.model import Project


def single_file_facts(path: str, text: str, hot_functions: Iterable[str] = (), gate_names: Iterable[str] = ()) -> FileFacts:
    """The model's facts for a file read alone: its own training loops, or, without one, its functions' names."""
    return Project([outline(path, text)], hot_functions, gate_names).file_facts(path)


__all__ = ["FileFacts", "Project", "outline", "single_file_facts"]
