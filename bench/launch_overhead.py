"""Check the launch profile and the priced per-tensor loop against real runs (CPU here; CUDA in gpu_validate.py).

    python bench/launch_overhead.py                 # calibrates this CPU, then the two cases below
    python bench/launch_overhead.py --hardware gpulint-hardware.yaml   # a profile `gpulint calibrate` wrote

1. A launch-bound model: a small MLP (8 layers of 32 features) at batch 1, trained with AdamW (foreach). Its launch
   profile (planner/launch.py, from the eager trace) predicts the step; the real eager step (forward, backward,
   optimizer step) is timed. Compared: predicted against measured step, and the overhead (step less the kernels'
   roofline time) predicted against measured.
2. A per-tensor loop over a model's parameters (GPL101: a norm per gradient read with `.item()`), against the
   same norms by `torch._foreach_norm` read once. Compared: GPL101's price (linter/pricing.py, from the example
   GPT's trace: its parameter tensors x (launch + round trip)) against the measured difference of the two forms.

Each prints predicted, measured and their ratio; the target is a ratio between 1/1.5 and 1.5. Timings are the
best of repeated runs, as `gpulint calibrate` times (2 cores shared with other work: run it on a quiet machine).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.5


def mlp(layers: int = 8, width: int = 32) -> torch.nn.Module:
    return torch.nn.Sequential(*(m for _ in range(layers) for m in (torch.nn.Linear(width, width), torch.nn.ReLU())))


def mlp_batch(width: int = 32) -> torch.Tensor:
    return torch.randn(1, width)


def example_gpt() -> torch.nn.Module:
    sys.path.insert(0, str(ROOT / "examples"))
    from model import GPTConfig, build_model

    return build_model(GPTConfig(vocab_size=512, n_layer=4, d_model=64, seq_len=32, batch_size=2))


def example_batch() -> dict[str, torch.Tensor]:
    sys.path.insert(0, str(ROOT / "examples"))
    from model import GPTConfig, make_batch

    return make_batch(GPTConfig(vocab_size=512, n_layer=4, d_model=64, seq_len=32, batch_size=2))


def timed(*runs: Callable[[], Any], device: str = "cpu", repeats: int = 300) -> list[float]:
    """The best seconds of each run over `repeats` calls, the runs taking turns (so that a disturbance on a shared
    machine hits them alike), after a warm-up: as `gpulint calibrate` times, the least disturbed call counts."""
    for run in runs:
        for _ in range(3):
            run()
    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for i, run in enumerate(runs):
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            run()
            if device == "cuda":
                torch.cuda.synchronize()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def profile_of(build: Callable[[], Any], batch: Callable[[], Any], hw: Any, device: str = "cpu",
               optimizer: str = "adamw") -> Any:
    from gpulint.planner.eager_trace import trace_eager
    from gpulint.planner.launch import launch_profile

    program = trace_eager(build, batch, optimizer=optimizer, device=device)
    return launch_profile(program.graph, hw, optimizer=optimizer)


def mlp_case(hw: Any, device: str = "cpu") -> dict[str, float]:
    """Predicted and measured step of the launch-bound MLP (and, on CUDA, of its step captured as a CUDA graph)."""
    launch = profile_of(mlp, mlp_batch, hw, device)
    torch.manual_seed(0)
    model = mlp().to(device)
    x = mlp_batch().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True, capturable=device == "cuda")

    def step() -> None:
        optimizer.zero_grad(set_to_none=False)  # keeps the gradients' memory: what a captured graph needs
        model(x).sum().backward()
        optimizer.step()

    forward_backward = profile_of(mlp, mlp_batch, hw, device, optimizer="none")
    out = {"kernels": launch.kernels, "predicted_step": launch.step_time_s,
           "predicted_forward_backward": forward_backward.step_time_s,
           "measured_forward_backward": timed(lambda: model(x).sum().backward(), device=device)[0],
           "predicted_overhead": launch.step_time_s - launch.device_time_s, "device": launch.device_time_s,
           "measured_step": timed(step, device=device)[0]}
    out["measured_overhead"] = out["measured_step"] - launch.device_time_s
    if device == "cuda":
        out["predicted_graph_step"] = launch.graph_step_time_s
        out["measured_graph_step"] = timed(_captured(step), device=device)[0]
    return out


def _captured(step: Callable[[], None]) -> Callable[[], None]:
    """The step captured as one CUDA graph (warmed up on a side stream first, as capture wants); returns its replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def loop_case(hw: Any, device: str = "cpu") -> dict[str, float]:
    """GPL101's price on the example GPT against the measured cost of its per-tensor loop over the foreach form."""
    from gpulint.linter.pricing import price

    launch = profile_of(example_gpt, example_batch, hw, device)
    seconds, _method = price("GPL101", launch, syncs=1)
    torch.manual_seed(0)
    model = example_gpt().to(device)
    batch = {k: v.to(device) for k, v in example_batch().items()}
    model(**batch).loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]

    def per_tensor() -> list[float]:
        return [g.norm().item() for g in grads]

    def foreach() -> list[float]:
        return torch.stack(torch._foreach_norm(grads)).tolist()

    loop, batched = timed(per_tensor, foreach, device=device)
    return {"tensors": launch.parameter_tensors, "predicted": seconds, "measured": loop - batched,
            "loop": loop, "foreach": batched}


def hardware(path: str | None, device: str = "cpu") -> Any:
    """The profile at `path`, or this machine calibrated now."""
    from gpulint.planner.calibrate import calibrate, to_yaml
    from gpulint.planner.hardware import load_hardware

    if path:
        return load_hardware(path)
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "hw.yaml"
        file.write_text(to_yaml(calibrate(device), "bench/launch_overhead.py"))
        return load_hardware(str(file))


def ratio_line(label: str, predicted: float, measured: float) -> tuple[str, bool]:
    ratio = predicted / measured if measured > 0 else float("inf")
    ok = 1 / TARGET <= ratio <= TARGET
    return (f"{label:44} predicted {predicted * 1e6:9.1f} us  measured {measured * 1e6:9.1f} us  "
            f"ratio {ratio:5.2f}  {'PASS' if ok else 'FAIL'}"), ok


def report(hw: Any, device: str = "cpu") -> tuple[list[str], bool]:
    """The benchmark's lines and whether every ratio is within the target."""
    lines = [f"hardware {hw.name} ({hw.kind}): eager overhead {(hw.eager_overhead_s or 0) * 1e6:.1f} us per op, "
             f"launch {hw.launch_overhead_s * 1e6:.1f} us, round trip {hw.sync_overhead_s * 1e6:.2f} us"]
    m = mlp_case(hw, device)
    lines.append(f"MLP 8x32 at batch 1, AdamW: {m['kernels']} kernels per step, predicted kernel time "
                 f"{m['device'] * 1e6:.1f} us")
    rows = [ratio_line("MLP forward+backward (no optimizer)", m["predicted_forward_backward"],
                       m["measured_forward_backward"]),
            ratio_line("MLP step (forward, backward, AdamW step)", m["predicted_step"], m["measured_step"]),
            ratio_line("MLP overhead (step less kernel time)", m["predicted_overhead"], m["measured_overhead"])]
    if "measured_graph_step" in m:
        rows.append(ratio_line("MLP step replayed as a CUDA graph", m["predicted_graph_step"],
                               m["measured_graph_step"]))
    loop = loop_case(hw, device)
    lines_loop = [f"per-tensor loop over the example GPT's {loop['tensors']} parameter tensors: loop "
                  f"{loop['loop'] * 1e6:.1f} us, foreach form {loop['foreach'] * 1e6:.1f} us"]
    rows.append(ratio_line("GPL101 price (loop less foreach form)", loop["predicted"], loop["measured"]))
    lines += [r[0] for r in rows[:-1]] + lines_loop + [rows[-1][0]]
    return lines, all(ok for _, ok in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hardware", help="a hardware profile (default: calibrate this CPU now)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # one op at a time on one core: the 2-core machine is shared
    lines, ok = report(hardware(args.hardware))
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
