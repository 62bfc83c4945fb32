"""The corpus evaluator's layout, matching and scoring, on a tiny hand-made corpus (never the real repositories)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.scripts import load_bench_script


TRAIN_PY = """\
import torch

def train(model, loader, opt):
    for step, (x, y) in enumerate(loader):
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        opt.step()
        total = loss.item()
        if step % 100 == 0:
            print(loss.item())

@torch.no_grad()
def evaluate(model, loader):
    return sum(model(x).item() for x in loader)
"""

UTILS_PY = """\
def ema(model, teacher):
    for p, q in zip(model.parameters(), teacher.parameters()):
        q.mul_(0.99).add_(p, alpha=0.01)
"""

LABELS = [
    # line 8: per-step .item() -> positive GPL4
    ("train.py", 8, "GPL4", "pos", "total = loss.item()", "per-step sync"),
    # line 10: gated print -> negative GPL4
    ("train.py", 10, "GPL4", "neg", "print(loss.item())", "gated"),
    # line 14: eval under no_grad -> negative GPL4
    ("train.py", 14, "GPL4", "neg", "model(x).item()", "eval"),
    # line 5: blocking .cuda() -> positive GPL4
    ("train.py", 5, "GPL4", "pos", "x.cuda()", "blocking copy"),
    # utils.py line 2: per-parameter EMA loop -> positive GPL5
    ("utils.py", 2, "GPL5", "pos", "for p, q in zip(", "per-param loop"),
]


ce = load_bench_script("corpus_eval")


def _git(*args: str, cwd: Path) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    ).stdout


@pytest.fixture()
def corpus(tmp_path: Path) -> dict:
    """A mirror folder laid out like `fetch` makes it (owner+name/repo with a .git), and a labels file."""
    repo_dir = tmp_path / "mirrors" / "acme+trainer" / "repo"
    repo_dir.mkdir(parents=True)
    _git("init", "-q", cwd=repo_dir)
    (repo_dir / "train.py").write_text(TRAIN_PY)
    (repo_dir / "pkg").mkdir()
    (repo_dir / "pkg" / "utils.py").write_text(UTILS_PY)
    _git("add", ".", cwd=repo_dir)
    _git("commit", "-q", "-m", "c1", cwd=repo_dir)
    commit = _git("rev-parse", "HEAD", cwd=repo_dir).strip()
    labels = tmp_path / "labels.csv"
    _write_labels(labels, commit)
    return {
        "mirrors": tmp_path / "mirrors",
        "labels": labels,
        "commit": commit,
        "tmp": tmp_path,
    }


def _write_labels(
    path: Path, commit: str, rows=LABELS, repo: str = "acme/trainer"
) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(ce.LABEL_COLUMNS)
        for file, line, family, verdict, code, reason in rows:
            file = "pkg/utils.py" if file == "utils.py" else file
            writer.writerow([repo, commit, file, line, family, verdict, code, reason])


def _finding(path: str, line: int, code: str, end_line: int | None = None) -> dict:
    return {
        "code": code,
        "name": "x",
        "message": "m",
        "severity": "warning",
        "path": path,
        "line": line,
        "column": 1,
        "end_line": end_line or line,
        "end_column": 2,
        "fix": None,
        "url": "",
    }


def test_matching_needs_same_file_family_and_a_covering_range():
    label = ce.Label("a/b", "0" * 40, "t.py", 10, "GPL4", "pos", "", "r")
    key = label.file_key
    hit = ce.Finding(key, 10, 10, "GPL4", "GPL401")
    span = ce.Finding(key, 8, 12, "GPL4", "GPL401")
    wrong_family = ce.Finding(key, 10, 10, "GPL2", "GPL201")
    before = ce.Finding(key, 8, 9, "GPL4", "GPL401")
    after = ce.Finding(key, 11, 11, "GPL4", "GPL401")
    other_file = ce.Finding("a+b/u.py", 10, 10, "GPL4", "GPL401")
    assert ce.flagged(label, {key: [hit]})
    assert ce.flagged(label, {key: [span]})
    assert not ce.flagged(
        label, {key: [wrong_family, before, after], "a+b/u.py": [other_file]}
    )


def test_scores_recall_and_false_alarms_per_family_and_overall():
    def lab(line, family, verdict):
        return ce.Label("a/b", "0" * 40, "t.py", line, family, verdict, "", "r")

    labels = [
        lab(1, "GPL4", "pos"),
        lab(2, "GPL4", "pos"),
        lab(3, "GPL4", "neg"),
        lab(4, "GPL4", "neg"),
        lab(5, "GPL5", "pos"),
        lab(6, "GPL5", "neg"),
    ]
    key = labels[0].file_key
    findings = [
        ce.Finding(key, 1, 1, "GPL4", "GPL401"),
        ce.Finding(key, 3, 3, "GPL4", "GPL402"),
        ce.Finding(key, 5, 6, "GPL5", "GPL501"),
    ]
    scores, missed, alarms = ce.score(labels, findings)
    assert (scores["GPL4"].positives, scores["GPL4"].negatives) == (2, 2)
    assert scores["GPL4"].recall == 0.5 and scores["GPL4"].false_alarm_rate == 0.5
    assert scores["GPL5"].recall == 1.0 and scores["GPL5"].false_alarm_rate == 1.0
    assert scores["all"].recall == pytest.approx(2 / 3) and scores[
        "all"
    ].false_alarm_rate == pytest.approx(2 / 3)
    assert scores["GPL1"].recall is None and scores["GPL1"].false_alarm_rate is None
    assert [lb.line for lb in missed] == [2] and [lb.line for lb in alarms] == [3, 6]


def test_end_to_end_with_a_findings_file(corpus, capsys):
    findings = [
        _finding("acme+trainer/train.py", 8, "GPL401"),  # hit
        # false alarm (gated print); the "./" prefix is normalised
        _finding("./acme+trainer/train.py", 10, "GPL401"),
        # hit: the loop's range spans the label line
        _finding("acme+trainer/pkg/utils.py", 2, "GPL501", end_line=3),
        # engine finding: no family, ignored
        _finding("acme+trainer/train.py", 1, "GPL001"),
    ]
    path = corpus["tmp"] / "findings.json"
    path.write_text(json.dumps(findings))
    rc = ce.main(
        [
            "--mirrors",
            str(corpus["mirrors"]),
            "--labels",
            str(corpus["labels"]),
            "--findings",
            str(path),
            "--details",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "corpus: 5 labels (2 negatives) in 2 files, 17 lines, 1 repositories" in out
    overall = next(line for line in out.splitlines() if line.startswith("overall"))
    # gpulint: 2 of 3 positives, 1 of 2 negatives flagged.
    assert overall.split("|")[1].split() == ["0.67", "0.50"]
    gpl5 = next(line for line in out.splitlines() if line.startswith("GPL5xx"))
    assert gpl5.split("|")[1].split() == ["1.00", "-"]
    assert "gpulint noise: 3 findings, 176.5 per 1,000 lines" in out
    assert "gpulint: 1 missed positives" in out and "train.py:5" in out
    assert (
        "reproduce: python bench/corpus_eval.py --mirrors" in out
        and "--findings" in out
    )


def test_runs_the_linter_as_a_subprocess(corpus, capsys):
    """--gpulint names any command; it gets `check --format json --no-cache --exit-zero <folders>` in the layout."""
    fake = corpus["tmp"] / "fake_gpulint.py"
    fake.write_text(
        "import json, os, sys\n"
        "assert sys.argv[1:5] == ['check', '--format', 'json', '--no-cache'], sys.argv\n"
        "assert sys.argv[5] == '--exit-zero' and sys.argv[6:] == ['acme+trainer'], sys.argv\n"
        "assert os.path.isfile('acme+trainer/pkg/utils.py')\n"
        "path = os.path.abspath('acme+trainer/train.py')\n"
        "print(json.dumps([{'code': 'GPL401', 'path': path, 'line': 5, 'end_line': 5},\n"
        "                  {'code': 'GPL403', 'path': path, 'line': 14, 'end_line': 14}]))\n"
    )
    rc = ce.main(
        [
            "--mirrors",
            str(corpus["mirrors"]),
            "--labels",
            str(corpus["labels"]),
            "--gpulint",
            f"{sys.executable} {fake}",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    gpl4 = next(line for line in out.splitlines() if line.startswith("GPL4xx"))
    # absolute paths are mapped back into the layout
    assert gpl4.split("|")[1].split() == ["0.50", "0.50"]


def test_a_failing_linter_still_scores_the_grep_baseline(corpus, capsys):
    rc = ce.main(
        [
            "--mirrors",
            str(corpus["mirrors"]),
            "--labels",
            str(corpus["labels"]),
            "--gpulint",
            f"{sys.executable} -c 'import sys; sys.exit(3)'",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "gpulint not scored:" in out and "exited 3" in out
    assert "grep recall" in out and "gpulint recall" not in out


def test_grep_baseline_flags_suspicious_calls_without_context(corpus):
    labels = ce.load_labels(corpus["labels"])
    layout, usable = ce.lay_out(labels, corpus["mirrors"], corpus["tmp"] / "layout")
    scores, _, _ = ce.score(usable, ce.grep_findings(layout))
    # grep flags every .item()/.cuda() line, gated or not, and the parameters() loop.
    assert scores["all"].recall == 1.0 and scores["all"].false_alarm_rate == 1.0


def test_missing_mirror_is_one_line_naming_the_fetch(corpus, capsys):
    labels = corpus["tmp"] / "labels2.csv"
    _write_labels(labels, corpus["commit"], repo="nobody/absent")
    findings = corpus["tmp"] / "none.json"
    findings.write_text("[]")
    rc = ce.main(
        [
            "--mirrors",
            str(corpus["mirrors"]),
            "--labels",
            str(labels),
            "--findings",
            str(findings),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    missing = [line for line in out.splitlines() if "nobody/absent" in line]
    expected = (
        "missing mirror for nobody/absent: run the fetch tool with github:nobody/absent "
        f"(expected under {corpus['mirrors']})"
    )
    assert missing == [expected]


def test_stale_label_is_reported_and_left_out(corpus, capsys):
    rows = [
        *LABELS[:1],
        ("train.py", 9, "GPL4", "pos", "total = loss.item()", "wrong line"),
    ]
    labels = corpus["tmp"] / "stale.csv"
    _write_labels(labels, corpus["commit"], rows=rows)
    findings = corpus["tmp"] / "f.json"
    findings.write_text("[]")
    ce.main(
        [
            "--mirrors",
            str(corpus["mirrors"]),
            "--labels",
            str(labels),
            "--findings",
            str(findings),
        ]
    )
    out = capsys.readouterr().out
    assert (
        "stale label acme/trainer:train.py:9 expects 'total = loss.item()', reads 'if step % 100 == 0:'"
        in out
    )
    assert "corpus: 1 labels" in out


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            ["acme/trainer", "abc", "train.py", "8", "GPL4", "pos", "", "r"],
            "field 'commit' must be a 40-hex commit",
        ),
        (
            ["acme/trainer", "0" * 40, "train.py", "0", "GPL4", "pos", "", "r"],
            "field 'line' must be a 1-based line",
        ),
        (
            ["acme/trainer", "0" * 40, "train.py", "8", "GPL9", "pos", "", "r"],
            "field 'family' must be one of",
        ),
        (
            ["acme/trainer", "0" * 40, "train.py", "8", "GPL4", "maybe", "", "r"],
            "field 'verdict' must be pos or neg",
        ),
        (
            ["acme", "0" * 40, "train.py", "8", "GPL4", "pos", "", "r"],
            "field 'repo' must be owner/name",
        ),
        (
            ["acme/trainer", "0" * 40, "train.py", "8", "GPL4", "pos", "", ""],
            "empty field 'reason'",
        ),
    ],
)
def test_bad_labels_file_is_one_line_and_exit_2(tmp_path, capsys, row, message):
    labels = tmp_path / "bad.csv"
    with open(labels, "w", newline="") as f:
        csv.writer(f).writerows([ce.LABEL_COLUMNS, row])
    rc = ce.main(["--mirrors", str(tmp_path), "--labels", str(labels)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and f"{labels}:2:" in err[0] and message in err[0]


def test_duplicate_label_and_bad_findings_file_are_errors(corpus, capsys):
    labels = corpus["tmp"] / "dup.csv"
    _write_labels(labels, corpus["commit"], rows=[LABELS[0], LABELS[0]])
    assert ce.main(["--mirrors", str(corpus["mirrors"]), "--labels", str(labels)]) == 2
    assert "duplicate label" in capsys.readouterr().err
    bad = corpus["tmp"] / "bad.json"
    bad.write_text("{not json")
    assert (
        ce.main(
            [
                "--mirrors",
                str(corpus["mirrors"]),
                "--labels",
                str(corpus["labels"]),
                "--findings",
                str(bad),
            ]
        )
        == 2
    )
    assert "not JSON" in capsys.readouterr().err


def test_the_committed_labels_file_is_well_formed():
    """The real labels meet the issue's size and balance targets, and every family has both verdicts."""
    labels = ce.load_labels(ce.DEFAULT_LABELS)
    assert len(labels) >= 150
    assert len({lb.repo for lb in labels}) >= 10
    negatives = sum(lb.verdict == "neg" for lb in labels)
    assert negatives / len(labels) >= 0.40
    for family in ce.FAMILIES:
        verdicts = {lb.verdict for lb in labels if lb.family == family}
        assert verdicts == {"pos", "neg"}, f"{family} lacks a verdict: has {verdicts}"
    assert all(lb.code for lb in labels), (
        "every label carries the code text that pins its line"
    )
    # one commit per repository, so the README table and the mirrors stay simple
    commits = {(lb.repo, lb.commit) for lb in labels}
    assert len(commits) == len({lb.repo for lb in labels})


def test_the_readme_lists_every_labelled_repository_with_its_commit():
    """A later session re-creates the mirrors from the README: each repo, commit and fetch source must be there."""
    readme = (ce.DEFAULT_LABELS.parent / "README.md").read_text()
    for lb in ce.load_labels(ce.DEFAULT_LABELS):
        row = f"| {lb.repo} | `{lb.commit}` | `github:{lb.repo}` |"
        assert row in readme, f"README.md lacks the row for {lb.repo} at {lb.commit}"


def test_layout_folder_is_kept_and_must_start_empty(corpus, capsys):
    findings = corpus["tmp"] / "none.json"
    findings.write_text("[]")
    layout = corpus["tmp"] / "kept"
    args = ["--mirrors", str(corpus["mirrors"]), "--labels", str(corpus["labels"])]
    assert ce.main([*args, "--findings", str(findings), "--layout", str(layout)]) == 0
    assert (layout / "acme+trainer" / "train.py").read_text() == TRAIN_PY
    assert f"--layout {layout}" in capsys.readouterr().out
    assert ce.main([*args, "--findings", str(findings), "--layout", str(layout)]) == 2
    assert "must be empty or absent" in capsys.readouterr().err


@pytest.mark.slow
def test_every_label_pins_its_line_in_the_local_mirrors(tmp_path):
    """Where the mirrors exist (a workstation with fetched repositories), no label is stale or missing."""
    mirrors = Path(os.environ.get("GPULINT_CORPUS_MIRRORS", "/work/.mirror"))
    labels = ce.load_labels(ce.DEFAULT_LABELS)
    if not all(ce.mirror_git_dir(mirrors, repo) for repo in {lb.repo for lb in labels}):
        pytest.skip(f"not every corpus repository is mirrored under {mirrors}")
    layout, usable = ce.lay_out(labels, mirrors, tmp_path)
    assert layout.stale == [] and len(usable) == len(labels)


def test_repo_filter_scores_a_subset_and_rejects_unknown_repos(corpus, capsys):
    findings = corpus["tmp"] / "none.json"
    findings.write_text("[]")
    args = [
        "--mirrors",
        str(corpus["mirrors"]),
        "--labels",
        str(corpus["labels"]),
        "--findings",
        str(findings),
    ]
    assert ce.main([*args, "--repo", "acme/trainer"]) == 0
    out = capsys.readouterr().out
    assert "corpus: 5 labels" in out and "--repo acme/trainer" in out
    assert ce.main([*args, "--repo", "other/repo"]) == 2
    assert "--repo other/repo: no labels for that repository" in capsys.readouterr().err


def test_a_finding_with_a_non_numeric_line_is_one_clear_error(corpus, capsys):
    bad = corpus["tmp"] / "bad_line.json"
    bad.write_text(
        json.dumps(
            [{"code": "GPL401", "path": "acme+trainer/train.py", "line": "eight"}]
        )
    )
    args = ["--mirrors", str(corpus["mirrors"]), "--labels", str(corpus["labels"])]
    assert ce.main([*args, "--findings", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "line is not a number" in err[0]


def test_layout_leaves_out_symbolic_links(tmp_path):
    repo_dir = tmp_path / "repo"
    repo_dir.mkdir()
    _git("init", "-q", cwd=repo_dir)
    (repo_dir / "prepare.py").write_text("x = 1\n")
    (repo_dir / "recipe").mkdir()
    (repo_dir / "recipe" / "prepare.py").symlink_to("../prepare.py")
    _git("add", ".", cwd=repo_dir)
    _git("commit", "-q", "-m", "c1", cwd=repo_dir)
    commit = _git("rev-parse", "HEAD", cwd=repo_dir).strip()
    target = tmp_path / "out"
    assert ce.lay_out_repo(repo_dir / ".git", commit, target)
    assert (target / "prepare.py").read_text() == "x = 1\n"
    assert not (target / "recipe" / "prepare.py").exists()
