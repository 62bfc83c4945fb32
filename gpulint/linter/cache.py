"""Per-file results cached across runs, keyed by gpulint version, effective settings and file contents.

One JSON file per (version, store format, settings) under `.gpulint_cache/`, mapping a path to the hash of its
bytes and its findings, with the rule codes those settings enable (and the facts of the last run's project model and
config files): a warm run reads it once, then only hashes files, and never needs to import the rules to know which
are on. A cache that cannot be read or written is ignored with one warning; it never changes what is reported.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from gpulint import __version__
from gpulint.fileio import atomic_write
from gpulint.linter.finding import Finding
from gpulint.project.store import FORMAT as STORE_FORMAT

CACHE_DIR = ".gpulint_cache"
CACHE_MARKER = "# created by gpulint"  # first line of the .gitignore in every cache folder (`gpulint clean` checks it)


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class ResultCache:
    def __init__(self, root: Path, settings_key: str, enabled: bool = True) -> None:
        self.enabled = enabled
        # The project store's format is part of the folder: findings cached with facts read by another version of the
        # store are not reused.
        self.file = root / CACHE_DIR / f"{__version__}+{STORE_FORMAT.rsplit('/', 1)[-1]}" / f"{settings_key}.json"
        self.entries: dict[str, list] = {}
        # The rule codes these settings enable, as the run that wrote the cache found them (None: not known yet).
        self.codes: list[str] | None = None
        # The project model's facts of the last run, and the key of the files they were made from (see runner.py).
        self.run: dict = {}
        # Each config file's facts (project/configs.py), by display path: [content hash, dumped facts].
        self.configs: dict[str, list] = {}
        self.dirty = False
        self.warned = False
        if enabled:
            self._load()

    def _load(self) -> None:
        if not self.file.exists():
            return
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
                raise ValueError("not a gpulint cache")
            codes = data.get("codes")
            if not (isinstance(codes, list) and all(isinstance(c, str) for c in codes)):
                raise ValueError("no rule codes")
            self.entries, self.codes = data["files"], codes
            run = data.get("run")
            self.run = run if isinstance(run, dict) else {}
            configs = data.get("configs")
            self.configs = configs if isinstance(configs, dict) else {}
        except (OSError, ValueError) as exc:
            self._warn(f"cannot read cache {self.file} ({exc}); linting without it")
            self.entries, self.codes = {}, None

    def get(self, key: str, digest: str) -> list[Finding] | None:
        entry = self.entries.get(key)
        if not self.enabled or entry is None or entry[0] != digest:
            return None
        try:
            return [Finding.from_json(f) for f in entry[1]]
        except (KeyError, TypeError, IndexError):
            return None

    def put(self, key: str, digest: str, findings: list[Finding]) -> None:
        if self.enabled:
            self.entries[key] = [digest, [f.to_json() for f in findings]]
            self.dirty = True

    def save(self) -> None:
        if not (self.enabled and self.dirty and self.codes is not None):
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            gitignore = self.file.parent.parent / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text(f"{CACHE_MARKER}\n*\n", encoding="utf-8")
            data = {"codes": self.codes, "files": self.entries, "run": self.run, "configs": self.configs}
            atomic_write(self.file, json.dumps(data, separators=(",", ":")).encode("utf-8"))
        except OSError as exc:
            self._warn(f"cannot write cache {self.file} ({exc.strerror or exc}); results were not cached")

    def _warn(self, message: str) -> None:
        if not self.warned:
            print(f"gpulint: warning: {message}", file=sys.stderr)
            self.warned = True


class ProjectStore:
    """The project model's outlines and read definitions between runs (gpulint/project/store.py), in one file beside
    the results, read only when some file changed. JSON lines: a header naming the format, then one line per source
    file, `[display path, content hash, outline]`; a run after an edit writes the lines of the unchanged files back
    as they were read, without encoding their outlines again."""

    def __init__(self, results: ResultCache) -> None:
        self.results = results
        self.file = results.file.with_name(f"project-{results.file.name}l")
        self.lines: dict[str, tuple[str, str, dict]] | None = None  # display -> (content hash, line, outline)

    def entry(self, display: str, digest: str) -> dict | None:
        if not self.results.enabled:
            return None
        if self.lines is None:
            self.lines = self._read()
        found = self.lines.get(display)
        return found[2] if found is not None and found[0] == digest else None

    def _read(self) -> dict[str, tuple[str, str, dict]]:
        try:
            with open(self.file, encoding="utf-8") as handle:
                if json.loads(handle.readline() or "null") != {"format": STORE_FORMAT}:
                    return {}
                lines = {}
                for line in handle:
                    display, digest, index = json.loads(line)
                    if isinstance(display, str) and isinstance(digest, str) and isinstance(index, dict):
                        lines[display] = (digest, line, index)
                return lines
        except (OSError, ValueError, TypeError):  # none yet, or not a store of this version: every file is read anew
            return {}

    def save(self, indexes: dict[str, tuple[str, dict | None]]) -> None:
        """`indexes`: display path -> (content hash, dumped outline, or None for the one stored for that hash)."""
        if not self.results.enabled:
            return
        lines = [json.dumps({"format": STORE_FORMAT}) + "\n"]
        for display, (digest, index) in indexes.items():
            stored = (self.lines or {}).get(display)
            if index is None and stored is not None and stored[0] == digest:
                lines.append(stored[1] if stored[1].endswith("\n") else stored[1] + "\n")
            elif index is not None:
                lines.append(json.dumps([display, digest, index], separators=(",", ":")) + "\n")
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.file, "".join(lines).encode("utf-8"))
        except OSError as exc:
            self.results._warn(f"cannot write cache {self.file} ({exc.strerror or exc}); the project was not cached")
