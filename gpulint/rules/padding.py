"""GPL3xx: computation spent on padding tokens."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.rule import Invalid, Replace, Rule, RuleDocs


class PadToMaxLength(Rule):
    code = "GPL301"
    name = "pad-to-max-length"
    message = "padding every batch to `max_length` spends attention and MLP FLOPs on pad tokens; pad per batch instead"
    triggers = ("max_length", "pad_to_max_length")
    fixable = True
    docs = RuleDocs(
        what_it_does="Flags tokenizer calls with `padding=\"max_length\"` or `pad_to_max_length=True` outside eval code.",
        why_slow="Every sequence is padded to the model's maximum length, so a batch of 60-token sentences padded to 512 "
        "runs 8.5x the linear-layer FLOPs and 70x the attention FLOPs it needs; the pad positions are then masked out of "
        "the loss. The GPU is busy, but on nothing.",
        example="enc = tokenizer(texts, padding=\"max_length\", truncation=True, max_length=512)",
        use_instead="`padding=True` (\"longest\") in the collate function, or `DataCollatorWithPadding(tokenizer)`, so "
        "each batch is padded only to its own longest sequence; add length-bucketed sampling for more.",
        fix_safety="Unsafe: the fix switches to `padding=True`. Code that relies on a fixed sequence length (static "
        "shapes for XLA/CUDA graphs, a model that requires exactly max_length) must keep the constant padding.",
        false_positives="Fixed-shape pipelines on purpose (TPU/XLA, CUDA graphs), and tokenization done once offline.",
    )
    valid = (
        'enc = tokenizer(texts, padding=True, truncation=True, max_length=512)\n',
        'def evaluate():\n    enc = tokenizer(texts, padding="max_length")\n',
    )
    invalid = (
        Invalid(
            'enc = tokenizer(texts, padding="max_length", truncation=True, max_length=512)\n',
            fixed='enc = tokenizer(texts, padding=True, truncation=True, max_length=512)\n',
        ),
        Invalid(
            "enc = tokenizer.batch_encode_plus(texts, pad_to_max_length=True)\n",
            fixed="enc = tokenizer.batch_encode_plus(texts, padding=True)\n",
        ),
    )

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is None:
            return
        keyword = node.keyword.value
        value = node.value
        if keyword == "padding" and isinstance(value, cst.SimpleString) and value.raw_value == "max_length":
            self.report(node, when="training", fix=[Replace(value, "True")], unsafe_fix=True)
        elif keyword == "pad_to_max_length" and isinstance(value, cst.Name) and value.value == "True":
            self.report(node, when="training", fix=[Replace(node, "padding=True")], unsafe_fix=True)
