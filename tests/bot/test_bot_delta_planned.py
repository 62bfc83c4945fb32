"""Two versions of a small model planned for real (base: 2 layers; head: one more), then compared by the bot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from gpulint.cli import main

MODELS = Path(__file__).parents[1] / "planner" / "models.py"
BUDGET = "700KB"  # the 2-layer step peaks at 540 kB today; the 3-layer one at 703 kB whatever is recomputed


def _plan(tmp_path: Path, name: str, model: str, batch: str, fits: bool = True) -> Path:
    config = tmp_path / f"{name}.yaml"
    config.write_text(f"plan:\n  model: {MODELS}:{model}\n  batch: {MODELS}:{batch}\n  hardware: cpu\n")
    out = tmp_path / name
    assert main(["plan", str(config), "--budget", BUDGET, "--format", "json", "--out", str(out)]) == (0 if fits else 1)
    return out / "plan.json"


def test_a_pr_adding_a_layer(tmp_path, capsys):
    base = _plan(tmp_path, "base", "tiny_gpt", "tiny_batch")
    head = _plan(tmp_path, "head", "tiny_gpt_deeper", "tiny_batch_deeper", fits=False)  # gpulint plan exits 1
    capsys.readouterr()
    out = tmp_path / "delta.json"
    assert main(["report", "--plan", str(head), "--base-plan", str(base), "--format", "delta",
                 "--output", str(out)]) == 0
    delta = json.loads(out.read_text())
    b, h = json.loads(base.read_text()), json.loads(head.read_text())

    # The delta is the difference of the two plans.
    assert delta["base"]["peak_bytes"] == b["baseline"]["peak_bytes"]
    assert delta["change"]["peak_bytes"] == h["baseline"]["peak_bytes"] - b["baseline"]["peak_bytes"] > 0
    assert delta["change"]["planned_peak_bytes"] == h["planned"]["peak_bytes"] - b["planned"]["peak_bytes"]
    assert delta["change"]["step_time_s"] == pytest.approx(h["baseline"]["step_time_s"] - b["baseline"]["step_time_s"])
    total = sum(d["bytes"] for d in h["decisions"]) - sum(d["bytes"] for d in b["decisions"])
    assert sum(a["change_bytes"] for a in delta["activations"]) == total > 0
    assert delta["unchanged_activations"] + sum(a["status"] != "new" for a in delta["activations"]) == len(
        b["decisions"])

    # The biggest contributor is the added layer's activations.
    assert delta["contributors"][0]["layer"] == "h.2"
    assert delta["contributors"][0]["activations"].get("new", 0) > 0
    assert delta["activations"][0]["module"].startswith("h.2") and delta["activations"][0]["status"] == "new"

    # The head passes the budget the base fitted: the gate fails, whatever the threshold.
    assert b["feasible"] and not h["feasible"]
    assert delta["change"]["budget_lost"]
    assert delta["gate"]["conclusion"] == "failure" and "over the 700.00 kB budget; the base fitted" in \
        delta["gate"]["reason"]
    assert main(["report", "--plan", str(head), "--base-plan", str(base), "--format", "delta",
                 "--memory-threshold", "1000%"]) == 0
    assert json.loads(capsys.readouterr().out)["gate"]["conclusion"] == "failure"
