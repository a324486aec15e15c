"""Torch operations on the encoder's device shared by the encoder metrics: pairs of a call, and
cosines of sentence embeddings, computed where the encoder runs with only scores coming back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

STEP = 4096  # pairs (or texts) per step of a streamed call: what memory holds at a time


def pair_lists(cands: Sequence[str], refs: Sequence[Sequence[str]]) -> tuple[list[str], list[str]]:
    """(candidate, reference) pairs of a call in order, as two aligned lists."""
    counts = [len(r) for r in refs]
    flat_refs = [r for group in refs for r in group]
    flat_cands = [c for c, k in zip(cands, counts, strict=True) for _ in range(k)]
    return flat_cands, flat_refs


def locality_order(texts: list[str]) -> list[int]:
    """Positions ordered by text: the pairs that share a text (a reference of several systems)
    fall in one step of a streamed call, so the memo serves them from one pass."""
    return sorted(range(len(texts)), key=texts.__getitem__)


def to_device(array: np.ndarray, device: str) -> Any:
    """A tensor on ``device``, through pinned memory where it is CUDA."""
    import torch

    t = torch.from_numpy(np.ascontiguousarray(array))
    if str(device).startswith("cuda"):
        return t.pin_memory().to(device, non_blocking=True)
    return t


def pair_cosines(sent: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of rows ``a[i]`` and ``b[i]`` of sentence embeddings in float64 (0 where a row is
    zero), computed where they are: numpy's on the CPU (the bits every earlier run gave: a tie
    between two segments stays a tie in rank correlations), torch's on another device."""
    if sent.device.type == "cpu":
        x = sent.numpy()
        return cosine_rows(x[a], x[b])
    return cosine_rows_torch(sent[to_device(a, sent.device)], sent[to_device(b, sent.device)])


def cosine_rows_torch(x: Any, y: Any) -> np.ndarray:
    """:func:`cosine_rows` of two tensors, on their device; only the cosines come back."""
    import torch

    with torch.inference_mode():
        x, y = x.double(), y.double()
        num = (x * y).sum(dim=1)
        den = torch.linalg.vector_norm(x, dim=1) * torch.linalg.vector_norm(y, dim=1)
        ok = den > 0
        out = torch.where(ok, num / torch.where(ok, den, torch.ones_like(den)), 0.0)
        return out.cpu().numpy()


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two (n, dim) arrays in float64 (0 where a row is zero)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    num = np.einsum("ij,ij->i", a, b)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def unit_sums(emb: Any) -> tuple[np.ndarray, float]:
    """The sum of the unit rows of a tensor (a zero row stays zero) and the sum of their squared
    norms, in float64 where it is: what the mean pairwise cosine of a set is made of."""
    import torch

    with torch.inference_mode():
        x = emb.double()
        norms = torch.linalg.vector_norm(x, dim=1, keepdim=True)
        unit = torch.where(norms > 0, x / torch.where(norms > 0, norms, 1.0), 0.0)
        return unit.sum(dim=0).cpu().numpy(), float((unit * unit).sum())
