"""GPL3xx: computation spent on padding tokens.

Padding rules look at data preparation (tokenizer calls, collate functions) and at the loss, not only at the step loop:
they report with `when="training"` (anywhere except eval code) and bring their own evidence (a collate function, a
constant length, an RNN in the same file). Test files (`FileContext.in_tests`) are skipped: padding there costs no
training time.
"""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.names import callee_method, dotted_name, last_name, name_parts
from gpulint.linter.rule import Invalid, Replace, Report, Rule, RuleDocs
from gpulint.linter.syntax import SyntaxVisitor, descendants
from gpulint.rules.common import is_true, keyword_arg

# A name that says it holds a sequence length (`MAX_LEN`, `max_seq_length`, `self.max_length`, `SEQ_LEN`).
_LENGTH_PARTS = frozenset({"len", "length", "seq", "seqlen", "maxlen", "tokens", "words"})




def _is_length_name(name: str) -> bool:
    return bool(name_parts(name) & _LENGTH_PARTS)


def _calls_max_or_len(expr: cst.BaseExpression) -> bool:
    """True when the expression computes something from the data (`max(len(s) for s in batch)`, `x.size(1)`)."""
    finder = _DataSizes()
    finder.walk(expr)
    return finder.found


class _DataSizes(SyntaxVisitor):
    found = False

    def visit_Call(self, node: cst.Call) -> bool:
        self.found = self.found or callee_method(node) in ("max", "len", "size", "amax")
        return not self.found

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.found = self.found or node.attr.value == "shape"
        return not self.found


class _LengthTracker:
    """Which names hold a constant sequence length: config attributes (`self.max_len`, `args.max_seq_length`),
    length-named constants and parameters not computed in the function (`MAX_LEN`, `max_seq_length`), and locals
    assigned from one of those. A local assigned from the batch (`max_len = max(len(s) for s in batch)`) is dynamic; the amount that
    pads up to a constant (`pad_len = MAX_LEN - len(ids)`) counts as constant: it is what padding to MAX_LEN looks like."""

    def __init__(self, context) -> None:
        self.context = context
        self._locals: dict[tuple[int, str], bool] = {}  # (id(function), name) -> constant?

    def record(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        name = node.targets[0].target.value
        function = self.context.enclosing_function()
        if function is not None:  # module-level names are judged by their name alone
            self._locals[(id(function), name)] = self.is_constant(node.value)

    def is_constant(self, expr: cst.BaseExpression) -> bool:
        """True when `expr` is (arithmetic on) a constant length and nothing computed from the data."""
        if isinstance(expr, cst.Integer):
            return True
        if isinstance(expr, cst.BinaryOperation):
            if isinstance(expr.operator, cst.Subtract):
                return self.is_constant(expr.left)
            sides = (expr.left, expr.right)
            return any(self.is_constant(s) for s in sides) and not any(_calls_max_or_len(s) for s in sides)
        if isinstance(expr, cst.Name):
            function = self.context.enclosing_function()
            local = self._locals.get((id(function), expr.value)) if function is not None else None
            if local is not None:
                return local
            return _is_length_name(expr.value)
        if isinstance(expr, cst.Attribute):
            return _is_length_name(expr.attr.value) and dotted_name(expr) is not None
        return False

    def is_dynamic_local(self, expr: cst.BaseExpression) -> bool:
        """True when `expr` is (arithmetic on) a local computed from the data in this function."""
        if isinstance(expr, cst.BinaryOperation):
            return self.is_dynamic_local(expr.left) or self.is_dynamic_local(expr.right)
        if isinstance(expr, cst.Name):
            function = self.context.enclosing_function()
            return function is not None and self._locals.get((id(function), expr.value)) is False
        return _calls_max_or_len(expr)


_EVAL_SPLIT_PARTS = frozenset({"test", "validation", "valid", "val", "eval", "dev"})


def _is_eval_split(name: str) -> bool:
    """`"test[:400]"`, `"validation"`, `eval_dataset`, `val_ds`: a split or dataset used only to evaluate."""
    return bool({p for p in re.split(r"[^a-z]+", name.lower()) if p} & _EVAL_SPLIT_PARTS)


# What `PadToMaxLength.visit_Call` reports: `padding="max_length"`, `padding=PaddingStrategy.MAX_LENGTH`,
# `pad_to_max_length=True`.
_MAX_LENGTH_ARGUMENT = re.compile(
    r"\bpadding\s*=\s*(?:[rRuU]?[\"']max_length[\"']|[\w.]*\bMAX_LENGTH\b)|\bpad_to_max_length\s*=\s*True\b"
)


class PadToMaxLength(Rule):
    code = "GPL301"
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
        "`pad_to_max_length=True` outside eval code, unless `max_length=` is computed from the batch itself.",
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
        "Files that import `diffusers` are skipped: diffusion models condition on the text encoder's full fixed-length "
        "output (CLIP's 77 tokens), a model-mandated length. "
        "A `padding=\"max_length\" if args.pad_to_max_length else False` option is not flagged (it is opt-in), nor is "
        "tokenisation mapped over an evaluation split (`raw[\"validation\"].map(...)`, a `split=\"test\"` dataset), "
        "nor test files (`tests/`, `test_*.py`).",
    )
    valid = (
        'enc = tokenizer(texts, padding=True, truncation=True, max_length=512)\n',
        'def evaluate():\n    enc = tokenizer(texts, padding="max_length")\n',
        'padding = "max_length" if args.pad_to_max_length else False\nenc = tokenizer(texts, padding=padding)\n',
        'def collate_fn(examples):\n    max_length = max(len(e["input_ids"]) for e in examples)\n'
        '    return tokenizer.pad(examples, padding="max_length", max_length=max_length + 1)\n',
        'from diffusers import UNet2DConditionModel\n'
        'ids = tokenizer(prompt, padding="max_length", max_length=tokenizer.model_max_length).input_ids\n',
        'pixels = processor(images=image, padding="max_length", return_tensors="pt")\n',
        'test_ds = load_dataset("wikitext", split="test[:400]")\n'
        'test_ds = test_ds.map(lambda x: tokenizer(x["text"], padding="max_length", max_length=256), batched=True)\n',
        'raw["validation"].map(lambda x: tokenizer(x["text"], padding="max_length"), batched=True)\n',
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
        Invalid(
            "from transformers.utils import PaddingStrategy\n\ndef collate(batch):\n"
            "    return tokenizer.pad(batch, padding=PaddingStrategy.MAX_LENGTH, max_length=args.max_seq_length)\n",
            fixed="from transformers.utils import PaddingStrategy\n\ndef collate(batch):\n"
            "    return tokenizer.pad(batch, padding=True, max_length=args.max_seq_length)\n",
        ),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self.lengths = _LengthTracker(context)
        self._eval_datasets: set[str] = set()  # names bound to `load_dataset(..., split="test")` and the like

    def visit_Assign(self, node: cst.Assign) -> None:
        self.lengths.record(node)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and isinstance(node.value, cst.Call):
            split = keyword_arg(node.value, "split")
            if split is not None and isinstance(split.value, cst.SimpleString) and _is_eval_split(split.value.raw_value):
                self._eval_datasets.add(node.targets[0].target.value)

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.in_tests or self.context.imports.imported("diffusers"):
            return
        if self._no_text(node) or self._maps_eval_split():
            return
        for arg in node.args:
            if arg.keyword is None:
                continue
            keyword, value = arg.keyword.value, arg.value
            if keyword == "padding" and self._is_max_length(value):
                if not self._dynamic_max_length(node):
                    self.report(arg, when="training", fix=[Replace(value, "True")], unsafe_fix=True)
            elif keyword == "pad_to_max_length" and is_true(value):
                if not self._dynamic_max_length(node):
                    self.report(arg, when="training", fix=[Replace(arg, "padding=True")], unsafe_fix=True)

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


_RNN_CLASSES = frozenset({"LSTM", "GRU", "RNN"})
_PACKING = frozenset({"pack_padded_sequence", "pack_sequence"})


class PaddedRnnWithoutPacking(Rule):
    code = "GPL302"
    name = "padded-rnn-without-packing"
    message = "`pad_sequence` output fed to an RNN/LSTM/GRU without `pack_padded_sequence`: the recurrence runs every pad step"
    triggers = ("pad_sequence",)
    facts = ("LSTM", "GRU", "RNN", "pack_")  # the recurrent layer and the packing may be built anywhere in the file
    docs = RuleDocs(
        what_it_does="Flags `pad_sequence(...)` in a file that builds an `nn.LSTM` / `nn.GRU` / `nn.RNN` and never calls "
        "`pack_padded_sequence` / `pack_sequence`.",
        why_slow="A recurrent layer is sequential in time: on a padded batch it runs all T steps for every sequence, so a "
        "batch whose lengths average half the longest wastes about half of the (strictly serial) RNN time. A packed "
        "sequence lets cuDNN stop each sequence at its own length and shrink the batch as sequences end.",
        example="x = pad_sequence(seqs, batch_first=True)\nout, _ = self.lstm(self.embed(x))",
        use_instead="`packed = pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=False)`, run "
        "the RNN on `packed`, then `pad_packed_sequence(out, batch_first=True)`.",
        false_positives="Padding in one file and the RNN in another is not seen (gpulint looks at one file); a model that "
        "needs the final hidden state of padded steps on purpose.",
    )
    valid = (
        "import torch.nn as nn\nfrom torch.nn.utils.rnn import pad_sequence, pack_padded_sequence\n\n"
        "class Tagger(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.lstm = nn.LSTM(16, 32, batch_first=True)\n\n    def forward(self, seqs, lengths):\n"
        "        x = pad_sequence(seqs, batch_first=True)\n"
        "        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)\n"
        "        return self.lstm(packed)\n",
        "from torch.nn.utils.rnn import pad_sequence\n\ndef collate(batch):\n    return pad_sequence(batch, batch_first=True)\n",
    )
    invalid = (
        Invalid(
            "import torch.nn as nn\nfrom torch.nn.utils.rnn import pad_sequence\n\n"
            "class Tagger(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.lstm = nn.LSTM(16, 32, batch_first=True)\n\n    def forward(self, seqs):\n"
            "        x = pad_sequence(seqs, batch_first=True)\n        return self.lstm(x)\n"
        ),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._pads: list[tuple[cst.Call, tuple[cst.CSTNode, ...]]] = []
        self._has_rnn = False
        self._packs = False

    def visit_Call(self, node: cst.Call) -> None:
        name = last_name(node.func)
        if name == "pad_sequence":
            self._pads.append((node, self.context.ancestors_snapshot()))
        elif name in _RNN_CLASSES:
            self._has_rnn = True
        elif name in _PACKING:
            self._packs = True

    def leave_Module(self, node: cst.Module) -> None:
        # Only now is it known whether the file has an RNN and packs anywhere.
        if not self._has_rnn or self._packs or self.context.in_tests:
            return
        for call, ancestors in self._pads:
            self.context.add_report(Report(self, call, self.message, "training", ancestors))


_PAD_FUNCTIONS = frozenset({"torch.nn.functional.pad", "torch.constant_pad_nd"})
_BUFFER_FUNCTIONS = frozenset({"torch.zeros", "torch.ones", "torch.full", "torch.empty"})
_BUFFER_METHODS = frozenset({"new_zeros", "new_ones", "new_full", "new_empty"})


# `[pad_token_id] * n` or `n * [PAD]` (what `_is_pad_list` accepts), and `while len(ids) < ...` (`visit_While`).
_PAD_LIST = re.compile(r"\[\s*[\w.]*pad[\w.]*\s*,?\s*\]\s*\*|\*\s*\[\s*[\w.]*pad[\w.]*\s*,?\s*\]", re.IGNORECASE)
_WHILE_LEN = re.compile(r"while\b[\s(]*len\s*\(")  # no leading `\b`: it would slow the search down
# What `_is_collate` accepts of a function's own name: `def collate_fn(`, `def my_collate(`, `def __getitem__(`.
_COLLATE_DEF = re.compile(r"def\s+(?:\w*collate\w*|__getitem__)\s*\(", re.IGNORECASE)


class PadToConstantInCollate(Rule):
    code = "GPL303"
    name = "pad-to-constant-in-collate"
    message = "every example or batch is padded to the constant `{length}`; pad to the batch's longest sequence instead"
    triggers = ("collate", "Collat", "__getitem__", "pad", "while len(")
    # A function passed as `collate_fn=` may size its buffers by a constant without naming padding at all: it is
    # parsed (`linked_by`), and so is the code passing it (`facts`), where the rule learns that it is a collate function.
    linked_by = ("collate_fn",)
    facts = ("collate_fn",)

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        # A pad or a buffer is reported in a collate function or `__getitem__` (or one linked by `collate_fn=`,
        # which the engine keeps by name); a list padded up to a constant anywhere.
        return (
            _COLLATE_DEF.search(code) is not None or ("collat" in class_name.lower() and "__call__" in code)
            or _PAD_LIST.search(code) is not None or _WHILE_LEN.search(code) is not None
        )
    docs = RuleDocs(
        what_it_does="Flags `F.pad(...)`, a project's own `pad_*(ids, MAX_LEN)` helper, or a `torch.zeros/full/ones(...)` "
        "buffer sized by a constant length (a module-level `MAX_LEN`, `self.max_length`, `args.max_seq_length`, "
        "`self.max_words - len(x)`) in a collate function (named `collate*`, passed as `collate_fn=`, a "
        "`*Collator.__call__`) or a dataset's `__getitem__`; and token lists padded up to a constant anywhere on the "
        "training path: `ids + [pad_token_id] * (max_seq_length - len(ids))`, `while len(ids) < max_seq_length: "
        "ids.append(0)`.",
        why_slow="Every batch is as long as the longest sequence the pipeline allows, not as the longest in the batch: "
        "linear layers spend FLOPs proportional to the padded length and attention to its square, all on pad tokens "
        "that the loss then ignores.",
        example="MAX_LEN = 512\n\ndef collate_fn(batch):\n    ids = torch.zeros(len(batch), MAX_LEN, dtype=torch.long)\n"
        "    for i, seq in enumerate(batch):\n        ids[i, :len(seq)] = seq\n    return ids",
        use_instead="Size the buffer by `max(len(s) for s in batch)` (optionally rounded up to a multiple of 8), or "
        "`pad_sequence(batch, batch_first=True)`; sort or bucket by length to cut padding further.",
        false_positives="Models that require a fixed length (position tables sized exactly, static shapes for XLA or CUDA "
        "graphs); constants that are not sequence lengths are not flagged unless their name says length/len/seq.",
    )
    valid = (
        "import torch\n\ndef collate_fn(batch):\n    max_len = max(len(s) for s in batch)\n"
        "    ids = torch.zeros(len(batch), max_len, dtype=torch.long)\n    return ids\n",
        "import torch\nMAX_LEN = 512\n\ndef evaluate_collate(batch):\n    return torch.zeros(len(batch), MAX_LEN)\n",
        "import torch\nMAX_LEN = 512\n\ndef make_positions():\n    return torch.zeros(MAX_LEN)\n",
        "def collate(batch):\n    longest = max(len(ids) for ids in batch)\n"
        "    return [ids + [pad_id] * (longest - len(ids)) for ids in batch]\n",
        "def collate(batch):\n    longest = max(len(ids) for ids in batch)\n    for ids in batch:\n"
        "        while len(ids) < longest:\n            ids.append(0)\n    return batch\n",
        "def parse_splits(splits, num_splits):\n    while len(splits) < num_splits:\n        if strict:\n"
        "            raise ValueError(splits)\n        splits.append(0.0)\n    return splits\n",
    )
    invalid = (
        Invalid(
            "import torch\nMAX_LEN = 512\n\ndef collate_fn(batch):\n"
            "    ids = torch.zeros(len(batch), MAX_LEN, dtype=torch.long)\n    for i, seq in enumerate(batch):\n"
            "        ids[i, :len(seq)] = seq\n    return ids\n"
        ),
        Invalid(
            "import torch\nimport torch.nn.functional as F\nSEQ_LEN = 256\n\ndef pad_batch(batch):\n"
            "    return torch.stack([F.pad(s, (0, SEQ_LEN - s.size(0))) for s in batch])\n\n"
            "loader = torch.utils.data.DataLoader(data, batch_size=8, collate_fn=pad_batch)\n"
        ),
        Invalid(
            "import torch\n\nclass PadCollator:\n    def __init__(self, max_length):\n        self.max_length = max_length\n\n"
            "    def __call__(self, batch):\n        return torch.full((len(batch), self.max_length), 0)\n"
        ),
        Invalid(
            "def preprocess_train(examples, max_seq_length):\n    ids = tokenizer.encode(examples['text'])\n"
            "    pad_len = max_seq_length - len(ids)\n    return ids + [tokenizer.pad_token_id] * pad_len\n"
        ),
        Invalid(
            "def convert_examples_to_features(examples, max_seq_length):\n    features = []\n    for ex in examples:\n"
            "        input_ids = tokenizer.convert_tokens_to_ids(ex)\n        input_mask = [1] * len(input_ids)\n"
            "        while len(input_ids) < max_seq_length:\n            input_ids.append(0)\n"
            "            input_mask.append(0)\n        features.append(input_ids)\n    return features\n"
        ),
        Invalid(
            "import torch\n\nclass InstructionDataset(torch.utils.data.Dataset):\n    def __getitem__(self, index):\n"
            "        example = torch.tensor(self.encode(index))\n        padding = self.max_words - example.shape[0]\n"
            "        return torch.cat((example, torch.zeros(padding, dtype=torch.int64) - 1))\n"
        ),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self.lengths = _LengthTracker(context)
        self._collate_fn_names: set[str] = set()
        # Padding to a constant in a function not yet known to be a collate function: decided at the end of the file.
        self._pending: list[tuple[str, cst.Call, str, tuple[cst.CSTNode, ...]]] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        self.lengths.record(node)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and node.keyword.value == "collate_fn":
            name = last_name(node.value)
            if name:
                self._collate_fn_names.add(name)

    def visit_Call(self, node: cst.Call) -> None:
        length = self._constant_length(node)
        if length is None or self.context.in_tests or self._pads_labels_or_mask(node):
            return
        function = self.context.enclosing_function()
        if function is None:
            return
        message = self.message.format(length=self.context.module.code_for_node(length))
        if self._is_collate(function):
            self.report(node, message, when="training")
        else:
            self._pending.append((function.name.value, node, message, self.context.ancestors_snapshot()))

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        # `ids + [pad_id] * (MAX_LEN - len(ids))`: a Python list padded up to a constant length, wherever it is built.
        if not isinstance(node.operator, cst.Multiply) or self.context.in_tests:
            return
        for pads, amount in ((node.left, node.right), (node.right, node.left)):
            if _is_pad_list(pads) and self.lengths.is_constant(amount) and not self._pads_labels_or_mask():
                length = amount.left if isinstance(amount, cst.BinaryOperation) else amount
                self.report(node, self.message.format(length=self.context.module.code_for_node(length)), when="training")
                return

    def _pads_labels_or_mask(self, call: cst.Call | None = None) -> bool:
        """Padding labels or a loss mask to the same constant follows the input's padding and costs no FLOPs of its
        own: only the input is reported, once per example."""
        if call is not None and call.args and call.args[0].keyword is None and _names_labels(call.args[0].value):
            return True
        for node in reversed(self.context.ancestors):
            if isinstance(node, cst.Assign):
                return any(_names_labels(t.target) for t in node.targets)
            if isinstance(node, (cst.SimpleStatementLine, cst.FunctionDef)):
                break
        return False

    def visit_While(self, node: cst.While) -> None:
        # `while len(input_ids) < max_seq_length: input_ids.append(0)`: the same list padding, one token at a time.
        test = node.test
        if self.context.in_tests or not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return
        grows, limit = test.left, test.comparisons[0].comparator
        if not isinstance(test.comparisons[0].operator, cst.LessThan) or isinstance(limit, cst.Integer):
            return  # `while len(splits) < 3`: a literal bound is not a sequence length
        if not self.lengths.is_constant(limit):
            return
        if not (isinstance(grows, cst.Call) and last_name(grows.func) == "len" and len(grows.args) == 1):
            return
        padded = dotted_name(grows.args[0].value)
        if padded is None or _names_labels(grows.args[0].value):
            return
        for statement in node.body.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                call = small.value if isinstance(small, cst.Expr) else None
                if (
                    isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                    and call.func.attr.value == "append" and dotted_name(call.func.value) == padded
                    and call.args and _is_pad_value(call.args[0].value)
                ):
                    # Reported on the append: the line that adds the pad tokens.
                    self.report(call, self.message.format(length=self.context.module.code_for_node(limit)),
                                when="training")
                    return

    def leave_Module(self, node: cst.Module) -> None:
        for function_name, call, message, ancestors in self._pending:
            if function_name in self._collate_fn_names:
                self.context.add_report(Report(self, call, message, "training", ancestors))

    def _is_collate(self, function: cst.FunctionDef) -> bool:
        name = function.name.value
        if "collate" in name.lower() or name == "__getitem__":
            return True
        if name == "__call__":
            for ancestor in reversed(self.context.ancestors):
                if isinstance(ancestor, cst.ClassDef):
                    return "collat" in ancestor.name.value.lower()
        return False

    def _constant_length(self, call: cst.Call) -> cst.BaseExpression | None:
        """The constant length expression a pad or a buffer is sized with, else None."""
        resolved = self.context.resolve(call.func) or ""
        if resolved in _PAD_FUNCTIONS and len(call.args) >= 2:
            sizes: list[cst.BaseExpression] = [call.args[1].value]
        elif isinstance(call.func, cst.Name) and name_parts(call.func.value) & {"pad", "padding"}:
            sizes = [a.value for a in call.args if a.keyword is None]  # a project's own `pad_tokens(ids, MAX_LEN)`
        elif resolved in _BUFFER_FUNCTIONS or callee_method(call) in _BUFFER_METHODS:
            sizes = [a.value for a in call.args if a.keyword is None]
            if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
                sizes = [e.value for e in sizes[0].elements]
        else:
            return None
        for size in sizes:
            for part in _length_parts(size):
                if self.lengths.is_constant(part) and not isinstance(part, cst.Integer):
                    return part
        return None


_LABEL_WORDS = ("label", "target", "mask", "msk")


def _names_labels(expr: cst.BaseExpression) -> bool:
    """The expression names labels, targets or a mask (`labels`, `pad_targets[1:]`, `_msk`, `(x, y_mask)`)."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        return any(_names_labels(e.value) for e in expr.elements)
    if isinstance(expr, cst.Subscript):
        expr = expr.value
    name = dotted_name(expr)
    return name is not None and any(word in name.lower() for word in _LABEL_WORDS)


def _is_pad_value(expr: cst.BaseExpression) -> bool:
    """`0`, `pad_id`, `tokenizer.pad_token_id`: what a token list is padded with."""
    if isinstance(expr, cst.Integer):
        return True
    name = dotted_name(expr)
    return name is not None and "pad" in name.lower()


def _is_pad_list(expr: cst.BaseExpression) -> bool:
    """`[pad_token_id]`, `[tokenizer.pad_token_id]`, `[PAD]`: a one-element list of a pad value."""
    if not isinstance(expr, cst.List) or len(expr.elements) != 1:
        return False
    name = dotted_name(expr.elements[0].value)
    return name is not None and "pad" in name.lower()


def _length_parts(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The names and attributes an F.pad spec or a size is computed from (`(0, MAX_LEN - s.size(0))` -> MAX_LEN...)."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        return [p for e in expr.elements for p in _length_parts(e.value)]
    if isinstance(expr, cst.BinaryOperation):
        return _length_parts(expr.left) + _length_parts(expr.right)
    if isinstance(expr, (cst.Name, cst.Attribute)):
        return [expr]
    return []


_CE_FUNCTIONS = frozenset({"torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss"})
_CE_CLASSES = frozenset({"CrossEntropyLoss", "NLLLoss"})
_SHAPE_METHODS = frozenset({"view", "reshape", "flatten", "squeeze", "float"})
_MASKING_METHODS = frozenset({"masked_fill", "masked_select", "masked_fill_"})


def _reduction_none(call: cst.Call) -> bool:
    arg = keyword_arg(call, "reduction")
    return arg is not None and isinstance(arg.value, cst.SimpleString) and arg.value.raw_value == "none"


def _mentions_pad(expr: cst.BaseExpression) -> bool:
    name = dotted_name(expr)
    return name is not None and "pad" in name.lower()


def _mentions_mask(expr: cst.BaseExpression) -> bool:
    """True when a mask name appears in the expression (`mask`, `attention_mask.float()`, `batch["loss_mask"]`)."""
    for node in descendants(expr):
        kind = type(node)
        if kind is cst.Name and "mask" in node.value.lower():
            return True
        if kind is cst.SimpleString and "mask" in node.raw_value.lower():
            return True
    return False


_UNREDUCED_OR_MASKED = re.compile(r"\breduction\s*=|\bmasked_(?:select|fill)")


class LossMaskedAfterwards(Rule):
    code = "GPL304"
    name = "loss-masked-afterwards"
    message = "the per-token loss is computed over pad positions and masked afterwards; pass `ignore_index` (pads labelled -100) instead"
    triggers = ("reduction", "masked_select", "masked_fill")

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        # Every report is at a use of the loss that names a mask (`loss * mask`, `loss[mask]`, `masked_select`), of a
        # loss made with `reduction=` or masked by a method (words in strings, such as weight names, do not count).
        return "mask" in code.lower() and _UNREDUCED_OR_MASKED.search(code) is not None
    docs = RuleDocs(
        what_it_does="Flags `cross_entropy` / `nll_loss` (or a `CrossEntropyLoss`/`NLLLoss` built with "
        "`reduction='none'`) whose per-token result is then multiplied by or indexed with a mask (`(loss * mask).sum() / "
        "mask.sum()`, `loss[mask]`, `loss.masked_fill(...)`) in the training step or a function it calls (`compute_loss`, "
        "`training_step`); and a hand-written per-token `loss.masked_select(non_pad_mask)`.",
        why_slow="The unreduced loss materialises a (batch x length) tensor, including every pad position, and the mask "
        "costs a multiply, two reductions and a division: 4-5 extra kernel launches and a full read/write of the loss "
        "tensor per step. With `ignore_index` the fused loss kernel skips pad targets and normalises by the count of "
        "real tokens in one launch; `(loss * mask).mean()` in addition divides by pads too, a silent loss-scale bug.",
        example="loss = F.cross_entropy(logits.view(-1, V), labels.view(-1), reduction='none')\n"
        "loss = (loss * attention_mask.view(-1)).sum() / attention_mask.sum()",
        use_instead="`labels = labels.masked_fill(attention_mask == 0, -100)` once in the collate function, then "
        "`F.cross_entropy(logits.view(-1, V), labels.view(-1), ignore_index=-100)` (with `label_smoothing=eps` for a "
        "smoothed loss).",
        false_positives="Masks that are real per-token weights (not 0/1 pad masks), and losses that need per-sequence "
        "normalisation before averaging (a weighted reduction ignore_index cannot express).",
    )
    valid = (
        "import torch.nn.functional as F\n\ndef compute_loss(logits, labels):\n"
        "    return F.cross_entropy(logits.view(-1, 100), labels.view(-1), ignore_index=-100)\n",
        "import torch.nn.functional as F\n\ndef compute_loss(logits, labels, weights):\n"
        "    loss = F.cross_entropy(logits, labels, reduction='none')\n    return (loss * weights).mean()\n",
        "import torch.nn.functional as F\n\ndef evaluate(logits, labels, mask):\n"
        "    loss = F.cross_entropy(logits, labels, reduction='none')\n    return (loss * mask).sum()\n",
        "import torch.nn.functional as F\n\ndef score_completions(logits, tokens, mask):\n"
        "    losses = F.cross_entropy(logits, tokens, reduction='none')\n"
        "    return (losses * mask).sum(dim=1) / mask.sum(dim=1)\n",
    )
    invalid = (
        Invalid(
            "import torch.nn.functional as F\n\ndef compute_loss(logits, labels, attention_mask):\n"
            "    loss = F.cross_entropy(logits.view(-1, 100), labels.view(-1), reduction='none')\n"
            "    return (loss * attention_mask.view(-1)).sum() / attention_mask.sum()\n"
        ),
        Invalid(
            "import torch.nn as nn\n\nclass Trainer:\n    def __init__(self):\n"
            "        self.criterion = nn.CrossEntropyLoss(reduction='none')\n\n    def training_step(self, batch):\n"
            "        loss = self.criterion(batch['logits'], batch['labels'])\n"
            "        return loss[batch['mask'].bool()].mean()\n"
        ),
        Invalid(
            "import torch.nn.functional as F\n\ndef compute_loss(logits, labels, pad_mask):\n"
            "    return (F.nll_loss(logits, labels, reduction='none') * pad_mask).sum() / pad_mask.sum()\n"
        ),
        Invalid(
            "import torch.nn.functional as F\n\ndef compute_loss(pred, gold, pad_idx, eps=0.1):\n"
            "    one_hot = F.one_hot(gold, pred.size(1)).float() * (1 - eps) + eps / pred.size(1)\n"
            "    loss = -(one_hot * F.log_softmax(pred, dim=1)).sum(dim=1)\n    non_pad_mask = gold.ne(pad_idx)\n"
            "    return loss.masked_select(non_pad_mask).sum()\n"
        ),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._criteria: set[str] = set()  # names of loss modules built with reduction='none'
        # (id(function), local name) -> the loss call and its ancestors, until a mask use reports it.
        self._losses: dict[tuple[int, str], tuple[cst.Call, tuple[cst.CSTNode, ...]]] = {}
        self._reported: set[int] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if len(node.targets) != 1 or not isinstance(value, cst.Call):
            return
        target = node.targets[0].target
        if last_name(value.func) in _CE_CLASSES and _reduction_none(value):
            name = last_name(target)
            if name:
                self._criteria.add(name)
        elif isinstance(target, cst.Name) and self._is_unreduced_loss(value):
            self._losses[(id(self.context.enclosing_function()), target.value)] = (value, self.context.ancestors_snapshot())

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if not isinstance(node.operator, cst.Multiply):
            return
        for loss_side, other in ((node.left, node.right), (node.right, node.left)):
            loss = self._find_loss(loss_side)  # cheap; the mask check walks the other operand
            if loss is not None and _mentions_mask(other):
                self._report(*loss)
                return

    def visit_Subscript(self, node: cst.Subscript) -> None:
        loss = self._find_loss(node.value)
        if loss is not None and any(isinstance(e.slice, cst.Index) and _mentions_mask(e.slice.value) for e in node.slice):
            self._report(*loss)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in _MASKING_METHODS:
            if not self._report_loss(node.func.value) and node.args and self._hand_written_loss(node.func.value):
                if _mentions_pad(node.args[0].value) and not self.context.in_tests:
                    # `loss = -(one_hot * log_prb).sum(1); loss.masked_select(non_pad_mask)`: a hand-written
                    # per-token loss over pad positions (label smoothing before `label_smoothing=` existed).
                    self.report(node)

    def _hand_written_loss(self, expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Name) and "loss" in expr.value.lower()

    def _is_unreduced_loss(self, call: cst.Call) -> bool:
        if self.context.resolve(call.func) in _CE_FUNCTIONS:
            return _reduction_none(call)
        return last_name(call.func) in self._criteria

    def _report_loss(self, expr: cst.BaseExpression) -> bool:
        """Report the unreduced loss that `expr` is; True when it is one."""
        loss = self._find_loss(expr)
        if loss is not None:
            self._report(*loss)
        return loss is not None

    def _find_loss(self, expr: cst.BaseExpression) -> tuple[cst.Call, tuple[cst.CSTNode, ...]] | None:
        """The unreduced loss call `expr` is (through `.view(-1)` and the like, or a local assigned from one) and the
        ancestors to report it with."""
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _SHAPE_METHODS:
            expr = expr.func.value
        if isinstance(expr, cst.Call) and self._is_unreduced_loss(expr):
            return expr, self.context.ancestors_snapshot()
        if isinstance(expr, cst.Name):
            return self._losses.get((id(self.context.enclosing_function()), expr.value))
        return None

    def _report(self, call: cst.Call, ancestors: tuple[cst.CSTNode, ...]) -> None:
        if id(call) not in self._reported and not self.context.in_tests:
            self._reported.add(id(call))
            # "per_step": the training loss runs every step (compute_loss, training_step, code the step calls); a
            # masked per-row average in an eval or scoring helper, or behind an eval-interval gate, is not it.
            self.context.add_report(Report(self, call, self.message, "per_step", ancestors))
