"""BLEURT (Sellam et al. 2020) from a local PyTorch checkpoint.

No weights ship with paraeval: ``checkpoint`` names a transformers sequence-regression model
(``num_labels: 1``) or a ``bleurt-pytorch`` port (``model_type: bleurt``, needs that package).
The score is the regression logit of ``tokenizer(references, candidates)``, in length-sorted
batches, each distinct pair once per process. ``multi_ref``: max (default) or mean. Corpus score:
the segment mean.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paraeval.metrics.base import (
    Metric,
    MetricConfigError,
    MetricResult,
    MissingResourceError,
    make_signature,
    reduce_pairs,
)
from paraeval.metrics.encoder_match import pair_lists
from paraeval.metrics.encoder_model import ENCODER_MEMORY, pick_device


def _digest(path: Path) -> str:
    h = hashlib.blake2b(digest_size=5)
    for p in sorted(x for x in path.rglob("*") if x.is_file()):
        h.update(p.relative_to(path).as_posix().encode())
        h.update(str(p.stat().st_size).encode())
        with p.open("rb") as fh:
            h.update(fh.read(1 << 20))
    return h.hexdigest()


class BLEURT(Metric):
    """BLEURT score of each candidate against its references (higher is better)."""

    name = "bleurt"
    resources = ("BLEURT checkpoint",)
    memory = ENCODER_MEMORY
    default_group = "semantic"

    def __init__(
        self,
        checkpoint: str | None = None,
        batch_size: int = 32,
        max_length: int = 512,
        device: str | None = None,
        multi_ref: str = "max",
        group: str | None = None,
        against_source: bool = False,
    ) -> None:
        super().__init__(group=group, against_source=against_source, multi_ref=multi_ref)
        if not checkpoint:
            raise MissingResourceError(
                "metric 'bleurt' needs `checkpoint`: a local BLEURT PyTorch checkpoint directory "
                "(metrics.bleurt.checkpoint=/path/to/checkpoint); no BLEURT weights ship with "
                "paraeval"
            )
        path = Path(checkpoint).expanduser()
        if not (path / "config.json").is_file():
            what = "does not exist" if not path.exists() else "has no config.json"
            raise MissingResourceError(f"BLEURT checkpoint directory '{path}' {what}")
        self.checkpoint = str(path.resolve())
        self.batch_size = max(1, int(batch_size))
        self.max_length = int(max_length)
        self.device = pick_device(device)
        self._model: Any = None
        self._tokenizer: Any = None
        self._layout = self._read_layout(path)
        self._digest = _digest(path)

    @staticmethod
    def _read_layout(path: Path) -> str:
        try:
            config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise MissingResourceError(
                f"BLEURT checkpoint '{path}': bad config.json ({exc})"
            ) from None
        if config.get("model_type") == "bleurt":
            return "bleurt-pytorch"
        labels = config.get("num_labels", len(config.get("id2label", {}) or {}) or 2)
        if int(labels) != 1:
            raise MetricConfigError(
                f"BLEURT checkpoint '{path}' is not a regression model (num_labels={labels}, "
                "BLEURT has 1)"
            )
        return "transformers"

    def _load(self) -> tuple[Any, Any]:
        if self._model is None:
            if self._layout == "bleurt-pytorch":
                try:
                    from bleurt_pytorch import (  # type: ignore[import-not-found]
                        BleurtForSequenceClassification,
                        BleurtTokenizer,
                    )
                except ImportError:
                    raise MissingResourceError(
                        f"BLEURT checkpoint '{self.checkpoint}' is in the bleurt-pytorch layout: "
                        "install the bleurt-pytorch package"
                    ) from None
                model_cls: Any = BleurtForSequenceClassification
                tok_cls: Any = BleurtTokenizer
            else:
                from transformers import AutoModelForSequenceClassification, AutoTokenizer

                model_cls, tok_cls = AutoModelForSequenceClassification, AutoTokenizer
            try:
                self._tokenizer = tok_cls.from_pretrained(self.checkpoint, local_files_only=True)
                model = model_cls.from_pretrained(self.checkpoint, local_files_only=True)
            except (OSError, ValueError) as exc:
                raise MissingResourceError(
                    f"cannot load BLEURT checkpoint '{self.checkpoint}': {str(exc).splitlines()[0]}"
                ) from None
            self._model = model.eval().to(self.device)
        return self._model, self._tokenizer

    def signature(self, nrefs: int | None = None, segment: bool | None = None) -> str:
        return make_signature(
            self.name,
            impl=f"paraeval~{self._layout}",
            checkpoint=f"{Path(self.checkpoint).name}@{self._digest}",
            maxlen=self.max_length,
            refs=self.multi_ref,
        )

    def score_pairs(self, references: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        """BLEURT of each (reference, candidate) pair."""
        import torch

        pairs = list(zip(references, candidates, strict=True))
        todo = list(dict.fromkeys(pairs))  # a pair that occurs several times is scored once
        scored: dict[tuple[str, str], float] = {}
        if todo:
            model, tok = self._load()
            todo.sort(key=lambda p: len(p[0]) + len(p[1]))
            with torch.inference_mode():
                for start in range(0, len(todo), self.batch_size):
                    chunk = todo[start : start + self.batch_size]
                    enc = tok(
                        [r for r, _ in chunk],
                        [c for _, c in chunk],
                        padding="longest",
                        truncation=True,
                        max_length=self.max_length,
                        return_tensors="pt",
                    ).to(self.device)
                    logits = model(**enc).logits.reshape(len(chunk), -1)[:, 0]
                    scored.update(zip(chunk, logits.float().cpu().tolist(), strict=True))
        return np.array([scored[p] for p in pairs], dtype=np.float64)

    def _score(
        self,
        candidates: list[str],
        references: list[list[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult:
        flat_cands, flat_refs = pair_lists(candidates, references)
        values = self.score_pairs(flat_refs, flat_cands)
        seg = reduce_pairs(values, references, self.multi_ref)
        corpus = float(np.nanmean(seg)) if np.isfinite(seg).any() else float("nan")
        return MetricResult({self.name: seg}, {self.name: corpus}, self.signature())
