"""verdict.py: one statement of which form holds the budget, never a recommendation of a form that does not fit."""

from __future__ import annotations

from gpulint.verdict import Form, Verdict

MiB = 2**20


def _verdict(eager_peak, compiled_peak, budget=200 * MiB, eager_error=None):
    forms = [Form("eager", "gpulint.apply", None if eager_error else eager_peak * MiB,
                  fits=eager_error is None and budget is not None and eager_peak * MiB <= budget, error=eager_error),
             Form("compiled", "gpulint.planner.compile", compiled_peak * MiB,
                  fits=budget is not None and compiled_peak * MiB <= budget)]
    return Verdict(budget, "MiB", forms, lowest_peak_bytes=compiled_peak * MiB)


def test_both_fit_the_eager_form_is_recommended():
    v = _verdict(199, 198)
    assert v.met and v.recommended.name == "eager"
    assert v.statement() == ("Budget 200.00 MiB: both forms fit: eager (`gpulint.apply`) at 199.00 MiB, "
                             "compiled (`gpulint.planner.compile`) at 198.00 MiB.")
    assert v.advice() == "Apply the eager form: `gpulint.apply(model, plan)`."


def test_only_the_compiled_form_fits_and_only_it_is_recommended():
    v = _verdict(230, 190)
    assert v.met and v.recommended.name == "compiled"
    assert v.statement().startswith("Budget 200.00 MiB: eager (`gpulint.apply`) does NOT fit: it peaks at 230.00 MiB; "
                                    "compiled (`gpulint.planner.compile`) fits at 190.00 MiB")
    assert "eager" not in v.advice()


def test_no_form_fits_nothing_is_recommended_and_the_budget_is_not_met():
    v = _verdict(230, 210)
    assert not v.met and v.recommended is None
    assert v.statement().startswith("Budget 200.00 MiB is NOT met: no form fits")
    assert "lowest peak recomputation reaches is 210.00 MiB" in v.statement()
    assert "compile" not in v.advice() and "apply" not in v.advice().replace("to apply", "")


def test_a_form_that_could_not_be_planned_is_named_and_never_recommended():
    v = _verdict(0, 190, eager_error="boom")
    assert v.recommended.name == "compiled"
    assert "eager (`gpulint.apply`) could not be planned" in v.statement()


def test_no_budget_is_always_met():
    v = _verdict(150, 140, budget=None)
    assert v.met and v.statement().startswith("No budget: each form recomputes down to its lowest peak")
    assert v.recommended.name == "eager"
