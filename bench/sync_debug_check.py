"""Do the GPL4xx examples really sync? Run each one on a CUDA device under `torch.cuda.set_sync_debug_mode("error")`.

Every GPL4xx INVALID example must raise (PyTorch saw a synchronizing call in a training step) and every VALID example
must not. Examples are complete scripts defining `train(model, loader, optimizer, device)` (or with `dataset` instead
of `loader`); this harness supplies a tiny model on the device, a pinned DataLoader (or its dataset) and SGD.

Step 0 of every loop runs with the debug mode off (so `if step % 100 == 0:` gated logging and warm-up may sync once),
later steps run with it on; code before and after the step loop (setup, epoch end) is never checked. This matches
what the rules claim: a finding is a sync that runs every step.

A few INVALID examples cost time without a synchronizing call PyTorch can see (listed in SILENT_BY_DESIGN with the
reason); for those the check is that they do NOT raise, so a change in PyTorch shows up here too.

    python bench/sync_debug_check.py            # on a machine with CUDA; exit 0 when every example behaves
    python bench/sync_debug_check.py --dry-run  # anywhere: run every example on CPU (gloo), debug mode off

Exit codes: 0 all as expected, 1 some example misbehaved, 2 no CUDA device (without --dry-run).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# (code, INVALID index) -> why PyTorch's sync debug mode cannot see the cost.
SILENT_BY_DESIGN = {
    ("GPL411", 2): "non_blocking copy from pageable memory: the driver stages it synchronously, PyTorch calls no sync",
    ("GPL420", 1): "per-tensor collectives cost one launch and one NCCL latency each, not a host sync",
    ("GPL422", 0): "redundant gradient all-reduces on every micro-step: communication, not a host sync",
}
STEPS = 6
BATCH = 4


@dataclass
class Outcome:
    code: str
    kind: str  # "valid" | "invalid"
    index: int
    expected: str  # "raises" | "clean"
    observed: str  # "raises" | "clean" | "skipped: ..." | "error: ..."

    @property
    def ok(self) -> bool:
        return self.observed == self.expected or self.observed.startswith("skipped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="run the examples on CPU with the debug mode off")
    parser.add_argument("--rule", action="append", default=[], help="only this rule code (repeatable)")
    args = parser.parse_args(argv)

    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("sync_debug_check: no CUDA device here; run it on a GPU machine (or use --dry-run to check the harness)")
        return 2
    from gpulint.linter.rule import all_rules

    device = "cpu" if args.dry_run else "cuda"
    distributed = _init_process_group(torch, "gloo" if args.dry_run else "nccl")
    outcomes = []
    for rule in all_rules():
        if not rule.code.startswith("GPL4") or (args.rule and rule.code not in args.rule):
            continue
        for index, source in enumerate(rule.valid):
            expected = "clean"
            outcomes.append(Outcome(rule.code, "valid", index, expected, _run(source, device, args.dry_run, distributed)))
        for index, example in enumerate(rule.invalid):
            expected = "clean" if (rule.code, index) in SILENT_BY_DESIGN or args.dry_run else "raises"
            outcomes.append(
                Outcome(rule.code, "invalid", index, expected, _run(example.code, device, args.dry_run, distributed))
            )
    _print_table(outcomes, torch, device)
    if distributed:
        torch.distributed.destroy_process_group()
    return 0 if all(o.ok for o in outcomes) else 1


def _init_process_group(torch, backend: str) -> bool:
    """A one-rank process group so collective and DDP examples run; False when the backend is unavailable."""
    dist = torch.distributed
    if not dist.is_available():
        return False
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    try:
        dist.init_process_group(backend, rank=0, world_size=1)
    except Exception as exc:  # noqa: BLE001 - no NCCL, port in use: the distributed examples are then skipped
        print(f"sync_debug_check: no {backend} process group ({type(exc).__name__}: {exc}); distributed examples skipped")
        return False
    return True


def _run(source: str, device: str, dry_run: bool, distributed: bool) -> str:
    """Run one example; "raises" when the sync debug mode raised inside the step loop, else "clean"."""
    import torch

    if not distributed and ("torch.distributed" in source or "DistributedDataParallel" in source):
        return "skipped: no process group"
    torch.manual_seed(0)
    features = torch.randn(STEPS * BATCH, 8)
    labels = torch.randint(0, 4, (STEPS * BATCH,))
    dataset = torch.utils.data.TensorDataset(features, labels)
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, pin_memory=not dry_run)
    model = torch.nn.Linear(8, 4).to(device)
    supplies = {
        "model": model,
        "loader": loader,
        "dataset": dataset,
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.01),
        "device": device,
    }
    namespace: dict = {"__name__": "gpulint_example"}
    output = io.StringIO()
    mode = None if dry_run else "error"
    try:
        with contextlib.redirect_stdout(output), _logging_to(output), _checked_steps(torch, mode):
            exec(compile(source, "<example>", "exec"), namespace)  # noqa: S102 - gpulint's own rule examples
            function = _entry_point(namespace)
            if function is None:
                return "skipped: no function to call"
            parameters = inspect.signature(function).parameters
            missing = [p for p, v in parameters.items() if p not in supplies and v.default is inspect.Parameter.empty]
            if missing:
                return f"skipped: cannot supply {', '.join(missing)}"
            function(**{p: supplies[p] for p in parameters if p in supplies})
            if not dry_run:
                torch.cuda.set_sync_debug_mode(0)  # a loop left by `break` never switched it back
                torch.cuda.synchronize()
    except RuntimeError as exc:
        message = str(exc).splitlines()[0][:120] if str(exc) else ""
        if "synchroniz" in str(exc).lower() and not dry_run:
            return "raises"
        if dry_run and _needs_cuda(message):
            return "skipped: needs CUDA"
        return f"error: {type(exc).__name__}: {message}"
    except ModuleNotFoundError as exc:  # an example of a library's hidden sync (`ema_pytorch`): run where it is installed
        return f"skipped: needs {exc.name}"
    except Exception as exc:  # noqa: BLE001 - any failure of an example is reported, the others still run
        message = str(exc).splitlines()[0][:120] if str(exc) else ""
        if dry_run and _needs_cuda(message):
            return "skipped: needs CUDA"
        return f"error: {type(exc).__name__}: {message}"
    finally:
        if not dry_run:
            torch.cuda.set_sync_debug_mode(0)
    return "clean"


def _needs_cuda(message: str) -> bool:
    """A dry run on CPU cannot run CUDA-only calls (`torch.cuda.Event`, `pin_memory()`): those are skipped there."""
    lowered = message.lower()
    return any(word in lowered for word in ("cuda", "accelerator", "dummy base class"))


def _entry_point(namespace: dict):
    """`train` if the example defines it, else its first function (`evaluate`, a class's step is never used)."""
    functions = [v for k, v in namespace.items() if inspect.isfunction(v) and v.__module__ == "gpulint_example"]
    for function in functions:
        if function.__name__ == "train":
            return function
    return functions[0] if functions else None


@contextlib.contextmanager
def _logging_to(stream: io.StringIO):
    """Loggers at INFO write somewhere, so `logger.info("%s", tensor)` really formats its argument."""
    root = logging.getLogger()
    handler = logging.StreamHandler(stream)
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


@contextlib.contextmanager
def _checked_steps(torch, mode: str | None):
    """Every DataLoader iteration turns the sync debug mode on from its second batch until it ends."""
    if mode is None:
        yield
        return
    DataLoader = torch.utils.data.DataLoader
    original = DataLoader.__iter__

    def checked_iter(self):
        iterator = original(self)
        step = 0
        while True:
            torch.cuda.set_sync_debug_mode(0)  # fetching and pinning the batch is the loader's business
            try:
                batch = next(iterator)
            except StopIteration:
                return
            if step > 0:
                torch.cuda.set_sync_debug_mode(mode)
            yield batch
            step += 1

    DataLoader.__iter__ = checked_iter
    try:
        yield
    finally:
        DataLoader.__iter__ = original
        torch.cuda.set_sync_debug_mode(0)


def _print_table(outcomes: list[Outcome], torch, device: str) -> None:
    where = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (dry run)"
    print(f"sync debug check on {where}, torch {torch.__version__}: {STEPS} steps per example, step 0 unchecked")
    print(f"{'example':<18} {'expected':<8} {'observed':<60} ok")
    for o in outcomes:
        name = f"{o.code} {o.kind}[{o.index}]"
        note = f"  ({SILENT_BY_DESIGN[(o.code, o.index)]})" if o.kind == "invalid" and (o.code, o.index) in SILENT_BY_DESIGN else ""
        print(f"{name:<18} {o.expected:<8} {o.observed[:60]:<60} {'yes' if o.ok else 'NO'}{note}")
    bad = [o for o in outcomes if not o.ok]
    skipped = [o for o in outcomes if o.observed.startswith("skipped")]
    print(f"{len(outcomes) - len(bad)}/{len(outcomes)} as expected, {len(skipped)} skipped")


if __name__ == "__main__":
    sys.exit(main())
