"""The linter's settings: `[tool.gpulint]` in the nearest pyproject.toml, or `--config FILE` (a TOML file with a
`[tool.gpulint]` table or top-level keys, or a gpulint.yaml whose `lint:` section holds the same keys).

Every mistake is one line naming the file and the key (a `ConfigError`, exit 2).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Sequence

from gpulint.errors import UsageError

KEYS = {
    "select", "ignore", "extend-select", "per-file-ignores", "exclude", "extend-exclude", "hot-functions", "log-gates",
    "unsafe-fixes",
}
DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".env", "env", ".tox", ".nox", ".mypy_cache", ".ruff_cache",
    ".pytest_cache", "__pycache__", "node_modules", "build", "dist", "site-packages", ".gpulint_cache", ".eggs",
)


class ConfigError(UsageError):
    pass


@dataclass(frozen=True)
class LintConfig:
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    hot_functions: tuple[str, ...] = ()
    log_gates: tuple[str, ...] = ()
    unsafe_fixes: bool = False
    source: str | None = None  # the file the settings came from
    root: Path = field(default_factory=Path.cwd)  # globs are relative to this folder

    def fingerprint(self) -> str:
        """What the cache key needs: everything that changes findings (not `root` or `source`)."""
        data = [self.select, self.ignore, self.extend_select, self.per_file_ignores, self.hot_functions, self.log_gates]
        return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:16]

    def enabled_codes(self, all_codes: Sequence[str], default_codes: Sequence[str]) -> list[str]:
        """Rule codes on after select / extend-select / ignore. A prefix selects the rules it covers that are on by
        default; naming a default-off rule's full code turns it on."""
        if self.select:
            chosen = {c for c in all_codes if _selected(c, self.select, default_codes)}
        else:
            chosen = set(default_codes)
        chosen |= {c for c in all_codes if _selected(c, self.extend_select, default_codes)}
        chosen = {c for c in chosen if not any(c.startswith(p) for p in self.ignore)}
        return sorted(chosen)

    def ignored_for(self, relative_path: str) -> tuple[str, ...]:
        """Code prefixes that `per-file-ignores` turns off for this path (relative to `root`, '/'-separated)."""
        prefixes: list[str] = []
        for pattern, codes in self.per_file_ignores:
            if path_matches(relative_path, pattern):
                prefixes.extend(codes)
        return tuple(prefixes)

    def is_excluded(self, relative_path: str) -> bool:
        return any(path_matches(relative_path, pattern) for pattern in self.exclude + self.extend_exclude)


def _selected(code: str, patterns: Sequence[str], default_codes: Sequence[str]) -> bool:
    for pattern in patterns:
        if pattern == "ALL":
            return True
        if code == pattern:
            return True
        if code.startswith(pattern) and code in default_codes:
            return True
    return False


def path_matches(relative_path: str, pattern: str) -> bool:
    """gitignore-like matching: a pattern without '/' matches any path component (or the file name), a pattern with
    '/' matches the path from the root; `**` crosses folders."""
    path = PurePosixPath(relative_path)
    pattern = pattern.rstrip("/")
    if "/" not in pattern:
        return any(fnmatch.fnmatchcase(part, pattern) for part in path.parts)
    pattern = pattern.lstrip("./").lstrip("/")
    return fnmatch.fnmatchcase(str(path), pattern) or fnmatch.fnmatchcase(str(path), pattern + "/*") or any(
        fnmatch.fnmatchcase("/".join(path.parts[:i]), pattern) for i in range(1, len(path.parts))
    )


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml with a [tool.gpulint] table, from `start` upward."""
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            try:
                data = tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                if "tool.gpulint" in text:  # a broken pyproject is ours to report only when it holds our table
                    raise ConfigError(f"{candidate}: malformed TOML: {exc}") from None
                continue
            if "gpulint" in data.get("tool", {}):
                return candidate
    return None


def load_config(config_file: str | None = None, start: Path | None = None, known_codes: Sequence[str] = ()) -> LintConfig:
    """Read the settings. With `config_file`, that file must exist and parse; otherwise the nearest pyproject.toml with a
    `[tool.gpulint]` table, or the defaults."""
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise ConfigError(f"{config_file}: config file not found")
        table = _read_table(path)
    else:
        found = find_pyproject((start or Path.cwd()).resolve())
        if found is None:
            return LintConfig(root=(start or Path.cwd()).resolve())
        path = found
        table = _read_table(path)
    return _from_table(table, path, known_codes)


def _read_table(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    if path.suffix in (".yaml", ".yml"):
        import yaml  # here, not at the top: most runs read pyproject.toml, and importing yaml is a tenth of a start-up

        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f":{mark.line + 1}" if mark else ""
            raise ConfigError(f"{path}{where}: malformed YAML: {getattr(exc, 'problem', exc)}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level")
        table = data.get("lint", {})
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: malformed TOML: {exc}") from None
        table = data.get("tool", {}).get("gpulint", data if path.name != "pyproject.toml" else {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: gpulint settings must be a table")
    return table


def _from_table(table: dict[str, Any], path: Path, known_codes: Sequence[str]) -> LintConfig:
    where = str(path)
    for key in table:
        if key not in KEYS:
            raise ConfigError(f"{where}: unknown key `{key}` in gpulint settings (known: {', '.join(sorted(KEYS))})")

    def codes(key: str) -> tuple[str, ...]:
        values = _string_list(table.get(key, []), where, key)
        for value in values:
            _check_code(value, known_codes, where, key)
        return tuple(v.upper() if v != "ALL" else v for v in values)

    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{where}: `per-file-ignores` must be a table of glob = [codes]")
    per_file_ignores = []
    for pattern, values in per_file.items():
        values = _string_list(values, where, f"per-file-ignores.{pattern}")
        for value in values:
            _check_code(value, known_codes, where, f"per-file-ignores.{pattern}")
        per_file_ignores.append((pattern, tuple(v.upper() for v in values)))
    unsafe = table.get("unsafe-fixes", False)
    if not isinstance(unsafe, bool):
        raise ConfigError(f"{where}: `unsafe-fixes` must be true or false")
    return LintConfig(
        select=codes("select"),
        ignore=codes("ignore"),
        extend_select=codes("extend-select"),
        per_file_ignores=tuple(per_file_ignores),
        exclude=_string_list(table.get("exclude", []), where, "exclude"),
        extend_exclude=_string_list(table.get("extend-exclude", []), where, "extend-exclude"),
        hot_functions=_string_list(table.get("hot-functions", []), where, "hot-functions"),
        log_gates=_string_list(table.get("log-gates", []), where, "log-gates"),
        unsafe_fixes=unsafe,
        source=where,
        root=path.parent.resolve(),
    )


def _string_list(value: Any, where: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: `{key}` must be a list of strings")
    return tuple(value)


def _check_code(value: str, known_codes: Sequence[str], where: str, key: str) -> None:
    if value == "ALL" or not known_codes:
        return
    if not any(code.startswith(value.upper()) for code in known_codes):
        raise ConfigError(f"{where}: unknown rule code `{value}` in `{key}` (see `gpulint rules`)")


def check_codes(values: Sequence[str], known_codes: Sequence[str], flag: str) -> tuple[str, ...]:
    """Validate codes given on the command line (`--select GPL4`)."""
    for value in values:
        _check_code(value, known_codes, "command line", flag)
    return tuple(v.upper() if v != "ALL" else v for v in values)
