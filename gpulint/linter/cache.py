"""Per-file results cached across runs, keyed by gpulint version, effective settings and file contents.

One JSON file per (version, settings) pair under `.gpulint_cache/`, mapping a path to the hash of its bytes and its
findings, with the rule codes those settings enable: a warm run reads it once, then only hashes files, and never
needs to import the rules to know which are on. A cache that cannot be read or written is ignored with one warning;
it never changes what is reported.
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
        self.file = root / CACHE_DIR / __version__ / f"{settings_key}.json"
        self.entries: dict[str, list] = {}
        # The rule codes these settings enable, as the run that wrote the cache found them (None: not known yet).
        self.codes: list[str] | None = None
        # The project model's facts of the last run, and the key of the files they were made from (see runner.py).
        self.run: dict = {}
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
            data = {"codes": self.codes, "files": self.entries, "run": self.run}
            atomic_write(self.file, json.dumps(data, separators=(",", ":")).encode("utf-8"))
        except OSError as exc:
            self._warn(f"cannot write cache {self.file} ({exc.strerror or exc}); results were not cached")

    def _warn(self, message: str) -> None:
        if not self.warned:
            print(f"gpulint: warning: {message}", file=sys.stderr)
            self.warned = True


class ProjectStore:
    """The project model's outlines and read definitions between runs (gpulint/project/store.py), one JSON file
    beside the results, read only when some file changed."""

    def __init__(self, results: ResultCache) -> None:
        self.results = results
        self.file = results.file.with_name(f"project-{results.file.name}")
        self.files: dict[str, dict] | None = None

    def entry(self, display: str, digest: str) -> dict | None:
        if not self.results.enabled:
            return None
        if self.files is None:
            self.files = {}
            try:
                data = json.loads(self.file.read_text(encoding="utf-8")) if self.file.exists() else {}
                if isinstance(data, dict) and data.get("format") == STORE_FORMAT and isinstance(data.get("files"), dict):
                    self.files = data["files"]
            except (OSError, ValueError):
                self.files = {}
        entry = self.files.get(display)
        return entry["index"] if isinstance(entry, dict) and entry.get("hash") == digest else None

    def save(self, indexes: dict[str, tuple[str, dict]]) -> None:
        """`indexes`: display path -> (content hash, dumped outline)."""
        if not self.results.enabled:
            return
        data = {"format": STORE_FORMAT, "files": {d: {"hash": h, "index": i} for d, (h, i) in indexes.items()}}
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.file, json.dumps(data, separators=(",", ":")).encode("utf-8"))
        except OSError as exc:
            self.results._warn(f"cannot write cache {self.file} ({exc.strerror or exc}); the project was not cached")
