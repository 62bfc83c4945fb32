"""GPL509 per-tensor-library-optimizer."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.names import last_name
from gpulint.linter.rule import Invalid, Rule, RuleDocs
from gpulint.linter.syntax import descendants

# Optimizers of NLP libraries that update one parameter tensor at a time in a Python loop, with no multi-tensor
# (foreach) or fused path, by what replaces them. transformers deprecated its `AdamW` for torch's in 4.x.
_PER_TENSOR_OPTIMIZERS = {
    "transformers.AdamW": "`torch.optim.AdamW`",
    "transformers.optimization.AdamW": "`torch.optim.AdamW`",
    "pytorch_transformers.AdamW": "`torch.optim.AdamW`",
    "pytorch_transformers.optimization.AdamW": "`torch.optim.AdamW`",
    "pytorch_pretrained_bert.BertAdam": "`torch.optim.AdamW` and a learning-rate scheduler",
    "pytorch_pretrained_bert.optimization.BertAdam": "`torch.optim.AdamW` and a learning-rate scheduler",
    "pytorch_pretrained_bert.OpenAIAdam": "`torch.optim.AdamW` and a learning-rate scheduler",
    "pytorch_pretrained_bert.optimization_openai.OpenAIAdam": "`torch.optim.AdamW` and a learning-rate scheduler",
}


# A learning-rate scheduler's constructor (`get_linear_schedule_with_warmup`, `LambdaLR`, `CosineAnnealingLR`): it
# reads the optimizer's learning rates, and never steps it (jiant's `OptimizerScheduler(optimizer=...)` may).
_LR_SCHEDULER = re.compile(r"^get_\w*schedule|LR$|^lr_scheduler$")


class PerTensorLibraryOptimizer(Rule):
    code = "GPL509"
    gpu_only = True  # kernel launches saved: none on the CPU
    name = "per-tensor-library-optimizer"
    message = (
        "`{name}` updates one parameter tensor at a time in a Python loop (several kernel launches per tensor, every "
        "optimizer step, with no foreach or fused path); use {instead}"
    )
    triggers = ("AdamW", "BertAdam", "OpenAIAdam")
    reports_anywhere = True  # a setting, wherever the optimizer is built
    docs = RuleDocs(
        what_it_does="Flags the construction of an NLP library's own Adam: `transformers.AdamW` (deprecated in "
        "favour of torch's), `pytorch_transformers.AdamW`, and `pytorch_pretrained_bert`'s `BertAdam` and "
        "`OpenAIAdam`, outside test files and outside code the training program never runs, where the optimizer is "
        "stepped, returned or handed on (not where a script only builds it and passes it to `accelerator.prepare`).",
        why_slow="Kernel launch count: these optimizers loop over the parameters in Python and run each elementwise "
        "step of the update (moments, bias correction, weight decay, the update itself: about ten ops) as its own "
        "launch for every tensor, every optimizer step. `torch.optim.AdamW` applies each op to all tensors in a few "
        "multi-tensor launches (its default on CUDA), or in one fused kernel with `fused=True`.",
        example="from transformers import AdamW\n\noptimizer = AdamW(model.parameters(), lr=5e-5)",
        use_instead="import torch\n\noptimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, eps=1e-6, "
        "weight_decay=0.0)  # transformers' defaults, passed explicitly",
        fix_safety="No automatic fix: the updates differ slightly. transformers' `AdamW` adds `eps` before the bias "
        "correction and decays the weights after the step; torch's adds it after and decays before; their defaults "
        "differ too (`eps=1e-6, weight_decay=0.0` against `1e-8, 0.01`). Pass the old defaults explicitly when "
        "switching. `BertAdam` and `OpenAIAdam` also schedule the learning rate and clip gradients themselves.",
        false_positives="An optimizer built but chosen only by an option the shipped runs leave off: add "
        "`# noqa: GPL509`.",
    )
    valid = (
        "import torch\n\noptimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)\n",
        "import torch\nfrom torch.optim import AdamW\n\noptimizer = AdamW(model.parameters(), lr=5e-5)\n",
        # torch's optimizer beside transformers' scheduler
        "import torch\nfrom transformers.optimization import get_linear_schedule_with_warmup\n\n"
        "optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)\n"
        "scheduler = get_linear_schedule_with_warmup(optimizer, 100, 1000)\n",
        # SSD-LM's decoding script, copied from its training script: the optimizer is built and prepared, never stepped
        "from transformers import AdamW\n\n\ndef main(accelerator, model, loader):\n"
        "    optimizer = AdamW(model.parameters(), lr=5e-5)\n"
        "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
        "    for batch in loader:\n        print(model.generate(**batch))\n",
    )
    invalid = (
        Invalid("from transformers import AdamW\n\noptimizer = AdamW(model.parameters(), lr=5e-5)\n"
                "trainer = Trainer(model=model, optimizers=(optimizer, None))\n"),
        Invalid("import transformers\n\n\ndef build_optimizer(groups, args):\n"
                "    optimizer = transformers.AdamW(\n        groups, lr=args.lr, correct_bias=False\n    )\n"
                "    return optimizer\n"),
        # jiant's runner: the optimizer and its scheduler wrapped together, the wrapper steps both
        Invalid("import transformers\n\n\ndef create_optimizer(model, scheduler):\n"
                "    optimizer = transformers.AdamW(model.parameters(), lr=1e-5)\n"
                "    return OptimizerScheduler(optimizer=optimizer, scheduler=scheduler)\n"),
        Invalid("from pytorch_pretrained_bert.optimization import BertAdam\n\n"
                "optimizer = BertAdam(groups, lr=5e-5, warmup=0.1, t_total=1000)\nfit(model, optimizer)\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.context.resolve(node.func) or ""
        instead = _PER_TENSOR_OPTIMIZERS.get(name)
        if instead is None or self.context.in_tests or self.context.outside_the_program() or self._never_stepped(node):
            return
        self.report(node, self.message.format(name=name, instead=instead), when="always")

    def _never_stepped(self, made: cst.Call) -> bool:
        """`optimizer = AdamW(groups, lr=lr)` in a function (or module) that neither steps it, returns it nor hands it
        to anything but `accelerator.prepare` or a learning-rate scheduler: a decoding script copied from the
        training one (SSD-LM's `ssd_model_decode.py`) builds the optimizer and never updates a weight with it."""
        statement = self.context.parent()
        if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0].target, cst.Name)):
            return False
        name = statement.targets[0].target.value
        scope = self.context.enclosing_function() or self.context.module
        for node in descendants(scope):
            if isinstance(node, cst.Return) and node.value is not None \
                    and name in {n.value for n in descendants(node.value) if isinstance(n, cst.Name)}:
                return False
            if not isinstance(node, cst.Call):
                continue
            func = node.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == name:
                return False  # `optimizer.step()`, `optimizer.zero_grad()`
            callee = last_name(func) or ""
            if callee != "prepare" and not _LR_SCHEDULER.search(callee) and any(
                    isinstance(n, cst.Name) and n.value == name for arg in node.args for n in descendants(arg.value)):
                return False  # handed to a trainer (`optimizers=(optimizer, scheduler)`) or a helper that may step it
        return True
