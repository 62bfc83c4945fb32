"""GPL410 synchronize-in-step."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.names import dotted_name, last_name, name_parts
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.project.vocab import is_benchmark_path, is_profiler_path
from gpulint.rules.examples import training_script
from gpulint.rules.sync.helpers import SyncRule, known_false_positives

_SYNC_FUNCTIONS = frozenset(
    {
        "torch.cuda.synchronize", "torch.cuda.empty_cache", "torch.accelerator.synchronize", "torch.mps.synchronize",
        "torch.xpu.synchronize", "torch.mps.empty_cache", "torch.xpu.empty_cache",
    }
)

# Linear algebra that checks its result on the host (LAPACK's `info`): on a CUDA tensor each call synchronizes the
# device. Each has an `_ex` twin that returns `info` as a tensor instead (PyTorch's docs, `torch.linalg`).
_CHECKED_LINALG = {
    "torch.linalg.cholesky": "torch.linalg.cholesky_ex", "torch.cholesky": "torch.linalg.cholesky_ex",
    "torch.linalg.inv": "torch.linalg.inv_ex", "torch.inverse": "torch.linalg.inv_ex",
    "torch.linalg.solve": "torch.linalg.solve_ex", "torch.linalg.ldl_factor": "torch.linalg.ldl_factor_ex",
    "torch.linalg.lu_factor": "torch.linalg.lu_factor_ex",
}


# ... and the tensor methods among them (`x.inverse()`, `x.cholesky()`)
_CHECKED_METHODS = {"inverse": "torch.linalg.inv_ex", "cholesky": "torch.linalg.cholesky_ex"}


class SynchronizeInStep(SyncRule):
    code = "GPL410"
    name = "synchronize-in-step"
    message = "`{name}()` blocks the host until all queued GPU work finishes, every step"
    message_checked = ("`{name}` checks its result on the host: on the GPU it synchronizes the device every step; "
                       "`{twin}` returns the check as a tensor instead")
    triggers = ("synchronize", "empty_cache", "cholesky", "inverse", "linalg")
    docs = RuleDocs(
        what_it_does="Flags `torch.cuda.synchronize()`, `torch.cuda.empty_cache()` and stream/event `synchronize()` "
        "calls in code that runs every training step, and the linear algebra that checks its result on the host "
        "(`torch.linalg.cholesky`, `inv` / `torch.inverse` / `x.inverse()`, `solve`, `ldl_factor`, `lu_factor`: "
        "PyTorch documents that each synchronizes a CUDA device, and its `_ex` twin does not).",
        why_slow="A device-wide synchronize drains the GPU queue and stops the CPU from running ahead: every kernel launch "
        "after it is exposed as idle GPU time. `empty_cache()` also synchronizes and returns cached blocks that the next "
        "step must allocate again with `cudaMalloc`, which is itself synchronous.",
        example="for batch in loader:\n    loss = model(batch)\n    loss.backward()\n    optimizer.step()\n"
        "    torch.cuda.synchronize()",
        use_instead="Time with `torch.cuda.Event(enable_timing=True)` read every N steps, or with the profiler; "
        "let the caching allocator keep its blocks. For checked linear algebra, call the `_ex` twin "
        "(`L, info = torch.linalg.cholesky_ex(A)`) and read `info` when you log, if at all.",
        fix_safety="No fix: removing a synchronize can change what a timing measures.",
        false_positives=known_false_positives("Files of a benchmark suite (under a `benchmarks/` or `bench/` folder, or named "
        "`bench_*.py` / `benchmark_*.py`) or a profiler (a `profiler/` folder) are left out: their syncs fence what they time. A training loop that times "
        "each step on purpose elsewhere: put the call under an opt-in flag (`if args.synchronize_step:`, which gpulint "
        "respects), gate it, or add `# noqa: GPL410`."),
    )
    valid = (
        training_script("if step % 50 == 0:\n    torch.cuda.synchronize()"),
        training_script("if synchronize_step:\n    torch.cuda.synchronize()", header="synchronize_step = False"),
        # OpenChatKit's pipeline: `if self.enable_tidy_profiling: self.profiling_optimizer_step()`
        training_script("if enable_tidy_profiling:\n    profiling_optimizer_step()",
                        header="enable_tidy_profiling = False\n\n\ndef profiling_optimizer_step():\n"
                        "    torch.cuda.synchronize()"),
        training_script("cov = out.t() @ out / out.shape[0]\nwhite, info = torch.linalg.cholesky_ex(cov)"),
        # a transform's inverse of its argument: no linear algebra
        training_script("recovered = mel.inverse(out)",
                        header="class Mel:\n    def inverse(self, spec):\n        return spec\n\n\nmel = Mel()"),
        training_script("if is_torch_xpu_available():\n    torch.xpu.empty_cache()",
                        header="def is_torch_xpu_available():\n    return False"),
        ("import torch\n\n\ndef train(model, loader, optimizer, device):\n    for x, y in loader:\n"
        "        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n    torch.cuda.synchronize()\n"),
    )
    invalid = (
        Invalid(training_script("torch.cuda.synchronize()")),
        Invalid(training_script("synchronize()",
                                header="synchronize = torch.cuda.synchronize if torch.cuda.is_available() else lambda: None")),
        Invalid(training_script("torch.cuda.empty_cache()")),
        Invalid(training_script("torch.cuda.current_stream().synchronize()")),
        Invalid(training_script("done = torch.cuda.Event()\ndone.record()\ndone.synchronize()")),
        # W-MSE's whitening: a Cholesky factor of the batch covariance every step
        Invalid(training_script("cov = out.t() @ out / out.shape[0]\nwhite = torch.linalg.cholesky(cov)")),
        Invalid(training_script("w = torch.inverse(out.t() @ out)")),
        # LoFTR's ground truth: the camera intrinsics inverted on the device at every step
        Invalid(training_script("intrinsics = torch.eye(3, device=device).expand(x.shape[0], 3, 3)\n"
                                "back_projection = intrinsics.inverse()")),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = self.context.resolve(func)
        if self._opted_in():
            return
        if name in _SYNC_FUNCTIONS:
            self.report(node, self.message.format(name=name))
            return
        if name in _CHECKED_LINALG:
            self.report(node, self.message_checked.format(name=name, twin=_CHECKED_LINALG[name]))
            return
        if isinstance(func, cst.Attribute) and func.attr.value in _CHECKED_METHODS and not node.args \
                and not (name or "").startswith(("torch.", "np.", "numpy.")) \
                and not self.context.is_host_value(func.value):
            # `K.inverse()`: the tensor method of `torch.inverse` (LoFTR's intrinsics, every step); no argument, so no
            # vocoder's `inverse(mel)` nor a transform's `inverse(x)`
            twin = _CHECKED_METHODS[func.attr.value]
            self.report(node, self.message_checked.format(name=f"x.{func.attr.value}()", twin=twin))
            return
        if not isinstance(func, cst.Attribute) or func.attr.value != "synchronize":
            return
        receiver = func.value
        receiver_name = last_name(receiver.func) if isinstance(receiver, cst.Call) else last_name(receiver)
        if receiver_name and re.search(r"stream|event|done|start|end", receiver_name, re.IGNORECASE):
            self.report(node, self.message.format(name=(dotted_name(receiver) or receiver_name) + ".synchronize"))

    def _opted_in(self) -> bool:
        """Under `if args.synchronize_step:` / `if timing:`: a sync the user asked for with a flag; or in a function
        named for profiling or timing (OpenChatKit's `profiling_optimizer_step`, called under its profiling flag);
        or anywhere in a benchmark or a profiler (`benchmarks/bench_rnn.py`): there the sync fences what is timed or
        measured."""
        if is_benchmark_path(self.context.path) or is_profiler_path(self.context.path):
            return True
        chain = self.context.ancestors
        for index in range(len(chain) - 2, -1, -1):
            node, child = chain[index], chain[index + 1]
            if isinstance(node, cst.FunctionDef):
                return bool(name_parts(node.name.value) & _TIMING_PARTS)
            if isinstance(node, cst.If) and child is node.body:
                name = dotted_name(node.test) or ""
                if name_parts(name.rsplit(".", 1)[-1]) & _OPT_IN_FLAG_PARTS:
                    return True
        return False


# Words of a flag or a function that measures time: its synchronize is what the measurement needs.
_TIMING_PARTS = frozenset({"timing", "benchmark", "profile", "profiling"})
# ... and of a flag that asks for the synchronize itself (`if args.synchronize_step:`)
_OPT_IN_FLAG_PARTS = _TIMING_PARTS | {"sync", "synchronize", "time"}
