"""METEOR (Banerjee & Lavie 2005), equal to ``nltk.translate.meteor_score`` with the same WordNet.

NLTK's alignment step for step (exact, Porter-stem, then WordNet-synonym matches, greedy from the
last hypothesis word), ``Fmean = P·R / (α·P + (1−α)·R)``, ``penalty = γ·(chunks/matches)^β`` and
``score = (1 − penalty)·Fmean``; the speed comes from looking up each word's stem and synsets once
per call. Multiple references: the best single-reference score. Corpus score: the segment mean.
``tokenize`` (sacrebleu names or ``whitespace``) makes NLTK's word lists; ``lowercase`` is NLTK's
default ``preprocess=str.lower``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from itertools import chain, pairwise
from typing import Any

import nltk
import numpy as np
from nltk.stem.porter import PorterStemmer

from paraeval.metrics._ngram import WordTokenizer
from paraeval.metrics.base import (
    MetricConfigError,
    MetricResult,
    SegmentLocal,
    distinct_pairs,
    make_signature,
)
from paraeval.metrics.wordnet import find_wordnet, load_wordnet, wordnet_version

Enum = list[tuple[int, str]]


def _match(
    hyp: Enum, ref: Enum, forms: Callable[[str], Iterable[str]] | None = None
) -> tuple[list[tuple[int, int]], Enum, Enum]:
    """NLTK's ``_match_enums`` (``forms`` None: a word's own form) and ``_enum_wordnetsyn_match``
    (``forms``: its synonyms): hypothesis words from last to first, each taking the latest
    still-free reference word with one of its forms; the matches, then the words left."""
    positions: dict[str, list[int]] = {}
    for j, (_, word) in enumerate(ref):
        positions.setdefault(word, []).append(j)
    matches: list[tuple[int, int]] = []
    used_h: set[int] = set()
    used_r: set[int] = set()
    for i in range(len(hyp) - 1, -1, -1):
        best_j = -1
        best_word: str | None = None
        for form in (hyp[i][1],) if forms is None else forms(hyp[i][1]):
            pos = positions.get(form)
            if pos and pos[-1] > best_j:
                best_j = pos[-1]
                best_word = form
        if best_word is not None:
            positions[best_word].pop()
            used_h.add(i)
            used_r.add(best_j)
            matches.append((hyp[i][0], ref[best_j][0]))
    if not matches:
        return matches, hyp, ref
    return (
        matches,
        [p for i, p in enumerate(hyp) if i not in used_h],
        [p for j, p in enumerate(ref) if j not in used_r],
    )


def count_chunks(matches: Sequence[tuple[int, int]]) -> int:
    """Fewest runs of matches adjacent in both sentences (NLTK's ``_count_chunks``)."""
    return 1 + sum(b != (a[0] + 1, a[1] + 1) for a, b in pairwise(matches))


class _WordForms:
    """Porter stems and WordNet synonyms of the words of one call, each looked up once."""

    def __init__(self, stemmer: PorterStemmer, wordnet: Any) -> None:
        self.wordnet = wordnet
        self.stem: Callable[[str], str] = cache(stemmer.stem)
        self.synonyms: Callable[[str], frozenset[str]] = cache(self._synonyms)

    def _synonyms(self, word: str) -> frozenset[str]:
        names = chain.from_iterable(
            (lemma.name() for lemma in synset.lemmas() if lemma.name().find("_") < 0)
            for synset in self.wordnet.synsets(word)
        )
        return frozenset(names) | {word}


class METEOR(SegmentLocal):
    """METEOR with exact, Porter-stem and WordNet-synonym modules (NLTK's algorithm)."""

    name = "meteor"
    resources = ("WordNet",)
    TOKENIZE = "13a"
    ALPHA = 0.9
    BETA = 3.0
    GAMMA = 0.5

    def __init__(
        self,
        alpha: float = ALPHA,
        beta: float = BETA,
        gamma: float = GAMMA,
        tokenize: str = TOKENIZE,
        lowercase: bool = True,
        wordnet_dir: str | None = None,
        group: str | None = None,
        against_source: bool = False,
    ) -> None:
        super().__init__(group=group, against_source=against_source)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.gamma = float(gamma)
        if not 0.0 <= self.alpha <= 1.0:
            raise MetricConfigError(f"metric 'meteor': alpha must be in [0, 1], got {alpha}")
        self.tokenize = tokenize
        self.lowercase = bool(lowercase)
        # the tokenizer keeps the case; lowercasing is NLTK's per-word ``preprocess``
        self.tokenizer = WordTokenizer(tokenize, lowercase=False)
        self.wordnet_dir = os.fspath(wordnet_dir) if wordnet_dir else None
        find_wordnet(self.wordnet_dir)  # a missing WordNet fails here, at configuration time
        self._wordnet: Any = None
        self.stemmer = PorterStemmer()

    # ------------------------------------------------------------------ resources
    @property
    def wordnet(self) -> Any:
        if self._wordnet is None:
            self._wordnet = load_wordnet(self.wordnet_dir)
        return self._wordnet

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        return make_signature(
            self.name,
            impl=f"paraeval=nltk-{nltk.__version__}",
            nrefs="var",
            refs="max",
            tok=self.tokenize,
            case="lc" if self.lowercase else "mixed",
            modules="exact+porter+wordnet",
            wordnet=wordnet_version(self.wordnet),
            alpha=f"{self.alpha:g}",
            beta=f"{self.beta:g}",
            gamma=f"{self.gamma:g}",
        )

    # -------------------------------------------------------------------- scoring
    def single(
        self, hyp_words: Sequence[str], ref_words: Sequence[str], forms: _WordForms | None = None
    ) -> float:
        """METEOR of one hypothesis against one reference (``single_meteor_score``); ``forms``
        keeps the stems and synonyms of the words seen so far in the caller's call."""
        if forms is None:
            forms = _WordForms(self.stemmer, self.wordnet)
        hyp: Enum = [(i, w.lower() if self.lowercase else w) for i, w in enumerate(hyp_words)]
        ref: Enum = [(j, w.lower() if self.lowercase else w) for j, w in enumerate(ref_words)]
        t_len, r_len = len(hyp), len(ref)
        exact, hyp, ref = _match(hyp, ref)
        stem = forms.stem
        stem_m, hyp, ref = _match([(i, stem(w)) for i, w in hyp], [(j, stem(w)) for j, w in ref])
        syn_m = _match(hyp, ref, forms.synonyms)[0] if hyp and ref else []
        matches = sorted(exact + stem_m + syn_m, key=lambda pair: pair[0])
        m = len(matches)
        try:
            precision = float(m) / t_len
            recall = float(m) / r_len
            fmean = (precision * recall) / (self.alpha * precision + (1 - self.alpha) * recall)
            frag = float(count_chunks(matches)) / m
        except ZeroDivisionError:
            return 0.0
        penalty = self.gamma * frag**self.beta
        return (1 - penalty) * fmean

    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult:
        pairs = distinct_pairs(candidates, references)
        texts = list(dict.fromkeys(t for pair in pairs for t in pair))
        words = dict(zip(texts, self.tokenizer.many(texts), strict=True))
        forms = _WordForms(self.stemmer, self.wordnet)
        score = {(c, r): self.single(words[c], words[r], forms) for c, r in pairs}
        pairs_of = zip(candidates, references, strict=True)
        seg = np.array([max(score[(c, r)] for r in refs) for c, refs in pairs_of], dtype=float)
        return self._mean_result(seg)
