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
            # the CQL paper's code and a PyTorch reimplementation of it
            ("cql", frozenset({"BY571/CQL", "aviralkumar2907/CQL"})),
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
