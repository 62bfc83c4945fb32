"""How the engine lints a file: the settings that reach it from the configuration."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LintOptions:
    hot_functions: tuple[str, ...] = ()
    gate_names: tuple[str, ...] = ()
    # Parse only the functions the enabled rules need (see regions.py); off only to check that pruning changes nothing.
    prune: bool = True
    ignore_noqa: bool = False  # report what `# noqa` comments would suppress (--ignore-noqa)
