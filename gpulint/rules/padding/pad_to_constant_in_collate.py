"""GPL303 pad-to-constant-in-collate."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.names import callee_method, dotted_name, last_name, name_parts
from gpulint.linter.rule import Invalid, Report, Rule, RuleDocs
from gpulint.rules.padding.helpers import LengthTracker, is_length_name

_PAD_FUNCTIONS = frozenset({"torch.nn.functional.pad", "torch.constant_pad_nd"})
_BUFFER_FUNCTIONS = frozenset({"torch.zeros", "torch.ones", "torch.full", "torch.empty"})
_BUFFER_METHODS = frozenset({"new_zeros", "new_ones", "new_full", "new_empty"})


# `[pad_token_id] * n` or `n * [PAD]` (what `_is_pad_list` accepts), and `while len(ids) < ...` (`visit_While`).
_PAD_LIST = re.compile(r"\[\s*[\w.]*pad[\w.]*\s*,?\s*\]\s*\*|\*\s*\[\s*[\w.]*pad[\w.]*\s*,?\s*\]", re.IGNORECASE)
_WHILE_LEN = re.compile(r"while\b[\s(]*len\s*\(")  # no leading `\b`: it would slow the search down
# `[eos_token_id] * (self.model_max_length - len(ids))`: one value filling a list up to a length
# (`LengthTracker.fill_length`), also through a local count: `[0] * padding_size` after `padding_size = MAX - len(ids)`.
_FILL_UP = re.compile(r"\]\s*\*\s*\(?[^()]*-\s*len\s*\(")
_TIMES_COUNT = re.compile(r"\]\s*\*\s*[A-Za-z_]")  # `[0] * padding_size`, with the count computed elsewhere
# What `_is_collate` accepts of a function's own name: `def collate_fn(`, `def my_collate(`, `def __getitem__(`.
_COLLATE_DEF = re.compile(r"def\s+(?:\w*collate\w*|__getitem__)\s*\(", re.IGNORECASE)


class PadToConstantInCollate(Rule):
    code = "GPL303"
    pytorch_only = True
    name = "pad-to-constant-in-collate"
    message = "every example or batch is padded to the constant `{length}`; pad to the batch's longest sequence instead"
    triggers = ("collate", "Collat", "__getitem__", "pad", "while len(", "- len(")
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
            or _FILL_UP.search(code) is not None or ("- len(" in code and _TIMES_COUNT.search(code) is not None)
        )
    docs = RuleDocs(
        what_it_does="Flags `F.pad(...)`, a project's own `pad_*(ids, MAX_LEN)` helper, or a `torch.zeros/full/ones(...)` "
        "buffer sized by a constant length (a module-level `MAX_LEN`, `self.max_length`, `args.max_seq_length`, "
        "`self.max_words - len(x)`; a parameter, unless every call of the function in its file hands it a length "
        "measured from the batch, `max(len(ids) for ids in batch)`) in a collate function (named `collate*`, passed "
        "as `collate_fn=`, a "
        "`*Collator.__call__`) or a dataset's `__getitem__`; and token lists padded up to a constant anywhere on the "
        "training path: `ids + [pad_token_id] * (max_seq_length - len(ids))` (any one value filling a list up to a "
        "constant length: `ids += [eos_token_id] * (self.model_max_length - len(ids))`), `while len(ids) < max_seq_length: "
        "ids.append(0)`. Not the placeholders another modality fills (`[img_pad_id] * num_image_tokens`: slots for "
        "image embeddings), nor a buffer in a function that cuts random windows of that length (`st = "
        "random.randint(0, n - self.max_len)`: fixed-length segments by design, the buffer pads only a shorter clip).",
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
        "def collate(batch):\n    longest = max(len(ids) for ids in batch)\n    for ids in batch:\n"
        "        padding_size = max(0, longest - len(ids))\n        ids.extend([0] * padding_size)\n    return batch\n",
        "def target_segments(tgt, seq_length):\n    pad_num = seq_length - len(tgt)\n"
        "    tgt_seg = [1] * len(tgt) + [0] * pad_num\n    return tgt_seg\n",
        "def context_channels_per_layer(context_channels, num_layers):\n"
        "    pad_count = num_layers + 1 - len(context_channels)\n    return context_channels + [0] * pad_count\n",
        "import torch.nn.functional as F\n\ndef shift(x, pad):\n    padding = tuple([pad] * 4)\n"
        "    return F.pad(x, padding, 'replicate')\n",
        "def parse_splits(splits, num_splits):\n    while len(splits) < num_splits:\n        if strict:\n"
        "            raise ValueError(splits)\n        splits.append(0.0)\n    return splits\n",
        # fixed-length random crops, a zero buffer only for the rare shorter clip (audio codecs and vocoders)
        "import random\nimport torch\n\nclass Clips(torch.utils.data.Dataset):\n    max_len = 24000\n\n"
        "    def __getitem__(self, index):\n        out = torch.zeros(1, self.max_len)\n"
        "        audio = self.clips[index]\n        if audio.shape[1] > self.max_len:\n"
        "            st = random.randint(0, audio.shape[1] - self.max_len - 1)\n"
        "            return audio[:, st:st + self.max_len]\n        out[:, :audio.shape[1]] = audio\n        return out\n",
        # a tokenizer's own padding, to the length its callers ask for
        "class PreTrainedTokenizerBase:\n    def _pad(self, encoded, max_length, pad_id=0):\n"
        "        difference = max_length - len(encoded['input_ids'])\n"
        "        encoded['input_ids'] = encoded['input_ids'] + [self.pad_token_id] * difference\n"
        "        return encoded\n",
        # a version string's digits filled up to a few fields: no sequence a model runs over
        "def digit_version(version_str, length=4):\n    release = list(parse(version_str).release)[:length]\n"
        "    if len(release) < length:\n        release = release + [0] * (length - len(release))\n"
        "    return tuple(release)\n",
        # a helper padding to the length it is handed, which every caller in the file measures from the batch
        "class DynamicCollator:\n    def __init__(self, pad_id):\n        self.pad_id = pad_id\n\n"
        "    def pad_tokens(self, tokens, max_length):\n"
        "        return tokens + [self.pad_id] * (max_length - len(tokens))\n\n"
        "    def __call__(self, batch):\n        max_length = max(len(ids) for ids in batch)\n"
        "        return [self.pad_tokens(ids, max_length) for ids in batch]\n",
    )
    invalid = (
        # Show-o2: the placeholders its image embeddings fill are no padding; the pad up to `max_seq_len` is
        Invalid(
            "def format_sequence(text_ids, boi_id, eoi_id, pad_id, img_pad_id, num_image_tokens, max_seq_len):\n"
            "    ids = text_ids + [boi_id] + [img_pad_id] * num_image_tokens + [eoi_id]\n"
            "    ids = ids + [pad_id] * (max_seq_len - len(ids))\n    return ids\n",
            count=1,
        ),
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
        # the same helper, handed a constant by one of its callers
        Invalid(
            "MAX_LEN = 512\n\ndef pad_tokens(tokens, max_length, pad_id=0):\n"
            "    return tokens + [pad_id] * (max_length - len(tokens))\n\n"
            "def collate(batch):\n    longest = max(len(ids) for ids in batch)\n"
            "    return [pad_tokens(ids, longest) for ids in batch]\n\n"
            "def collate_fixed(batch):\n    return [pad_tokens(ids, MAX_LEN) for ids in batch]\n",
            count=2,  # the helper's padding, and the call handing it the constant
        ),
        Invalid(
            "def example_to_feature(tokenizer, example, max_seq_len=512):\n    token_ids = tokenizer.encode(example)\n"
            "    features = {'input_ids': token_ids, 'type_ids': [0] * len(token_ids)}\n"
            "    padding_size = max(0, max_seq_len - len(token_ids))\n    for name in features:\n"
            "        features[name].extend([0] * padding_size)\n    return features\n"
        ),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self.lengths = LengthTracker(context)
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
        if function is None or self._crops_to(function, length):
            return
        message = self.message.format(length=self.context.module.code_for_node(length))
        if self._is_collate(function):
            self.report(node, message, when="training")
        else:
            self._pending.append((function.name.value, node, message, self.context.ancestors_snapshot()))

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        # `ids + [pad_id] * (MAX_LEN - len(ids))`: a Python list padded up to a constant length, wherever it is built.
        if not isinstance(node.operator, cst.Multiply) or self.context.in_tests or self._in_a_tokenizer():
            return
        for pads, amount in ((node.left, node.right), (node.right, node.left)):
            if isinstance(amount, cst.Integer):
                continue  # `tuple([self.pad] * 4)`: a fixed count of pads (an image's four sides), not up to a length
            filled = self.lengths.fill_length(amount)
            # (a value other than a pad fills up to a sequence length, not to `num_layers + 1`: a config list)
            padding = _is_pad_list(pads) or (_is_single_element_list(pads) and filled is not None
                                             and _names_a_length(filled))
            if padding and self.lengths.is_constant(amount) and not self._pads_labels_or_mask():
                length = filled or (amount.left if isinstance(amount, cst.BinaryOperation) else amount)
                self.report(node, self.message.format(length=self.context.module.code_for_node(length)), when="training")
                return

    def _in_a_tokenizer(self) -> bool:
        """A tokenizer's own `_pad` (a vendored `PreTrainedTokenizerBase`) pads to whatever length its callers ask
        for: the choice to pad to a constant is theirs (`padding="max_length"`, GPL301), made where they call it."""
        return "tokenizer" in self.context.enclosing_class().rsplit(".", 1)[-1].lower()

    def _pads_labels_or_mask(self, call: cst.Call | None = None) -> bool:
        """Padding labels or a loss mask to the same constant follows the input's padding and costs no FLOPs of its
        own: only the input is reported, once per example."""
        if call is not None and call.args and call.args[0].keyword is None and _names_labels(call.args[0].value):
            return True
        for node in reversed(self.context.ancestors):
            if isinstance(node, cst.Assign):
                return any(_names_labels(t.target) for t in node.targets)
            if isinstance(node, cst.AugAssign):  # `label_ids += [ignore_index] * (max_len - len(label_ids))`
                return _names_labels(node.target)
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

    def _crops_to(self, function: cst.FunctionDef, length: cst.BaseExpression) -> bool:
        """Does the function cut a random window of that length (`st = random.randint(0, n - self.max_len)`)? Then
        every sample is a fixed-length segment by design (audio codecs and vocoders train on fixed crops), and the
        buffer pads only the rare clip shorter than a segment."""
        code = self.context.module.code_for_node(function)
        name = re.escape(self.context.module.code_for_node(length))
        return re.search(rf"randint\([^)]*-\s*{name}\b", code) is not None

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
# Segment ids (`seg`, `tgt_seg`) are padded along with the tokens they mark, like a mask (a whole word: an audio
# `segment` padded to `segment_length` is the input itself).
_SEGMENT_ID_PARTS = frozenset({"seg", "segs"})


def _names_labels(expr: cst.BaseExpression) -> bool:
    """The expression names labels, targets, a mask or segment ids (`labels`, `pad_targets[1:]`, `_msk`,
    `(x, y_mask)`, `tgt_seg`)."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        return any(_names_labels(e.value) for e in expr.elements)
    if isinstance(expr, cst.Subscript):
        expr = expr.value
    name = dotted_name(expr)
    return name is not None and (any(word in name.lower() for word in _LABEL_WORDS)
                                 or bool(name_parts(name.rsplit(".", 1)[-1]) & _SEGMENT_ID_PARTS))


def _is_pad_value(expr: cst.BaseExpression) -> bool:
    """`0`, `pad_id`, `tokenizer.pad_token_id`: what a token list is padded with."""
    if isinstance(expr, cst.Integer):
        return True
    name = dotted_name(expr)
    return name is not None and "pad" in name.lower()


def _is_pad_list(expr: cst.BaseExpression) -> bool:
    """`[pad_token_id]`, `[tokenizer.pad_token_id]`, `[PAD]`: a one-element list of a pad value. Not the placeholder
    of another modality (Show-o2's `[img_pad_id] * num_image_tokens`): slots its image embeddings fill."""
    if not isinstance(expr, cst.List) or len(expr.elements) != 1:
        return False
    name = dotted_name(expr.elements[0].value)
    return name is not None and "pad" in name.lower() \
        and not name_parts(name.rsplit(".", 1)[-1]) & _PLACEHOLDER_PARTS


_PLACEHOLDER_PARTS = frozenset({"img", "image", "vision", "video", "audio", "patch"})


def _is_single_element_list(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.List) and len(expr.elements) == 1 and not isinstance(expr.elements[0], cst.StarredElement)


def _names_a_length(expr: cst.BaseExpression) -> bool:
    """`max_seq_len`, `self.model_max_length`, `args.seq_length - 2`: a length names itself so."""
    return any(is_length_name((dotted_name(part) or "").rsplit(".", 1)[-1]) for part in _length_parts(expr))


def _length_parts(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The names and attributes an F.pad spec or a size is computed from (`(0, MAX_LEN - s.size(0))` -> MAX_LEN...)."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        return [p for e in expr.elements for p in _length_parts(e.value)]
    if isinstance(expr, cst.BinaryOperation):
        return _length_parts(expr.left) + _length_parts(expr.right)
    if isinstance(expr, (cst.Name, cst.Attribute)):
        return [expr]
    return []
