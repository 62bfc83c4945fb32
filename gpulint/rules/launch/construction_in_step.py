"""GPL505 construction-in-step."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.rule import Invalid, Rule, RuleDocs
from gpulint.rules.common import off_by_default
from gpulint.rules.examples import training_script
from gpulint.rules.launch.helpers import one_time_branch

OPTIMIZER_MODULES = ("torch.optim.", "apex.optimizers.", "bitsandbytes.optim.", "bnb.optim.", "timm.optim.")
COMPILERS = frozenset({"torch.compile", "torch.jit.script", "torch.jit.trace"})
DATA_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})


class ConstructionInStep(Rule):
    code = "GPL505"
    name = "construction-in-step"
    default_enabled = False  # mostly false on the fresh batches (its docs say how often)
    message = "`{name}(...)` is built inside the training step; build it once before the loop"
    triggers = ("compile(", "optim.", "DataLoader(", "jit.", "AdamW(", "Adam(", "SGD(")
    hot_only = True  # every finding is "per_step"
    docs = RuleDocs(
        what_it_does="Flags `torch.compile`, `torch.jit.script/trace`, optimizer constructors (`torch.optim.*`, apex, "
        "bitsandbytes) and `DataLoader(...)` called inside the training step loop or a function it calls.",
        why_slow="Rebuilding per step repeats one-time work: `torch.compile` re-checks guards and may recompile "
        "(seconds of CPU while the GPU idles), a new optimizer allocates fresh state and loses momentum, and a new "
        "DataLoader restarts its worker processes and prefetch queue, so the GPU waits on the first batch every time.",
        example="for batch in loader:\n    model_c = torch.compile(model)\n    loss = model_c(batch)",
        use_instead="model_c = torch.compile(model)  # once\nfor batch in loader:\n    loss = model_c(batch)",
        fix_safety="No automatic fix: moving a construction out of the loop changes which objects later code "
        "refers to.",
        false_positives=off_by_default(
            code, 4, 24,
            "most constructions it reported ran once: lazily cached, in setup helpers, or at a rare schedule "
            "change",
        )
        + "A one-time switch inside the loop (`if step == warmup_steps:` or a lazy `if self.opt is "
        "None:`) is not flagged, nor is a construction behind an interval gate (a validation loader built every "
        "`eval_steps`: its cost is spread over them); other one-time conditions are: add `# noqa: GPL505`.",
    )
    valid = (
        ("import torch\n\n\n@torch.compile(fullgraph=True)\ndef fused_update(p, g):\n    p.add_(g)\n\n\n"
         "def train(model, loader, opt):\n    for batch in loader:\n        model(batch).backward()\n"
         "        for p in model.parameters():\n            fused_update(p, p.grad)\n"),
        ("import torch\n\ndef train(model, loader):\n    opt = torch.optim.AdamW(model.parameters())\n"
         "    model = torch.compile(model)\n    for batch in loader:\n        model(batch).backward()\n        opt.step()\n"),
        training_script("if step == 1000:\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)"),
        training_script("if compiled is None:\n    compiled = torch.compile(model)"),
    )
    invalid = (
        Invalid(training_script("fast = torch.compile(model)")),
        Invalid(training_script("opt2 = torch.optim.Adam(model.parameters(), lr=1e-3)")),
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\n\ndef train(model, dataset, opt):\n"
            "    for epoch in range(3):\n        for i in range(100):\n"
            "            batch = next(iter(DataLoader(dataset, batch_size=32)))\n            model(batch).backward()\n"
            "            opt.step()\n"
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.context.resolve(node.func) or ""
        if not (name in COMPILERS or name in DATA_LOADERS or self._is_optimizer(name)):
            return
        if one_time_branch(self.context) or self.context.in_tests or self._decorates_at_definition():
            return
        self.report(node, self.message.format(name=name), when="per_step")

    def _decorates_at_definition(self) -> bool:
        """`@torch.compile(...)` on a function of a module or class runs once, when the `def` runs at import."""
        chain = self.context.ancestors
        for index in range(len(chain) - 1, -1, -1):
            if isinstance(chain[index], cst.Decorator):
                return not any(isinstance(node, (cst.FunctionDef, cst.Lambda)) for node in chain[:index - 1])
        return False

    @staticmethod
    def _is_optimizer(name: str) -> bool:
        if not name.startswith(OPTIMIZER_MODULES) or ".lr_scheduler." in name:
            return False
        last = name.rsplit(".", 1)[-1]
        return last[:1].isupper() and last != "Optimizer"
