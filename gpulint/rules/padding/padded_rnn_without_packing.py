"""GPL302 padded-rnn-without-packing."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.names import last_name
from gpulint.linter.rule import Invalid, Report, Rule, RuleDocs

_RNN_CLASSES = frozenset({"LSTM", "GRU", "RNN"})
_PACKING = frozenset({"pack_padded_sequence", "pack_sequence"})


class PaddedRnnWithoutPacking(Rule):
    code = "GPL302"
    pytorch_only = True
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
