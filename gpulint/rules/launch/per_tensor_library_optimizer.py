"""GPL509 per-tensor-library-optimizer."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.rule import Invalid, Rule, RuleDocs

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
        "`OpenAIAdam`, outside test files and outside code the training program never runs.",
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
    )
    invalid = (
        Invalid("from transformers import AdamW\n\noptimizer = AdamW(model.parameters(), lr=5e-5)\n"),
        Invalid("import transformers\n\noptimizer = transformers.AdamW(\n    groups, lr=args.lr, correct_bias=False\n)\n"),
        Invalid("from pytorch_pretrained_bert.optimization import BertAdam\n\n"
                "optimizer = BertAdam(groups, lr=5e-5, warmup=0.1, t_total=1000)\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.context.resolve(node.func) or ""
        instead = _PER_TENSOR_OPTIMIZERS.get(name)
        if instead is None or self.context.in_tests or self.context.outside_the_program():
            return
        self.report(node, self.message.format(name=name, instead=instead), when="always")
