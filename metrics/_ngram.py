"""Word tokenization and n-gram counting shared by the NLTK-style metrics (NIST, METEOR, CIDEr).

The reference implementations of these metrics take pre-tokenized word lists; the tokenizer is
therefore a setting of each metric and is named in its signature. ``tokenize`` takes sacrebleu's
tokenizer names (``13a`` is mteval-v13a's tokenization, the one NIST's own script uses; ``intl``,
``char``, ``zh`` ...) plus ``whitespace`` (plain ``str.split``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from paraeval.metrics.base import MetricConfigError

_CACHE_MAX = 500_000


def _sacrebleu_tokenizer(name: str) -> Callable[[str], str]:
    from sacrebleu.metrics.bleu import _TOKENIZERS, _get_tokenizer

    if name not in _TOKENIZERS:
        raise MetricConfigError(
            f"unknown tokenize '{name}'; choose one of {sorted([*_TOKENIZERS, 'whitespace'])}"
        )
    tok: Callable[[str], str] = _get_tokenizer(name)()
    return tok


class WordTokenizer:
    """``text -> tuple of words``, memoised per text (references and sources repeat often)."""

    def __init__(self, name: str = "13a", lowercase: bool = False) -> None:
        self.name = name
        self.lowercase = bool(lowercase)
        self._tok: Callable[[str], str] | None = (
            None if name == "whitespace" else _sacrebleu_tokenizer(name)
        )
        self._cache: dict[str, tuple[str, ...]] = {}

    def __call__(self, text: str) -> tuple[str, ...]:
        hit = self._cache.get(text)
        if hit is not None:
            return hit
        s = text.lower() if self.lowercase else text
        if self._tok is not None:
            s = self._tok(s)
        words = tuple(s.split())
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()
        self._cache[text] = words
        return words

    def many(self, texts: Sequence[str]) -> list[tuple[str, ...]]:
        return [self(t) for t in texts]

    @property
    def signature(self) -> str:
        return self.name


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """The n-grams of ``tokens`` in order of position (C-level zip, no Python loop)."""
    if n == 1:
        return [(t,) for t in tokens]
    return list(zip(*(tokens[i:] for i in range(n)), strict=False))


def ngram_counter(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(ngrams(tokens, n))
