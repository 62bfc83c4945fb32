"""The fresh batches under bench/corpus/fresh are what their README says: each loads, and each repository is in one
batch only and in no tuned label, whatever its owner is called now (GitHub keeps a moved repository's old address
working: Lightning-AI/lightning-bolts is batch 10's Lightning-Universe/lightning-bolts)."""

from __future__ import annotations

import csv
from pathlib import Path

from tests.bench.scripts import load_bench_script

CORPUS = Path(__file__).resolve().parents[2] / "bench" / "corpus"
# Different repositories that share a name.
DISTINCT = {("dino", frozenset({"IDEA-Research/DINO", "facebookresearch/dino"})),
            ("lora", frozenset({"cloneofsimo/lora", "microsoft/LoRA"})),
            # openvpi's is a rewrite of the original (Lightning tasks, its own models and samplers), not a copy
            ("diffsinger", frozenset({"MoonInTheRiver/DiffSinger", "openvpi/DiffSinger"})),
            # two unofficial VALL-E implementations (a DeepSpeed trainer of its own; one built on icefall and lhotse)
            ("vall-e", frozenset({"enhuiz/vall-e", "lifeiteng/vall-e"})),
            # the CQL paper's code and two PyTorch reimplementations of it (BY571's; Young Geng's SimpleSAC)
            ("cql", frozenset({"BY571/CQL", "aviralkumar2907/CQL", "young-geng/CQL"})),
            # MosaicML's Composer recipes and PyTorch's examples
            ("examples", frozenset({"mosaicml/examples", "pytorch/examples"}))}


def test_every_fresh_batch_loads():
    fresh_eval = load_bench_script("fresh_eval")
    for folder in sorted((CORPUS / "fresh").iterdir()):
        batch = fresh_eval.load_batch(folder)
        assert batch.labels, folder


def test_a_repository_is_in_one_batch_and_no_tuned_label_under_any_owner():
    places: dict[str, set[tuple[str, str]]] = {}
    for repos in sorted((CORPUS / "fresh").glob("*/repos.csv")):
        for row in csv.DictReader(repos.open()):
            places.setdefault(row["repo"].split("/")[1].lower(), set()).add((repos.parent.name, row["repo"]))
    with (CORPUS / "labels.csv").open() as handle:
        for row in csv.DictReader(handle):
            places.setdefault(row["repo"].split("/")[1].lower(), set()).add(("tuned", row["repo"]))
    repeated = {(name, frozenset(repo for _, repo in found)) for name, found in places.items()
                if len({where for where, _ in found}) > 1}
    assert repeated <= DISTINCT, sorted(repeated - DISTINCT)


def test_the_default_figures_leave_out_possible_findings_as_gpulint_check_does():
    fresh_eval = load_bench_script("fresh_eval")
    found = [fresh_eval.Found("a.py", line, line, "GPL401", "m", confidence)
             for line, confidence in ((1, "certain"), (2, "likely"), (3, "possible"))]
    shown, certain, everything = fresh_eval.confidence_views(found)
    assert [f.line for f in shown] == [1, 2] and [f.line for f in certain] == [1] and everything == found


def test_labels_matched_by_statement_cover_a_finding_on_a_later_line_of_it():
    """A reader labels a multi-line statement at its first line (`print(` of a print whose f-string reads a device
    loss); gpulint reports the line of the expression it flags. The line-exact figures miss the label and leave the
    finding to a judge; the statement view matches them, and a label on the finding's own line still judges it."""
    fresh_eval = load_bench_script("fresh_eval")
    text = "x = 1\nprint(\n    f'{loss}',\n)\nfor i in range(\n        n):\n    y = 2\n"
    starts = fresh_eval.statement_starts(text)
    assert starts == {3: 2, 4: 2, 6: 5}

    def label(line, verdict, origin="reading"):
        return fresh_eval.FreshLabel(fresh_eval.Label("o/r", "c", "a.py", line, "GPL4", verdict, "", ""), origin)

    labels = [label(2, "pos"), label(5, "pos"), label(6, "neg", "finding")]
    found = [fresh_eval.Found("a.py", 3, 3, "GPL404", "m", "certain"), fresh_eval.Found("a.py", 6, 6, "GPL411", "m",
                                                                                          "certain")]
    exact, by_statement = (fresh_eval.Outcome(tallies={}) for _ in range(2))
    fresh_eval.score_repo(labels, found, "o/r", exact)
    fresh_eval.score_repo(labels, found, "o/r", by_statement, {"a.py": starts})
    line_exact, matched = exact.tallies["all"], by_statement.tallies["all"]
    assert (line_exact.hits, line_exact.real, line_exact.false, line_exact.unjudged) == (0, 0, 1, 1)
    # the print's finding is real by the statement's label; the loop header's, judged neg on its own line, stays false
    assert (matched.hits, matched.real, matched.false, matched.unjudged) == (2, 1, 1, 0)


def test_a_folder_named_like_a_module_is_no_file_to_count(tmp_path):
    """fastMRI ships a folder `unet_reproduce_20201111.py/`: counting the laid-out files skips it."""
    fresh_eval = load_bench_script("fresh_eval")
    (tmp_path / "unet_reproduce_20201111.py").mkdir()
    (tmp_path / "unet_reproduce_20201111.py" / "leaderboard.py").write_text("a = 1\nb = 2\n")
    (tmp_path / "train.py").write_text("c = 3\n")
    assert fresh_eval._line_counts(tmp_path) == (2, 3)
