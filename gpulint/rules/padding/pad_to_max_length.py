"""GPL301 pad-to-max-length."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.rule import Invalid, Replace, Rule, RuleDocs
from gpulint.rules.common import is_true, keyword_arg
from gpulint.rules.padding.helpers import LengthTracker

# Code that trains: a backward pass, an optimizer step, a trainer's `train()` / `fit()`, a dataset for training.
_TRAINS = re.compile(r"\.backward\(|\.step\(|\.train\(|\.fit\(|train_dataset|Trainer\(")
_EVAL_SPLIT_PARTS = frozenset({"test", "validation", "valid", "val", "eval", "dev"})


def _for_diffusion(context) -> bool:
    """A file that imports `diffusers`, or is part of a copy of it (`third_party/diffusers/src/diffusers/pipelines/...`,
    whose own imports are relative): its text encoders condition a diffusion model on their full fixed-length output."""
    return context.imports.imported("diffusers") or "diffusers" in re.split(r"[\\/]", context.path)[:-1]


def _is_eval_split(name: str) -> bool:
    """`"test[:400]"`, `"validation"`, `eval_dataset`, `val_ds`: a split or dataset used only to evaluate."""
    return bool({p for p in re.split(r"[^a-z]+", name.lower()) if p} & _EVAL_SPLIT_PARTS)


# What `PadToMaxLength.visit_Call` reports: `padding="max_length"`, `padding=PaddingStrategy.MAX_LENGTH`,
# `pad_to_max_length=True`.
# A parameter's default counts too (`padding: Union[str, bool] = "max_length"`).
_MAX_LENGTH_ARGUMENT = re.compile(
    r"\bpadding\s*(?::[^=\n]*)?=\s*(?:[rRuU]?[\"']max_length[\"']|[\w.]*\bMAX_LENGTH\b)"
    r"|\bpad_to_max_length\s*(?::[^=\n]*)?=\s*True\b"
)
# What a function does with its `padding` parameter that makes the default the padding of its tokenizer calls.
_PASSES_PADDING = re.compile(r"\bpadding\s*=\s*padding\b|[\"']padding[\"']\s*:\s*padding\b")


class PadToMaxLength(Rule):
    code = "GPL301"
    pytorch_only = True
    name = "pad-to-max-length"
    message = "padding every batch to `max_length` spends attention and MLP FLOPs on pad tokens; pad per batch instead"
    triggers = ("max_length", "pad_to_max_length", "MAX_LENGTH")
    requires = (("padding", "pad_to_max_length"),)  # reported: a `padding=` or `pad_to_max_length=` argument

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        return _MAX_LENGTH_ARGUMENT.search(code) is not None
    fixable = True
    docs = RuleDocs(
        what_it_does="Flags tokenizer calls with `padding=\"max_length\"`, `padding=PaddingStrategy.MAX_LENGTH` or "
        "`pad_to_max_length=True` outside eval code and code that only generates (`model.generate(...)` with no "
        "training in the same function or script), unless `max_length=` is computed from the batch itself, and a "
        "`padding` parameter defaulting to `\"max_length\"` that its function passes on (`padding=padding`).",
        why_slow="Every sequence is padded to the model's maximum length, so a batch of 60-token sentences padded to 512 "
        "runs 8.5x the linear-layer FLOPs and 70x the attention FLOPs it needs; the pad positions are then masked out of "
        "the loss. The GPU is busy, but on nothing.",
        example="enc = tokenizer(texts, padding=\"max_length\", truncation=True, max_length=512)",
        use_instead="`padding=True` (\"longest\") in the collate function, or `DataCollatorWithPadding(tokenizer)`, so "
        "each batch is padded only to its own longest sequence; add length-bucketed sampling for more.",
        fix_safety="Unsafe: the fix switches to `padding=True`. Code that relies on a fixed sequence length (static "
        "shapes for XLA/CUDA graphs, a model that requires exactly max_length, tokenising a whole dataset into one "
        "rectangular array before batching) must keep the constant padding. With an attention mask and pad labels "
        "ignored, the model's outputs at real tokens and the loss are unchanged (tested).",
        false_positives="Fixed-shape pipelines on purpose (TPU/XLA, CUDA graphs), and tokenization done once offline. "
        "Files that import `diffusers`, or belong to a copy of it, are skipped: diffusion models condition on the text encoder's full fixed-length "
        "output (CLIP's 77 tokens), a model-mandated length. "
        "A `padding=\"max_length\" if args.pad_to_max_length else False` option is not flagged (it is opt-in), nor is "
        "tokenisation mapped over an evaluation split (`raw[\"validation\"].map(...)`, a `split=\"test\"` dataset), "
        "nor test files (`tests/`, `test_*.py`).",
    )
    valid = (
        'enc = tokenizer(texts, padding=True, truncation=True, max_length=512)\n',
        'def evaluate():\n    enc = tokenizer(texts, padding="max_length")\n',
        # a script that only generates: the padding of what it is given
        ('for text in texts:\n    ids = tokenizer([text], padding="max_length", max_length=512)["input_ids"]\n'
         '    print(model.generate(input_ids=ids))\n'),
        'padding = "max_length" if args.pad_to_max_length else False\nenc = tokenizer(texts, padding=padding)\n',
        'def collate_fn(examples):\n    max_length = max(len(e["input_ids"]) for e in examples)\n'
        '    return tokenizer.pad(examples, padding="max_length", max_length=max_length + 1)\n',
        'from diffusers import UNet2DConditionModel\n'
        'ids = tokenizer(prompt, padding="max_length", max_length=tokenizer.model_max_length).input_ids\n',
        'pixels = processor(images=image, padding="max_length", return_tensors="pt")\n',
        'test_ds = load_dataset("wikitext", split="test[:400]")\n'
        'test_ds = test_ds.map(lambda x: tokenizer(x["text"], padding="max_length", max_length=256), batched=True)\n',
        'raw["validation"].map(lambda x: tokenizer(x["text"], padding="max_length"), batched=True)\n',
        'def tokenize(texts, padding="max_length"):\n    return tokenizer(texts, padding="longest")\n',
    )
    invalid = (
        Invalid(
            'def tokenize(texts, padding: str = "max_length"):\n'
            '    return tokenizer(texts, padding=padding, truncation=True, max_length=48, return_tensors="pt")\n\n\n'
            'enc = tokenize(texts)\n',
            fixed='def tokenize(texts, padding: str = "longest"):\n'
            '    return tokenizer(texts, padding=padding, truncation=True, max_length=48, return_tensors="pt")\n\n\n'
            'enc = tokenize(texts)\n',
        ),
        Invalid(
            'enc = tokenizer(texts, padding="max_length", truncation=True, max_length=512)\n',
            fixed='enc = tokenizer(texts, padding=True, truncation=True, max_length=512)\n',
        ),
        Invalid(
            "enc = tokenizer.batch_encode_plus(texts, pad_to_max_length=True)\n",
            fixed="enc = tokenizer.batch_encode_plus(texts, padding=True)\n",
        ),
        Invalid(
            "from transformers.utils import PaddingStrategy\n\ndef collate(batch):\n"
            "    return tokenizer.pad(batch, padding=PaddingStrategy.MAX_LENGTH, max_length=args.max_seq_length)\n",
            fixed="from transformers.utils import PaddingStrategy\n\ndef collate(batch):\n"
            "    return tokenizer.pad(batch, padding=True, max_length=args.max_seq_length)\n",
        ),
    )

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """A `padding` parameter defaulting to max_length, which the function passes on (`padding=padding`)."""
        if self.context.in_tests or _for_diffusion(self.context):
            return
        params = [*node.params.params, *node.params.kwonly_params]
        if not any(param.name.value in ("padding", "pad_to_max_length") for param in params):
            return
        if not _PASSES_PADDING.search(self.context.module.code_for_node(node.body)):
            return
        for param in params:
            if param.default is None:
                continue
            if param.name.value == "padding" and self._is_max_length(param.default):
                self.report(param, when="training", fix=[Replace(param.default, '"longest"')], unsafe_fix=True)
            elif param.name.value == "pad_to_max_length" and is_true(param.default):
                self.report(param, when="training", fix=[Replace(param.default, "False")], unsafe_fix=True)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.lengths = LengthTracker(context)
        self._eval_datasets: set[str] = set()  # names bound to `load_dataset(..., split="test")` and the like

    def visit_Assign(self, node: cst.Assign) -> None:
        self.lengths.record(node)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and isinstance(node.value, cst.Call):
            split = keyword_arg(node.value, "split")
            if split is not None and isinstance(split.value, cst.SimpleString) and _is_eval_split(split.value.raw_value):
                self._eval_datasets.add(node.targets[0].target.value)

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.in_tests or _for_diffusion(self.context):
            return
        for arg in node.args:
            if arg.keyword is None:
                continue
            keyword, value = arg.keyword.value, arg.value
            if keyword == "padding" and self._is_max_length(value):
                if self._pads_for_training(node):
                    self.report(arg, when="training", fix=[Replace(value, "True")], unsafe_fix=True)
            elif keyword == "pad_to_max_length" and is_true(value):
                if self._pads_for_training(node):
                    self.report(arg, when="training", fix=[Replace(arg, "padding=True")], unsafe_fix=True)

    def _pads_for_training(self, node: cst.Call) -> bool:
        """The tests of a padding call that may pad training batches, asked only of a call that pads to a fixed length:
        `_generates_only` renders the enclosing function's code, too dear to do for every call."""
        if self._no_text(node) or self._maps_eval_split() or self._generates_only():
            return False
        return not self._dynamic_max_length(node)

    def _generates_only(self) -> bool:
        """Is the call in a function (or a script's top level) that generates with a model and never trains
        (textgen's `t5_xlsum.py`: tokenize each article, then `model.generate(input_ids=...)`)? Inference pads
        what it is given; the training's padding is elsewhere."""
        function = self.context.enclosing_function()
        code = self.context.module.code_for_node(function) if function is not None else self.context.module.code
        return ".generate(" in code and not _TRAINS.search(code)

    def _maps_eval_split(self) -> bool:
        """True inside `<eval split>.map(...)`: `raw["validation"].map(f)`, `test_ds.filter(g).map(lambda x: ...)`."""
        for node in reversed(self.context.ancestors[:-1]):
            if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "map"):
                continue
            receiver: cst.BaseExpression = node.func.value
            while True:
                if isinstance(receiver, cst.Subscript):
                    key = receiver.slice[0].slice
                    if isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString):
                        if _is_eval_split(key.value.raw_value):
                            return True
                    receiver = receiver.value
                elif isinstance(receiver, cst.Call):
                    receiver = receiver.func
                elif isinstance(receiver, cst.Attribute):
                    receiver = receiver.value
                else:
                    break
            if isinstance(receiver, cst.Name):
                return receiver.value in self._eval_datasets or _is_eval_split(receiver.value)
        return False

    @staticmethod
    def _no_text(call: cst.Call) -> bool:
        """A processor call on images only (`processor(images=img, padding="max_length")`) pads no tokens."""
        keywords = {a.keyword.value for a in call.args if a.keyword is not None}
        positional = any(a.keyword is None for a in call.args)
        return not positional and "images" in keywords and "text" not in keywords

    @staticmethod
    def _is_max_length(value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.SimpleString):
            return value.raw_value == "max_length"
        return isinstance(value, cst.Attribute) and value.attr.value == "MAX_LENGTH"

    def _dynamic_max_length(self, call: cst.Call) -> bool:
        arg = keyword_arg(call, "max_length")
        return arg is not None and self.lengths.is_dynamic_local(arg.value)
