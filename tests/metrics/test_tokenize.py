"""EncoderModel.tokenize (one Rust batch call) against bert-score's ``sent_encode``, on small
tokenizers trained here: BERT's WordPiece and RoBERTa's byte-level BPE with and without the
prefix space. No weights: tokenize loads the tokenizer and config.json only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import transformers
from bert_score.utils import sent_encode
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors, trainers
from tokenizers.models import BPE, WordPiece

from paraeval.metrics.encoder_model import EncoderModel

MAX_LENGTH = 16
CORPUS = [
    "the cat sat on the mat",
    "a quick brown fox jumps over the lazy dog",
    "paraphrase generation is evaluated against human judgments",
    "hello world, hello there! how are you?",
    "café naïve résumé",
] * 20
LONG = " ".join(["the cat sat on the mat"] * 10)
BLANK = ["", "   ", "\t\n "]
TEXTS = [
    "the cat sat on the mat",
    "Hello world",
    "  leading and trailing spaces  ",
    "Café naïve Zürich — résumé",
    LONG,
    "!?,.;:",
    "zyxwvq",  # letters outside the trained vocabulary
    "日本語",  # characters the corpus never had
    *BLANK,
]
OOV = ["zyxwvq", "日本語"]


def save(directory: Path, tokenizer: Any, config: Any, vocab_size: int) -> None:
    """The tokenizer and a tiny config.json: what AutoTokenizer needs to load it."""
    tokenizer.save_pretrained(directory)
    sizes = {"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 1}
    config(vocab_size=vocab_size, intermediate_size=8, **sizes).save_pretrained(directory)


def wordpiece(directory: Path) -> None:
    tok = Tokenizer(WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(
        CORPUS, trainers.WordPieceTrainer(vocab_size=120, special_tokens=specials)
    )
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[(s, tok.token_to_id(s)) for s in ("[CLS]", "[SEP]")],
    )
    tok.decoder = decoders.WordPiece()
    wrapped = transformers.BertTokenizer(tokenizer_object=tok, model_max_length=MAX_LENGTH)
    save(directory, wrapped, transformers.BertConfig, tok.get_vocab_size())


def byte_bpe(directory: Path, prefix_space: bool) -> None:
    tok = Tokenizer(BPE())
    # one vocabulary for both variants: only the prefix space differs between them
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS, trainer)
    vocab = tok.get_vocab()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix_space)
    sep, cls = (("</s>", vocab["</s>"]), ("<s>", vocab["<s>"]))
    tok.post_processor = processors.RobertaProcessing(sep, cls, add_prefix_space=prefix_space)
    # RobertaTokenizer rebuilds its pre-tokenizer from its own add_prefix_space (saved in
    # tokenizer_config.json): it has to say the same
    wrapped = transformers.RobertaTokenizer(
        tokenizer_object=tok, model_max_length=MAX_LENGTH, add_prefix_space=prefix_space
    )
    save(directory, wrapped, transformers.RobertaConfig, tok.get_vocab_size())


KINDS: dict[str, tuple[Callable[[Path], None], type, tuple[str, str]]] = {
    "wordpiece": (wordpiece, transformers.BertTokenizer, ("[CLS]", "[SEP]")),
    "bpe": (lambda d: byte_bpe(d, False), transformers.RobertaTokenizer, ("<s>", "</s>")),
    "bpe-prefix": (lambda d: byte_bpe(d, True), transformers.RobertaTokenizer, ("<s>", "</s>")),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, EncoderModel]:
    built = {}
    for kind, (build, _, _) in KINDS.items():
        directory = tmp_path_factory.mktemp(kind)
        build(directory)
        built[kind] = EncoderModel(model=str(directory), device="cpu")
    return built


def expected(tok: Any, text: str, specials: tuple[str, str]) -> list[int]:
    """sent_encode; for a blank text the special tokens alone (transformers 5 lost the
    ``build_inputs_with_special_tokens`` that bert-score calls there)."""
    if not text.strip():
        return [tok.convert_tokens_to_ids(s) for s in specials]
    return list(sent_encode(tok, text))


@pytest.mark.parametrize("kind", KINDS)
def test_token_ids_equal_sent_encode(models: dict[str, EncoderModel], kind: str) -> None:
    model = models[kind]
    _, cls, specials = KINDS[kind]
    tok = model.tokenizer
    assert type(model.tokenizer) is cls  # what AutoTokenizer made of the saved files
    assert model.max_length == tok.model_max_length == MAX_LENGTH
    tokens = model.tokenize(TEXTS)
    assert tokens.ids.dtype == np.int32 and tokens.lengths.dtype == np.int64
    assert len(tokens) == len(TEXTS)
    for i, text in enumerate(TEXTS):
        assert tokens[i].tolist() == expected(tok, text, specials), text
    assert tokens.lengths.tolist() == [len(expected(tok, t, specials)) for t in TEXTS]
    assert int(tokens.lengths.sum()) == len(tokens.ids)


@pytest.mark.parametrize("kind", KINDS)
def test_truncation_at_model_max_length_keeps_the_specials(
    models: dict[str, EncoderModel], kind: str
) -> None:
    model = models[kind]
    first, last = (model.tokenizer.convert_tokens_to_ids(s) for s in KINDS[kind][2])
    ids = model.tokenize([LONG])[0].tolist()
    assert len(ids) == MAX_LENGTH and ids[0] == first and ids[-1] == last
    untruncated = model.tokenizer(LONG.strip())["input_ids"]
    assert len(untruncated) > MAX_LENGTH and ids[:-1] == untruncated[: MAX_LENGTH - 1]


@pytest.mark.parametrize("kind", KINDS)
def test_blank_texts_are_the_special_tokens_alone(
    models: dict[str, EncoderModel], kind: str
) -> None:
    model = models[kind]
    specials = [model.tokenizer.convert_tokens_to_ids(s) for s in KINDS[kind][2]]
    tokens = model.tokenize(BLANK)
    assert [tokens[i].tolist() for i in range(len(BLANK))] == [specials] * len(BLANK)


def test_unknown_words_become_unk_in_wordpiece(models: dict[str, EncoderModel]) -> None:
    model = models["wordpiece"]
    unk = model.tokenizer.unk_token_id
    for text in OOV:
        assert unk in model.tokenize([text])[0].tolist()


def test_prefix_space_changes_the_ids_and_each_equals_its_sent_encode(
    models: dict[str, EncoderModel],
) -> None:
    without, with_ = models["bpe"], models["bpe-prefix"]
    assert without.tokenizer.get_vocab() == with_.tokenizer.get_vocab()
    ids = {k: models[k].tokenize(["Hello"])[0].tolist() for k in ("bpe", "bpe-prefix")}
    assert ids["bpe"] != ids["bpe-prefix"]
    first = {k: models[k].tokenizer.convert_ids_to_tokens(ids[k][1]) for k in ids}
    assert not first["bpe"].startswith("Ġ") and first["bpe-prefix"].startswith("Ġ")
    assert ids["bpe"] == sent_encode(without.tokenizer, "Hello")
    assert ids["bpe-prefix"] == sent_encode(with_.tokenizer, "Hello")
    # the prefix-space variant encodes "Hello" as it does the word inside a sentence
    inner = with_.tokenize(["say Hello"])[0].tolist()
    assert ids["bpe-prefix"][1:-1] == inner[len(inner) - len(ids["bpe-prefix"]) + 1 : -1]


@pytest.mark.parametrize("kind", KINDS)
def test_a_batch_equals_one_text_at_a_time(models: dict[str, EncoderModel], kind: str) -> None:
    model = models[kind]
    batch = model.tokenize(TEXTS)
    for i, text in enumerate(TEXTS):
        alone = model.tokenize([text])
        assert alone.lengths.tolist() == [batch.lengths[i]]
        assert alone[0].tolist() == batch[i].tolist()
    assert len(model.tokenize([])) == 0
