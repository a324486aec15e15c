"""Word tokenization and n-gram counting shared by the NLTK-style metrics (NIST, METEOR, CIDEr).

Their reference implementations take word lists, so the tokenizer is a setting named in the
signature: sacrebleu's tokenizer names (``13a``, as NIST's own script; ``intl``, ``char`` ...) or
``whitespace`` (``str.split``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from itertools import accumulate, pairwise

from paraeval.metrics.base import MetricConfigError


class WordTokenizer:
    """``text -> tuple of words``."""

    def __init__(self, name: str = "13a", lowercase: bool = False) -> None:
        self.lowercase = bool(lowercase)
        self._tok: Callable[[str], str] | None = None
        if name != "whitespace":
            from sacrebleu.metrics import BLEU

            if name not in BLEU.TOKENIZERS:
                choices = sorted([*BLEU.TOKENIZERS, "whitespace"])
                raise MetricConfigError(f"unknown tokenize '{name}'; choose one of {choices}")
            # the tokenizer a BLEU object made with this name uses (sacrebleu's public attribute)
            self._tok = BLEU(tokenize=name).tokenizer

    def __call__(self, text: str) -> tuple[str, ...]:
        s = text.lower() if self.lowercase else text
        if self._tok is not None:
            s = self._tok(s)
        return tuple(s.split())

    def many(self, texts: Sequence[str]) -> list[tuple[str, ...]]:
        """Each text's words; a text that occurs several times (references and sources repeat
        often) is tokenized once."""
        words = {t: self(t) for t in dict.fromkeys(texts)}
        return [words[t] for t in texts]

    def segments(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]]
    ) -> tuple[list[tuple[str, ...]], list[list[tuple[str, ...]]]]:
        """The words of each candidate and of each segment's references, every distinct text of
        the call tokenized once."""
        words = self.many([*candidates, *(r for refs in references for r in refs)])
        ends = accumulate((len(refs) for refs in references), initial=len(candidates))
        return words[: len(candidates)], [words[a:b] for a, b in pairwise(ends)]


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """The n-grams of ``tokens`` in order of position (C-level zip, no Python loop)."""
    if n == 1:
        return [(t,) for t in tokens]
    return list(zip(*(tokens[i:] for i in range(n)), strict=False))


def ngram_counts(tokens: Sequence[str], max_order: int) -> Counter[tuple[str, ...]]:
    """Counts of the 1..``max_order``-grams, first seen by order, then by position (the order
    pycocoevalcap's ``precook`` keeps)."""
    counts: Counter[tuple[str, ...]] = Counter()
    for n in range(1, max_order + 1):
        counts.update(ngrams(tokens, n))
    return counts
