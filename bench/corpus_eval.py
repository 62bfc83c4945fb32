"""Precision of `gpulint check` on real training code, against a hand-labelled corpus.

The labels (bench/corpus/labels.csv) name lines of public training codebases at fixed commits, each with a rule
family (GPL1..GPL5) and a verdict: `pos` (real per-step lost GPU time a linter should flag) or `neg` (looks
suspicious to a naive grep but costs nothing per step). This script lays the labelled files out from local git
mirrors into a temp folder, runs `gpulint check --format json` on them, and prints per family and overall:
positives, negatives, recall, false-alarm rate (flagged negatives / negatives), and findings per 1,000 lines
(noise). A naive grep baseline is scored in the same table so the floor is visible.

    python bench/corpus_eval.py --mirrors /work/.mirror [--gpulint "python -m gpulint"] [--details]

Matching: a finding matches a label when the file and the family band (GPL4xx -> GPL4) agree and the finding's
line range [line, end_line] covers the label's line. It is a benchmark: it exits 0 whatever the figures; only a
malformed labels file or a bad flag exits 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

# The files a user's checkout gives gpulint: Python, and the configs, scripts and READMEs it reads for what the training
# builds and the intervals it sets (gpulint.linter.discovery's suffixes), and the dependency files that pin PyTorch
# (`requirements.txt`, `pyproject.toml`: `gpulint.project.configs.is_dependency_file`).
_LAID_OUT = (".py", ".pyi", ".yaml", ".yml", ".json", ".jsonnet", ".libsonnet", ".sh", ".md")
from dataclasses import dataclass, field
from pathlib import Path

FAMILIES = ("GPL1", "GPL2", "GPL3", "GPL4", "GPL5")
FAMILY_NAMES = {
    "GPL1": "per-tensor loops",
    "GPL2": "unvectorized metrics",
    "GPL3": "padded computation",
    "GPL4": "host-device sync",
    "GPL5": "launch overhead",
}
VERDICTS = ("pos", "neg")
LABEL_COLUMNS = (
    "repo",
    "commit",
    "path",
    "line",
    "family",
    "verdict",
    "code",
    "reason",
)
DEFAULT_LABELS = Path(__file__).resolve().parent / "corpus" / "labels.csv"
REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
from gpulint.project.configs import is_dependency_file  # noqa: E402  (the same files a user's checkout holds)

# The naive baseline: what a grep for the suspicious calls would flag, one regex per family hint.
# Deliberately context-free (no hot path, gates or device provenance): it is the floor gpulint must beat.
GREP_PATTERNS: dict[str, list[str]] = {
    "GPL1": [
        r"\bfor\b.+\bin\b.*\.(named_)?parameters\(",
        r"\bfor\b.+\bin\b.*state_dict\(\)",
        r"\bfor\b.+\bin\b.*\.items\(\)",
        r"\[\s*\w+\.item\(\)\s+for\b",
    ],
    "GPL2": [
        r"\+=.*\.item\(\)",
        r"\.update\(.*\.item\(\)",
        r"\+=\s*float\(",
        r"\btorch\.cat\(",
        r"\.numpy\(\)",
        r"\bsklearn\b|accuracy_score|f1_score",
        r"\bfor\b.+\bin\s+range\(.*\.size\(0\)",
        r"\btorch\.tensor\(\[",
        r"\.eq\(|==.*\.sum\(\)",
    ],
    "GPL3": [
        r"max_length",
        r"pad_to_max",
        r"pad_sequence",
        r"\bF\.pad\(|\bpad\(",
        r"padding\s*=",
    ],
    "GPL4": [
        r"\.item\(\)",
        r"\.cpu\(\)",
        r"\.tolist\(\)",
        r"\.numpy\(\)",
        r"synchronize\(",
        r"\b(all_reduce|all_gather\w*|broadcast|barrier|reduce_scatter\w*|gather_object|all_to_all)\(",
        r"\.nonzero\(|masked_select|\.unique\(|repeat_interleave",
        r"empty_cache\(",
        r"\.cuda\(|\.to\(\s*[\w.\[\]'\"]*(device|rank|gpu|cuda)",
        r"\b(float|int|bool)\(\s*\w+\s*\)",
        r"\bprint\(",
        r"\.gather\(|\.reduce\(",
    ],
    "GPL5": [
        r"zero_grad\(",
        r"\bfor\b.+\bin\b.*\.(named_)?parameters\(",
        r"\bfor\b.+\bin\b.*state_dict\(\)",
        r"foreach\s*=\s*False",
        r"\btorch\.compile\(",
        r"set_detect_anomaly",
        r"\btorch\.(zeros|ones|empty|randn|rand|arange|tensor|full)\(.*\)\.(cuda|to)\(",
        r"profiler\.profile\(|torch\.profiler",
        r"\bDataLoader\(|optim\.\w+\(",
        r"\.mul_\(|\.add_\(|\.copy_\(|\.lerp_\(",
    ],
}


class CorpusError(Exception):
    """A malformed labels file or flag: printed as one line, exit 2."""


@dataclass(frozen=True)
class Label:
    repo: str
    commit: str
    path: str
    line: int
    family: str
    verdict: str
    code: str
    reason: str

    @property
    def file_key(self) -> str:
        return file_key(self.repo, self.path)


@dataclass(frozen=True)
class Finding:
    file: str  # file_key of the laid-out file
    line: int
    end_line: int
    family: str
    code: str


@dataclass
class Layout:
    root: Path
    # file_key -> number of lines, for every laid-out file
    line_counts: dict[str, int] = field(default_factory=dict)
    repos: list[str] = field(default_factory=list)  # the laid-out repository folders (owner+name)
    # (label, what its line really reads)
    stale: list[tuple[Label, str]] = field(default_factory=list)
    missing_repos: list[str] = field(default_factory=list)


def file_key(repo: str, path: str) -> str:
    """Where a labelled file lives in the layout: `owner+name/path` (the mirror folder's naming)."""
    return f"{repo.replace('/', '+')}/{path}"


def load_labels(path: Path) -> list[Label]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read labels ({exc.strerror})") from None
    rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise CorpusError(f"{path}: no labels")
    missing = [c for c in LABEL_COLUMNS if c not in rows[0]]
    if missing:
        raise CorpusError(
            f"{path}: missing column(s) {', '.join(missing)}; expected {','.join(LABEL_COLUMNS)}"
        )
    labels, seen = [], set()
    for number, row in enumerate(rows, start=2):  # line 1 is the header
        labels.append(_parse_row(path, number, row))
        key = (labels[-1].file_key, labels[-1].line, labels[-1].family)
        if key in seen:
            raise CorpusError(
                f"{path}:{number}: duplicate label for {key[0]}:{key[1]} {key[2]}"
            )
        seen.add(key)
    return labels


def _parse_row(path: Path, number: int, row: dict[str, str]) -> Label:
    where = f"{path}:{number}"
    values = {c: (row.get(c) or "").strip() for c in LABEL_COLUMNS}
    for column in ("repo", "commit", "path", "line", "family", "verdict", "reason"):
        if not values[column]:
            raise CorpusError(f"{where}: empty field '{column}'")
    if values["repo"].count("/") != 1:
        raise CorpusError(
            f"{where}: field 'repo' must be owner/name, got {values['repo']!r}"
        )
    if not re.fullmatch(r"[0-9a-f]{40}", values["commit"]):
        raise CorpusError(
            f"{where}: field 'commit' must be a 40-hex commit, got {values['commit']!r}"
        )
    if not values["line"].isdigit() or int(values["line"]) < 1:
        raise CorpusError(
            f"{where}: field 'line' must be a 1-based line number, got {values['line']!r}"
        )
    if values["family"] not in FAMILIES:
        raise CorpusError(
            f"{where}: field 'family' must be one of {', '.join(FAMILIES)}, got {values['family']!r}"
        )
    if values["verdict"] not in VERDICTS:
        raise CorpusError(
            f"{where}: field 'verdict' must be pos or neg, got {values['verdict']!r}"
        )
    return Label(**{**values, "line": int(values["line"])})


def mirror_git_dir(mirrors: Path, repo: str) -> Path | None:
    """The git directory `fetch` made for owner/name: a bare `repo/` or a clone's `repo/.git`."""
    base = mirrors / repo.replace("/", "+") / "repo"
    for candidate in (base / ".git", base):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    return None


def git_show(git_dir: Path, commit: str, path: str) -> str | None:
    result = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"],
        check=False,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
    )
    return result.stdout if result.returncode == 0 else None


def lay_out_repo(git_dir: Path, commit: str, target: Path) -> bool:
    """Every Python file of the repository at `commit`, and its YAML configs (which the project model reads for
    the classes training builds), written under `target`; False when the commit is missing. (Blob by blob: a
    snapshot may lack its large data files, which `git archive` would stop at.)"""
    listing = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "-z", commit], capture_output=True, check=False
    )
    if listing.returncode != 0:
        return False
    wanted = []
    for entry in listing.stdout.decode("utf-8", "surrogateescape").split("\0"):
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        # A symbolic link (mode 120000) is stored as a blob holding its target's path: written out it would be a
        # file of one line that is no Python (speechbrain's recipes link to shared prepare scripts).
        if len(parts) == 3 and parts[1] == "blob" and parts[0] != "120000" \
                and (path.endswith(_LAID_OUT) or is_dependency_file(path)):
            wanted.append((parts[2], path))
    request = "".join(f"{sha}\n" for sha, _ in wanted).encode()
    batch = subprocess.run(
        ["git", f"--git-dir={git_dir}", "cat-file", "--batch"], input=request, capture_output=True, check=False
    )
    data, offset = batch.stdout, 0
    target.mkdir(parents=True, exist_ok=True)
    for _, path in wanted:
        header_end = data.index(b"\n", offset)
        header = data[offset:header_end].split()
        if len(header) < 3 or header[1] == b"missing":
            offset = header_end + 1
            continue
        size = int(header[2])
        body = data[header_end + 1: header_end + 1 + size]
        offset = header_end + 1 + size + 1
        destination = target / path
        if ".." in Path(path).parts:
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(body)
    return True


def lay_out(
    labels: list[Label], mirrors: Path, root: Path
) -> tuple[Layout, list[Label]]:
    """Write each labelled repository, whole (every Python file at the label's commit), into `root/owner+name`, so
    that gpulint sees every caller as a user's run does; return the layout and the labels that could be used.

    A label whose `code` text is not on its line is stale (wrong line or wrong commit) and is left out, with a note.
    """
    layout = Layout(root=root)
    usable: list[Label] = []
    files: dict[str, list[str] | None] = {}
    laid_out: dict[str, bool] = {}
    for label in labels:
        if label.repo not in laid_out:
            git_dir = mirror_git_dir(mirrors, label.repo)
            if git_dir is None:
                layout.missing_repos.append(label.repo)
            folder = root / label.repo.replace("/", "+")
            laid_out[label.repo] = git_dir is not None and lay_out_repo(git_dir, label.commit, folder)
            if laid_out[label.repo]:
                layout.repos.append(folder.name)
                for path in folder.rglob("*.py"):
                    if not path.is_file():
                        continue  # a folder named like a module (fastMRI's `unet_reproduce_20201111.py/`)
                    key = path.relative_to(root).as_posix()
                    layout.line_counts[key] = path.read_bytes().count(b"\n")
        if not laid_out[label.repo]:
            continue
        if label.file_key not in files:
            path = root / label.file_key
            files[label.file_key] = (
                path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else None
            )
        lines = files[label.file_key]
        if lines is None:
            layout.stale.append(
                (label, f"{label.commit[:12]}:{label.path} is not in the mirror")
            )
            continue
        actual = (
            lines[label.line - 1]
            if label.line <= len(lines)
            else "<past the end of the file>"
        )
        if label.code and label.code not in actual:
            layout.stale.append((label, actual.strip()))
            continue
        usable.append(label)
    return layout, usable


def parse_findings(data: object, root: Path, source: str) -> list[Finding]:
    """Findings from `gpulint check --format json` output, paths made relative to the layout root."""
    if not isinstance(data, list):
        raise CorpusError(f"{source}: expected a JSON list of findings")
    findings = []
    for item in data:
        if not isinstance(item, dict) or not {"code", "path", "line"} <= item.keys():
            raise CorpusError(
                f"{source}: a finding lacks code/path/line: {str(item)[:80]}"
            )
        code = str(item["code"])
        family = code[:4]
        # GPL0xx engine findings (parse errors) belong to no family.
        if family not in FAMILIES:
            continue
        try:
            line = int(item["line"])
            end_line = int(item.get("end_line") or line)
        except (TypeError, ValueError):
            raise CorpusError(
                f"{source}: a finding's line is not a number: {str(item)[:80]}"
            ) from None
        findings.append(
            Finding(
                _relative(item["path"], root), line, max(line, end_line), family, code
            )
        )
    return findings


def _relative(path: str, root: Path) -> str:
    p = Path(path)
    if p.is_absolute():
        try:
            p = p.resolve().relative_to(root.resolve())
        except ValueError:
            return path
    return p.as_posix().removeprefix("./")


def run_gpulint(command: str, layout: Layout) -> tuple[list[Finding] | None, str]:
    """Run the linter on each laid-out repository, one run per repository as its own project; (None, why) when it
    could not produce findings."""
    argv = shlex.split(command)
    if argv and argv[0] == "python":
        # The evaluator's own interpreter (the venv's), even when the venv is not activated.
        argv[0] = sys.executable
    # The linter runs inside the layout so finding paths are `owner+name/...`; keep this checkout importable.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    findings: list[Finding] = []
    for folder in layout.repos:
        try:
            result = subprocess.run(
                [*argv, "check", "--format", "json", "--no-cache", "--exit-zero", folder],
                check=False, cwd=layout.root, env=env, capture_output=True, text=True, timeout=1800,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"could not run {command!r}: {exc}"
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
            return None, f"{command!r} check {folder} exited {result.returncode}: {last}"
        try:
            findings += parse_findings(json.loads(result.stdout or "[]"), layout.root, command)
        except (json.JSONDecodeError, CorpusError) as exc:
            return None, f"{command!r} check printed no findings JSON: {exc}"
    return findings, ""


def grep_findings(layout: Layout) -> list[Finding]:
    """The naive baseline: every line matching a family's regexes is a finding of that family."""
    compiled = {
        family: [re.compile(p) for p in patterns]
        for family, patterns in GREP_PATTERNS.items()
    }
    findings = []
    for key in layout.line_counts:
        text = (layout.root / key).read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), start=1):
            code_part = (
                line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
            )
            for family, patterns in compiled.items():
                if any(p.search(code_part) for p in patterns):
                    findings.append(Finding(key, number, number, family, family + "00"))
    return findings


def flagged(label: Label, findings_by_file: dict[str, list[Finding]]) -> bool:
    return any(
        f.family == label.family and f.line <= label.line <= f.end_line
        for f in findings_by_file.get(label.file_key, ())
    )


@dataclass
class Score:
    positives: int = 0
    negatives: int = 0
    hits: int = 0  # flagged positives
    false_alarms: int = 0  # flagged negatives

    @property
    def recall(self) -> float | None:
        return self.hits / self.positives if self.positives else None

    @property
    def false_alarm_rate(self) -> float | None:
        return self.false_alarms / self.negatives if self.negatives else None


def score(
    labels: list[Label], findings: list[Finding]
) -> tuple[dict[str, Score], list[Label], list[Label]]:
    """Per-family and overall ("all") scores, plus the missed positives and the flagged negatives."""
    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        by_file.setdefault(f.file, []).append(f)
    scores = {family: Score() for family in (*FAMILIES, "all")}
    missed, alarms = [], []
    for label in labels:
        hit = flagged(label, by_file)
        for key in (label.family, "all"):
            s = scores[key]
            if label.verdict == "pos":
                s.positives += 1
                s.hits += hit
            else:
                s.negatives += 1
                s.false_alarms += hit
        if label.verdict == "pos" and not hit:
            missed.append(label)
        if label.verdict == "neg" and hit:
            alarms.append(label)
    return scores, missed, alarms


def _ratio(value: float | None) -> str:
    return "   -" if value is None else f"{value:4.2f}"


def render_table(tools: dict[str, dict[str, Score]]) -> str:
    names = list(tools)
    header = f"{'family':<28} {'pos':>4} {'neg':>4}" + "".join(
        f" | {n + ' recall':>15} {'false-alarm':>11}" for n in names
    )
    rows = [header, "-" * len(header)]
    for family in (*FAMILIES, "all"):
        first = tools[names[0]][family]
        title = "overall" if family == "all" else f"{family}xx {FAMILY_NAMES[family]}"
        row = f"{title:<28} {first.positives:>4} {first.negatives:>4}"
        for name in names:
            s = tools[name][family]
            row += f" | {_ratio(s.recall):>15} {_ratio(s.false_alarm_rate):>11}"
        rows.append(row)
    return "\n".join(rows)


def describe(label: Label) -> str:
    return f"  {label.family} {label.verdict} {label.repo}:{label.path}:{label.line}  {label.code}  -- {label.reason}"


def evaluate(args: argparse.Namespace) -> int:
    labels = load_labels(Path(args.labels))
    if args.repo:
        unknown = sorted(set(args.repo) - {lb.repo for lb in labels})
        if unknown:
            raise CorpusError(
                f"--repo {unknown[0]}: no labels for that repository in {args.labels}"
            )
        labels = [lb for lb in labels if lb.repo in args.repo]
    if args.layout:
        root = Path(args.layout)
        if root.exists() and any(root.iterdir()):
            raise CorpusError(f"{root}: --layout folder must be empty or absent")
        root.mkdir(parents=True, exist_ok=True)
        _evaluate_in(args, labels, root)
    else:
        with tempfile.TemporaryDirectory(prefix="gpulint-corpus-") as tmp:
            _evaluate_in(args, labels, Path(tmp))
    print(f"\nreproduce: {reproduce_command(args)}")
    return 0


def _evaluate_in(args: argparse.Namespace, labels: list[Label], root: Path) -> None:
    mirrors = Path(args.mirrors)
    layout, usable = lay_out(labels, mirrors, root)
    for repo in layout.missing_repos:
        print(
            f"missing mirror for {repo}: run the fetch tool with github:{repo} (expected under {mirrors})"
        )
    for label, actual in layout.stale:
        print(
            f"stale label {label.repo}:{label.path}:{label.line} expects {label.code!r}, reads {actual!r}"
        )
    findings_by_tool: dict[str, list[Finding]] = {}
    if args.findings:
        findings_by_tool["gpulint"] = _read_findings_file(
            Path(args.findings), layout.root
        )
    else:
        findings, why = run_gpulint(args.gpulint, layout)
        if findings is None:
            print(f"gpulint not scored: {why}")
        else:
            findings_by_tool["gpulint"] = findings
    findings_by_tool["grep"] = grep_findings(layout)
    _print_report(usable, layout, findings_by_tool, details=args.details)


def _print_report(
    labels: list[Label],
    layout: Layout,
    findings_by_tool: dict[str, list[Finding]],
    *,
    details: bool,
) -> None:
    total_lines = sum(layout.line_counts.values())
    negatives = sum(lb.verdict == "neg" for lb in labels)
    repos = {lb.repo for lb in labels}
    print(
        f"\ncorpus: {len(labels)} labels ({negatives} negatives) in "
        f"{len(layout.line_counts)} files, {total_lines} lines, {len(repos)} repositories"
    )
    scored = {
        name: score(labels, findings) for name, findings in findings_by_tool.items()
    }
    print(render_table({name: result[0] for name, result in scored.items()}))
    for name, findings in findings_by_tool.items():
        per_k = 1000 * len(findings) / total_lines if total_lines else 0.0
        print(f"{name} noise: {len(findings)} findings, {per_k:.1f} per 1,000 lines")
    if details:
        for name, (_, missed, alarms) in scored.items():
            print(f"\n{name}: {len(missed)} missed positives")
            print("\n".join(describe(lb) for lb in missed) or "  (none)")
            print(f"{name}: {len(alarms)} flagged negatives")
            print("\n".join(describe(lb) for lb in alarms) or "  (none)")


def _read_findings_file(path: Path, root: Path) -> list[Finding]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read findings ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    return parse_findings(data, root, str(path))


def reproduce_command(args: argparse.Namespace) -> str:
    parts = ["python", "bench/corpus_eval.py", "--mirrors", str(args.mirrors)]
    if Path(args.labels).resolve() != DEFAULT_LABELS:
        parts += ["--labels", str(args.labels)]
    if args.findings:
        parts += ["--findings", str(args.findings)]
    elif args.gpulint != "python -m gpulint":
        parts += ["--gpulint", args.gpulint]
    for repo in args.repo or ():
        parts += ["--repo", repo]
    if args.details:
        parts.append("--details")
    if args.layout:
        parts += ["--layout", str(args.layout)]
    return shlex.join(parts)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--mirrors",
        default="/work/.mirror",
        help="folder of fetched git mirrors (owner+name/repo)",
    )
    parser.add_argument(
        "--labels",
        default=str(DEFAULT_LABELS),
        help="labels CSV (default: bench/corpus/labels.csv)",
    )
    parser.add_argument(
        "--gpulint", default="python -m gpulint", help="command that runs gpulint"
    )
    parser.add_argument(
        "--findings",
        help="score this findings JSON instead of running gpulint (paths relative to the layout)",
    )
    parser.add_argument(
        "--repo",
        action="append",
        metavar="OWNER/NAME",
        help="score only this repository's labels (repeatable), e.g. for a held-out subset",
    )
    parser.add_argument(
        "--layout",
        help="lay the labelled files out in this (new or empty) folder and keep it, to rerun gpulint by hand",
    )
    parser.add_argument(
        "--details",
        action="store_true",
        help="list each missed positive and flagged negative",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return evaluate(args)
    except CorpusError as exc:
        print(f"corpus_eval: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
