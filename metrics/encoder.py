"""The encoder shared by the semantic metrics: one forward pass per unique sentence serves every
metric on the model (token ids, each registered layer, the sentence embedding). Callers fetch a
chunk of a pool at a time; outputs are kept in a bounded memo and, with a ``cache_dir``, on disk.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from paraeval.metrics.base import Metric, MetricConfigError
from paraeval.metrics.encoder_disk import EmbeddingCache, Stored
from paraeval.metrics.encoder_match import STEP, to_device
from paraeval.metrics.encoder_model import (
    DEFAULT_MODEL,
    ENCODER_MEMORY,
    EncoderModel,
    Tokens,
    pick_device,
    resolve_model_path,
)
from paraeval.metrics.encoder_precision import check_precision
from paraeval.metrics.encoder_store import DEFAULT_MEMO_BYTES, Memo, Packed, concat, starts_of

# bumped whenever what is stored under a key changes meaning
_CACHE_SCHEMA = "v3"  # v3: packed chunks (v2: an array per text; v1 kept token embeddings)
CHUNK = 2048  # unique sentences tokenized at a time by :meth:`Encoder.prepare`


class Encoder(EncoderModel):
    """An :class:`EncoderModel` with a memo and an optional disk cache."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        device: str | None = None,
        batch_size: int = 64,
        cache_dir: str | None = None,
        use_cache: bool = True,
        memo_bytes: int = DEFAULT_MEMO_BYTES,
        precision: str = "fp32",
    ) -> None:
        super().__init__(model, device, batch_size, precision)
        self.cache_dir = str(cache_dir) if cache_dir and use_cache else None
        self.layers: set[int] = set()
        self._cache: EmbeddingCache | None = None
        self.memo = Memo(memo_bytes)  # bounded: `memo.max_bytes` may be changed
        # pairs (or texts) a metric scores per step: with the memo, what bounds its memory
        self.step = STEP

    @property
    def cache(self) -> EmbeddingCache | None:
        """The disk cache of the model's signature (which a half precision's fallback changes)."""
        if self.cache_dir is None:
            return None
        namespace = f"{self.model_name}-{self.fingerprint}-{_CACHE_SCHEMA}"
        if self._cache is None or self._cache.path.stem != namespace:
            self.close()
            self._cache = EmbeddingCache(self.cache_dir, namespace)
        return self._cache

    def require_layer(self, layer: int, metric: str = "") -> None:
        """Register a layer every later pass keeps (0 = the embeddings' output, ``num_layers`` the
        last); one out of range is ``metric``'s config error."""
        n = self.num_layers
        if not 0 <= int(layer) <= n:
            where = f"metric '{metric}': " if metric else ""
            raise MetricConfigError(
                f"{where}layer must be in 0..{n} for {self.model_name}, got {layer}"
            )
        self.layers.add(int(layer))

    def _held(
        self, texts: Iterable[str], need: list[int], sentence: bool
    ) -> tuple[list[Packed], list[str]]:
        """The parts of the unique ``texts`` that the memo, then the disk cache, hold with ids,
        ``need``'s token embeddings and, with ``sentence``, sentence embeddings; and the texts
        left. The disk cache has no token embeddings: 20 times the room, cheaper to encode."""
        parts, missing = self.memo.find(texts, need, sentence)
        if not missing or self.cache is None or need:
            return parts, missing
        stored = self.cache.get(missing, sentence)
        if stored.texts:
            sent = None if stored.sent is None else to_device(stored.sent, self.device)
            starts = starts_of(stored.lengths)
            found = Packed(stored.texts, stored.ids, starts, stored.lengths, sent=sent)
            self.memo.put(found)
            parts.append(found)
            missing = [t for t in missing if t not in found.row]
        return parts, missing

    def fetch(
        self, texts: Iterable[str], layers: Iterable[int] = (), sentence: bool = False
    ) -> Packed:
        """The unique texts' ids, token embeddings of ``layers`` (registered for later passes) and,
        with ``sentence``, sentence embeddings: the held ones, the rest encoded in one pass."""
        for layer in layers:
            self.require_layer(layer)
        parts, missing = self._held(texts, sorted({int(layer) for layer in layers}), sentence)
        if missing:
            parts.append(self._encode(missing, self.tokenize(missing), sorted(self.layers)))
        return concat(parts)

    def prepare(self, texts: Iterable[str]) -> None:
        """A run's texts, before scoring: where their outputs fit in the memo, they are encoded
        now in one pass (the batches, hence the last bits of float32, of a run that encodes all
        its sentences at once); a larger pool is left to the scoring's steps."""
        need = sorted(self.layers)
        missing = self._held(texts, need, True)[1]
        if not missing:
            return
        dim, room = self.hidden_size, self.memo.max_bytes - self.memo.nbytes
        parts: list[Tokens] = []
        for start in range(0, len(missing), CHUNK):  # a pool too large is found chunk by chunk
            parts.append(self.tokenize(missing[start : start + CHUNK]))
            tokens, n = sum(int(p.lengths.sum()) for p in parts), sum(map(len, parts))
            if tokens * dim * 4 * len(need) + n * (dim * 4 + 300) > room:
                return
        ids, lengths = (np.concatenate([getattr(p, k) for p in parts]) for k in ("ids", "lengths"))
        self._encode(missing, Tokens(ids, lengths), need)

    def _encode(self, texts: list[str], tokens: Tokens, layers: list[int]) -> Packed:
        fresh = self.encode(texts, tokens, layers)
        self.memo.put(fresh)
        if self.cache is not None:
            sent = fresh.sent.cpu().numpy()
            self.cache.put(Stored(texts, tokens.ids, tokens.lengths, sent))
        return fresh

    def ensure_ids(self, texts: Iterable[str]) -> Packed:
        """Token ids only (no forward pass): what static-embedding WMD and idf need."""
        parts, missing = self._held(texts, [], False)
        if missing:
            tokens = self.tokenize(missing)
            fresh = Packed(missing, tokens.ids, tokens.starts, tokens.lengths)
            if self.cache is not None:
                self.cache.put(Stored(missing, tokens.ids, tokens.lengths, None))
            self.memo.put(fresh)
            parts.append(fresh)
        return concat(parts)

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None


class Encoders:
    """The encoders of one run, one per (model, device, disk cache, precision): the metrics built
    with the same ``Encoders`` share one forward pass per unique sentence. The score stage makes
    one per run and gives it to the metrics it builds (``encoders=``); a metric built without one
    gets an encoder of its own. Nothing outlives the object: no state is kept per process."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str, str | None, str], Encoder] = {}

    def get(
        self,
        model: str = DEFAULT_MODEL,
        device: str | None = None,
        batch_size: int = 64,
        cache_dir: str | None = None,
        use_cache: bool = True,
        precision: str = "fp32",
    ) -> Encoder:
        """The shared encoder for these settings; the smallest batch size asked for wins."""
        path, _ = resolve_model_path(model)
        cache = str(Path(cache_dir).expanduser().resolve()) if cache_dir and use_cache else None
        key = (path, pick_device(device), cache, check_precision(precision))
        enc = self._by_key.get(key)
        if enc is None:
            enc = self._by_key[key] = Encoder(
                model, device, batch_size, cache, use_cache, precision=precision
            )
        else:
            enc.batch_size = min(enc.batch_size, max(1, int(batch_size)))
        return enc

    def __len__(self) -> int:
        return len(self._by_key)

    def close(self) -> None:
        for enc in self._by_key.values():
            enc.close()
        self._by_key.clear()


def own_encoder(
    encoders: Encoders | None,
    metric: str,
    model: str,
    device: str | None,
    batch_size: int,
    cache_dir: str | None,
    use_cache: bool,
    precision: str,
) -> Encoder:
    """Metric ``metric``'s encoder: from the run's ``encoders`` when given, else one of its own.
    An unknown precision is the metric's config error."""
    pool = encoders if encoders is not None else Encoders()
    return pool.get(
        model, device, batch_size, cache_dir, use_cache, check_precision(precision, metric)
    )


class EncoderMetric(Metric):
    """A metric on an :class:`Encoder` of the run (``self.encoder``): the texts it will see are
    encoded in one batched pass by :meth:`prepare`."""

    resources = ("encoder",)
    memory = ENCODER_MEMORY
    encoder: Encoder

    def prepare(self, texts: Iterable[str]) -> None:
        self.encoder.prepare(texts)
