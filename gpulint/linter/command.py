"""`gpulint check` / `fix` / `rules` / `rule`: arguments and what they do."""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import sys
from pathlib import Path

from gpulint.config import LintConfig, check_codes, load_config
from gpulint.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from gpulint.fileio import atomic_write
from gpulint.linter.cache import ResultCache
from gpulint.linter.discovery import discover, relative_to_root
from gpulint.linter.finding import Finding
from gpulint.linter.formats import FORMATS, render
from gpulint.linter.noqa import add_noqa
from gpulint.linter.options import LintOptions
from gpulint.linter.runner import (
    FileOutcome,
    FileTask,
    default_jobs,
    io_error,
    run_tasks,
    with_project_facts,
)
from gpulint.linter.source import decode

# The rules (and libcst, which they import) are imported only where needed: listing them, checking codes on a run
# whose settings no cache knows yet, or linting a file that is not cached. A warm run imports neither.


def _code_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["."], help="files or folders to lint (default: .)")
    parser.add_argument("--config", metavar="FILE", help="settings file (default: nearest pyproject.toml with [tool.gpulint])")
    parser.add_argument("--select", type=_code_list, metavar="CODES", help="comma list of codes or prefixes to enable, replacing the config's")
    parser.add_argument("--extend-select", type=_code_list, metavar="CODES", help="codes or prefixes to enable in addition")
    parser.add_argument("--ignore", type=_code_list, metavar="CODES", help="codes or prefixes to disable")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.add_argument("--output-file", metavar="FILE", help="write the report to FILE instead of stdout")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    parser.add_argument("--fix", action="store_true", help="apply safe fixes")
    parser.add_argument("--unsafe-fixes", action="store_true", help="with --fix or --diff, also apply unsafe fixes")
    parser.add_argument("--diff", action="store_true", help="print the fixes as a unified diff; write nothing")
    parser.add_argument("--add-noqa", action="store_true", help="add `# noqa: CODE` to every line with a finding")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write .gpulint_cache/")
    parser.add_argument("--jobs", type=int, metavar="N", help="worker processes (default: all cores)")
    parser.add_argument("--force-exclude", action="store_true", help="apply exclusions to files named on the command line too (for pre-commit)")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour text output (auto: on a terminal, unless NO_COLOR is set)")
    parser.add_argument(
        "--confidence", choices=("likely", "certain"), default="likely",
        help="show findings at least this sure to run every step: `certain` hides those reached through a guess "
             "(an object of unknown class, a callback, a name, an opt-in flag); default: likely (all)",
    )
    parser.set_defaults(fix=False)


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
    config = _with_cli_overrides(load_config(args.config), args)  # codes are checked below, against the rules
    cache = ResultCache(config.root, _settings_key(config), enabled=not args.no_cache)
    if cache.codes is None:
        # Settings no cache of this version knows: check their codes and find what they enable, from the rules. (A
        # cache for them was written by a run that did, so a warm run skips importing the rules.)
        cache.codes = _enabled_codes(args)
    enabled = cache.codes
    unsafe = args.unsafe_fixes or config.unsafe_fixes
    fixing = args.fix or args.diff

    found = discover(args.paths, config, force_exclude=args.force_exclude)
    cwd = Path.cwd()
    options = LintOptions(hot_functions=config.hot_functions, gate_names=config.log_gates)
    tasks = []
    for file in found.files:
        relative = relative_to_root(file, config.root)
        ignored = config.ignored_for(relative)
        codes = tuple(c for c in enabled if not any(c.startswith(p) for p in ignored))
        tasks.append(FileTask(_display(file, cwd), str(file), codes, options, fix=fixing, unsafe=unsafe))

    outcomes = run_tasks(with_project_facts(tasks), cache, args.jobs or default_jobs())
    cache.save()

    findings = [io_error(path, reason) for path, reason in found.errors]
    fixed_total = 0
    diffs: list[str] = []
    for outcome in outcomes:
        findings.extend(outcome.findings)
        if outcome.fixed_text is None:
            continue
        if args.diff:
            diffs.append(_unified_diff(outcome))
        else:
            _write_fixed(outcome)
        fixed_total += outcome.fixed
    if args.confidence == "certain":
        findings = [f for f in findings if f.confidence == "certain"]
    findings.sort(key=Finding.sort_key)

    if args.add_noqa:
        added = _add_noqa(findings, tasks)
        print(f"Added {added} noqa comment{'s' * (added != 1)}.", file=sys.stderr)
        return EXIT_OK
    if args.diff:
        _emit("".join(diffs), args.output_file)
        if diffs:
            print(f"{fixed_total} fix{'es' * (fixed_total != 1)} would be applied (--diff writes nothing).", file=sys.stderr)
        return EXIT_FINDINGS if diffs and not args.exit_zero else EXIT_OK

    color = _use_color(args.color, args.output_file)
    sources = _SourceLines()
    registry = _rules_by_code() if args.format == "sarif" else {}  # SARIF describes every rule
    report = render(args.format, findings, registry, sources, color=color, fixed=fixed_total if args.fix else 0)
    _emit(report, args.output_file)
    if findings and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_OK


def _rules_by_code() -> dict:
    from gpulint.linter.rule import rules_by_code

    return rules_by_code()


def _enabled_codes(args: argparse.Namespace) -> list[str]:
    """The codes the settings enable; a code in them that names no rule is a one-line error (exit 2)."""
    registry = _rules_by_code()
    known = list(registry)
    config = _with_cli_overrides(load_config(args.config, known_codes=known), args, known)
    return config.enabled_codes(known, [r.code for r in registry.values() if r.default_enabled])


def _with_cli_overrides(config: LintConfig, args: argparse.Namespace, known: list[str] = ()) -> LintConfig:
    from dataclasses import replace

    changes = {}
    if args.select is not None:
        changes["select"] = check_codes(args.select, known, "--select")
    if args.extend_select is not None:
        changes["extend_select"] = config.extend_select + check_codes(args.extend_select, known, "--extend-select")
    if args.ignore is not None:
        changes["ignore"] = config.ignore + check_codes(args.ignore, known, "--ignore")
    return replace(config, **changes) if changes else config


def _settings_key(config: LintConfig) -> str:
    """What selects a cache file (within a gpulint version's folder): the settings that change findings, command-line
    overrides included. The codes they enable follow from them and the version's rules."""
    return hashlib.sha256(config.fingerprint().encode()).hexdigest()[:20]


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


def _use_color(choice: str, output_file: str | None) -> bool:
    if choice != "auto":
        return choice == "always"
    if output_file or os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


def _emit(text: str, output_file: str | None) -> None:
    if output_file:
        try:
            atomic_write(output_file, text)
        except OSError as exc:
            raise UsageError(f"{output_file}: cannot write: {exc.strerror or exc}") from None
    else:
        sys.stdout.write(text)


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
        if finding.code not in ("GPL001", "GPL002"):
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
        new_text, count = add_noqa(source.text, [(f.line, f.code) for f in items])
        if count:
            atomic_write(path, new_text.encode(source.encoding))
            added += count
    return added
