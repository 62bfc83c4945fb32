"""GPL3xx behaviour beyond the rules' own examples: the evidence each rule needs, and padding that is not waste."""

from __future__ import annotations

import textwrap

from gpulint.linter.engine import lint_text
from gpulint.linter.rule import all_rules

RULES = all_rules()


def lines(source: str, code: str, path: str = "train.py") -> list[int]:
    return [f.line for f in lint_text(path, textwrap.dedent(source), RULES) if f.code == code]


def test_max_length_padding_in_a_dataset_map_is_flagged():
    source = """\
    def tokenize(examples):
        return tokenizer(examples["text"], padding="max_length", truncation=True, max_length=args.max_seq_length)

    train_dataset = raw_datasets["train"].map(tokenize, batched=True)
    """
    assert lines(source, "GPL301") == [2]


def test_max_length_padding_to_a_batch_computed_length_is_fine():
    source = """\
    def collate_fn(examples):
        longest = max(len(e["input_ids"]) for e in examples)
        return tokenizer.pad(examples, padding="max_length", max_length=longest, return_tensors="pt")
    """
    assert lines(source, "GPL301") == []


def test_max_length_padding_to_a_constant_local_is_flagged():
    source = """\
    def collate_fn(examples):
        longest = 512
        return tokenizer.pad(examples, padding="max_length", max_length=longest, return_tensors="pt")
    """
    assert lines(source, "GPL301") == [3]


def test_pad_to_max_length_false_is_fine():
    assert lines("enc = tokenizer(texts, pad_to_max_length=False)\n", "GPL301") == []


def test_padded_rnn_reported_at_pad_sequence_and_not_in_eval():
    source = """\
    import torch.nn as nn
    from torch.nn.utils.rnn import pad_sequence

    rnn = nn.GRU(8, 8)

    def collate(batch):
        return pad_sequence(batch)

    def evaluate(batch):
        return rnn(pad_sequence(batch))
    """
    assert lines(source, "GPL302") == [7]


def test_padded_rnn_with_packing_anywhere_in_the_file_is_fine():
    source = """\
    import torch
    from torch.nn.utils.rnn import pad_sequence

    lstm = torch.nn.LSTM(8, 8)

    def collate(batch):
        return pad_sequence(batch)

    def run(x, lengths):
        return lstm(torch.nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False))
    """
    assert lines(source, "GPL302") == []


def test_constant_buffer_in_dataset_getitem_is_flagged():
    source = """\
    import torch
    MAX_SEQ_LEN = 128

    class TextDataset(torch.utils.data.Dataset):
        def __getitem__(self, index):
            ids = torch.zeros(MAX_SEQ_LEN, dtype=torch.long)
            ids[: len(self.rows[index])] = torch.tensor(self.rows[index])
            return ids
    """
    assert lines(source, "GPL303") == [6]


def test_constant_alias_in_collate_is_flagged_and_dynamic_alias_is_not():
    source = """\
    import torch
    import torch.nn.functional as F
    MAX_LEN = 256

    def collate_constant(batch):
        target = MAX_LEN
        return torch.stack([F.pad(s, (0, target - s.size(0))) for s in batch])

    def collate_dynamic(batch):
        target = max(s.size(0) for s in batch)
        return torch.stack([F.pad(s, (0, target - s.size(0))) for s in batch])
    """
    assert lines(source, "GPL303") == [7]


def test_constant_that_is_not_a_length_is_fine():
    source = """\
    import torch
    NUM_CLASSES = 10

    def collate(batch):
        return torch.zeros(len(batch), NUM_CLASSES)
    """
    assert lines(source, "GPL303") == []


def test_function_not_used_as_collate_fn_is_fine():
    source = """\
    import torch
    MAX_LEN = 512

    def make_buffer(batch):
        return torch.zeros(len(batch), MAX_LEN)

    loader = torch.utils.data.DataLoader(data, collate_fn=default_collate)
    """
    assert lines(source, "GPL303") == []


def test_masked_loss_inside_training_step_is_reported_at_the_loss_call():
    source = """\
    import torch.nn.functional as F

    def train(model, loader, optimizer):
        for batch in loader:
            logits = model(batch["input_ids"])
            per_token = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), reduction="none")
            loss = (per_token.view(-1) * batch["attention_mask"].view(-1)).sum() / batch["attention_mask"].sum()
            loss.backward()
            optimizer.step()
    """
    assert lines(source, "GPL304") == [6]


def test_masked_loss_under_an_eval_gate_is_fine():
    source = """\
    import torch.nn.functional as F

    def train(model, loader, optimizer):
        for step, batch in enumerate(loader):
            loss = model(batch).mean()
            loss.backward()
            optimizer.step()
            if step % 250 == 0:
                losses = F.cross_entropy(model(batch), batch, reduction="none")
                print((losses * batch_mask).sum(dim=1))
    """
    assert lines(source, "GPL304") == []


def test_ignore_index_loss_is_fine():
    source = """\
    import torch.nn.functional as F

    def compute_loss(logits, labels, mask):
        loss = F.cross_entropy(logits, labels, ignore_index=-100)
        return loss * mask.any()
    """
    assert lines(source, "GPL304") == []


def test_max_length_padding_in_test_files_is_fine():
    source = 'enc = tokenizer(texts, padding="max_length", max_length=128)\n'
    assert lines(source, "GPL301", path="src/pkg/test_utils/training.py") == []
    assert lines(source, "GPL301", path="tests/test_train.py") == []
    assert lines(source, "GPL301", path="examples/train.py") == [1]


def test_token_list_padded_to_a_constant_is_reported_once_for_the_inputs():
    source = """\
    def preprocess_function_train(examples, max_seq_length):
        input_ids = tokenizer.encode(examples["text"])
        labels = list(input_ids)
        pad_len = max_seq_length - len(input_ids)
        input_ids = input_ids + [tokenizer.pad_token_id] * pad_len
        labels = labels + [tokenizer.pad_token_id] * pad_len
        return input_ids, labels
    """
    assert lines(source, "GPL303") == [5]


def test_project_pad_helper_with_a_constant_in_getitem():
    source = """\
    class FTDataset:
        def __getitem__(self, item):
            ids, n = padding_tokens(self.samples[item], self.max_seq_length, 0, 1)
            msk, _ = padding_tokens(self.masks[item], self.max_seq_length, 0.0, 1)
            return ids, msk
    """
    assert lines(source, "GPL303") == [3]
