"""Does parsing only the functions the rules need change any finding? (A check over real code, not a test.)

    python bench/prune_check.py                     # installed transformers subset + torch.optim/distributed/utils.data
    python bench/prune_check.py DIR [DIR ...]       # e.g. the labelled corpus laid out by corpus_eval.py --layout DIR

Lints every file twice in one process, with the engine's pruning on and off (`LintOptions(prune=...)`), and checks
that findings, positions and fixes are identical; then checks every position the statement-level position finder
gives against libcst's own whole-module positions, and that every cut parses (else the engine silently parses the
whole file). Prints the counts and the CPU time of both runs.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from gpulint.linter import engine, positions
from gpulint.linter.engine import lint_text
from gpulint.linter.options import LintOptions
from gpulint.linter.rule import all_rules
from gpulint.linter.source import decode
from gpulint.project import FileFacts, Project, outline

RULES = [r for r in all_rules() if r.default_enabled]


def default_folders(work: Path) -> list[Path]:
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    from lint_speed import default_corpus

    folders = [default_corpus(work)]
    for part in ("optim", "distributed", "utils/data"):
        target = work / "torch" / part
        shutil.copytree(Path(torch.__file__).parent / part, target, ignore=shutil.ignore_patterns("__pycache__"))
        folders.append(target)
    return folders


def project_facts(folders: list[Path]) -> dict[Path, FileFacts]:
    """The project model's facts for every file, each folder read as one project (as `gpulint check FOLDER`)."""
    facts: dict[Path, FileFacts] = {}
    for folder in folders:
        files = sorted(p for p in folder.rglob("*.py") if p.is_file())
        indexes = {}
        for path in files:
            try:
                indexes[path] = outline(path.relative_to(folder).as_posix(), decode(path.read_bytes()).text)
            except (OSError, ValueError):
                continue
        project = Project(indexes.values())
        facts.update({path: project.file_facts(index.path) for path, index in indexes.items()})
    return facts


def finding_keys(findings) -> list[tuple]:
    return [(f.code, f.line, f.column, f.end_line, f.end_column, f.fix) for f in findings]


def compare(files: list[Path], facts: dict[Path, FileFacts]) -> tuple[int, int, list[str], float, float]:
    cpu = [0.0, 0.0]
    total, differ = 0, []
    for path in files:
        try:
            text = decode(path.read_bytes()).text
        except (OSError, ValueError):
            continue
        found = []
        for index, prune in enumerate((False, True)):
            start = time.process_time()
            found.append(finding_keys(lint_text(str(path), text, RULES, LintOptions(prune=prune), facts.get(path))))
            cpu[index] += time.process_time() - start
        total += len(found[0])
        if found[0] != found[1]:
            differ.append(f"{path}: {sorted(set(found[0]) ^ set(found[1]))}")
    return len(files), total, differ, cpu[0], cpu[1]


def cuts_that_fail(files: list[Path], facts: dict[Path, FileFacts]) -> list[str]:
    """Files that parse whole but whose pruned text does not: the engine then parses them whole, which is correct
    but slow, so a cut that fails on real code is a bug worth seeing."""
    failing = []
    for path in files:
        try:
            text = decode(path.read_bytes()).text
            engine._parse(text)
        except Exception:  # unreadable or not Python: the engine reports it, no cut to check
            continue
        active = [r for r in RULES if r.triggers and r.has_words_in(text)]
        cut = engine._pruned(text, active, facts.get(path) or FileFacts()) if active else None
        if cut is None:
            continue
        try:
            engine._parse("\n".join(cut.kept))
        except Exception as exc:
            failing.append(f"{path}: the cut does not parse ({str(exc).splitlines()[0]})")
    return failing


def check_positions(files: list[Path], facts: dict[Path, FileFacts]) -> tuple[int, list[str]]:
    """Every node a report needs, positioned by `positions_of`, against libcst's whole-module positions."""
    checked, wrong = 0, []
    original = positions.positions_of

    def checking(text, module, reports, tree):
        nonlocal checked
        found = original(text, module, reports, tree)
        truth = positions._whole(module)
        for report in reports:
            for node in (report.node, *(part.node for part in report.fix)):
                checked += 1
                if found[node] != truth[node]:
                    wrong.append(f"{current}: {report.rule.code} {found[node]} != {truth[node]}")
        return found

    engine.positions_of = checking
    try:
        for current in files:
            try:
                lint_text(str(current), decode(current.read_bytes()).text, RULES, facts=facts.get(current))
            except (OSError, ValueError):
                continue
    finally:
        engine.positions_of = original
    return checked, wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="folders of Python files (default: see above)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpulint-prune-") as tmp:
        folders = args.folders or default_folders(Path(tmp))
        files = [p for folder in folders for p in sorted(folder.rglob("*.py")) if p.is_file()]
        facts = project_facts(folders)
        count, findings, differ, full, pruned = compare(files, facts)
        checked, wrong = check_positions(files, facts)
        failing = cuts_that_fail(files, facts)
    for line in differ + wrong + failing:
        print(line)
    print(f"files: {count}, findings: {findings}, files whose findings differ with pruning: {len(differ)}")
    print(f"positions checked against libcst: {checked}, wrong: {len(wrong)}")
    print(f"files parsed whole because their cut does not parse: {len(failing)}")
    print(f"CPU seconds: whole files {full:.2f}, pruned {pruned:.2f} ({full / max(pruned, 1e-9):.2f}x)")
    return 1 if differ or wrong or failing else 0


if __name__ == "__main__":
    sys.exit(main())
