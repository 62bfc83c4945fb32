"""`gpulint check` / `fix` / `rules` / `rule` / `clean`: arguments and what they do."""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from gpulint.config import LintConfig, check_codes, load_config
from gpulint.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from gpulint.fileio import atomic_write
from gpulint.linter import formats
from gpulint.linter.cache import CACHE_DIR, CACHE_MARKER, ResultCache
from gpulint.linter.codes import RULE_CODES
from gpulint.linter.discovery import discover, excluded, relative_to_root
from gpulint.linter.finding import CONFIDENCE_LEVELS, Finding
from gpulint.linter.formats import FORMATS
from gpulint.linter.noqa import UNUSED_NOQA_CODE, add_noqa
from gpulint.linter.options import LintOptions
from gpulint.linter.runner import (
    FileOutcome,
    FileTask,
    Workers,
    default_jobs,
    io_error,
    process_bytes,
    run_tasks,
    with_project_facts,
)
from gpulint.linter.source import decode
from gpulint.progress import Progress

# The rules (and libcst, which they import) are imported only where needed: listing them, checking codes on a run
# whose settings no cache knows yet, or linting a file that is not cached. A warm run imports neither.


def _comma_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", help=(
        "files or folders to lint (default: .); `-` reads standard input. The project model reads them by their "
        "paths within their project (the nearest folder above them with a .git, pyproject.toml or setup file; "
        "without one, the current folder if it holds them, else the deepest folder that does), so findings do not "
        "depend on where the run starts"))
    parser.add_argument("--config", metavar="FILE", help="settings file (default: nearest pyproject.toml with [tool.gpulint])")

    rules = parser.add_argument_group("rule selection")
    rules.add_argument("--select", type=_comma_list, metavar="CODES", help="comma list of codes or prefixes to enable, replacing the config's")
    rules.add_argument("--extend-select", type=_comma_list, metavar="CODES", help="codes or prefixes to enable in addition")
    rules.add_argument("--ignore", type=_comma_list, metavar="CODES", help="codes or prefixes to disable")
    rules.add_argument(
        "--confidence", choices=CONFIDENCE_LEVELS, default="likely",
        help="show findings at least this sure to run every step: `certain` hides those reached through a guess "
             "(an object of unknown class, a callback, a name, an opt-in flag); `likely` (the default) hides only "
             "those reached through a guess among many candidates (one of a project's dozens of models) and those "
             "behind an opt-in switch that no shipped setting turns on, which `possible` shows too",
    )
    rules.add_argument("--ignore-noqa", action="store_true", help="report findings that `# noqa` comments would suppress")

    files = parser.add_argument_group("files")
    files.add_argument("--exclude", type=_comma_list, metavar="GLOBS", help="comma list of globs to exclude, replacing the config's `exclude`")
    files.add_argument("--extend-exclude", type=_comma_list, metavar="GLOBS", help="globs to exclude in addition")
    files.add_argument("--force-exclude", action="store_true", help="apply exclusions to files named on the command line too (for pre-commit)")
    files.add_argument("--stdin-filename", metavar="PATH", help="lint standard input as this file (its settings and per-file ignores apply)")
    files.add_argument("--show-files", action="store_true", help="list the files that would be checked, and check nothing")
    files.add_argument("--show-settings", action="store_true", help="print the settings in effect (file, codes, globs), and check nothing")

    fixes = parser.add_argument_group("fixes")
    fixes.add_argument("--fix", action="store_true", help="apply safe fixes")
    fixes.add_argument("--unsafe-fixes", action="store_true", help="with --fix or --diff, also apply unsafe fixes")
    fixes.add_argument("--fix-only", action="store_true", help="apply fixes and report nothing else; exit 0 whatever is left (implies --fix)")
    fixes.add_argument("--diff", action="store_true", help="print the fixes as a unified diff; write nothing")
    fixes.add_argument("--show-fixes", action="store_true", help="list the fixes applied, by file and code")
    fixes.add_argument("--add-noqa", action="store_true", help="add `# noqa: CODE` to every line with a finding")

    output = parser.add_argument_group("output")
    output.add_argument("--output-format", "--format", dest="format", choices=FORMATS, default="text",
                        help="output format (default: text; `full` is the same, `concise` drops the code frames)")
    output.add_argument("--output-file", metavar="FILE", help="write the report to FILE instead of stdout")
    output.add_argument("--statistics", action="store_true", help="count findings per code instead of listing them")
    output.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour text output (auto: on a terminal or with FORCE_COLOR set, never with NO_COLOR set)")
    verbosity = output.add_mutually_exclusive_group()
    verbosity.add_argument("-q", "--quiet", action="store_true", help="print the findings only: no summary, hints, warnings or progress")
    verbosity.add_argument("-v", "--verbose", action="store_true", help="also say where the settings came from and how long the run took")
    output.add_argument("--plan", metavar="PLAN_JSON",
                        help="a plan from `gpulint plan` for this training step: price each finding (estimated ms per "
                             "step and share of the step, a model estimate from the trace), sort them by cost, and "
                             "print the step's launch profile (CUDA Graphs, batch copy)")
    output.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    output.add_argument("--exit-non-zero-on-fix", action="store_true", help="exit 1 when fixes were applied, even if nothing is left")

    run = parser.add_argument_group("run")
    run.add_argument("--watch", action="store_true", help="check again whenever a file changes (Ctrl-C stops)")
    run.add_argument("--no-cache", action="store_true", help="do not read or write .gpulint_cache/")
    run.add_argument("--jobs", type=int, metavar="N", help="worker processes (default: all cores)")
    parser.set_defaults(fix=False)


def add_clean_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["."], help="folders to clear of .gpulint_cache/ (default: .)")


def add_rules_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("text", "json", "md"), default="text", help="text table, JSON, or the Markdown rule reference")


def add_rule_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("code", help="rule code (GPL401) or name (scalar-sync-in-step)")


def run_rules(args: argparse.Namespace) -> int:
    from gpulint.linter import docs as rule_docs
    from gpulint.linter.rule import all_rules

    rules = all_rules()
    if args.format == "json":
        print(json.dumps([rule_docs.summary(r) for r in rules], indent=2))
    elif args.format == "md":
        sys.stdout.write(rule_docs.reference_markdown(rules))
    else:
        sys.stdout.write(rule_docs.table(rules))
    return EXIT_OK


def run_rule(args: argparse.Namespace) -> int:
    from gpulint.linter import docs as rule_docs
    from gpulint.linter.rule import all_rules

    wanted = args.code.strip()
    for rule in all_rules():
        if wanted.upper() == rule.code or wanted == rule.name:
            sys.stdout.write(rule_docs.rule_text(rule))
            return EXIT_OK
    raise UsageError(f"unknown rule `{wanted}` (see `gpulint rules`)")


def run_check(args: argparse.Namespace) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.fix_only:
        args.fix = True
    stdin = _reads_stdin(args)
    if args.watch:
        if stdin or args.add_noqa or args.show_files or args.show_settings:
            raise UsageError("--watch cannot be combined with standard input, --add-noqa, --show-files or --show-settings")
        return _watch(args)
    return _check(args, stdin)


def _reads_stdin(args: argparse.Namespace) -> bool:
    if "-" in (args.paths or ()):
        if len(args.paths) > 1:
            raise UsageError("`-` (standard input) cannot be combined with other paths")
        return True
    return args.stdin_filename is not None and not args.paths


def _check(args: argparse.Namespace, stdin: bool) -> int:
    config = _with_cli_overrides(load_config(args.config), args)  # codes are checked below, against the rules
    if args.plan:
        from gpulint.linter.pricing import load_launch

        args.launch = load_launch(args.plan)  # a bad plan is one line before any file is read
    options = LintOptions(hot_functions=config.hot_functions, gate_names=config.log_gates, ignore_noqa=args.ignore_noqa)
    cache = ResultCache(config.root, _settings_key(config, options), enabled=not (args.no_cache or stdin))
    if cache.codes is None:
        # Settings no cache of this version knows: check their codes and find what they enable, from the rules. (A
        # cache for them was written by a run that did, so a warm run skips importing the rules.)
        cache.codes = _enabled_codes(args)
    enabled = cache.codes
    unsafe = args.unsafe_fixes or config.unsafe_fixes
    if args.show_settings:
        _emit(_settings_text(config, enabled, options, unsafe), args.output_file)
        return EXIT_OK
    if stdin:
        return _check_stdin(args, config, enabled, options, unsafe)

    started = time.monotonic()
    found = discover(args.paths or ["."], config, force_exclude=args.force_exclude)
    cwd = Path.cwd()
    if args.show_files:
        _emit("".join(f"{_display(file, cwd)}\n" for file in found.files), args.output_file)
        return EXIT_OK
    linted = _linted_folder(args.paths or ["."], cwd)
    tasks = [replace(_task(_display(file, cwd), str(file), config, enabled, options, args, unsafe),
                     project_path=_project_path(file, linted)) for file in found.files]
    with Workers(args.jobs or default_jobs()) as workers:
        with Progress("reading", len(tasks), enabled=not args.quiet) as reading:
            config_files = [(_project_path(file, linted), file) for file in found.configs]
            tasks = with_project_facts(tasks, cache, workers, reading.advance, config_files)
        with Progress("fixing" if args.fix else "checking", len(tasks), enabled=not args.quiet) as progress:
            outcomes = run_tasks(tasks, cache, workers, progress.advance)
    cache.save()
    if args.verbose:
        files = f"{len(tasks)} file{'s' * (len(tasks) != 1)}"
        _note(f"gpulint: settings from {config.source or 'the defaults'}; {files} checked in "
              f"{time.monotonic() - started:.2f} s")
    if not found.files and not found.errors and not args.quiet:
        _note("gpulint: warning: no Python files found under the given paths")

    findings = [io_error(path, reason) for path, reason in found.errors]
    fixed: dict[str, tuple[str, ...]] = {}
    diffs: list[str] = []
    for outcome in outcomes:
        findings.extend(outcome.findings)
        if outcome.fixed_text is None:
            continue
        if args.diff:
            diffs.append(_unified_diff(outcome))
        else:
            _write_fixed(outcome)
        fixed[outcome.display] = outcome.fixed_codes
    findings = sorted(_at_confidence(findings, args), key=Finding.sort_key)

    if args.add_noqa:
        added = _add_noqa(findings, tasks)
        if not args.quiet:
            _note(f"Added {added} noqa comment{'s' * (added != 1)}.")
        return EXIT_OK
    return _report(args, findings, fixed, diffs, _SourceLines(), checked=len(tasks))


def _at_confidence(findings: list[Finding], args: argparse.Namespace) -> list[Finding]:
    """The findings at least as sure as --confidence (`certain` > `likely` > `possible`)."""
    most = CONFIDENCE_LEVELS.index(args.confidence)
    return [f for f in findings if CONFIDENCE_LEVELS.index(f.confidence) <= most]


def _task(display: str, path: str, config: LintConfig, enabled: list[str], options: LintOptions,
          args: argparse.Namespace, unsafe: bool) -> FileTask:
    ignored = config.ignored_for(relative_to_root(Path(path), config.root))
    codes = tuple(c for c in enabled if not any(c.startswith(p) for p in ignored))
    return FileTask(display, path, codes, options, fix=args.fix or args.diff, unsafe=unsafe)


def _check_stdin(args: argparse.Namespace, config: LintConfig, enabled: list[str], options: LintOptions,
                 unsafe: bool) -> int:
    """Lint standard input as `--stdin-filename` (as editors and formatters pipe a buffer). With --fix the fixed
    source goes to stdout and the report to stderr."""
    data = sys.stdin.buffer.read()
    display = args.stdin_filename or "-"
    writes_source = args.fix and not args.diff
    if args.stdin_filename and args.force_exclude and excluded(Path(args.stdin_filename), config):
        if writes_source:
            sys.stdout.buffer.write(data)
        return EXIT_OK
    outcome = process_bytes(_task(display, display, config, enabled, options, args, unsafe), data)
    sources = _SourceLines()
    try:
        sources.cache[display] = decode(data).text.splitlines()
    except ValueError:
        sources.cache[display] = None
    fixed = {display: outcome.fixed_codes} if outcome.fixed_text is not None else {}
    diffs = [_unified_diff(outcome)] if fixed and args.diff else []
    if writes_source:
        source = outcome.original
        sys.stdout.buffer.write(outcome.fixed_text.encode(source.encoding) if fixed and source else data)
        sys.stdout.flush()
    findings = sorted(_at_confidence(outcome.findings, args), key=Finding.sort_key)
    return _report(args, findings, fixed, diffs, sources, checked=1, stream=sys.stderr if writes_source else None)


def _report(args: argparse.Namespace, findings: list[Finding], fixed: dict[str, tuple[str, ...]], diffs: list[str],
            sources: "_SourceLines", checked: int, stream: TextIO | None = None) -> int:
    """Print what the run found (or would fix) and return the exit code. `stream` replaces stdout (stdin --fix)."""
    fixed_total = sum(len(codes) for codes in fixed.values())
    launch = getattr(args, "launch", None)
    if launch is not None:
        from gpulint.linter.pricing import priced

        findings = priced(findings, launch)
    if args.diff:
        _emit("".join(diffs), args.output_file, stream)
        if not args.quiet:
            _note(_diff_summary(fixed_total, findings))
        return EXIT_FINDINGS if diffs and not args.exit_zero else EXIT_OK
    text_format = args.format in ("text", "full", "concise")
    listing = _fixes_listing(fixed) if args.show_fixes and fixed else ""
    if args.fix_only:
        report = "" if args.quiet else f"Fixed {fixed_total} finding{'s' * (fixed_total != 1)}.\n"
        _emit(report + listing, args.output_file, stream)
    else:
        if args.statistics:
            report = formats.statistics(findings, as_json=args.format == "json")
        else:
            color = _use_color(args.color, bool(args.output_file) or stream is not None)
            registry = _rules_by_code() if args.format == "sarif" else {}  # SARIF describes every rule
            report = formats.render(args.format, findings, registry, sources, color=color,
                                    fixed=fixed_total if args.fix else 0, checked=checked, summary=not args.quiet)
        profile = _launch_text(launch, findings) if launch is not None and text_format and not args.quiet else ""
        _emit(report + (listing if text_format else "") + profile, args.output_file, stream)
        if listing and not text_format:
            sys.stderr.write(listing)
    if args.exit_non_zero_on_fix and fixed_total:
        return EXIT_FINDINGS
    if findings and not args.exit_zero and not args.fix_only:
        return EXIT_FINDINGS
    return EXIT_OK


def _launch_text(launch, findings: list[Finding]) -> str:
    from gpulint.linter.pricing import profile_text

    return "\n" + profile_text(launch, findings)


def _diff_summary(fixed_total: int, findings: list[Finding]) -> str:
    if fixed_total:
        return f"{fixed_total} fix{'es' * (fixed_total != 1)} would be applied (--diff writes nothing)."
    unsafe = sum(1 for f in findings if f.fix is not None and f.fix.applicability == "unsafe")
    if unsafe:
        return f"No fixes would be applied ({unsafe} more with --unsafe-fixes)."
    return "No fixes would be applied."


def _fixes_listing(fixed: dict[str, tuple[str, ...]]) -> str:
    """--show-fixes: the fixes applied, by file, then code (`2 × GPL504 (tensor-created-then-moved)`)."""
    names = {code: name for code, name, _ in RULE_CODES}
    total = sum(len(codes) for codes in fixed.values())
    out = [f"Fixed {total} finding{'s' * (total != 1)}:"]
    for path in sorted(fixed):
        out.append(f"- {path}:")
        counts: dict[str, int] = {}
        for code in fixed[path]:
            counts[code] = counts.get(code, 0) + 1
        out.extend(f"    {counts[code]} × {code} ({names.get(code, '?')})" for code in sorted(counts))
    return "\n".join(out) + "\n"


def _settings_text(config: LintConfig, enabled: list[str], options: LintOptions, unsafe: bool) -> str:
    """--show-settings: the settings in effect, in the keys of `[tool.gpulint]`."""
    def value(items) -> str:
        return json.dumps(list(items))

    lines = [
        f"# settings from {config.source or 'the defaults (no [tool.gpulint] found)'}",
        f"# globs are relative to {config.root}",
        f"select = {value(config.select)}",
        f"extend-select = {value(config.extend_select)}",
        f"ignore = {value(config.ignore)}",
        f"exclude = {value(config.exclude)}",
        f"extend-exclude = {value(config.extend_exclude)}",
        f"hot-functions = {value(config.hot_functions)}",
        f"log-gates = {value(config.log_gates)}",
        f"unsafe-fixes = {'true' if unsafe else 'false'}",
        f"# ignore-noqa = {'true' if options.ignore_noqa else 'false'} (command line)",
        f"# enabled rules ({len(enabled)}): {', '.join(enabled)}",
        "",
        "[tool.gpulint.per-file-ignores]",
        *(f"{json.dumps(pattern)} = {value(codes)}" for pattern, codes in config.per_file_ignores),
    ]
    return "\n".join(lines) + "\n"


def _note(message: str) -> None:
    print(message, file=sys.stderr)


# --watch polls: a stat of each file every half second costs milliseconds on thousands of files, and needs no
# dependency or OS-specific notification API.
WATCH_POLL_S = 0.5
_WATCHED_SUFFIXES = (".py", ".pyi", ".toml", ".yaml", ".yml")


def _watch(args: argparse.Namespace) -> int:
    """Check, then check again whenever a Python file or a settings file under the paths changes. A mistake in the
    settings (being edited) is reported and the watch goes on."""
    clear = sys.stdout.isatty()
    last = None
    try:
        while True:
            state = _snapshot(args)
            if state != last:
                if clear and last is not None:
                    sys.stdout.write("\033[2J\033[H")
                try:
                    _check(args, stdin=False)
                except UsageError as exc:
                    print(f"gpulint: error: {exc}", file=sys.stderr)
                last = _snapshot(args)  # after --fix wrote its fixes, and before saying so: a change after it is new
                print(f"[{time.strftime('%H:%M:%S')}] Watching for file changes (Ctrl-C stops).", flush=True)
            time.sleep(WATCH_POLL_S)
    except KeyboardInterrupt:
        return EXIT_OK


def _snapshot(args: argparse.Namespace) -> frozenset[tuple[str, int, int]]:
    """(path, mtime, size) of every file --watch looks at: Python and settings files under the paths, and the
    settings file in use."""
    from gpulint.config import DEFAULT_EXCLUDE, find_pyproject

    files: list[Path] = [Path(p) for p in (args.paths or ["."]) if not Path(p).is_dir()]
    for folder in (Path(p) for p in (args.paths or ["."]) if Path(p).is_dir()):
        for current, dirs, names in os.walk(folder):
            dirs[:] = [d for d in dirs if d not in DEFAULT_EXCLUDE]
            files.extend(Path(current) / n for n in names if n.endswith(_WATCHED_SUFFIXES))
    settings = Path(args.config) if args.config else find_pyproject(Path.cwd())
    if settings is not None:
        files.append(settings)
    state = set()
    for file in files:
        try:
            info = file.stat()
        except OSError:
            continue
        state.add((str(file), info.st_mtime_ns, info.st_size))
    return frozenset(state)


def run_clean(args: argparse.Namespace) -> int:
    """`gpulint clean`: remove every .gpulint_cache/ folder gpulint made under the paths."""
    import shutil

    from gpulint.config import DEFAULT_EXCLUDE

    removed = 0
    for root in args.paths:
        if not Path(root).is_dir():
            raise UsageError(f"{root}: not a folder")
        for current, dirs, _ in os.walk(root):
            if CACHE_DIR in dirs and _made_by_gpulint(Path(current) / CACHE_DIR):
                shutil.rmtree(Path(current) / CACHE_DIR)
                print(f"Removed {Path(current) / CACHE_DIR}")
                removed += 1
            dirs[:] = [d for d in dirs if d not in DEFAULT_EXCLUDE]
    if not removed:
        print("No gpulint cache found.")
    return EXIT_OK


def _made_by_gpulint(folder: Path) -> bool:
    """A cache folder gpulint wrote holds its .gitignore; a folder of the same name that does not is left alone."""
    try:
        return (folder / ".gitignore").read_text(encoding="utf-8").startswith(CACHE_MARKER)
    except OSError:
        return False


def _rules_by_code() -> dict:
    from gpulint.linter.rule import rules_by_code

    return rules_by_code()


def _enabled_codes(args: argparse.Namespace) -> list[str]:
    """The codes the settings enable; a code in them that names no rule is a one-line error (exit 2)."""
    known = [code for code, _, _ in RULE_CODES]
    config = _with_cli_overrides(load_config(args.config, known_codes=known), args, known)
    return config.enabled_codes(known, [code for code, _, on in RULE_CODES if on])


def _with_cli_overrides(config: LintConfig, args: argparse.Namespace, known: list[str] = ()) -> LintConfig:
    from dataclasses import replace

    changes: dict = {}
    if args.exclude is not None:
        changes["exclude"] = tuple(args.exclude)
    if args.extend_exclude is not None:
        changes["extend_exclude"] = config.extend_exclude + tuple(args.extend_exclude)
    if args.select is not None:
        changes["select"] = check_codes(args.select, known, "--select")
    if args.extend_select is not None:
        changes["extend_select"] = config.extend_select + check_codes(args.extend_select, known, "--extend-select")
    if args.ignore is not None:
        changes["ignore"] = config.ignore + check_codes(args.ignore, known, "--ignore")
    return replace(config, **changes) if changes else config


def _settings_key(config: LintConfig, options: LintOptions) -> str:
    """What selects a cache file (within a gpulint version's folder): the settings that change findings, command-line
    overrides included. The codes they enable follow from them and the version's rules."""
    key = config.fingerprint() + (" ignore-noqa" if options.ignore_noqa else "")
    return hashlib.sha256(key.encode()).hexdigest()[:20]


# What marks a project's top folder: its version control, or its packaging.
_PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")


def _linted_folder(paths: list[str], cwd: Path) -> Path:
    """The folder whose files the project model reads by their paths within it (`src/train.py`), wherever the run
    starts: the project around the paths given (the nearest folder holding all of them with a `.git`, a
    `pyproject.toml` or a setup file); without one, the working folder when it holds them all (`gpulint check .`),
    else the deepest folder that does (`gpulint check /home/me/repo` from anywhere). The folders above a project
    must not count: their names could make its files look like tests or examples, and its imports not resolve."""
    folders = [Path(os.path.abspath(p)) for p in paths]
    common = Path(os.path.commonpath([f if f.is_dir() else f.parent for f in folders]))
    for folder in (common, *common.parents):
        if any((folder / marker).exists() for marker in _PROJECT_MARKERS):
            return folder
    return cwd if common == cwd or cwd in common.parents else common


def _project_path(file: Path, linted: Path) -> str:
    """A file's path within the linted folder ('/'-separated)."""
    try:
        return Path(os.path.abspath(file)).relative_to(linted).as_posix()
    except ValueError:
        return file.as_posix()


def _display(file: Path, cwd: Path) -> str:
    if not file.is_absolute():
        return file.as_posix().removeprefix("./")
    try:
        return file.relative_to(cwd).as_posix()
    except ValueError:
        return file.as_posix()


class _SourceLines:
    """Source lines for code frames, read once per file that has a finding."""

    def __init__(self) -> None:
        self.cache: dict[str, list[str] | None] = {}

    def __call__(self, path: str) -> list[str] | None:
        if path not in self.cache:
            try:
                self.cache[path] = decode(Path(path).read_bytes()).text.splitlines()
            except (OSError, ValueError):
                self.cache[path] = None
        return self.cache[path]


def _use_color(choice: str, to_file: bool) -> bool:
    """--color; in `auto`, FORCE_COLOR (set and not empty) turns colour on where stdout is not a terminal (a CI log),
    and NO_COLOR turns it off; a report written to a file never gets it."""
    if choice != "auto":
        return choice == "always"
    if to_file:
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


def _emit(text: str, output_file: str | None, stream: TextIO | None = None) -> None:
    if output_file:
        try:
            atomic_write(output_file, text)
        except OSError as exc:
            raise UsageError(f"{output_file}: cannot write: {exc.strerror or exc}") from None
    else:
        (stream or sys.stdout).write(text)


def _unified_diff(outcome: FileOutcome) -> str:
    assert outcome.original is not None and outcome.fixed_text is not None
    return "".join(
        difflib.unified_diff(
            outcome.original.text.splitlines(keepends=True),
            outcome.fixed_text.splitlines(keepends=True),
            fromfile=f"a/{outcome.display}",
            tofile=f"b/{outcome.display}",
        )
    )


def _write_fixed(outcome: FileOutcome) -> None:
    source = outcome.original
    assert source is not None and outcome.fixed_text is not None
    data = outcome.fixed_text.encode(source.encoding)
    try:
        atomic_write(outcome.path, data)
    except OSError as exc:
        print(f"gpulint: error: {outcome.display}: cannot write fixes: {exc.strerror or exc}", file=sys.stderr)


def _add_noqa(findings: list[Finding], tasks: list[FileTask]) -> int:
    by_path: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.code not in ("GPL001", "GPL002", UNUSED_NOQA_CODE):
            by_path.setdefault(finding.path, []).append(finding)
    paths = {t.display: t.path for t in tasks}
    added = 0
    for display, items in by_path.items():
        path = paths.get(display, display)
        try:
            source = decode(Path(path).read_bytes())
        except (OSError, ValueError) as exc:
            print(f"gpulint: error: {display}: cannot add noqa: {exc}", file=sys.stderr)
            continue
        new_text, count, skipped = add_noqa(source.text, [(f.line, f.code) for f in items])
        for line, codes in skipped.items():
            print(f"gpulint: warning: {display}:{line}: cannot add a noqa comment there (a multi-line string ends on "
                  f"a line where another begins); {', '.join(codes)} still reported", file=sys.stderr)
        if count:
            atomic_write(path, new_text.encode(source.encoding))
            added += count
    return added
