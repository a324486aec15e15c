"""What the ROUGE metrics (``metrics/rouge.py``) share: rouge-score's tokenizer, its F-measure,
and the base class that scores every (candidate, reference) pair of a call in one batch and
reduces over each segment's references."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from paraeval.metrics._lcs import Packed, TokenIds, pack_pairs
from paraeval.metrics.base import MetricConfigError, MetricResult, SegmentLocal, make_signature
from paraeval.metrics.encoder_match import pair_lists

_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_VALID = re.compile(r"^[a-z0-9]+$")
MEASURES = ("fmeasure", "precision", "recall")

try:
    from importlib.metadata import version as _version

    ROUGE_SCORE_VERSION = _version("rouge-score")
except Exception:  # the reference package is only a test dependency
    ROUGE_SCORE_VERSION = "0.1.2"

Toks = tuple[str, ...]


class RougeTokenizer:
    """rouge-score's ``tokenize.tokenize(text, stemmer)``, each text and word once per
    tokenizer: a metric makes one for each call."""

    def __init__(self, use_stemmer: bool = False) -> None:
        self.use_stemmer = bool(use_stemmer)
        self._stemmer = None
        if self.use_stemmer:
            from nltk.stem import porter

            self._stemmer = porter.PorterStemmer()
        self._cache: dict[str, Toks] = {}
        self._stems: dict[str, str] = {}

    def _stem(self, word: str) -> str:
        s = self._stems.get(word)
        if s is None:
            assert self._stemmer is not None
            s = self._stemmer.stem(word) if len(word) > 3 else word
            self._stems[word] = s
        return s

    def __call__(self, text: str) -> Toks:
        hit = self._cache.get(text)
        if hit is not None:
            return hit
        # after the substitution every piece matches [a-z0-9]+, so split() is rouge-score's
        # split-and-filter; only stems need the validity check again
        words = _NON_ALNUM.sub(" ", text.lower()).split()
        if self.use_stemmer:
            words = [w for w in map(self._stem, words) if _VALID.match(w)]
        toks = self._cache[text] = tuple(words)
        return toks


def fmeasure(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    """rouge-score's ``scoring.fmeasure``: 2PR/(P+R), 0 where P+R = 0."""
    s = p + r
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(s > 0, 2 * p * r / np.where(s > 0, s, 1.0), 0.0)


def prf(
    hits: np.ndarray, cand_units: np.ndarray, ref_units: np.ndarray, power: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision and recall, ``hits`` over each side's units (0 where it has none) to the
    ``power``, and their F."""
    p, r = (
        np.where(u > 0, hits / np.where(u > 0, u, 1.0), 0.0) ** power
        for u in (cand_units, ref_units)
    )
    return p, r, fmeasure(p, r)


class RougeBase(SegmentLocal):
    """Shared machinery: tokenize once per text, score every (candidate, reference) pair in one
    batch, then reduce over each segment's references."""

    default_group = "syntactic"
    higher_is_better = True
    impl: ClassVar[str] = f"paraeval=rouge-score-{ROUGE_SCORE_VERSION}"

    def __init__(
        self,
        use_stemmer: bool = False,
        measure: str = "fmeasure",
        multi_ref: str = "max",
        group: str | None = None,
        against_source: bool = False,
    ) -> None:
        super().__init__(group=group, against_source=against_source, multi_ref=multi_ref)
        if measure not in MEASURES:
            raise MetricConfigError(
                f"metric '{self.name}': measure must be one of {list(MEASURES)}, got '{measure}'"
            )
        self.use_stemmer = bool(use_stemmer)
        self.measure = measure

    def _sig_fields(self) -> dict[str, object]:
        return {}

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        return make_signature(
            self.name,
            impl=self.impl,
            tok="rouge-score",
            case="lc",
            stem="porter" if self.use_stemmer else "no",
            **self._sig_fields(),
            measure=self.measure,
            nrefs="var",
            refs="max-f" if self.multi_ref == "max" else "mean",
        )

    def _pair_prf(
        self, cands: list[str], refs: list[str], call: Call
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Precision, recall and F of each (candidate, reference) text pair; ``call`` holds the
        call's tokens and token ids."""
        raise NotImplementedError

    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult:
        counts = [len(r) for r in references]
        pair_c, pair_r = pair_lists(candidates, references)
        p, r, f = self._pair_prf(pair_c, pair_r, Call(self.use_stemmer))
        chosen = {"precision": p, "recall": r, "fmeasure": f}[self.measure]
        seg = np.zeros(len(candidates), dtype=float)
        start = 0
        for i, k in enumerate(counts):
            if k == 0:
                seg[i] = np.nan
            elif self.multi_ref == "max":
                seg[i] = chosen[start + int(np.argmax(f[start : start + k]))]
            else:
                seg[i] = float(np.mean(chosen[start : start + k]))
            start += k
        return self._mean_result(seg)


class Call:
    """What one call of a ROUGE metric shares between its pairs: each text's tokens, each token
    tuple's ids (and n-gram counts), made once."""

    def __init__(self, use_stemmer: bool) -> None:
        self.tokenizer = RougeTokenizer(use_stemmer)
        self.ids = TokenIds()
        self.grams: dict[Toks, Counter[Toks]] = {}

    def packed_pairs(self, cands: Sequence[str], refs: Sequence[str]) -> Packed:
        """:func:`~paraeval.metrics._lcs.pack_pairs` of the texts' tokens."""
        a = [self.tokenizer(c) for c in cands]
        return pack_pairs(a, [self.tokenizer(r) for r in refs], self.ids)
