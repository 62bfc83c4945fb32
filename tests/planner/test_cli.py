"""`gpulint plan` end to end: outputs, --out, --sweep, --measure, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

from gpulint.cli import main

MODELS = Path(__file__).with_name("models.py")


def _config(tmp_path, **fields):
    plan = {"model": f"{MODELS}:tiny_gpt", "batch": f"{MODELS}:tiny_batch", "hardware": "cpu", **fields}
    body = "plan:\n" + "".join(f"  {k}: {v}\n" for k, v in plan.items() if v is not None)
    path = tmp_path / "gpulint.yaml"
    path.write_text(body)
    return str(path)


def test_json_plan_follows_the_schema(tmp_path, capsys):
    assert main(["plan", _config(tmp_path, budget="520KB"), "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["schema"] == "gpulint.plan/1"
    assert {"model", "hardware", "dtype", "budget_bytes", "baseline", "planned", "feasible", "decisions",
            "excluded", "timeline"} <= plan.keys()
    assert plan["budget_bytes"] == 520_000 and plan["feasible"]
    assert plan["planned"]["peak_bytes"] <= 520_000 < plan["baseline"]["peak_bytes"]
    d = next(d for d in plan["decisions"] if d["action"] == "recompute")
    assert {"id", "op", "bytes", "action", "module", "call_index", "source"} <= d.keys()
    assert d["source"]["path"].endswith("model.py") and d["source"]["line"] > 0


def test_text_sweep_and_out(tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["plan", _config(tmp_path), "--sweep", "4", "--out", str(out), "--format", "md"]) == 0
    text = capsys.readouterr().out
    assert "| today |" in text and "| compiled (`gpulint.planner.compile`) |" in text
    plan = json.loads((out / "plan.json").read_text())
    assert len(plan["sweep"]) == 4
    peaks = [row["peak_bytes"] for row in plan["sweep"]]
    assert peaks == sorted(peaks) and all(r["feasible"] for r in plan["sweep"])
    assert (out / "plan.md").exists() and (out / "frontier.svg").read_text().startswith("<svg")
    assert not list(out.glob(".*tmp"))


@pytest.mark.slow
def test_measure_reports_measured_next_to_predicted(tmp_path, capsys):
    assert main(["plan", _config(tmp_path, budget="520KB"), "--measure", "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    m = plan["measured"]
    assert m["device"] == "cpu" and m["loss"] == pytest.approx(m["baseline_loss"], rel=1e-6)
    assert abs(m["peak_bytes"] - m["predicted_peak_bytes"]) / m["peak_bytes"] < 0.01
    assert m["peak_bytes"] <= 520_000


def _error(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("gpulint: error:")]
    assert len(errors) == 1 and "Traceback" not in err  # progress lines may precede the one error line
    return errors[0]


def test_bad_inputs_one_line_exit_2(tmp_path, capsys):
    assert "unknown hardware" in _error(capsys, ["plan", _config(tmp_path, hardware="b300")])
    assert "--budget" in _error(capsys, ["plan", _config(tmp_path), "--budget", "0.5"])
    assert "below the floor" in _error(capsys, ["plan", _config(tmp_path), "--budget", "10KB"])
    assert "does not import" in _error(capsys, ["plan", _config(tmp_path, model="missing_mod_xyz:build")])
    assert "malformed YAML" in _error(capsys, ["plan", _write(tmp_path, "plan: {model: [")])
    line = _error(capsys, ["plan", _config(tmp_path, model=f"{MODELS}:masked_rows", batch=f"{MODELS}:shifting_batch")])
    assert "data-dependent" in line and "models.py:" in line  # a mask whose shapes change between runs
    line = _error(capsys, ["plan", _config(tmp_path, model=f"{MODELS}:mlp", batch=f"{MODELS}:mlp_batch",
                                          loss=f"{MODELS}:vector_loss")])
    assert "plan.loss" in line and "scalar" in line


def _write(tmp_path, text):
    path = tmp_path / "broken.yaml"
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_exit_1_when_no_form_meets_the_budget_and_the_verdict_comes_first(tmp_path, capsys):
    # tiny_gpt: floor 481.7 kB, lowest compiled peak 499.7 kB, lowest eager peak 524.0 kB.
    assert main(["plan", _config(tmp_path), "--budget", "490KB"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("Budget 490.00 kB is NOT met: no form fits: eager (gpulint.apply) peaks at ")
    assert lines[2].startswith("No form to apply")
    assert sum("fit" in line for line in lines) == 1  # said once, at the top
    # The compiled form fits, the eager one does not: exit 0, and only the compiled form is recommended.
    assert main(["plan", _config(tmp_path, budget="510KB")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("Budget 510.00 kB: eager (gpulint.apply) does NOT fit: it peaks at ")
    assert "compiled (gpulint.planner.compile) fits at" in lines[1]
    assert lines[2].startswith("Apply the compiled form: gpulint.planner.compile(model, plan)")


def test_the_budget_and_peaks_are_shown_in_the_unit_written_and_no_progress_off_a_terminal(tmp_path, capsys):
    assert main(["plan", _config(tmp_path), "--budget", "0.5M", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["budget_bytes"] == 500_000 and json.loads(out)["budget_unit"] == "MB"
    assert err == ""  # stderr is no terminal here: no progress at all
    assert main(["plan", _config(tmp_path, budget="0.5Mi"), "--format", "md", "-q"]) == 0
    out, err = capsys.readouterr()
    assert "Budget 0.500 MiB" in out and "| today | 0.515 MiB |" in out and err == ""  # today: 539,532 B


@pytest.mark.skipif(not hasattr(__import__("os"), "openpty"), reason="pseudo-terminals")
def test_phases_with_their_totals_on_a_real_pseudo_terminal(tmp_path):
    import os
    import sys

    from tests.terminal import stderr_on_terminal

    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "gpulint", "plan", _config(tmp_path, budget="520KB"), "--sweep", "3"]
    code, seen = stderr_on_terminal(command, 120, env={**os.environ, "PYTHONPATH": str(root)})
    assert code == 0
    text = seen.decode()
    for phase in ("[1/5] tracing the compiled form", "[2/5] recording the eager step",
                  "[3/5] planning the compiled form", "[4/5] planning the eager form", "[5/5] sweeping 3 budgets"):
        assert phase in text, (phase, text)
    assert text.endswith("\r") and "\n" not in text.strip(" \r")  # one line, redrawn, erased at the end
