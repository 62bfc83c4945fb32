"""What the memory delta costs a pull request on a CPU runner: `gpulint plan` of the base and of the head, each in a
fresh process as the workflow runs them, then the comment rendered from both.

    python bench/ci_cost.py              # the bundled example (base: examples/; head: two more layers)
    python bench/ci_cost.py --gpt2       # also GPT-2 small (bench/gpt2_small/gpulint.yaml), planned twice

Wall and CPU seconds (user + system, of the child processes) are printed for each step and in all. On a shared
machine the wall time counts the other processes' load too; CPU time is the steadier figure. Installing torch and
gpulint on the runner is not counted (no network here).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GPULINT = str(Path(sys.executable).parent / "gpulint")


def timed(what: str, command: list[str], cwd: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"  {what}: {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
    return wall, cpu


def example_pr(work: Path) -> tuple[float, float]:
    """The demo's pull request: examples/ as the base, the same model with two more layers as the head."""
    base, head = work / "base", work / "head"
    for folder in (base, head):
        shutil.copytree(ROOT / "examples", folder / "examples", ignore=shutil.ignore_patterns("gpulint-plan.json"))
        subprocess.run(["git", "init", "-q", str(folder)], check=True)
    model = head / "examples" / "model.py"
    model.write_text(model.read_text().replace("n_layer: int = 4", "n_layer: int = 6"))
    plan = [GPULINT, "plan", "examples/gpulint.yaml", "--budget", "200MB", "--format", "json", "--out", "out"]
    steps = [
        timed("plan the base", plan, base),
        timed("plan the head (with --patch)", [*plan, "--patch"], head),
        timed("render the comment", [GPULINT, "report", "--plan", str(head / "out/plan.json"), "--base-plan",
                                     str(base / "out/plan.json"), "--plan-patch", str(head / "out/plan.diff"),
                                     "--output", str(work / "pr-comment.md")], work),
    ]
    return sum(w for w, _ in steps), sum(c for _, c in steps)


def gpt2_pr(work: Path) -> tuple[float, float]:
    """GPT-2 small planned twice (base and head are the same model: the cost, not the delta)."""
    config = str(ROOT / "bench" / "gpt2_small" / "gpulint.yaml")
    plan = [GPULINT, "plan", config, "--format", "json"]
    steps = [timed("plan the base", [*plan, "--out", str(work / "base")], work),
             timed("plan the head", [*plan, "--out", str(work / "head")], work)]
    return sum(w for w, _ in steps), sum(c for _, c in steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpt2", action="store_true", help="also GPT-2 small (needs transformers)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    runs = [("bundled example (GPT, 4 -> 6 layers, d=256, seq 256, batch 8, fp32)", example_pr)]
    if args.gpt2:
        runs.append(("GPT-2 small (12 layers, d=768, seq 1024, batch 8, bf16)", gpt2_pr))
    for name, run in runs:
        print(name, flush=True)
        with tempfile.TemporaryDirectory() as work:
            wall, cpu = run(Path(work))
        print(f"  a PR whose base is not cached: {wall:.1f} s wall, {cpu:.1f} s CPU "
              f"({cpu / 60:.2f} CPU minutes)", flush=True)


if __name__ == "__main__":
    main()
