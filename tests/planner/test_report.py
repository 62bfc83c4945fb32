"""The plan report shows the eager path (`gpulint.apply`) next to the compiled prediction, and value reads."""

from __future__ import annotations

from gpulint.planner import planfile
from gpulint.planner.report import render_markdown, render_text

MiB = 2**20


def _plan(**extra) -> planfile.Plan:
    plan = {
        "schema": "gpulint.plan/1", "model": "m", "hardware": "cpu", "dtype": "fp32", "budget_bytes": 100 * MiB,
        "feasible": True, "floor_bytes": 10 * MiB, "lowest_peak_bytes": 50 * MiB,
        "baseline": {"peak_bytes": 120 * MiB, "step_time_s": 0.010},
        "planned": {"peak_bytes": 90 * MiB, "step_time_s": 0.012, "recompute_time_s": 0.002},
        "decisions": [{"id": "relu", "op": "aten.relu.default", "bytes": 30 * MiB, "action": "recompute",
                       "module": "layers.0", "call_index": 0, "source": {"path": "model.py", "line": 7}}],
        "excluded": [],
    }
    plan.update(extra)
    return planfile.from_dict(plan, complete=True)


EAGER = {"peak_bytes": 95 * MiB, "step_time_s": 0.013, "recompute_time_s": 0.003, "fits_budget": True,
         "layers": ["h.0", "h.1", "h.2", "h.3"]}


def _row(text: str, label: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith(label))


def test_text_shows_the_eager_step_next_to_the_compiled_one():
    text = render_text(_plan(eager=dict(EAGER)))
    planned, eager = _row(text, "compiled"), _row(text, "eager")
    assert "90.00 MiB" in planned and "12.00 ms" in planned
    assert "95.00 MiB" in eager and "13.00 ms" in eager and "3.00 ms" in eager
    assert "4 layers checkpointed: h.0, h.1, h.2 and 1 more" in eager
    assert "does NOT fit" not in text


def test_text_shows_the_measured_eager_step_and_the_eager_plan_notes():
    figures = {**EAGER, "fits_budget": False, "unapplied": ["aten.mm.default call 0 in module 'h.0.fc' (gone)"],
               "measured": {"peak_bytes": 96 * MiB, "step_time_s": 0.02, "device": "cpu",
                            "predicted_peak_bytes": 95 * MiB}}
    text = render_text(_plan(eager=figures))
    lines = text.splitlines()
    measured = lines[lines.index(_row(text, "eager")) + 1]
    assert measured.strip().startswith("measured") and "96.00 MiB" in measured and "predicted there 95.00 MiB" in measured
    assert text.splitlines()[1] == ("Budget 100.00 MiB: eager (gpulint.apply) does NOT fit: it peaks at 95.00 MiB; "
                                    "compiled (gpulint.planner.compile) fits at 90.00 MiB.")
    assert text.splitlines()[2] == "Apply the compiled form: gpulint.planner.compile(model, plan) (or torch.compile with gpulint_backend)."
    assert "eager mode leaves out 1 decision(s), e.g. aten.mm.default call 0 in module 'h.0.fc' (gone)" in text


def test_a_form_that_could_not_run_says_why():
    text = render_text(_plan(eager={"peak_bytes": 0, "step_time_s": 0.0, "error": "boom at model.py:3"},
                             measured={"peak_bytes": 0, "step_time_s": 0.0, "device": "", "error": "OOM"}))
    assert "could not be planned: boom at model.py:3" in _row(text, "eager")
    assert "could not run: OOM" in _row(text, "measured")


def test_a_plan_without_eager_figures_has_no_eager_row():
    assert "eager" not in render_text(_plan())


def test_value_reads_are_listed_with_their_lines():
    reads = [{"op": "Tensor.item()", "path": "model.py", "line": 12}]
    text = render_text(_plan(eager=dict(EAGER), data_dependent=reads))
    assert "model.py:12  Tensor.item()" in text and "eager mode" in text
    markdown = render_markdown(_plan(eager=dict(EAGER), data_dependent=reads))
    assert "| eager (`gpulint.apply`) | 95.00 MiB | 13.00 ms | 3.00 ms |" in markdown
    assert "`model.py:12` (Tensor.item())" in markdown
