"""Plan, apply and measure on families of bench/planner_families.py, as `gpulint plan --measure` does.

Tested here: the hand-written families (a U-Net with its own loss, two models that already checkpoint, a
value-dependent loop, a two-view step function) and, slow, ResNet (BatchNorm).
Held out of the tests, measured only by the benchmark: GPT-NeoX, Mistral, Phi, DistilBERT, Whisper, CLIP, Mamba.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import planner_families
import planner_models

from gpulint.planner import planning

HELD_OUT = {"neox", "mistral", "phi", "distilbert", "whisper", "clip", "mamba"}


def plan_and_measure(name: str, share: float = 0.6):
    family = planner_models.PLAN_FAMILIES[name]()
    forms = planning.trace_forms(family.build, family.batch, family.step, optimizer="adamw", name=name)
    budget = int(share * forms.program.peak_bytes)
    planned = planning.plan_forms(forms, budget, "cpu")
    planning.add_measurement(planned)
    return family, forms, planned, budget


def assert_row_holds(name: str) -> None:
    """What bench/planner_families.py requires of each row."""
    family, forms, planned, budget = plan_and_measure(name)
    plan = planned.plan
    today = forms.program.peak_bytes
    assert plan.baseline.peak_bytes == today  # today is the user's eager step, their own checkpointing included
    assert plan.eager.peak_bytes <= today  # no plan is worse than today
    eager = plan.eager.measured  # within the 2% (equal to the byte on every family but ResNet: -0.07%)
    assert eager is not None and not eager.error
    assert abs(plan.eager.peak_bytes - eager.peak_bytes) <= planner_families.EAGER_TOLERANCE * eager.peak_bytes
    assert eager.baseline_peak_bytes == today
    assert not plan.eager.fits_budget or eager.peak_bytes <= budget
    assert planner_families.eager_equal(family, plan)
    if plan.data_dependent:  # the step reads values: one static compiled graph cannot run it, and says so
        assert "tensor values" in plan.measured.error
        return
    compiled = plan.measured
    assert not compiled.error and compiled.peak_bytes == compiled.predicted_peak_bytes == plan.planned.peak_bytes
    assert not plan.feasible or compiled.peak_bytes <= budget
    assert planner_families.compiled_equal(family, plan)


@pytest.mark.parametrize("name", ["checkpointed", "checkpointed-reentrant", "value-loop", "siamese"])
def test_small_families(name):
    assert_row_holds(name)


@pytest.mark.slow
# Mixtral is measured by the benchmark only (a fresh process per run): within one test process its real CPU step
# peaks 30% higher on the first run than on later ones, so the plan's figures cannot be checked to 2% here.
@pytest.mark.parametrize("name", ["unet", "resnet"])
def test_heavier_families(name):
    assert_row_holds(name)


def test_the_held_out_families_are_families_of_the_benchmark():
    assert HELD_OUT <= set(planner_models.PLAN_FAMILIES)
    assert len(planner_models.PLAN_FAMILIES) >= 12


def test_a_model_that_already_checkpoints_is_planned_on_top_of_it():
    """Today is what the user's own checkpointing gives (not the step without it), and the compiled form, which
    runs their checkpoint regions plainly, plans against that."""
    _family, forms, planned, _budget = plan_and_measure("checkpointed", share=1.0)
    unchecked = forms.traced.graph
    from gpulint.planner.simulate import simulate

    assert planned.plan.baseline.peak_bytes < simulate(unchecked, unchecked.default_saved()).peak
    assert planned.plan.planned.peak_bytes <= planned.plan.baseline.peak_bytes
