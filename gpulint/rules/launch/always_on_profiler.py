"""GPL507 always-on-profiler."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.rule import Invalid, Rule, RuleDocs
from gpulint.rules.common import is_true, keyword_arg
from gpulint.rules.launch.helpers import under_any_if

PROFILERS = frozenset(
    {"torch.profiler.profile", "torch.autograd.profiler.profile", "torch.autograd.profiler_legacy.profile",
     "torch.autograd.profiler.emit_nvtx", "torch.cuda.profiler.profile"}
)


class AlwaysOnProfiler(Rule):
    code = "GPL507"
    name = "always-on-profiler"
    message = "a profiler records every step without a `schedule=` or an off switch; it slows the whole run"
    triggers = ("profile(", "emit_nvtx(")
    docs = RuleDocs(
        what_it_does="Flags `torch.profiler.profile(...)` and the autograd profilers created without a `schedule=` "
        "and without `enabled=` set to something other than `True`, outside test files and outside any `if`.",
        why_slow="The profiler hooks every operator launch (and with `record_shapes`/`with_stack`, records shapes and "
        "Python stacks): CPU-side overhead per kernel launch grows several times, the trace buffer grows without bound, "
        "and CUPTI collection adds device-side overhead. Left on for a whole run, every step pays it.",
        example="with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:\n    for batch in loader:\n"
        "        train_step(batch)",
        use_instead="with torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=3, "
        "repeat=1)) as prof:\n    for batch in loader:\n        train_step(batch)\n        prof.step()",
        fix_safety="No automatic fix: which steps to profile is the author's choice.",
        false_positives="Short profiling scripts that run a few steps on purpose: functions named `profile*`/"
        "`benchmark*` are skipped; otherwise add `# noqa: GPL507`.",
    )
    valid = (
        ("import torch\n\ndef train(loader):\n    sched = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)\n"
         "    with torch.profiler.profile(schedule=sched) as prof:\n        for batch in loader:\n            step(batch)\n"
         "            prof.step()\n"),
        ("import torch\n\ndef train(loader, args):\n    with torch.autograd.profiler.profile(enabled=args.profile):\n"
         "        for batch in loader:\n            step(batch)\n"),
        "import torch\n\ndef profile_model(model, x):\n    with torch.profiler.profile() as prof:\n        model(x)\n",
    )
    invalid = (
        Invalid(
            "import torch\nfrom torch.profiler import profile, ProfilerActivity\n\ndef train(loader):\n"
            "    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True):\n"
            "        for batch in loader:\n            step(batch)\n"
        ),
        Invalid("import torch\n\nprof = torch.autograd.profiler.profile(use_cuda=True)\nprof.__enter__()\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.resolve(node.func) not in PROFILERS:
            return
        if self.context.in_tests or under_any_if(self.context):
            return
        if keyword_arg(node, "schedule") is not None:
            return
        enabled = keyword_arg(node, "enabled")
        if enabled is not None and not is_true(enabled.value):
            return
        self.report(node, when="training")
