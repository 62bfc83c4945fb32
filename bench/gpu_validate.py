"""Check the planner's predictions on a real CUDA GPU (prepared for a GPU machine; run it there).

    python bench/gpu_validate.py [--out bench/results]         # on a machine with CUDA
    python bench/gpu_validate.py --device cpu --small           # smoke test of this script on CPU

For GPT-2 (12 layers, d=768, seq 1024, batch 8) and a Llama-shaped model (8 layers, d=2048, seq 2048,
batch 2), bf16, AdamW: trace with fake CUDA tensors, plan today's step and budgets at 75% and 50% of the way
from the lowest reachable peak to today's, run each for real and compare
  predicted peak  vs torch.cuda.max_memory_allocated   (target within 5%)
  predicted time  vs measured forward+backward time     (target within 15%; FX graphs run op by op, no fusion)
The hardware profile is picked from the device name (H200, H100, A100, L4, T4). Results print and, with
--out, go to <out>/gpu_validate_<profile>.txt (commit that file after a GPU run).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import planner_models

from gpulint.planner.cost import node_times
from gpulint.planner.greedy import GreedyPlanner
from gpulint.planner.hardware import load_hardware
from gpulint.planner.measure import measure_step
from gpulint.planner.trace import trace_step

PROFILES = [("H200", "h200"), ("H100", "h100-sxm"), ("A100", "a100-80gb"), ("L4", "l4"), ("T4", "t4")]


def profile_for(device: str) -> str:
    import torch

    if device == "cpu":
        return "cpu"
    name = torch.cuda.get_device_name()
    return next((p for key, p in PROFILES if key in name), "h100-sxm")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--out", help="folder for gpu_validate_<profile>.txt")
    args = parser.parse_args()
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_validate: no CUDA device here; run this on a GPU machine (or --device cpu --small)")
        return 2
    hw = load_hardware(profile_for(args.device))
    dtype = "bf16"
    if args.small:
        cases = {"gpt2": planner_models.gpt2(), "llama": planner_models.llama()}
    else:
        cases = {
            "gpt2": planner_models.gpt2(n_layer=12, d=768, seq=1024, batch=8, vocab=50257),
            "llama": planner_models.llama(n_layer=8, d=2048, seq=2048, batch=2, vocab=32000, ffn=5632),
        }
    lines = [f"device {torch.cuda.get_device_name() if args.device != 'cpu' else 'cpu'}, profile {hw.name}, {dtype}"]
    ok = True
    for name, (build, make) in cases.items():
        traced = trace_step(build, make, optimizer="adamw", dtype=dtype, name=name, device=args.device)
        planner = GreedyPlanner(traced.graph, node_times(traced.graph, hw), hw.allocation_rounding)
        full = planner.run(None)
        lo, hi = full.lowest_peak, full.baseline.peak
        for label, budget in (("today", hi), ("75%", int(lo + 0.75 * (hi - lo))), ("50%", int(lo + 0.5 * (hi - lo)))):
            r = planner.for_budget(full, budget)
            names = {traced.graph.nodes[i].name for i in r.chosen.saved}
            m = measure_step(build, make, names, optimizer="adamw", dtype=dtype, device=args.device, repeats=5)
            mem_err = (r.chosen.peak - m.peak_bytes) / m.peak_bytes
            time_err = (r.chosen.step_time_s - m.step_time_s) / m.step_time_s
            passed = abs(mem_err) <= 0.05 and abs(time_err) <= 0.15
            ok &= passed
            lines.append(
                f"{name:6} {label:6} predicted {r.chosen.peak / 2**30:7.3f} GiB / {r.chosen.step_time_s * 1e3:8.2f} ms"
                f"   measured {m.peak_bytes / 2**30:7.3f} GiB / {m.step_time_s * 1e3:8.2f} ms"
                f"   memory {mem_err:+.2%}  time {time_err:+.1%}  {'PASS' if passed else 'FAIL'}"
            )
            print(lines[-1], flush=True)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"gpu_validate_{hw.name}.txt").write_text("\n".join(lines) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
