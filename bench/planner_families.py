"""The planner on model families of different kinds, each planned at 0.8x, 0.6x and 0.45x of today's peak and
measured (`gpulint plan --measure`): one row per model and budget.

    python bench/planner_families.py                          # every family (about 15 minutes on 2 cores)
    python bench/planner_families.py --families unet mixtral  # some of them
    python bench/planner_families.py --out bench/results      # also write planner_families.csv there
    python bench/planner_families.py --calibrate              # times predicted by this machine's `gpulint calibrate`

Each family is traced once (both forms: the compiled step and the eager step), then, for each budget, planned and
measured for real on CPU (fp32, dropout on wherever the family has it). A row passes when:
  - plan, apply and measure all run (a form that cannot run says why, and the row fails);
  - where a form is said to fit, its measured peak holds the budget;
  - its predicted peak is within 1% of the measured one for the compiled form, 2% for the eager form;
  - the planned step's loss and every gradient equal the unplanned step's bitwise, over two steps (dropout on).
A family whose step reads tensor values (value-loop) has no single compiled graph: its compiled form is refused by
design (gpulint says to apply that plan in eager mode) and its row is judged on the eager form.

Step times: each row also prints predicted / measured step time for both forms. With --calibrate the machine is
first measured (`gpulint calibrate`, one thread, as the steps run) and the predictions use that profile; the summary
counts the predictions within 25% of the measured time. Steps run on one thread and are timed by the CPU time they
take (`time.process_time`, best of 3): on a shared machine, wall time also counts the time other processes held the
core, and swings by tens of percent.

Families (bench/planner_models.py PLAN_FAMILIES): decoder LLMs (GPT-NeoX, Mistral, Phi), a mixture of experts
(Mixtral), an encoder (DistilBERT), audio encoder-decoder (Whisper), two-tower (CLIP), convolutional with BatchNorm
(ResNet), state-space (Mamba), a U-Net with its own loss, two models that already checkpoint (non-reentrant and
reentrant), a value-dependent loop, and a user's own step function (two views through one encoder).
"""

from __future__ import annotations

import argparse
import copy
import csv
import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import planner_models

from gpulint.planner import eager_apply, planning
from gpulint.planner.backend import compile as compile_plan
from gpulint.planner.step import as_step

SHARES = (0.8, 0.6, 0.45)
COMPILED_TOLERANCE, EAGER_TOLERANCE = 0.01, 0.02


def mib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**20:.2f}"


def _on(device: str, family):
    """The family's model and batch on `device`."""
    import torch.utils._pytree as pytree

    torch.manual_seed(0)
    model = family.build().train().to(device)
    batch = pytree.tree_map_only(torch.Tensor, lambda t: t.to(device), family.batch())
    return model, batch


def compiled_equal(family, plan, device: str = "cpu") -> bool:
    """Two compiled steps under the plan give the unplanned compiled step's losses and gradients, bitwise."""
    step = as_step(family.step)
    planned, batch = _on(device, family)
    reference = copy.deepcopy(planned)
    steps = [compile_plan(reference, None, step), compile_plan(planned, plan, step)]
    for seed in (1, 2):
        results = []
        for model, run in zip((reference, planned), steps):
            model.zero_grad(set_to_none=True)
            torch.manual_seed(seed)
            loss = run(batch)
            loss.backward()
            results.append((loss.detach(), [p.grad for p in model.parameters()]))
        if not _same(*results):
            return False
    return True


def eager_equal(family, plan, device: str = "cpu") -> bool:
    """Two eager steps under gpulint.apply give the unplanned eager step's losses and gradients, bitwise (the first
    step checks each layer, the second runs the plan)."""
    step = as_step(family.step)
    reference, batch = _on(device, family)
    planned = copy.deepcopy(reference)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager_apply.apply(planned, plan)
    for seed in (1, 2):
        results = []
        for model in (reference, planned):
            model.zero_grad(set_to_none=True)
            torch.manual_seed(seed)
            loss = step(model, batch)
            loss.backward()
            results.append((loss.detach(), [p.grad for p in model.parameters()]))
        if not _same(*results):
            return False
    return True


def _same(a, b) -> bool:
    (loss_a, grads_a), (loss_b, grads_b) = a, b
    if not torch.equal(loss_a, loss_b):
        return False
    return all((x is None and y is None) or (x is not None and y is not None and torch.equal(x, y))
               for x, y in zip(grads_a, grads_b))


def _error(predicted: int, measured: int) -> float:
    return (predicted - measured) / measured if measured else float("inf")


def judge_form(measured, predicted: int, fits: bool, budget: int, tolerance: float, equal: bool) -> tuple[bool, str]:
    if measured is None or measured.error:
        return False, f"could not run ({measured.error if measured else 'not measured'})"
    problems = []
    if fits and measured.peak_bytes > budget:
        problems.append("over budget")
    if abs(_error(predicted, measured.peak_bytes)) > tolerance:
        problems.append("prediction off")
    if not equal:
        problems.append("not bitwise equal")
    return not problems, ", ".join(problems) or "ok"


def _times(form: str, predicted: float, measured) -> dict:
    """Predicted and measured step time of a form, and their ratio."""
    if measured is None or measured.error or not measured.step_time_s:
        return {f"{form}_time_ms": "-", f"{form}_time_ratio": "-"}
    return {f"{form}_time_ms": f"{predicted * 1e3:.1f}/{measured.step_time_s * 1e3:.1f}",
            f"{form}_time_ratio": f"{predicted / measured.step_time_s:.2f}"}


def run_family(name: str, shares: tuple[float, ...], hardware: str) -> list[dict]:
    family = planner_models.PLAN_FAMILIES[name]()
    start = time.perf_counter()
    forms = planning.trace_forms(family.build, family.batch, family.step, optimizer="adamw", name=name)
    trace_seconds = time.perf_counter() - start
    today = forms.program.peak_bytes if forms.program is not None else None
    print(f"\n{name} ({family.kind}): traced in {trace_seconds:.1f} s; today's peak {mib(today)} MiB", flush=True)
    if today is None:
        print(f"  the eager step could not be run: {forms.eager_error}")
        return [{"family": name, "share": share, "passed": False, "note": forms.eager_error} for share in shares]
    rows = []
    for share in shares:
        budget = int(share * today)
        start = time.perf_counter()
        planned = planning.plan_forms(forms, budget, hardware)
        plan_seconds = time.perf_counter() - start
        planning.add_measurement(planned, clock=time.process_time)
        plan = planned.plan
        compiled_refused = bool(plan.data_dependent)
        row = {"family": name, "kind": family.kind, "share": share, "budget_mib": mib(budget),
               "plan_s": round(trace_seconds + plan_seconds, 1)}
        row.update(_times("compiled", plan.planned.step_time_s, plan.measured))
        row.update(_times("eager", plan.eager.step_time_s, plan.eager.measured))
        if compiled_refused:
            c_ok, c_note = True, "refused by design: the step reads tensor values"
            row.update(compiled_fits="-", compiled_predicted_mib="-", compiled_measured_mib="-", compiled_error="-")
        else:
            measured = plan.measured
            equal = compiled_equal(family, plan)
            c_ok, c_note = judge_form(measured, measured.predicted_peak_bytes if measured else 0, plan.feasible,
                                      budget, COMPILED_TOLERANCE, equal)
            row.update(compiled_fits=plan.feasible, compiled_predicted_mib=mib(plan.planned.peak_bytes),
                       compiled_measured_mib=mib(measured.peak_bytes if measured and not measured.error else None),
                       compiled_error=f"{_error(measured.predicted_peak_bytes, measured.peak_bytes):+.2%}"
                       if measured and not measured.error else "-")
        eager = plan.eager
        e_equal = eager_equal(family, plan) if not eager.error else False
        e_ok, e_note = judge_form(eager.measured, eager.peak_bytes, eager.fits_budget, budget, EAGER_TOLERANCE,
                                  e_equal)
        measured = eager.measured
        row.update(eager_fits=eager.fits_budget, eager_predicted_mib=mib(eager.peak_bytes),
                   eager_measured_mib=mib(measured.peak_bytes if measured and not measured.error else None),
                   eager_error=f"{_error(eager.peak_bytes, measured.peak_bytes):+.2%}"
                   if measured and not measured.error else "-",
                   eager_layers=len(eager.layers), left_out=len(eager.unapplied),
                   passed=c_ok and e_ok, note=f"compiled: {c_note}; eager: {e_note}")
        rows.append(row)
        print(f"  {share:4.2f}x = {mib(budget):>7} MiB | compiled {'fits' if row['compiled_fits'] is True else 'over' if row['compiled_fits'] is False else '  - '}"
              f" pred {row['compiled_predicted_mib']:>7} meas {row['compiled_measured_mib']:>7} ({row['compiled_error']:>7})"
              f" | eager {'fits' if eager.fits_budget else 'over'} pred {row['eager_predicted_mib']:>7}"
              f" meas {row['eager_measured_mib']:>7} ({row['eager_error']:>7}) {row['eager_layers']} layers"
              f" | time x{row['compiled_time_ratio']}/x{row['eager_time_ratio']}"
              f" | {row['plan_s']:5.1f} s | {'PASS' if row['passed'] else 'FAIL'}: {row['note']}", flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=list(planner_models.PLAN_FAMILIES),
                        choices=list(planner_models.PLAN_FAMILIES))
    parser.add_argument("--shares", nargs="+", type=float, default=list(SHARES))
    parser.add_argument("--hardware", default="cpu", help="hardware profile (default: cpu; see gpulint calibrate)")
    parser.add_argument("--calibrate", action="store_true",
                        help="measure this machine first (gpulint calibrate) and predict step times with that profile")
    parser.add_argument("--out", help="folder for planner_families.csv")
    args = parser.parse_args()
    torch.set_num_threads(1)  # one thread: timings and measurements do not depend on the other engineers' load
    warnings.filterwarnings("ignore", category=UserWarning)
    if args.calibrate:
        from gpulint.planner.calibrate import calibrate, to_yaml

        profile = calibrate("cpu")
        args.hardware = str(Path(args.out or "/tmp") / "planner_families_hardware.yaml")
        Path(args.hardware).parent.mkdir(parents=True, exist_ok=True)
        Path(args.hardware).write_text(to_yaml(profile, "bench/planner_families.py --calibrate"))
        print(f"calibrated: {args.hardware}")
    rows = []
    for name in args.families:
        try:
            rows += run_family(name, tuple(args.shares), args.hardware)
        except Exception as exc:  # noqa: BLE001 -- a family the planner cannot handle: a failed row, the rest go on
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            print(f"  FAIL: {type(exc).__name__}: {text}", flush=True)
            rows += [{"family": name, "share": share, "passed": False, "note": f"{type(exc).__name__}: {text}"}
                     for share in args.shares]
    passed = sum(1 for row in rows if row.get("passed"))
    print(f"\n{passed} of {len(rows)} rows pass ({len(args.families)} families x {len(args.shares)} budgets)")
    ratios = [float(row[key]) for row in rows for key in ("compiled_time_ratio", "eager_time_ratio")
              if row.get(key, "-") != "-"]
    if ratios:
        within = sum(1 for r in ratios if 0.75 <= r <= 1.25)
        print(f"step time predicted within 25% of measured: {within} of {len(ratios)} (profile {args.hardware}; "
              f"predicted / measured from {min(ratios):.2f} to {max(ratios):.2f})")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        fields = sorted({key for row in rows for key in row}, key=lambda k: list(rows[0]).index(k)
                        if k in rows[0] else 99)
        with (out / "planner_families.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
