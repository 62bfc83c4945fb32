"""Precision and recall of `gpulint check` on whole repositories that no rule was tuned on (fresh batches).

A fresh batch is a folder under bench/corpus/fresh/ with two files:

    repos.csv    repo,commit,kind            one row per repository, the commit it is linted at
    labels*.csv  (one file or several, read together) the columns of bench/corpus/labels.csv plus `origin`:
                   finding   a finding gpulint made when the batch was scored, judged by reading its callers
                   reading   a real per-step cost found by reading the training loop and all it calls
                   grep      a line a naive grep flags that costs nothing per step (a negative)

Each repository is laid out whole (every Python file at its commit) and linted as a user would lint it, one
`gpulint check` per repository, so the project-wide analysis sees every caller. Then:

    precision = findings on a `pos` line / findings on a labelled line (judged findings)
    recall    = `pos` labels some finding covers / `pos` labels
    grep-neg  = `grep` negatives some finding covers / `grep` negatives (lines that cost nothing, chosen among those
                gpulint did not flag when the batch was labelled: zero then, a regression later)

A finding covers a label when the label's line lies in [line, end_line]; the family need not agree (a cost reported
under another family is still reported; the per-family rows group labels by their own family and findings by
theirs). Under the per-repository table, the pooled line gives both figures with their counts (real / judged
findings, covered / all positives). Findings on no labelled line are *unjudged*: zero when the batch is scored at the
commit its labels were written for; after later rule changes `--unjudged` lists them.

Readers label a statement that spans several lines at its first line; a finding sits on the line of the expression
it flags (the f-string of a multi-line `print(`, the `padding="max_length"` keyword of a tokenizer call). The last
line printed scores the shown findings with labels also matched by statement: a finding covers a label on the first
line of the statement it is in, and is judged by it when no label is on its own lines. The table keeps line-exact
matching.

    python bench/fresh_eval.py bench/corpus/fresh/batch-1                 # the table
    python bench/fresh_eval.py bench/corpus/fresh/batch-1 --details       # also misses, false findings, unjudged
    python bench/fresh_eval.py bench/corpus/fresh/batch-1 --layout /tmp/b1  # keep the laid-out repositories
    python bench/fresh_eval.py --lay-out-only owner/name@COMMIT --layout /tmp/x   # for labelling a new repository

It is a benchmark: it exits 0 whatever the figures; a malformed batch or flag is one line and exit 2.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_eval import (  # noqa: E402  (bench/ is a folder of scripts, not a package)
    FAMILIES,
    FAMILY_NAMES,
    LABEL_COLUMNS,
    REPO_ROOT,
    CorpusError,
    Label,
    _parse_row,
    mirror_git_dir,
)
from corpus_eval import lay_out_repo as lay_out_whole  # noqa: E402

ORIGINS = ("finding", "reading", "grep")
REPO_COLUMNS = ("repo", "commit", "kind")


@dataclass(frozen=True)
class FreshLabel:
    label: Label
    origin: str


@dataclass(frozen=True)
class RepoRow:
    repo: str
    commit: str
    kind: str


@dataclass(frozen=True)
class Found:
    path: str  # relative to the repository root
    line: int
    end_line: int
    code: str
    message: str
    confidence: str = "certain"

    @property
    def family(self) -> str:
        return self.code[:4]


@dataclass
class Batch:
    folder: Path
    repos: list[RepoRow]
    labels: list[FreshLabel]


@dataclass
class Tally:
    positives: int = 0
    negatives: int = 0
    hits: int = 0
    false_alarms: int = 0
    findings: int = 0
    real: int = 0  # findings covering a pos label
    false: int = 0  # findings covering only neg labels
    unjudged: int = 0

    @property
    def recall(self) -> float | None:
        return self.hits / self.positives if self.positives else None

    @property
    def precision(self) -> float | None:
        judged = self.real + self.false
        return self.real / judged if judged else None

    @property
    def false_alarm_rate(self) -> float | None:
        return self.false_alarms / self.negatives if self.negatives else None


@dataclass
class Outcome:
    tallies: dict[str, Tally] = field(default_factory=dict)
    missed: list[FreshLabel] = field(default_factory=list)
    false_findings: list[tuple[str, Found]] = field(default_factory=list)
    unjudged: list[tuple[str, Found]] = field(default_factory=list)
    stale: list[tuple[FreshLabel, str]] = field(default_factory=list)
    files: int = 0
    lines: int = 0
    seconds: float = 0.0


def _read_csv(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read ({exc.strerror})") from None
    rows = list(csv.DictReader(text.splitlines()))
    if rows:
        missing = [c for c in columns if c not in rows[0]]
        if missing:
            raise CorpusError(f"{path}: missing column(s) {', '.join(missing)}; expected {','.join(columns)}")
    return rows


def load_batch(folder: Path) -> Batch:
    if not folder.is_dir():
        raise CorpusError(f"{folder}: not a batch folder (expected repos.csv and labels.csv in it)")
    repos = []
    for number, row in enumerate(_read_csv(folder / "repos.csv", REPO_COLUMNS), start=2):
        values = {c: (row.get(c) or "").strip() for c in REPO_COLUMNS}
        if values["repo"].count("/") != 1 or not re.fullmatch(r"[0-9a-f]{40}", values["commit"]):
            raise CorpusError(f"{folder / 'repos.csv'}:{number}: needs owner/name and a 40-hex commit")
        repos.append(RepoRow(**values))
    if not repos:
        raise CorpusError(f"{folder / 'repos.csv'}: no repositories")
    commits = {r.repo: r.commit for r in repos}
    labels, seen = [], set()
    # Every labels*.csv of the folder: people labelling different repositories at once each write their own file.
    for labels_file in sorted(folder.glob("labels*.csv")):
        for number, row in enumerate(_read_csv(labels_file, (*LABEL_COLUMNS, "origin")), start=2):
            label = _parse_row(labels_file, number, row)
            origin = (row.get("origin") or "").strip()
            where = f"{labels_file}:{number}"
            if origin not in ORIGINS:
                raise CorpusError(f"{where}: field 'origin' must be one of {', '.join(ORIGINS)}, got {origin!r}")
            if commits.get(label.repo) != label.commit:
                raise CorpusError(f"{where}: {label.repo}@{label.commit[:12]} is not a row of repos.csv")
            key = (label.repo, label.path, label.line, label.family)
            if key in seen:
                raise CorpusError(f"{where}: duplicate label for {label.repo}:{label.path}:{label.line} {label.family}")
            seen.add(key)
            labels.append(FreshLabel(label, origin))
    return Batch(folder, repos, labels)


def lay_out_repo(mirrors: Path, repo: str, commit: str, root: Path) -> Path:
    """Every Python file of `repo` at `commit`, written under root/owner+name; returns that folder."""
    git_dir = mirror_git_dir(mirrors, repo)
    if git_dir is None:
        raise CorpusError(f"missing mirror for {repo}: run the fetch tool with github:{repo} (expected under {mirrors})")
    target = root / repo.replace("/", "+")
    if not lay_out_whole(git_dir, commit, target):
        raise CorpusError(f"{repo}: commit {commit[:12]} is not in the mirror")
    return target


def run_gpulint(command: str, folder: Path) -> list[Found]:
    argv = shlex.split(command)
    if argv and argv[0] == "python":
        argv[0] = sys.executable
    argv += ["check", "--format", "json", "--no-cache", "--exit-zero", "--confidence", "possible", "."]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, check=False, timeout=3600)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise CorpusError(f"{folder.name}: {command!r} check exited {result.returncode}: {last}")
    found = []
    for item in json.loads(result.stdout or "[]"):
        if item["code"][:4] not in FAMILIES:
            continue
        line = int(item["line"])
        found.append(Found(item["path"].removeprefix("./"), line, max(line, int(item.get("end_line") or line)),
                           item["code"], item.get("message", ""), item.get("confidence", "certain")))
    return found


def _line_counts(folder: Path) -> tuple[int, int]:
    files = lines = 0
    for path in folder.rglob("*.py"):
        if not path.is_file():
            continue  # a folder named like a module (fastMRI's `unet_reproduce_20201111.py/`)
        files += 1
        with open(path, "rb") as handle:
            lines += handle.read().count(b"\n")
    return files, lines


def stale_labels(labels: list[FreshLabel], folder: Path) -> list[tuple[FreshLabel, str]]:
    """Labels whose `code` text is not on their line (a wrong line or commit): reported and left out."""
    stale, texts = [], {}
    for item in labels:
        path = folder / item.label.path
        if path not in texts:
            texts[path] = path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else None
        lines = texts[path]
        if lines is None:
            stale.append((item, "<no such file>"))
        elif item.label.line > len(lines) or item.label.code not in lines[item.label.line - 1]:
            stale.append((item, lines[item.label.line - 1].strip() if item.label.line <= len(lines) else "<past the end>"))
    return stale


def statement_starts(text: str) -> dict[int, int]:
    """The first line of the statement each line belongs to, for the lines of statements that span several: a simple
    statement, or the header of a compound one (`for ... in (`, `if (`, a `with`'s items). Readers label a statement
    at its first line; a finding sits on the line of the expression it flags."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    starts: dict[int, int] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        body = getattr(node, "body", None)
        end = (body[0].lineno - 1) if isinstance(body, list) and body and isinstance(body[0], ast.stmt) \
            else (node.end_lineno or node.lineno)
        for line in range(node.lineno + 1, max(node.lineno, end) + 1):
            starts.setdefault(line, node.lineno)
    return starts


def score_repo(labels: list[FreshLabel], found: list[Found], repo: str, outcome: Outcome,
               starts: dict[str, dict[int, int]] | None = None) -> None:
    """Score one repository's findings against its labels. With `starts` (`statement_starts` by path), a finding on
    a later line of a statement also covers a label on the statement's first line, and is judged by it when no label
    is on its own lines."""
    by_line: dict[tuple[str, int], list[FreshLabel]] = {}
    for item in labels:
        by_line.setdefault((item.label.path, item.label.line), []).append(item)
    covered: set[int] = set()
    for finding in found:
        hits = [item for line in range(finding.line, finding.end_line + 1) for item in by_line.get((finding.path, line), ())]
        start = (starts or {}).get(finding.path, {}).get(finding.line)
        statement = by_line.get((finding.path, start), []) if start is not None else []
        covered.update(id(item) for item in [*hits, *statement])
        hits = hits or statement
        for key in (finding.family, "all", repo):
            tally = outcome.tallies.setdefault(key, Tally())
            tally.findings += 1
            if any(item.label.verdict == "pos" for item in hits):
                tally.real += 1
            elif hits:
                tally.false += 1
            else:
                tally.unjudged += 1
        if hits and not any(item.label.verdict == "pos" for item in hits):
            outcome.false_findings.append((repo, finding))
        elif not hits:
            outcome.unjudged.append((repo, finding))
    for item in labels:
        hit = id(item) in covered
        for key in (item.label.family, "all", repo):
            tally = outcome.tallies.setdefault(key, Tally())
            if item.label.verdict == "pos":
                tally.positives += 1
                tally.hits += hit
            elif item.origin == "grep":
                tally.negatives += 1
                tally.false_alarms += hit
        if item.label.verdict == "pos" and not hit:
            outcome.missed.append(item)


def evaluate(batch: Batch, mirrors: Path, command: str, root: Path) -> tuple[Outcome, Outcome, Outcome, Outcome]:
    """The scores of the findings `gpulint check` shows (`certain` and `likely`), of the `certain` ones only (what
    `--confidence certain` shows), of all of them (`--confidence possible`), and of those it shows with labels
    matched by statement (`statement_starts`)."""
    outcome, certain, everything, by_statement = (
        Outcome(tallies={key: Tally() for key in (*FAMILIES, "all")}) for _ in range(4))
    for row in batch.repos:
        folder = lay_out_repo(mirrors, row.repo, row.commit, root)
        files, lines = _line_counts(folder)
        outcome.files += files
        outcome.lines += lines
        started = time.perf_counter()
        found = run_gpulint(command, folder)
        outcome.seconds += time.perf_counter() - started
        labels = [item for item in batch.labels if item.label.repo == row.repo]
        stale = stale_labels(labels, folder)
        outcome.stale += stale
        usable = [item for item in labels if all(item is not s for s, _ in stale)]
        views = confidence_views(found)
        for view, scored in zip(views, (outcome, certain, everything)):
            score_repo(usable, view, row.repo, scored)
        starts = {path: statement_starts((folder / path).read_text(encoding="utf-8", errors="replace"))
                  for path in {f.path for f in views[0]} if (folder / path).is_file()}
        score_repo(usable, views[0], row.repo, by_statement, starts)
    return outcome, certain, everything, by_statement


def confidence_views(found: list[Found]) -> tuple[list[Found], list[Found], list[Found]]:
    """What `gpulint check` shows (`certain` and `likely` findings), what `--confidence certain` shows, and what
    `--confidence possible` shows (all): the batch is linted once, with `--confidence possible`."""
    return ([f for f in found if f.confidence in ("certain", "likely")],
            [f for f in found if f.confidence == "certain"], found)


def _ratio(value: float | None) -> str:
    return "   -" if value is None else f"{value:4.2f}"


def render(batch: Batch, outcome: Outcome) -> str:
    header = f"{'family':<28} {'pos':>4} {'grep-neg':>8} {'recall':>7} {'flagged':>8} | {'findings':>8} {'real':>5} {'false':>5} {'unjudged':>8} {'precision':>9}"
    rows = [header, "-" * len(header)]
    for key in (*FAMILIES, "all"):
        t = outcome.tallies[key]
        title = "overall" if key == "all" else f"{key}xx {FAMILY_NAMES[key]}"
        rows.append(
            f"{title:<28} {t.positives:>4} {t.negatives:>8} {_ratio(t.recall):>7} {_ratio(t.false_alarm_rate):>8} | "
            f"{t.findings:>8} {t.real:>5} {t.false:>5} {t.unjudged:>8} {_ratio(t.precision):>9}"
        )
    rows += ["", *by_repository(batch, outcome)]
    kinds = ", ".join(f"{r.repo} ({r.kind})" for r in batch.repos)
    intro = (
        f"batch {batch.folder.name}: {len(batch.labels)} labels in {len(batch.repos)} repositories: {kinds}\n"
        f"linted whole: {outcome.files} files, {outcome.lines} lines, {outcome.seconds:.1f} s of gpulint"
    )
    notes = [f"stale label {i.label.repo}:{i.label.path}:{i.label.line} expects {i.label.code!r}, reads {actual!r}"
             for i, actual in outcome.stale]
    return "\n".join([*notes, intro, *rows])


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def by_repository(batch: Batch, outcome: Outcome) -> list[str]:
    """Each repository's precision and recall, and their mean: one large repository can carry the pooled figure."""
    header = f"{'repository':<36} {'pos':>4} {'recall':>7} | {'findings':>8} {'real':>5} {'false':>5} {'precision':>9}"
    rows = [header, "-" * len(header)]
    precisions, recalls = [], []
    for row in batch.repos:
        t = outcome.tallies.get(row.repo, Tally())
        rows.append(f"{row.repo:<36} {t.positives:>4} {_ratio(t.recall):>7} | {t.findings:>8} {t.real:>5} {t.false:>5} "
                    f"{_ratio(t.precision):>9}")
        precisions += [t.precision] if t.precision is not None else []
        recalls += [t.recall] if t.recall is not None else []
    rows.append(f"{'mean over repositories':<36} {'':>4} {_ratio(_mean(recalls)):>7} | {'':>8} {'':>5} {'':>5} "
                f"{_ratio(_mean(precisions)):>9}")
    pooled = outcome.tallies["all"]
    rows.append(f"pooled: precision {_ratio(pooled.precision)} ({pooled.real} / {pooled.real + pooled.false}), "
                f"recall {_ratio(pooled.recall)} ({pooled.hits} / {pooled.positives})")
    return rows


def details(outcome: Outcome) -> str:
    out = [f"\nmissed positives ({len(outcome.missed)}):"]
    out += [f"  {i.label.family} {i.label.repo}:{i.label.path}:{i.label.line}  {i.label.code}  -- {i.label.reason}"
            for i in outcome.missed] or ["  (none)"]
    for title, items in (("false findings", outcome.false_findings), ("unjudged findings", outcome.unjudged)):
        out.append(f"{title} ({len(items)}):")
        out += [f"  {f.code} {repo}:{f.path}:{f.line}  {f.message[:140]}" for repo, f in items] or ["  (none)"]
    return "\n".join(out)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("batch", nargs="?", help="a batch folder (repos.csv, labels.csv)")
    parser.add_argument("--mirrors", default="/work/.mirror", help="folder of fetched git mirrors (owner+name/repo)")
    parser.add_argument("--gpulint", default="python -m gpulint", help="command that runs gpulint")
    parser.add_argument("--layout", help="lay the repositories out in this (new or empty) folder and keep it")
    parser.add_argument("--details", action="store_true", help="list misses, false findings and unjudged findings")
    parser.add_argument("--unjudged", action="store_true", help="list only the findings no label judges")
    parser.add_argument("--lay-out-only", metavar="OWNER/NAME@COMMIT",
                        help="lay one repository out in --layout and lint nothing (to label a new repository)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.lay_out_only:
            if not args.layout or "@" not in args.lay_out_only:
                raise CorpusError("--lay-out-only needs OWNER/NAME@COMMIT and --layout DIR")
            repo, commit = args.lay_out_only.split("@", 1)
            print(lay_out_repo(Path(args.mirrors), repo, commit, Path(args.layout)))
            return 0
        if not args.batch:
            raise CorpusError("give a batch folder (bench/corpus/fresh/NAME)")
        batch = load_batch(Path(args.batch))
        if args.layout:
            root = Path(args.layout)
            if root.exists() and any(root.iterdir()):
                raise CorpusError(f"{root}: --layout folder must be empty or absent")
            root.mkdir(parents=True, exist_ok=True)
            outcome, certain, everything, by_statement = evaluate(batch, Path(args.mirrors), args.gpulint, root)
        else:
            with tempfile.TemporaryDirectory(prefix="gpulint-fresh-") as tmp:
                outcome, certain, everything, by_statement = evaluate(
                    batch, Path(args.mirrors), args.gpulint, Path(tmp))
    except CorpusError as exc:
        print(f"fresh_eval: error: {exc}", file=sys.stderr)
        return 2
    if args.unjudged:
        # (of all confidences: the `possible` findings are judged too, for the figures of `--confidence possible`)
        print("\n".join(f"{f.code} {repo}:{f.path}:{f.line}:{f.end_line}  {f.message}"
                        for repo, f in everything.unjudged))
        return 0
    print(render(batch, outcome))
    for name, scored in (("certain findings only (--confidence certain)", certain),
                         ("all findings (--confidence possible)", everything),
                         ("labels matched by statement (a label on a statement's first line, a finding on a later line "
                          "of it)", by_statement)):
        t = scored.tallies["all"]
        print(f"{name}: {t.findings} findings, {t.real} real, {t.false} false, {t.unjudged} unjudged, "
              f"precision {_ratio(t.precision)}, recall {_ratio(t.recall)}")
    if args.details:
        print(details(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())
