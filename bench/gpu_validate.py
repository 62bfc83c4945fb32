"""Check the planner's predictions on a real CUDA GPU (prepared for a GPU machine; run it there).

    python bench/gpu_validate.py [--out bench/results]         # on a machine with CUDA
    python bench/gpu_validate.py --device cpu --small           # smoke test of this script on CPU

First the GPU is calibrated (`gpulint calibrate --device cuda`: matmul, batched-matmul and convolution FLOP/s,
memory bandwidth, element rates, per-op overheads) into a profile. Then, for GPT-2 (12 layers, d=768, seq 1024,
batch 8) and a Llama-shaped model (8 layers, d=2048, seq 2048, batch 2), bf16, AdamW, dropout on: both forms of the
step are traced as the GPU runs them (fake CUDA tensors: its kernels), planned at today's peak and at 75% and 50%
of the way from the floor to it, and run for real (`--measure`), comparing
  predicted peak  vs torch.cuda.max_memory_allocated   (target within 5%: cuBLAS and attention workspaces come from
                                                        the same allocator and the model does not count them)
  predicted time  vs measured forward+backward time     (target within 25%, as on CPU with a calibrated profile)
for the compiled form (gpulint.planner.compile) and the eager form (gpulint.apply), and the losses and gradients of
both against the unplanned step (bitwise, dropout on). Before the models, the launch profile is checked on the
GPU (bench/launch_overhead.py with the calibrated profile): a small MLP at batch 1 with AdamW (capturable), its
predicted eager step against the measured one, and the same step captured as a CUDA graph and replayed against
the predicted graph step; GPL101's price against a per-tensor norm loop less its foreach form (target within a
factor of 1.5 each). Results print and, with --out, go to <out>/gpu_validate_<device>.txt (commit that file after
a GPU run).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import launch_overhead
import planner_families
import planner_models

from gpulint.planner import planning
from gpulint.planner.calibrate import calibrate, to_yaml
from gpulint.planner.hardware import load_hardware

MEMORY_TOLERANCE, TIME_TOLERANCE = 0.05, 0.25


def _family(build, make) -> planner_models.Family:
    return planner_models.Family(build, make, "transformers")


def _cases(small: bool) -> dict[str, planner_models.Family]:
    if small:
        return {"gpt2": _family(*planner_models.gpt2()), "llama": _family(*planner_models.llama())}
    return {
        "gpt2": _family(*planner_models.gpt2(n_layer=12, d=768, seq=1024, batch=8, vocab=50257)),
        "llama": _family(*planner_models.llama(n_layer=8, d=2048, seq=2048, batch=2, vocab=32000, ffn=5632)),
    }


def _row(name: str, label: str, form: str, predicted: int, predicted_time: float, measured,
         equal: bool) -> tuple[str, bool]:
    if measured is None or measured.error:
        return f"{name:6} {label:6} {form:8} could not run: {measured.error if measured else 'not measured'}", False
    memory = (predicted - measured.peak_bytes) / measured.peak_bytes
    time_error = (predicted_time - measured.step_time_s) / measured.step_time_s
    passed = abs(memory) <= MEMORY_TOLERANCE and abs(time_error) <= TIME_TOLERANCE and equal
    return (f"{name:6} {label:6} {form:8} predicted {predicted / 2**30:7.3f} GiB / {predicted_time * 1e3:8.2f} ms   "
            f"measured {measured.peak_bytes / 2**30:7.3f} GiB / {measured.step_time_s * 1e3:8.2f} ms   "
            f"memory {memory:+.2%}  time {time_error:+.1%}  bitwise {'yes' if equal else 'NO'}  "
            f"{'PASS' if passed else 'FAIL'}"), passed


def _bitwise(check, family, plan, device: str) -> bool:
    """A bitwise check, on CUDA with deterministic kernels (index_add, embedding backward and scatter use atomics
    otherwise, which would differ between two unplanned runs as well)."""
    import torch

    if not device.startswith("cuda"):
        return check(family, plan, device)
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        return check(family, plan, device)
    finally:
        torch.use_deterministic_algorithms(before)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--out", help="folder for gpu_validate_<device>.txt and the calibrated profile")
    args = parser.parse_args()
    import torch

    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print("gpu_validate: no CUDA device here; run this on a GPU machine (or --device cpu --small)")
        return 2
    out = Path(args.out or "/tmp")
    out.mkdir(parents=True, exist_ok=True)
    device_name = torch.cuda.get_device_name() if cuda else "cpu"
    profile = calibrate("cuda" if cuda else "cpu", quick=args.small)
    hardware = out / f"gpu_validate_{'cuda' if cuda else 'cpu'}_hardware.yaml"
    hardware.write_text(to_yaml(profile, "bench/gpu_validate.py"))
    dtype = "bf16"
    lines = [f"device {device_name}, calibrated profile {hardware}, {dtype}, AdamW"]
    print(lines[0], flush=True)
    launch_lines, ok = launch_overhead.report(load_hardware(str(hardware)), "cuda" if cuda else "cpu")
    lines += launch_lines
    print("\n".join(launch_lines), flush=True)
    for name, family in _cases(args.small).items():
        forms = planning.trace_forms(family.build, family.batch, family.step, optimizer="adamw", dtype=dtype,
                                     name=name, device="cuda" if cuda else "cpu")
        if forms.program is None:
            lines.append(f"{name}: the eager step could not be recorded: {forms.eager_error}")
            ok = False
            continue
        today = forms.program.peak_bytes
        floor = planning.floor_bytes(forms.traced.graph, profile["allocation_rounding"])
        for label, budget in (("today", today), ("75%", int(floor + 0.75 * (today - floor))),
                              ("50%", int(floor + 0.5 * (today - floor)))):
            planned = planning.plan_forms(forms, budget, str(hardware))
            planning.add_measurement(planned)
            plan = planned.plan
            for form, measured, step_time_s, equal in (
                ("compiled", plan.measured, plan.planned.step_time_s, planner_families.compiled_equal),
                ("eager", plan.eager.measured, plan.eager.step_time_s, planner_families.eager_equal),
            ):
                text, passed = _row(name, label, form, measured.predicted_peak_bytes if measured else 0,
                                    step_time_s, measured, _bitwise(equal, family, plan, args.device))
                lines.append(text)
                ok &= passed
                print(text, flush=True)
    if args.out:
        (out / f"gpu_validate_{'cuda' if cuda else 'cpu'}.txt").write_text("\n".join(lines) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
