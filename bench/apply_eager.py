"""Eager application of gpulint plans: the eager form's predicted vs measured peak, next to the compiled form's.

For each model and budget: trace both forms once (`planning.trace_forms`), plan both under the budget
(`planning.plan_forms`), then measure both (`planning.add_measurement`):
  - eager: the step run with `gpulint.apply` (CPU: the live-storage tracker), predicted by running the same step on
    fake tensors under the same plan (`eager_trace.run_step`);
  - compiled: the step compiled with `gpulint.planner.backend` and the plan's saved set.
Budgets are shares of today's eager peak. bench/planner_families.py runs the same comparison over 14 families; this
script keeps the models the README quoted before (example GPT, BERT, T5, ViT, and a step that reads values).

    python bench/apply_eager.py                 # example GPT + BERT, 3 budgets each (a few minutes on 2 cores)
    python bench/apply_eager.py --models gpt --shares 0.8 0.5
    python bench/apply_eager.py --models t5 vit branchy --shares 0.7   # branchy reads tensor values in forward
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

from gpulint.planner import planning
from gpulint.planner.step import UserStep


def example_gpt():
    import model as example

    config = example.GPTConfig(vocab_size=512, n_layer=4, n_head=4, d_model=128, seq_len=128, batch_size=4)
    return (lambda: example.build_model(config)), (lambda: example.make_batch(config))


def bert():
    import planner_models

    return planner_models.bert(n_layer=4, d=128, seq=128, batch=4, vocab=512)


def t5():
    import planner_models

    return planner_models.t5(n_layer=2, d=128, seq=64, batch=4, vocab=512)


def vit():
    import planner_models

    return planner_models.vit(n_layer=4, d=128, image=64, patch=8, batch=8)


def branchy():
    """A step that reads tensor values (`if x.sum() > 0`, `.item()`): the compiled form is refused, eager applies."""
    from tests.planner import models

    return models.branchy, models.branchy_batch


MODELS = {"gpt": example_gpt, "bert": bert, "t5": t5, "vit": vit, "branchy": branchy}
DEFAULT_MODELS = ["gpt", "bert"]


def mib(n: float | None) -> str:
    return f"{n / 2**20:8.2f}" if n else "       -"


def run_model(name: str, shares: list[float], optimizer: str) -> list[dict]:
    build, make_batch = MODELS[name]()
    forms = planning.trace_forms(build, make_batch, UserStep(), optimizer=optimizer, name=name)
    if forms.program is None:
        raise RuntimeError(f"the eager form could not be recorded: {forms.eager_error}")
    today = forms.program.peak_bytes
    print(f"\n{name}: {len(forms.traced.graph.nodes)} compiled ops, {len(forms.program.graph.nodes)} eager ops; "
          f"today's eager peak {mib(today)} MiB")
    print(f"{'share':>5} {'budget':>9} | {'eager pred':>10} {'eager meas':>10} {'err %':>6} {'layers':>6} | "
          f"{'compiled pred':>13} {'compiled meas':>13} | time eager/compiled (ms)")
    rows = []
    for share in shares:
        budget = int(today * share)
        planned = planning.plan_forms(forms, budget, "cpu")
        planning.add_measurement(planned)
        plan = planned.plan
        eager = plan.eager.measured
        if eager is None or eager.error:
            print(f"{share:5.2f} {mib(budget)} | eager not measured: {eager.error if eager else 'no eager form'}")
            continue
        error = (eager.predicted_peak_bytes - eager.peak_bytes) / eager.peak_bytes * 100
        compiled = plan.measured
        compiled_meas = compiled.peak_bytes if compiled is not None and not compiled.error else None
        compiled_time = f"{compiled.step_time_s * 1e3:.1f}" if compiled_meas else "refused"
        print(f"{share:5.2f} {mib(budget)} | {mib(eager.predicted_peak_bytes):>10} {mib(eager.peak_bytes):>10} "
              f"{error:6.2f} {len(plan.eager.layers):6d} | {mib(plan.planned.peak_bytes):>13} "
              f"{mib(compiled_meas):>13} | "
              f"{eager.step_time_s * 1e3:.1f}/{compiled_time}")
        rows.append({"model": name, "share": share, "budget": budget, "eager_predicted": eager.predicted_peak_bytes,
                     "eager_measured": eager.peak_bytes, "error_pct": error,
                     "compiled_predicted": plan.planned.peak_bytes,
                     "compiled_measured": compiled_meas})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=DEFAULT_MODELS, choices=list(MODELS))
    parser.add_argument("--shares", nargs="+", type=float, default=[0.8, 0.6, 0.45])
    parser.add_argument("--optimizer", default="adamw")
    args = parser.parse_args()
    rows = []
    for name in args.models:
        try:
            rows += run_model(name, args.shares, args.optimizer)
        except Exception as exc:  # noqa: BLE001 -- a model the planner cannot handle: say so, measure the others
            print(f"\n{name}: not measured: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    if not rows:
        sys.exit("no model could be measured")
    errors = [abs(r["error_pct"]) for r in rows]
    print(f"\neager peak prediction: max |error| {max(errors):.2f}%, median {statistics.median(errors):.2f}% "
          f"over {len(rows)} points (target: within 2% on CPU)")


if __name__ == "__main__":
    main()
