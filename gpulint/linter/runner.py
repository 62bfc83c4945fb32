"""Lint many files: cache lookups, a process pool across files, fixes, and per-file errors that never stop the run."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable, Sequence

from gpulint.linter.cache import ProjectStore, ResultCache, content_hash
from gpulint.linter.finding import Finding, rule_url
from gpulint.linter.notebooks import analysed_text
from gpulint.linter.options import LintOptions
from gpulint.linter.source import SourceFile, decode
from gpulint.project import FileFacts, Project, outline
from gpulint.project.facts import shown_at
from gpulint.project.configs import TrainingConfigs, config_bytes, config_file_facts, config_text, united
from gpulint.project.index import ModuleIndex
from gpulint.project.store import (
    dump_configs, dump_facts, dump_index, facts_digest, load_configs, load_facts, load_index,
)

# The engine and the rules (and libcst) are imported by `process`, in the workers: a run whose every file is cached
# never imports them, which is most of a warm run's time.

IO_ERROR_CODE = "GPL002"
# Below this many files to lint, starting worker processes costs more than it saves.
PARALLEL_THRESHOLD = 16


@dataclass(frozen=True)
class FileTask:
    display: str  # the path as the user sees it in reports
    path: str
    codes: tuple[str, ...]
    options: LintOptions
    fix: bool = False
    unsafe: bool = False
    facts: FileFacts | None = None  # the project model's facts for this file (None: model it alone)
    facts_digest: str = ""  # what cached findings must agree on besides the file's bytes
    # The path within the linted folder, which the project model and the path tests (`tests/`, `benchmarks/`) read,
    # so that where the run starts cannot change what it finds. Empty: the display path.
    project_path: str = ""

    @property
    def model_path(self) -> str:
        return self.project_path or self.display


@dataclass
class FileOutcome:
    display: str
    path: str = ""
    findings: list[Finding] = field(default_factory=list)
    digest: str | None = None
    original: SourceFile | None = None
    fixed_text: str | None = None  # set when fixes changed the file
    fixed_codes: tuple[str, ...] = ()  # the code of each fix applied

    @property
    def fixed(self) -> int:
        return len(self.fixed_codes)


def io_error(display: str, reason: str) -> Finding:
    return Finding(
        code=IO_ERROR_CODE,
        name="io-error",
        message=f"cannot read file: {reason}",
        severity="error",
        path=display,
        line=1,
        column=1,
        end_line=1,
        end_column=1,
        url=rule_url(IO_ERROR_CODE, "io-error"),
    )


def process(task: FileTask) -> FileOutcome:
    """Lint (and, if asked, fix) one file. Never raises for a problem with the file itself."""
    try:
        data = Path(task.path).read_bytes()
    except OSError as exc:
        return FileOutcome(task.display, task.path, [io_error(task.display, exc.strerror or str(exc))])
    return process_bytes(task, data)


def process_bytes(task: FileTask, data: bytes) -> FileOutcome:
    """Lint (and, if asked, fix) the contents of one file (read from disk, or standard input)."""
    from gpulint.linter.engine import lint_bytes, lint_text
    from gpulint.linter.fixes import fix_text
    from gpulint.linter.rule import rules_by_code

    outcome = FileOutcome(task.display, task.path)
    outcome.digest = content_hash(data)
    registry = rules_by_code()
    rules = [registry[c] for c in task.codes]
    if not task.fix:
        outcome.findings = _shown(task, lint_bytes(task.model_path, data, rules, task.options, task.facts).findings)
        return outcome
    try:
        source = decode(data)
    except ValueError:
        outcome.findings = _shown(task, lint_bytes(task.model_path, data, rules, task.options, task.facts).findings)
        return outcome
    outcome.original = source

    def lint(text: str) -> list[Finding]:
        return _shown(task, lint_text(task.model_path, text, rules, task.options, task.facts))

    new_text, fixed = fix_text(source.text, lint, task.unsafe, newline=source.newline)
    if fixed:
        outcome.fixed_text, outcome.fixed_codes = new_text, tuple(fixed)
    outcome.findings = lint(new_text)
    return outcome


def _shown(task: FileTask, findings: list[Finding]) -> list[Finding]:
    """The findings at the file's display path (they were made at its path within the linted folder)."""
    if task.model_path == task.display:
        return findings
    return [replace(f, path=task.display) if f.path == task.model_path else f for f in findings]


class Workers:
    """The process pool a run shares between reading the project and linting its files: started on first use, only
    for work large enough to pay for it."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.shutdown()

    def map(self, function, items: list, chunksize: int = 1) -> Iterable:
        if self.jobs <= 1 or len(items) < PARALLEL_THRESHOLD:
            return map(function, items)
        if self.pool is None:
            self.pool = ProcessPoolExecutor(max_workers=self.jobs)
        return self.pool.map(function, items, chunksize=chunksize)

    def warm_up(self) -> None:
        """Start importing the linter (libcst, the engine, the rules) in every started worker, without waiting: the
        workers are idle while this process builds the project model, and the imports are then off the critical path
        of the lint that follows."""
        if self.pool is not None:
            for _ in range(self.jobs):
                self.pool.submit(_import_linter)


def _import_linter() -> None:
    from gpulint.linter.engine import lint_bytes  # noqa: F401
    from gpulint.linter.fixes import fix_text  # noqa: F401
    from gpulint.linter.rule import rules_by_code

    rules_by_code()


def _outline(item: tuple[str, str]) -> ModuleIndex:
    """A file's outline, made in a worker; its text stays with the caller, which has it (see `with_project_facts`)."""
    index = outline(*item)
    index.text, index.lines = "", []
    return index


def with_project_facts(
    tasks: Sequence[FileTask], cache: ResultCache, workers: Workers, done: Callable[[], None] = lambda: None,
    config_files: Sequence[tuple[str, Path]] = (),
) -> list[FileTask]:
    """The tasks, each with the project model's facts for its file: every task's file is read and outlined, and the
    model built over all of them (gpulint/project/). A file that cannot be read or decoded is left to its worker,
    which reports it.

    With a cache: when no file changed since the last run, its facts are reused as they are; else the files that
    did not change are taken from their stored outlines (with the definitions the model read), and only the others
    are read anew. The model reads every file and config by its path within the linted folder (`model_path`); the
    facts it gives are keyed, and their chains written, by display path. `config_files` (project path, path): the
    project's configs, which tell what its training builds by
    name and the values it gives intervals (with those its training files give, `configs.every_step_intervals`)."""
    if not tasks:
        return list(tasks)
    reading_configs = _read_configs(config_files, cache, workers)  # in the workers, while this reads the sources
    texts: dict[str, tuple[str, str]] = {}  # by project path
    shown = {task.model_path: task.display for task in tasks}
    for task in tasks:
        try:
            data = Path(task.path).read_bytes()
            texts[task.model_path] = (content_hash(data), analysed_text(decode(data).text))
        except (OSError, ValueError):
            continue
        finally:
            done()
    configs = reading_configs()
    run_key = content_hash("\0".join([
        *(f"{d}\0{h}" for d, (h, _) in sorted(texts.items())), *sorted(configs.classes), "\0names", *sorted(configs.names),
        "\0intervals", *(f"{name}={value}" for name, value in sorted(configs.intervals)),
        "\0values", *(f"{name}={value}" for name, value in sorted(configs.values)),
        "\0switches", *(f"{name}={value}" for name, value in sorted(configs.switches)),
        "\0keys", *sorted(configs.keys),
        "\0torch", *(f"{folder}={pin}" for folder, pin in sorted(configs.torch_pins)),
        "\0python", *sorted(configs.python_optimize),
    ]).encode())
    stored = _stored_facts(cache, run_key, {shown[p] for p in texts})
    if stored is not None:
        facts, digests = stored
    else:
        facts = _model_facts(tasks, cache, texts, workers, configs)
        if facts is None:
            return list(tasks)
        facts = {shown[p]: f if p == shown[p] else shown_at(f, shown) for p, f in facts.items()}
        if cache.enabled:
            dumped, digests = _dumped_facts(facts, cache.run)
            cache.run = {"key": run_key, "facts": dumped, "digests": digests}
            cache.dirty = True
        else:
            digests = {d: "" for d in facts}
    return [replace(t, facts=facts[t.display], facts_digest=digests[t.display]) if t.display in facts else t
            for t in tasks]


def _read_configs(
    config_files: Sequence[tuple[str, Path]], cache: ResultCache, workers: Workers,
) -> Callable[[], TrainingConfigs]:
    """Start reading the project's config files: each unchanged one's facts come from the cache, the others are read
    in the workers. The function returned waits for them and gives the facts of all."""
    stored = cache.configs if cache.enabled else {}
    found: dict[str, TrainingConfigs] = {}
    entries: dict[str, list] = {}
    unread: list[tuple[str, str, str]] = []  # display, content hash, text
    for display, path in config_files:
        data = config_bytes(path)
        if data is None:
            continue
        digest = content_hash(data)
        entry = stored.get(display)
        if isinstance(entry, list) and len(entry) == 2 and entry[0] == digest:
            try:
                found[display], entries[display] = load_configs(entry[1]), entry
                continue
            except (KeyError, TypeError, ValueError):  # an entry of another shape: read the file anew
                pass
        unread.append((display, digest, config_text(data)))
    chunk = max(1, min(16, len(unread) // (workers.jobs * 4)))
    results = workers.map(_config_facts, [(display, text) for display, _, text in unread], chunksize=chunk)

    def finish() -> TrainingConfigs:
        for (display, digest, _), facts in zip(unread, results):
            found[display], entries[display] = facts, [digest, dump_configs(facts)]
        if cache.enabled and entries != stored:
            cache.configs, cache.dirty = entries, True
        return united(found[display] for display, _ in config_files if display in found)

    return finish


def _config_facts(item: tuple[str, str]) -> TrainingConfigs:
    display, text = item
    return config_file_facts(text, display)


def _stored_facts(cache: ResultCache, run_key: str, displays: set[str]) -> tuple[dict, dict] | None:
    """The last run's facts and their digests, when it read these very files, shown at these display paths."""
    run = cache.run if cache.enabled and cache.run.get("key") == run_key else {}
    stored, digests = run.get("facts"), run.get("digests")
    if not isinstance(stored, dict) or not isinstance(digests, dict) or set(stored) != displays:
        return None
    try:
        return {display: load_facts(data) for display, data in stored.items()}, digests
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def _dumped_facts(facts: dict[str, FileFacts], last_run: dict) -> tuple[dict, dict]:
    """Each file's facts as JSON data, and its digest. A file whose facts are those of the last run keeps that run's
    data and digest: after one file is edited, most files' facts are unchanged, and comparing them costs far less than
    encoding and hashing them again."""
    stored, stored_digests = last_run.get("facts"), last_run.get("digests")
    if not isinstance(stored, dict) or not isinstance(stored_digests, dict):
        stored, stored_digests = {}, {}
    dumped, digests = {}, {}
    for display, file_facts in facts.items():
        data, digest = stored.get(display), stored_digests.get(display)
        if data is not None and isinstance(digest, str) and _same_facts(data, file_facts):
            dumped[display], digests[display] = data, digest
        else:
            dumped[display] = data = dump_facts(file_facts)
            digests[display] = facts_digest(data)
    return dumped, digests


def _same_facts(data: dict, facts: FileFacts) -> bool:
    try:
        return load_facts(data) == facts
    except (KeyError, TypeError, ValueError, IndexError):  # stored by another version of the facts: not the same
        return False


def _model_facts(
    tasks: Sequence[FileTask], cache: ResultCache, texts: dict, workers: Workers, configs: TrainingConfigs,
) -> dict[str, FileFacts] | None:
    store = ProjectStore(cache)
    indexes = []
    unread = []
    for display, (digest, text) in texts.items():
        stored = store.entry(display, digest)
        try:
            indexes.append(load_index(display, text, stored)) if stored is not None else unread.append(display)
        except (KeyError, TypeError, ValueError, IndexError):  # a stored entry of another shape: read it anew
            unread.append(display)
    chunk = max(1, min(16, len(unread) // (workers.jobs * 8)))
    for index in workers.map(_outline, [(d, texts[d][1]) for d in unread], chunksize=chunk):
        index.text = texts[index.path][1]
        index.lines = index.text.split("\n")
        indexes.append(index)
    workers.warm_up()
    options = tasks[0].options
    try:
        project = Project(indexes, options.hot_functions, options.gate_names, configs.classes, configs.intervals,
                          configs.names, configs.values, configs.switches, configs.keys, configs.torch_pins,
                          configs.python_optimize)
        facts = {display: project.file_facts(display) for display in project.files}
    except Exception as exc:  # noqa: BLE001  (a bug of the model must not lose the lint: each file is read alone)
        print(f"gpulint: warning: the project model failed ({type(exc).__name__}: {exc}); files are read one by one "
              "(please report this)", file=sys.stderr)
        return None
    if cache.enabled:  # what was read or analysed anew is dumped; the rest is written back as it was stored
        store.save({ix.path: (texts[ix.path][0], dump_index(ix) if ix.changed else None) for ix in indexes})
    return facts


def run_tasks(
    tasks: Sequence[FileTask], cache: ResultCache, workers: Workers, done: Callable[[], None] = lambda: None
) -> list[FileOutcome]:
    """Outcomes in the order of `tasks`. Cached results are used for plain lint runs whose file bytes are unchanged.
    `done` is called once per file as its outcome arrives (a progress counter)."""
    outcomes: dict[int, FileOutcome] = {}
    pending: list[tuple[int, FileTask]] = []
    for index, task in enumerate(tasks):
        cached = None if task.fix else _cached(task, cache)
        if cached is not None:
            outcomes[index] = cached
            done()
        else:
            pending.append((index, task))
    for (index, task), outcome in zip(pending, _map(process, [t for _, t in pending], workers, done)):
        outcomes[index] = outcome
        if not task.fix and outcome.digest is not None:
            cache.put(_cache_key(task), outcome.digest + task.facts_digest, outcome.findings)
    return [outcomes[i] for i in range(len(tasks))]


def _cache_key(task: FileTask) -> str:
    return f"{task.display}\0{task.project_path}\0{','.join(task.codes)}"


def _cached(task: FileTask, cache: ResultCache) -> FileOutcome | None:
    if not cache.enabled or _cache_key(task) not in cache.entries:
        return None  # nothing cached for it: the worker reads and hashes the file anyway
    try:
        data = Path(task.path).read_bytes()
    except OSError:
        return None
    digest = content_hash(data)
    findings = cache.get(_cache_key(task), digest + task.facts_digest)
    if findings is None:
        return None
    return FileOutcome(task.display, task.path, findings, digest)


def _map(function, tasks: list[FileTask], workers: Workers, done: Callable[[], None]) -> Iterable[FileOutcome]:
    # Largest files first, in small chunks, so that the workers finish together rather than one of them starting
    # a big file when the rest is done (longest-processing-time-first scheduling).
    order = sorted(range(len(tasks)), key=lambda i: _size(tasks[i].path), reverse=True)
    chunk = max(1, min(8, len(tasks) // (workers.jobs * 32)))
    results = [_counted(r, done) for r in workers.map(function, [tasks[i] for i in order], chunksize=chunk)]
    outcomes: list[FileOutcome] = [None] * len(tasks)  # type: ignore[list-item]
    for index, outcome in zip(order, results):
        outcomes[index] = outcome
    return outcomes


def _counted(outcome: FileOutcome, done: Callable[[], None]) -> FileOutcome:
    done()
    return outcome


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0  # unreadable: the worker reports it


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


__all__ = [
    "FileOutcome", "FileTask", "Workers", "default_jobs", "io_error", "process", "process_bytes", "run_tasks",
    "with_project_facts",
]
