"""The ROUGE family (Lin 2004): rouge1, rouge2, rougeN, rougeL, rougeLsum, rougeW, rougeS, rougeSU.

Tokenization reproduces Google ``rouge-score``'s default tokenizer (lowercase, runs outside
``[a-z0-9]`` become spaces, optional Porter stemming of words over 3 characters); LCS-type
recurrences run in compiled kernels (``metrics._lcs``).

- ``rouge1``, ``rouge2``, ``rougeL``, ``rougeLsum`` equal ``rouge_score``'s ``RougeScorer``
  (``rougeLsum``: lines as sentences, ``split_summaries=False``); ``rougeN`` with ``n: N`` is
  ``rouge<N>`` for any N >= 1 (rouge-score's scorer has N = 1..9).
- ``rougeW``: weighted LCS with f(k) = k^w (w = 1.2), Lin (2004)'s ``R = f⁻¹(WLCS/f(|ref|))``,
  ``P = f⁻¹(WLCS/f(|cand|))``, ``F = 2PR/(P+R)``. ``formula: rouge155`` reproduces ROUGE-1.5.5.pl
  exactly instead (hits from runs on the backtracked path, recall over f(f(|ref|)), so an
  identical candidate gets a recall below 1).
- ``rougeS`` / ``rougeSU``: skip-bigrams with at most ``skip_distance`` words between (``null``:
  any), SU with unigrams, counted as ROUGE-1.5.5.pl does (unigrams of all tokens but the last).

Multiple references: ``multi_ref: max`` (default) reports the measure of the reference with the
highest F (rouge-score's ``score_multi``), ``mean`` averages. Corpus score: the segment mean.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from functools import cache
from itertools import chain
from typing import ClassVar

import numpy as np

from paraeval.metrics import _lcs
from paraeval.metrics._ngram import ngrams
from paraeval.metrics.base import (
    MetricConfigError,
    MetricResult,
    SegmentLocal,
    choice_setting,
    make_signature,
    order_setting,
)
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
        if self.use_stemmer:
            from nltk.stem import porter

            self._stemmer = porter.PorterStemmer()
        self._cache: dict[str, Toks] = {}
        self._stem = cache(self._stem_word)

    def _stem_word(self, word: str) -> str:
        return self._stemmer.stem(word) if len(word) > 3 else word

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


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def prf(
    hits: np.ndarray, cand_units: np.ndarray, ref_units: np.ndarray, power: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision and recall, ``hits`` over each side's units (0 where it has none) to the
    ``power``, and rouge-score's ``scoring.fmeasure`` of them (0 where P+R = 0)."""
    p, r = (_ratio(hits, u) ** power for u in (cand_units, ref_units))
    return p, r, _ratio(2 * p * r, p + r)


class RougeBase(SegmentLocal):
    """Shared machinery: tokenize once per text, score every (candidate, reference) pair in one
    batch, then reduce over each segment's references."""

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
        self.use_stemmer = bool(use_stemmer)
        self.measure = choice_setting(self.name, "measure", measure, MEASURES)

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
        pair_c, pair_r = pair_lists(candidates, references)
        p, r, f = self._pair_prf(pair_c, pair_r, Call(self.use_stemmer))
        chosen = {"precision": p, "recall": r, "fmeasure": f}[self.measure]
        seg = np.zeros(len(candidates), dtype=float)
        start = 0
        for i, k in enumerate(len(refs) for refs in references):
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
        self.ids = _lcs.TokenIds()
        self.grams: dict[Toks, Counter[Toks]] = {}

    def packed_pairs(self, cands: Sequence[str], refs: Sequence[str]) -> _lcs.Packed:
        """:func:`~paraeval.metrics._lcs.pack_pairs` of the texts' tokens."""
        a = [self.tokenizer(c) for c in cands]
        return _lcs.pack_pairs(a, [self.tokenizer(r) for r in refs], self.ids)


class RougeN(RougeBase):
    """ROUGE-N of any order ``n`` >= 1: rouge-score's ``rouge<n>`` (its scorer names n = 1..9, its
    counts hold for any n). Name, column and signature are ``rouge<n>``, as for :class:`Rouge1`,
    so equal settings give equal signatures whichever class scored; ``rougeN`` is the config id."""

    name = "rougeN"

    def __init__(
        self,
        n: int,
        use_stemmer: bool = False,
        measure: str = "fmeasure",
        multi_ref: str = "max",
        group: str | None = None,
        against_source: bool = False,
    ) -> None:
        self.n = order_setting(self.name, "n", n)
        # before the base class's checks, whose messages name the metric by its column
        self.name = f"rouge{n}"
        super().__init__(use_stemmer, measure, multi_ref, group, against_source)

    def _counter(self, toks: Toks, call: Call) -> Counter[Toks]:
        hit = call.grams.get(toks)
        if hit is None:
            hit = call.grams[toks] = Counter(ngrams(toks, self.n))
        return hit

    def _pair_prf(
        self, cands: list[str], refs: list[str], call: Call
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tok = call.tokenizer
        n = self.n
        inter, pc, tc = np.zeros((3, len(cands)))
        for k, (c, r) in enumerate(zip(cands, refs, strict=True)):
            ct, rt = tok(c), tok(r)
            cc, rc = self._counter(ct, call), self._counter(rt, call)
            inter[k] = sum((cc & rc).values()) if len(cc) <= len(rc) else sum((rc & cc).values())
            pc[k] = max(len(ct) - n + 1, 0)
            tc[k] = max(len(rt) - n + 1, 0)
        return prf(inter, pc, tc)


class _FixedOrderRougeN(RougeN):
    """ROUGE-N of the class's own order: no ``n`` setting, so a config cannot give ``rouge1`` a
    column other than its id."""

    order: ClassVar[int]

    def __init__(
        self,
        use_stemmer: bool = False,
        measure: str = "fmeasure",
        multi_ref: str = "max",
        group: str | None = None,
        against_source: bool = False,
    ) -> None:
        super().__init__(self.order, use_stemmer, measure, multi_ref, group, against_source)


class Rouge1(_FixedOrderRougeN):
    """ROUGE-1: unigram overlap F (rouge-score)."""

    name = "rouge1"
    order = 1


class Rouge2(_FixedOrderRougeN):
    """ROUGE-2: bigram overlap F (rouge-score)."""

    name = "rouge2"
    order = 2


class RougeL(RougeBase):
    """ROUGE-L: longest common subsequence F (rouge-score's ``rougeL``)."""

    name = "rougeL"

    def _pair_prf(
        self, cands: list[str], refs: list[str], call: Call
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        flat, starts, lens, pa, pb = call.packed_pairs(cands, refs)
        hits = _lcs.pair_scores(flat, starts, lens, pa, pb, _lcs.LCS)
        return prf(hits, lens[pa].astype(float), lens[pb].astype(float))


def summary_lcs_hits(ref_sents: list[Toks], can_sents: list[Toks], ids: _lcs.TokenIds) -> int:
    """rouge-score's ``_summary_level_lcs`` hit count: union LCS per reference sentence, each
    token counted at most as often as it occurs on both sides (ROUGE-1.5.5's clipping)."""
    cnt_r = Counter(chain.from_iterable(ref_sents))
    cnt_c = Counter(chain.from_iterable(can_sents))
    hits = 0
    can_ids = [ids(c) for c in can_sents]
    for ref in ref_sents:
        ref_ids = ids(ref)
        union = np.zeros(len(ref), dtype=bool)
        for c in can_ids:
            union |= _lcs.lcs_reference_mask(ref_ids, c)
        for i in np.flatnonzero(union):
            tok = ref[i]
            if cnt_c[tok] > 0 and cnt_r[tok] > 0:
                hits += 1
                cnt_c[tok] -= 1
                cnt_r[tok] -= 1
    return hits


class RougeLsum(RougeBase):
    """ROUGE-Lsum: summary-level union LCS over the text's lines (rouge-score's ``rougeLsum``);
    single-line texts reduce to ROUGE-L exactly, which the fast path uses."""

    name = "rougeLsum"

    def _sig_fields(self) -> dict[str, object]:
        return {"split": "newline"}

    @staticmethod
    def _sents(text: str, call: Call) -> list[Toks]:
        return [call.tokenizer(s) for s in text.split("\n") if len(s)]

    def _pair_prf(
        self, cands: list[str], refs: list[str], call: Call
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        hits, cl, rl = np.zeros((3, len(cands)))
        single: list[tuple[int, Toks, Toks]] = []
        for k, (c, r) in enumerate(zip(cands, refs, strict=True)):
            cs, rs = self._sents(c, call), self._sents(r, call)
            cl[k] = sum(map(len, cs))
            rl[k] = sum(map(len, rs))
            if cl[k] == 0 or rl[k] == 0:
                continue
            if len(cs) == 1 and len(rs) == 1:
                single.append((k, cs[0], rs[0]))
            else:
                hits[k] = summary_lcs_hits(rs, cs, call.ids)
        if single:
            ks, single_a, single_b = zip(*single, strict=True)
            packed = _lcs.pack_pairs(single_a, single_b, call.ids)
            hits[np.array(ks)] = _lcs.pair_scores(*packed, _lcs.LCS)
        return prf(hits, cl, rl)


class RougeW(RougeBase):
    """ROUGE-W: weighted LCS F, f(k) = k^weight (see the module docstring for ``formula``)."""

    name = "rougeW"
    impl = "paraeval"
    WEIGHT = 1.2
    FORMULAS = ("lin2004", "rouge155")

    def __init__(
        self,
        weight: float = WEIGHT,
        formula: str = "lin2004",
        use_stemmer: bool = False,
        measure: str = "fmeasure",
        multi_ref: str = "max",
        group: str | None = None,
        against_source: bool = False,
    ) -> None:
        super().__init__(use_stemmer, measure, multi_ref, group, against_source)
        if float(weight) < 1.0:
            raise MetricConfigError(f"metric 'rougeW': weight must be >= 1, got {weight}")
        self.weight = float(weight)
        self.formula = choice_setting("rougeW", "formula", formula, self.FORMULAS)

    def _sig_fields(self) -> dict[str, object]:
        return {"w": f"{self.weight:g}", "formula": self.formula}

    def _pair_prf(
        self, cands: list[str], refs: list[str], call: Call
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        flat, starts, lens, pa, pb = call.packed_pairs(cands, refs)
        w = self.weight
        lin = self.formula == "lin2004"
        kind = _lcs.WLCS if lin else _lcs.WLCS_ROUGE155
        hits = _lcs.pair_scores(flat, starts, lens, pa, pb, kind, w)
        ref_base = lens[pb].astype(float) ** w
        if not lin:
            ref_base = ref_base**w  # ROUGE-1.5.5.pl weights the reference length twice
        return prf(hits, lens[pa].astype(float) ** w, ref_base, 1.0 / w)


class _RougeSkip(RougeBase):
    impl = "paraeval"
    unigrams: ClassVar[bool] = False

    def __init__(
        self,
        skip_distance: int | None = None,
        use_stemmer: bool = False,
        measure: str = "fmeasure",
        multi_ref: str = "max",
        group: str | None = None,
        against_source: bool = False,
    ) -> None:
        super().__init__(use_stemmer, measure, multi_ref, group, against_source)
        if skip_distance is not None and int(skip_distance) < 0:
            raise MetricConfigError(
                f"metric '{self.name}': skip_distance must be >= 0 or null, got {skip_distance}"
            )
        self.skip_distance = None if skip_distance is None else int(skip_distance)

    def _sig_fields(self) -> dict[str, object]:
        skip = "*" if self.skip_distance is None else self.skip_distance
        return {"skip": skip, "count": "rouge155"}

    def _pair_prf(
        self, cands: list[str], refs: list[str], call: Call
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        flat, starts, lens, pa, pb = call.packed_pairs(cands, refs)
        gap = -1 if self.skip_distance is None else self.skip_distance
        vocab = max(len(call.ids.vocab), 1)
        stats = _lcs.skip_bigram_stats(flat, starts, lens, pa, pb, vocab, gap, self.unigrams)
        hits, ca, rb = stats.T.astype(float)
        return prf(hits, ca, rb)


class RougeS(_RougeSkip):
    """ROUGE-S: skip-bigram co-occurrence F."""

    name = "rougeS"


class RougeSU(_RougeSkip):
    """ROUGE-SU: skip-bigrams plus unigrams (ROUGE-1.5.5's unit counting)."""

    name = "rougeSU"
    unigrams = True
