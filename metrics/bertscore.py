"""BERTScore (Zhang et al. 2020) on the shared encoder pass.

Numbers equal ``bert_score.score(cands, refs, model_type=<path>, num_layers=<layer>, idf=<idf>)``
(bert-score 0.3.13): the same token ids, layer, greedy cosine matching and weights ([CLS]/[SEP]
weigh 0; ``idf: true`` counts one document per (candidate, reference) pair, ``log((N + 1) /
(df + 1))``); over several references the element-wise maximum of P, R and F; a text with no
tokens scores 0.

bert-score's batching artefact is reproduced on purpose: pairs are matched in batches padded to
the longest sentence, so padding offers a similarity of 0 and a token whose true similarities are
all negative scores 0 when its pair is shorter than its batch's longest. Sentence embedding models
have many negative similarities, so ``bert_score_batch_size`` (default 64) replays the batching;
``0`` turns the artefact off.

Rescaling ``(s − b) / (1 − b)`` reads the baseline from ``baseline_path`` (bert-score's
``LAYER,P,R,F`` format, see :mod:`metrics.baseline`), the shipped file for the default model, or
bert-score's own files (``lang``); a missing baseline is an error.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from paraeval.metrics.base import (
    CorpusCounts,
    MetricConfigError,
    MetricResult,
    Sharded,
    Texts,
    make_signature,
)
from paraeval.metrics.baseline import find_baseline
from paraeval.metrics.encoder import EncoderMetric, Encoders, own_encoder
from paraeval.metrics.encoder_match import STEP, pair_lists, to_device
from paraeval.metrics.encoder_model import DEFAULT_MODEL_NAME, ENCODER_MEMORY, LARGE_HIDDEN
from paraeval.metrics.encoder_store import Packed, pad_positions


def _bert_score_version() -> str:
    """bert-score's ``__version__`` read from its ``__init__.py`` (importing it loads pyplot); the
    module's string may differ from the distribution's (bert-score 0.3.13 says 0.3.12)."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("bert_score")  # a runtime dependency
    text = Path(spec.origin).read_text(encoding="utf-8") if spec and spec.origin else ""
    found = re.search(r"""^__version__\s*=\s*["']([^"']+)["']""", text, re.MULTILINE)
    if found is None:  # pragma: no cover - another layout: import it after all
        from bert_score import __version__

        return str(__version__)
    return found.group(1)


BERT_SCORE_VERSION = _bert_score_version()

# all-MiniLM-L6-v2's last layer: trained contrastively, pooled for sentence embeddings, and the
# best with humans (STS-B, ParaBank-Eval)
DEFAULT_LAYERS = {DEFAULT_MODEL_NAME: 6}
COLUMNS = ("bertscore_precision", "bertscore_recall", "bertscore_f1")


def document_frequencies(ref_ids: Sequence[np.ndarray]) -> CorpusCounts:
    """References, and the references each token id occurs in (bert-score's ``get_idf_dict``)."""
    df: Counter[int] = Counter()
    for ids in ref_ids:
        df.update(set(int(i) for i in ids))
    return CorpusCounts(len(ref_ids), df)


def idf_weights(counts: CorpusCounts) -> tuple[dict[int, float], float]:
    """bert-score's idf of each token id, and of an id no reference has: ``log((N + 1) / (df +
    1))``."""
    n = counts.total
    return {tok: math.log((n + 1) / (c + 1)) for tok, c in counts.counts.items()}, math.log(n + 1)


def step_nbytes(bert_score_batch_size: int, n_pairs: int, tokens: int) -> int:
    """Peak bytes of one step of :meth:`BERTScore._score_calls`: its pairs' token embeddings
    (float32, a large encoder's), ``tokens`` per sentence, at most one step or padding batch."""
    pairs = min(max(1, n_pairs), max(bert_score_batch_size, STEP))
    return pairs * 2 * tokens * LARGE_HIDDEN * 4


def padding_floors(
    cand_lens: Sequence[int], ref_lens: Sequence[int], batch_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Which pairs bert-score pads (pairs in input order, batches of ``batch_size``, none at 0): a
    padded reference lets the candidate's token maxima floor at 0, a padded candidate the
    reference's."""
    c, r = np.asarray(cand_lens), np.asarray(ref_lens)
    p_floor, r_floor = np.zeros(len(c), dtype=bool), np.zeros(len(c), dtype=bool)
    for start in range(0, len(c), batch_size) if batch_size > 0 else ():
        sl = slice(start, start + batch_size)
        p_floor[sl] = r[sl] < r[sl].max()
        r_floor[sl] = c[sl] < c[sl].max()
    return p_floor, r_floor


def token_weights(ids: np.ndarray, table: tuple[dict[int, float], float]) -> np.ndarray:
    """Each token's weight (float32) from a table of weights by id and the weight of the rest."""
    weights, unseen = table
    keys = np.fromiter(weights, dtype=np.int64, count=len(weights))
    size = int(max(ids.max(initial=-1), keys.max(initial=-1))) + 1
    lookup = np.full(size, unseen, dtype=np.float64)
    lookup[keys] = np.fromiter(weights.values(), dtype=np.float64, count=len(weights))
    return lookup[ids].astype(np.float32)


def greedy_match(
    packed: Packed,
    layer: int,
    weights: np.ndarray,
    cand: np.ndarray,
    ref: np.ndarray,
    floors: tuple[np.ndarray, np.ndarray],
    batch_size: int = 256,
) -> np.ndarray:
    """(P, R, F) per pair (rows ``cand[i]``, ``ref[i]`` of ``packed``) as bert-score's
    ``greedy_cos_idf`` in float32, ``weights`` per token of ``packed``; ``floors`` mark pairs
    whose token maxima floor at 0 (:func:`padding_floors`). The matching runs where the packed
    embeddings are; only the scores come back."""
    import torch

    out = np.zeros((len(cand), 3), dtype=np.float64)
    if not len(cand):
        return out
    tok = packed.tok[layer]
    w = to_device(weights, tok.device)
    c_len, r_len = packed.lengths[cand], packed.lengths[ref]
    order = np.lexsort((r_len, c_len))  # similar lengths together: less padding per batch
    scores = []
    with torch.inference_mode():
        for start in range(0, len(cand), batch_size):
            idx = order[start : start + batch_size]
            c = padded_unit(tok, w, packed.starts[cand[idx]], c_len[idx])
            r = padded_unit(tok, w, packed.starts[ref[idx]], r_len[idx])
            both = to_device(np.stack([floors[0][idx], floors[1][idx]], axis=1), tok.device)
            scores.append(_match_batch(*c, *r, both))
        out[order] = torch.cat(scores).double().cpu().numpy()
    return out


def padded_unit(tok: Any, w: Any, starts: np.ndarray, lengths: np.ndarray) -> tuple[Any, Any, Any]:
    """Padded unit token vectors, weights and mask of sentences of a packed layer, gathered where
    it is."""
    import torch

    where, mask = pad_positions(starts, lengths)
    at, m = to_device(where, tok.device), to_device(mask, tok.device)
    e = tok[at]
    unit = torch.where(m.unsqueeze(-1), e / torch.norm(e, dim=-1, keepdim=True), 0.0)
    return unit, torch.where(m, w[at], 0.0), m


def _match_batch(c: Any, cw: Any, cm: Any, r: Any, rw: Any, rm: Any, floors: Any) -> Any:
    """(P, R, F) of a padded batch of pairs, as float32 rows on the batch's device."""
    import torch

    sim = torch.bmm(c, r.transpose(1, 2))
    valid = cm.unsqueeze(2) & rm.unsqueeze(1)
    sim = sim.masked_fill(~valid, float("-inf"))
    word_p = sim.max(dim=2)[0]
    word_r = sim.max(dim=1)[0]
    word_p = torch.where(floors[:, :1], word_p.clamp(min=0.0), word_p)
    word_r = torch.where(floors[:, 1:], word_r.clamp(min=0.0), word_r)
    word_p = word_p.masked_fill(~cm, 0.0)
    word_r = word_r.masked_fill(~rm, 0.0)
    cw = cw / cw.sum(dim=1, keepdim=True)
    rw = rw / rw.sum(dim=1, keepdim=True)
    p = (word_p * cw).sum(dim=1)
    r_ = (word_r * rw).sum(dim=1)
    f = 2 * p * r_ / (p + r_)
    # bert-score: a sentence of only [CLS] [SEP] scores 0 (F is taken before P/R are)
    empty = (cm.sum(dim=1) == 2) | (rm.sum(dim=1) == 2)
    p = p.masked_fill(empty, 0.0)
    r_ = r_.masked_fill(empty, 0.0)
    f = f.masked_fill(torch.isnan(f), 0.0)
    return torch.stack([p, r_, f], dim=1)


class BERTScore(Sharded, EncoderMetric):
    """BERTScore precision, recall and F1 (columns ``bertscore_precision``, ``_recall``,
    ``_f1``). Corpus score: the mean of the segment scores, as bert-score reports it."""

    name = "bertscore"
    memory = MappingProxyType(
        {
            **ENCODER_MEMORY,
            "bert_score_batch_size": lambda size, s: step_nbytes(size, s.pairs, s.tokens),
        }
    )
    default_group = "semantic"
    higher_is_better = True
    columns = COLUMNS
    MODEL = "default"
    BATCH_SIZE = 64

    def __init__(
        self,
        model: str = MODEL,
        layer: int | None = None,
        idf: bool = False,
        rescale_with_baseline: bool = False,
        baseline_path: str | None = None,
        lang: str = "en",
        batch_size: int = BATCH_SIZE,
        device: str | None = None,
        bert_score_batch_size: int = 64,
        cache_dir: str | None = None,
        use_cache: bool = True,
        group: str | None = None,
        against_source: bool = False,
        precision: str = "fp32",
        encoders: Encoders | None = None,
    ) -> None:
        super().__init__(group=group, against_source=against_source)
        self.model = model
        self.bert_score_batch_size = max(0, int(bert_score_batch_size))
        settings = (model, device, batch_size, cache_dir, use_cache, precision)
        self.encoder = own_encoder(encoders, self.name, *settings)
        self.layer = self._pick_layer(model, layer)
        self.idf = bool(idf)
        self.rescale_with_baseline = bool(rescale_with_baseline)
        self.lang = lang
        self.baseline_path = baseline_path
        self.baseline: np.ndarray | None = None
        self.baseline_source = "none"
        if self.rescale_with_baseline:
            self.baseline, self.baseline_source = find_baseline(
                baseline_path, model, self.encoder.model_name, lang, self.layer
            )

    def _pick_layer(self, model: str, layer: int | None) -> int:
        if layer is None:
            known = DEFAULT_LAYERS.get(self.encoder.model_name)
            if known is None:
                from bert_score.utils import model2layers

                known = model2layers.get(model)
            if known is None:
                raise MetricConfigError(
                    f"metric 'bertscore': no default layer for model '{model}'; set `layer` "
                    f"(0..{self.encoder.num_layers})"
                )
            layer = int(known)
        self.encoder.require_layer(layer, self.name)
        return int(layer)

    # ------------------------------------------------------------------ contract
    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        rescale = f"yes[{self.baseline_source}]" if self.rescale_with_baseline else "no"
        return make_signature(
            self.name,
            impl=f"paraeval~bert_score-{BERT_SCORE_VERSION}",
            model=self.encoder.signature,
            layer=self.layer,
            idf=self.idf,
            rescale=rescale,
            refs="max",
            pad=f"bs{self.bert_score_batch_size}" if self.bert_score_batch_size else "none",
        )

    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult:
        return self._score_calls([(candidates, references)])[0]

    def score_systems(self, calls: Sequence[Texts]) -> list[MetricResult]:
        """Several systems' calls in one streamed pass: step k scores the k-th chunk of pairs of
        every call, so the references and sources the systems share are encoded once while
        memory holds a step's embeddings only."""
        for call in calls:
            self._check_call(*call)
        return self._score_calls([(c, refs) for c, refs, _ in calls])

    @property
    def uses_counts(self) -> bool:
        return self.idf

    def counts(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]]
    ) -> CorpusCounts:
        """With idf, one document per (candidate, reference) pair; without, nothing."""
        return self._pair_counts(pair_lists(candidates, references)[1])

    def score_shard(
        self,
        counts: CorpusCounts,
        candidates: Sequence[str],
        references: Sequence[Sequence[str]],
        sources: Sequence[str] | None = None,
    ) -> MetricResult:
        self._check_call(candidates, references, sources)
        return self._score_calls([(candidates, references)], [counts])[0]

    def split(self, references: Sequence[Sequence[str]], rows: int) -> list[slice]:
        """Cuts after ``rows`` rows or more, where a whole number of bert-score's batches of
        pairs ends (its padding rule depends on the batch): a call with no such place is one."""
        unit = self.bert_score_batch_size
        if not unit:
            return super().split(references, rows)
        bounds: list[slice] = []
        start = pairs = 0
        for i, refs in enumerate(references):
            pairs += len(refs)
            if i + 1 - start >= rows and pairs % unit == 0:
                bounds.append(slice(start, i + 1))
                start = i + 1
        if start < len(references) or not bounds:
            bounds.append(slice(start, len(references)))
        return bounds

    def _score_calls(
        self,
        calls: Sequence[tuple[Sequence[str], Sequence[Sequence[str]]]],
        counts: Sequence[CorpusCounts] | None = None,
    ) -> list[MetricResult]:
        """``counts``: each call's :meth:`counts` (default: of the call itself)."""
        flat = [pair_lists(cands, refs) for cands, refs in calls]
        if counts is None:
            counts = [self._pair_counts(refs) for _, refs in flat]
        tables = [self._weight_table(c) for c in counts]
        per_pair = [np.zeros((len(c), 3)) for c, _ in flat]
        # pairs per call and step, a multiple of bert-score's batch: the padding rule's batches
        # never straddle two steps
        unit = self.bert_score_batch_size or 64
        step = max(unit, self.encoder.step // max(1, len(calls)) // unit * unit)
        longest = max((len(c) for c, _ in flat), default=0)
        for start in range(0, longest, step):
            sl = slice(start, start + step)
            texts = [t for cands, refs in flat for t in (*cands[sl], *refs[sl])]
            found = self.encoder.fetch(texts, [self.layer])
            for (cands, refs), table, out in zip(flat, tables, per_pair, strict=True):
                if start < len(cands):
                    cand, ref = found.rows(cands[sl]), found.rows(refs[sl])
                    unit = self.bert_score_batch_size
                    floors = padding_floors(found.lengths[cand], found.lengths[ref], unit)
                    w = token_weights(found.ids, table)
                    out[sl] = greedy_match(found, self.layer, w, cand, ref, floors)
        return [
            self._result(per_pair[k], [len(r) for r in refs]) for k, (_, refs) in enumerate(calls)
        ]

    def _pair_counts(self, refs: list[str]) -> CorpusCounts:
        if not self.idf:
            return CorpusCounts()
        ids = self.encoder.ensure_ids(refs)
        return document_frequencies([ids.ids[ids.span(t)] for t in refs])

    def _weight_table(self, counts: CorpusCounts) -> tuple[dict[int, float], float]:
        """Token weights by id and the weight of an id not in the table; with idf, from the
        counts of the call's references."""
        if self.idf:
            return idf_weights(counts)
        tok = self.encoder.tokenizer
        return {tok.sep_token_id: 0.0, tok.cls_token_id: 0.0}, 1.0

    def _result(self, per_pair: np.ndarray, counts: list[int]) -> MetricResult:
        seg = np.full((len(counts), 3), np.nan)
        has = np.asarray(counts) > 0
        if has.any():
            starts = np.cumsum([0, *counts])[:-1][has]
            seg[has] = np.maximum.reduceat(per_pair, starts, axis=0)
        if self.baseline is not None:
            seg = (seg - self.baseline) / (1.0 - self.baseline)
        return MetricResult(
            {col: seg[:, k] for k, col in enumerate(COLUMNS)},
            self.corpus_from_stats(seg),
            self.signature(),
            stats=seg,
        )

    def corpus_from_stats(self, stats: np.ndarray) -> dict[str, float]:
        if len(stats) == 0:
            return {col: float("nan") for col in COLUMNS}
        means = stats.mean(axis=0)
        return {col: float(means[k]) for k, col in enumerate(COLUMNS)}
