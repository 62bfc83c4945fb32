"""GPL3xx fixes compute the same values: padding per batch instead of to max_length leaves a tiny transformer's outputs
at real tokens and its pad-ignoring loss unchanged (CPU, a word-level tokenizer and a model built from a config)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gpulint.linter.rule import rules_by_code  # noqa: E402

WORDS = ["[PAD]", "[UNK]", "hello", "world", "the", "cat", "sat", "on", "a", "mat", "dog", "ran"]
TEXTS = ["hello world", "the cat sat on a mat", "a dog ran"]
FIXABLE = [rule for code, rule in rules_by_code().items() if code.startswith("GPL3") and rule.fixable]
CASES = [
    pytest.param(rule, index, id=f"{rule.code}-invalid{index}")
    for rule in FIXABLE
    for index, example in enumerate(rule.invalid)
    if example.fixed is not None
]


class _LegacyTokenizer:
    """The tokenizer API the examples were written against: transformers 4's `batch_encode_plus` with
    `pad_to_max_length=True` meant `padding="max_length"` to the model's maximum length."""

    def __init__(self, tokenizer) -> None:
        self._tokenizer = tokenizer

    def __call__(self, *args, **kwargs):
        return self._tokenizer(*args, **kwargs)

    def pad(self, *args, **kwargs):
        return self._tokenizer.pad(*args, **kwargs)

    def batch_encode_plus(self, texts, pad_to_max_length=False, **kwargs):
        if pad_to_max_length:
            kwargs["padding"] = "max_length"
        return self._tokenizer(texts, **kwargs)


@pytest.fixture(scope="module")
def tokenizer():
    # Imported here, not at module level: transformers takes seconds to import and these tests are `slow`.
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {word: index for index, word in enumerate(WORDS)}
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]", model_max_length=64
    )
    return _LegacyTokenizer(fast)


@pytest.fixture(scope="module")
def model():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=512, pad_token_id=0,
    )
    return transformers.BertForMaskedLM(config).eval()


def _encode(source: str, tokenizer) -> dict:
    """Run an example: it either assigns `enc` or defines `collate(batch)`."""
    namespace = {"tokenizer": tokenizer, "texts": TEXTS, "args": type("Args", (), {"max_seq_length": 48})()}
    exec(compile(source, "<example>", "exec"), namespace)
    if "collate" in namespace:
        return namespace["collate"]([tokenizer(text) for text in TEXTS])
    return namespace["enc"]


def _outputs(encoding, model):
    ids = torch.as_tensor(encoding["input_ids"])
    mask = torch.as_tensor(encoding["attention_mask"])
    labels = ids.masked_fill(mask == 0, -100)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
    real = [out.logits[row, : int(mask[row].sum())] for row in range(ids.size(0))]
    return out.loss, real, ids.size(1)


def test_there_are_fixable_padding_examples():
    assert CASES, "no fixable GPL3xx INVALID example with a `fixed` form"


@pytest.mark.slow  # builds a transformers model: several seconds of imports
@pytest.mark.filterwarnings("ignore:`max_length` is ignored when `padding`=`True`")  # the fixed collate example
@pytest.mark.parametrize("rule,index", CASES)
def test_dynamic_padding_gives_the_same_outputs(rule, index, tokenizer, model):
    example = rule.invalid[index]
    loss_before, real_before, length_before = _outputs(_encode(example.code, tokenizer), model)
    loss_after, real_after, length_after = _outputs(_encode(example.fixed, tokenizer), model)
    assert length_after < length_before, "the fix should pad less"
    assert float(loss_after) == pytest.approx(float(loss_before), rel=1e-5)
    for before, after in zip(real_before, real_after):
        torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)
