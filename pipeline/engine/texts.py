"""Texts as codes: each is one Python string (Arrow strings are new objects on every ``tolist``)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

# one system's texts as a metric sees them: candidates, per-segment references, sources
Texts = tuple[list[str], list[list[str]], list[str]]


class RunTexts:
    """:attr:`unique`: candidates, sources, then references, as earlier runs gave the encoders:
    their batches (so float32's last bits) follow that order."""

    def __init__(self, df: pd.DataFrame) -> None:
        index: dict[str, int] = {}

        def codes(values: Iterable[str], count: int) -> np.ndarray:
            # setdefault's default is evaluated first: a new text gets the next code
            return np.fromiter((index.setdefault(v, len(index)) for v in values), np.int32, count)

        n = len(df)
        self.candidate = codes(df["candidate"], n)
        self.source = codes(df["source"], n)
        counts = np.fromiter((len(r) for r in df["references"]), np.int64, n)
        self.ref_starts = np.concatenate([[0], np.cumsum(counts)])
        total = int(self.ref_starts[-1])
        self.references = codes((r for refs in df["references"] for r in refs), total)
        self.unique: list[str] = list(index)
        # one code per distinct reference list, so that segments compare as three integers
        sets: dict[bytes, int] = {}
        starts = self.ref_starts
        keys = (self.references[starts[i] : starts[i + 1]].tobytes() for i in range(n))
        self.reference_set = np.fromiter((sets.setdefault(k, len(sets)) for k in keys), np.int32, n)

    def texts(self, rows: np.ndarray, vs_source: bool) -> Texts:
        """The texts of the rows at positions ``rows``; ``vs_source``: sources as references."""
        u = self.unique
        cands = [u[i] for i in self.candidate[rows]]
        srcs = [u[i] for i in self.source[rows]]
        if vs_source:
            return cands, [[s] for s in srcs], srcs
        starts, flat = self.ref_starts, self.references
        refs = [[u[j] for j in flat[starts[i] : starts[i + 1]]] for i in rows]
        return cands, refs, srcs

    def segments(self, rows: np.ndarray, vs_source: bool) -> tuple[np.ndarray, np.ndarray]:
        """A row standing for each distinct segment (first seen first), and each row's segment."""
        if len(rows) == 0:
            return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
        refs = self.source[rows] if vs_source else self.reference_set[rows]
        keys = np.stack([self.candidate[rows], refs, self.source[rows]], axis=1)
        _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        rank = np.empty(len(order), dtype=np.intp)
        rank[order] = np.arange(len(order))
        return rows[first[order]], rank[inverse.reshape(-1)]
