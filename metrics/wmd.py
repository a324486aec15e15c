"""Word Mover's Distance (Kusner et al. 2015): lower is better.

POT's exact ``ot.emd2`` between the normalized bags of words of candidate and reference, with
Euclidean ground cost between word vectors from one of (named in the signature):

- ``vectors: <file>``: word2vec text/binary or gensim ``.kv`` vectors on ``\\w+`` words, OOV words
  dropped; equals gensim's ``KeyedVectors.wmdistance``.
- ``embedding: static`` (default): the model's word pieces and static input embeddings.
- ``embedding: contextual``: hidden states of ``layer`` from the shared encoder pass, each token
  occurrence its own point.

``normalize: true`` scales vectors to unit length. Unlike gensim, a text with no known word gives
NaN (not inf, which no average survives) and an all-zero distance matrix gives 0. Multiple
references: ``multi_ref`` max (closest) or mean. Corpus score: the mean of finite distances.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from paraeval.metrics.base import (
    MetricConfigError,
    MetricResult,
    MissingResourceError,
    SegmentLocal,
    choice_setting,
    distinct_pairs,
    make_signature,
)
from paraeval.metrics.encoder import Encoder, Encoders, own_encoder
from paraeval.metrics.encoder_match import STEP, locality_order
from paraeval.metrics.encoder_model import ENCODER_MEMORY
from paraeval.metrics.encoder_precision import check_precision

_WORD = re.compile(r"\w+(?:['’-]\w+)*", re.UNICODE)
EMBEDDINGS = ("static", "contextual")


def load_word_vectors(path: str | Path) -> tuple[dict[str, int], np.ndarray]:
    """(word -> row, matrix) from a word2vec text/binary file or a gensim KeyedVectors file."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise MissingResourceError(f"word-vector file '{p}' does not exist")
    if p.suffix in (".kv", ".model"):
        try:
            from gensim.models import KeyedVectors
        except ImportError:
            raise MissingResourceError(
                f"'{p}' is a gensim KeyedVectors file: pip install gensim, or give a word2vec "
                "text file"
            ) from None
        kv = KeyedVectors.load(str(p))
        return {w: i for i, w in enumerate(kv.index_to_key)}, np.asarray(kv.vectors, np.float32)
    with p.open("rb") as fh:
        header = fh.readline().split()
        try:
            n, dim = int(header[0]), int(header[1])
        except (IndexError, ValueError):
            raise MetricConfigError(
                f"word-vector file '{p}' does not start with a word2vec header 'COUNT DIM'"
            ) from None
        vocab: dict[str, int] = {}
        matrix = np.zeros((n, dim), dtype=np.float32)
        binary = p.suffix == ".bin"
        for row in range(n):
            if binary:
                word_bytes = bytearray()
                while (ch := fh.read(1)) not in (b" ", b""):
                    if ch != b"\n":
                        word_bytes += ch
                word = word_bytes.decode("utf-8", errors="replace")
                vec = np.frombuffer(fh.read(4 * dim), dtype="<f4")
            else:
                parts = fh.readline().decode("utf-8", errors="replace").rstrip("\n").split(" ")
                word, vec = parts[0], np.asarray(parts[1 : dim + 1], dtype=np.float32)
            if len(vec) != dim:
                raise MetricConfigError(f"word-vector file '{p}': row {row + 1} is short")
            vocab.setdefault(word, row)  # the first occurrence of a duplicate word wins
            matrix[row] = vec
    return vocab, matrix


def emd_distance(
    weights_a: np.ndarray, vecs_a: np.ndarray, weights_b: np.ndarray, vecs_b: np.ndarray
) -> float:
    """Exact EMD between two weighted point sets with Euclidean ground cost."""
    import ot
    from scipy.spatial.distance import cdist

    if len(weights_a) == 0 or len(weights_b) == 0:
        return float("nan")
    cost = cdist(vecs_a.astype(np.float64), vecs_b.astype(np.float64))
    if abs(cost.sum()) < 1e-8:
        return 0.0
    return float(ot.emd2(weights_a.astype(np.float64), weights_b.astype(np.float64), cost))


def _bag(items: Sequence[int]) -> tuple[list[int], np.ndarray]:
    """The distinct rows of a document's words and their weights, in order of first occurrence."""
    counts = Counter(items)
    total = float(len(items))
    return list(counts), np.array([c / total for c in counts.values()], dtype=np.float64)


class WMD(SegmentLocal):
    """Word Mover's Distance of each candidate to its references (lower is better)."""

    name = "wmd"
    resources = ("encoder or word vectors",)
    memory = ENCODER_MEMORY
    default_group = "semantic"
    higher_is_better = False
    MODEL = "default"

    def __init__(
        self,
        vectors: str | None = None,
        model: str = MODEL,
        embedding: str = "static",
        layer: int | None = None,
        lowercase: bool = False,
        normalize: bool = True,
        batch_size: int = 64,
        device: str | None = None,
        cache_dir: str | None = None,
        use_cache: bool = True,
        multi_ref: str = "max",
        group: str | None = None,
        against_source: bool = False,
        precision: str = "fp32",
        encoders: Encoders | None = None,
    ) -> None:
        super().__init__(group=group, against_source=against_source, multi_ref=multi_ref)
        precision = check_precision(precision, self.name)
        self.vectors = vectors
        self.model = model
        self.embedding = choice_setting("wmd", "embedding", embedding, EMBEDDINGS)
        self.lowercase = bool(lowercase)
        self.normalize = bool(normalize)
        self.encoder: Encoder | None = None
        self._vocab: dict[str, int] = {}
        self._matrix: np.ndarray | None = None
        self.layer: int | None = None
        if vectors:
            self._vocab, matrix = load_word_vectors(vectors)
            self._matrix = self._norm(matrix)
            self._source = f"w2v:{Path(vectors).name}"
        else:
            settings = (model, device, batch_size, cache_dir, use_cache, precision)
            self.encoder = own_encoder(encoders, self.name, *settings)
            if embedding == "contextual":
                self.layer = self.encoder.num_layers if layer is None else int(layer)
                self.encoder.require_layer(self.layer, self.name)
                self._source = f"contextual:{self.encoder.signature}:L{self.layer}"
            else:
                self._source = f"static-wordpiece:{self.encoder.signature}"

    def _norm(self, m: np.ndarray) -> np.ndarray:
        if not self.normalize:
            return m
        norms = np.linalg.norm(m, axis=-1, keepdims=True)
        return m / np.where(norms > 0, norms, 1.0)

    def prepare(self, texts: Iterable[str]) -> None:
        if self.encoder is not None and self.embedding == "contextual":
            self.encoder.prepare(texts)

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        return make_signature(
            self.name,
            impl="paraeval~pot-emd2",
            emb=self._source,
            case="lc" if self.lowercase else "mixed",
            norm=self.normalize,
            refs="best" if self.multi_ref == "max" else "mean",
        )

    def _docs(self, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text: (weights, vectors) of its bag of words (of word pieces, special tokens left
        out, for the static embedding) or, contextual, of its token occurrences."""
        enc = self.encoder
        if enc is None:
            case = (t.lower() if self.lowercase else t for t in texts)
            bags = [[self._vocab[w] for w in _WORD.findall(t) if w in self._vocab] for t in case]
        else:
            special = {int(i) for i in enc.tokenizer.all_special_ids}
            if self.embedding == "contextual":
                assert self.layer is not None
                found = enc.fetch(texts, [self.layer])
                flat = found.tok[self.layer].cpu().numpy()
                docs = []
                for span in map(found.span, texts):
                    keep = np.array([int(i) not in special for i in found.ids[span]], dtype=bool)
                    pts = self._norm(flat[span][keep].astype(np.float64))
                    docs.append((np.full(len(pts), 1.0 / max(len(pts), 1)), pts))
                return docs
            found = enc.ensure_ids(texts)
            bags = [
                [int(i) for i in found.ids[found.span(t)] if int(i) not in special] for t in texts
            ]
            if self._matrix is None:
                self._matrix = self._norm(enc.input_embeddings())
        matrix = self._matrix
        assert matrix is not None
        return [(w, matrix[keys]) for keys, w in map(_bag, bags)]

    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult:
        pairs = distinct_pairs(candidates, references)
        distance: dict[tuple[str, str], float] = {}
        pairs = [pairs[i] for i in locality_order([r for _, r in pairs])]
        for start in range(0, len(pairs), STEP):  # memory holds one step's documents
            step = pairs[start : start + STEP]
            uniq = list(dict.fromkeys(t for pair in step for t in pair))
            doc = dict(zip(uniq, self._docs(uniq), strict=True))
            distance.update({(c, r): emd_distance(*doc[c], *doc[r]) for c, r in step})
        seg = np.full(len(candidates), np.nan)
        for i, (cand, refs) in enumerate(zip(candidates, references, strict=True)):
            finite = [d for ref in refs if not np.isnan(d := distance[(cand, ref)])]
            if finite:
                seg[i] = min(finite) if self.multi_ref == "max" else float(np.mean(finite))
        return MetricResult({self.name: seg}, {self.name: _corpus(seg)}, self.signature())

    def select(self, result: MetricResult, rows: np.ndarray) -> MetricResult:
        seg = np.asarray(result.segment[self.name])[rows]
        return MetricResult({self.name: seg}, {self.name: _corpus(seg)}, result.signature)


def _corpus(seg: np.ndarray) -> float:
    """The mean distance over the segments that have one."""
    ok = seg[~np.isnan(seg)]
    return float(ok.mean()) if len(ok) else float("nan")
