"""Content-addressed on-disk cache of metric results: one entry per (metric, system call), keyed
by a hash of the metric's cache signature and the exact texts it saw, so a stale number is never
served. An entry holds segment and corpus scores, ``extra`` and the sufficient statistics, so
``corpus_from_stats`` works on a hit as on a fresh result. Corpus-dependent metrics (CIDEr, NIST,
BERTScore's idf) are valid per whole call, which is what the key covers; ``Metric.prepare`` only
batches work, so it is not part of the key. iBLEU is cached without α (BLEU against references
and against the source), the α combination redone on every lookup: a sweep over α recomputes
nothing from text.

Storage: one ``.npz`` per entry under ``<dir>/scores/v1/<2 hex>/<key>.npz``, read with
``allow_pickle=False``, written atomically (a crash or two parallel writers never leave a half
entry); plain files also behave on cluster network file systems. Correlation rows are cached
next to it (:mod:`.cache_rows`; :attr:`ScoreCache.rows`)."""

from __future__ import annotations

import hashlib
import json
import logging
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from paraeval.metrics.base import Metric, MetricResult
from paraeval.metrics.sacre import IBLEU
from paraeval.pipeline.stages.cache_rows import KEY_FIELD, CorrelationRows, Counts, write_atomically

log = logging.getLogger(__name__)

FORMAT = "paraeval-score-cache/3"
_SEG = "seg__"


def cache_signature(metric: Metric) -> str:
    """The part of the key that describes the metric: its signature, except for iBLEU, whose entry
    does not depend on α (the α combination is recomputed from the cached components)."""
    signature = metric.components_signature() if isinstance(metric, IBLEU) else metric.signature()
    return f"{type(metric).__module__}.{type(metric).__qualname__}|{signature}"


def texts_digest(
    candidates: Sequence[str], references: Sequence[Sequence[str]], sources: Sequence[str] | None
) -> str:
    """Hash of the exact texts one metric call sees (the same for every metric of a system, so
    the caller hashes them once per system)."""
    refs = [list(r) for r in references]
    return _hash([list(candidates), refs, None if sources is None else list(sources)])


def key_of(signature: str, digest: str) -> str:
    """:func:`cache_key` from the metric's :func:`cache_signature` and the texts' digest."""
    return _hash([FORMAT, signature, digest])


def _hash(value: object) -> str:
    # JSON is an unambiguous encoding of nested lists of strings (["ab", "c"] != ["a", "bc"])
    # and is built in C: hashing the texts of a large system stays a few milliseconds
    payload = json.dumps(value, ensure_ascii=False)
    return hashlib.blake2b(payload.encode("utf-8", "surrogatepass"), digest_size=32).hexdigest()


def cache_key(
    metric: Metric,
    candidates: Sequence[str],
    references: Sequence[Sequence[str]],
    sources: Sequence[str] | None,
    digest: str | None = None,
) -> str:
    """Key of one entry: the metric's cache signature and the texts' digest (``digest`` when the
    caller already has :func:`texts_digest` of these texts)."""
    return key_of(cache_signature(metric), digest or texts_digest(candidates, references, sources))


def _to_arrays(result: MetricResult, n: int) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {
        "n": np.asarray(n, dtype=np.int64),
        "signature": np.asarray(result.signature, dtype=np.str_),
        "corpus_names": np.asarray(list(result.corpus), dtype=np.str_),
        "corpus_values": np.asarray(list(result.corpus.values()), dtype=np.float64),
        "extra_names": np.asarray(list(result.extra), dtype=np.str_),
        "extra_values": np.asarray(list(result.extra.values()), dtype=np.float64),
        "segment_names": np.asarray(list(result.segment), dtype=np.str_),
    }
    for i, values in enumerate(result.segment.values()):
        arrays[f"{_SEG}{i}"] = np.asarray(values, dtype=np.float64)
    if result.stats is not None:
        arrays["stats"] = np.asarray(result.stats, dtype=np.float64)
    return arrays


def _from_arrays(arrays: Mapping[str, np.ndarray]) -> MetricResult:
    def named(kind: str) -> dict[str, float]:
        names, values = arrays[f"{kind}_names"].tolist(), arrays[f"{kind}_values"].tolist()
        return {str(k): float(v) for k, v in zip(names, values, strict=True)}

    names = [str(s) for s in arrays["segment_names"].tolist()]
    return MetricResult(
        segment={name: np.array(arrays[f"{_SEG}{i}"]) for i, name in enumerate(names)},
        corpus=named("corpus"),
        signature=str(arrays["signature"]),
        stats=np.array(arrays["stats"]) if "stats" in arrays else None,
        extra=named("extra"),
    )


class ScoreCache:
    """Metric results by content. ``counts`` records hits and misses per output name (the metric id,
    ``<id>_src`` for the against-source pass). A broken or unwritable cache folder is reported once
    and then bypassed: the run never fails because of its cache."""

    def __init__(self, directory: str | Path) -> None:
        self.root = Path(directory).expanduser() / "scores" / "v1"
        self.counts: dict[str, Counts] = {}
        self._write_failed = False
        self._read_warned = False
        self.rows = CorrelationRows(self.root.parent / "correlations")

    @classmethod
    def from_config(cls, node: Mapping[str, Any] | None) -> ScoreCache | None:
        if not node or not node.get("enabled", True) or not node.get("dir"):
            return None
        return cls(str(node["dir"]))

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.npz"

    def _count(self, name: str) -> Counts:
        return self.counts.setdefault(name, Counts())

    def get(
        self,
        name: str,
        metric: Metric,
        candidates: Sequence[str],
        references: Sequence[Sequence[str]],
        sources: Sequence[str] | None,
    ) -> MetricResult | None:
        """The cached result or None (a miss); every call counts as one hit or one miss."""
        key = cache_key(metric, candidates, references, sources)
        return self.get_by_key(name, metric, key, len(candidates))

    def get_by_key(self, name: str, metric: Metric, key: str, n: int) -> MetricResult | None:
        """:meth:`get` by the entry's :func:`cache_key` and the number of segments."""
        entry = self._read(self.path(key), n, key)
        if entry is None:
            self._count(name).misses += 1
            return None
        self._count(name).hits += 1
        return metric.from_components(entry) if isinstance(metric, IBLEU) else entry

    def put(
        self,
        metric: Metric,
        candidates: Sequence[str],
        references: Sequence[Sequence[str]],
        sources: Sequence[str] | None,
        result: MetricResult,
        digest: str | None = None,
    ) -> None:
        if self._write_failed:
            return
        if isinstance(metric, IBLEU):
            if result.stats is None or "bleu_ref" not in result.extra:
                return
            # the entry's own signature is the cache's (with the class), as the key's
            result = replace(metric.components(result), signature=cache_signature(metric))
        key = cache_key(metric, candidates, references, sources, digest)
        path = self.path(key)
        try:
            # the entry carries its key: a file that is valid but not this key's is never served
            arrays = {**_to_arrays(result, len(candidates)), KEY_FIELD: np.asarray(key)}
            write_atomically(path, lambda fh: np.savez(fh, **arrays), sync=True)  # type: ignore[arg-type]
        except OSError as exc:
            self._write_failed = True
            log.warning("score cache: cannot write to %s (%s); continuing without it", path, exc)

    def _read(self, path: Path, n: int, key: str) -> MetricResult | None:
        try:
            with np.load(path, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
            if KEY_FIELD not in arrays or str(arrays[KEY_FIELD]) != key:
                # copied, renamed or written before entries carried keys: a miss, replaced
                return None
            entry = _from_arrays(arrays)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
            # an unreadable entry (disk trouble, foreign file) is a miss and is replaced
            if not self._read_warned:
                self._read_warned = True
                log.warning("score cache: ignoring unreadable entry %s (%s)", path, exc)
            return None
        if int(arrays["n"]) != n or any(len(v) != n for v in entry.segment.values()):
            return None
        return entry

    def summary(self) -> dict[str, dict[str, int]]:
        return {k: {"hits": c.hits, "misses": c.misses} for k, c in self.counts.items()}

    def _totals(self) -> tuple[int, int]:
        counts = self.counts.values()
        return sum(c.hits for c in counts), sum(c.misses for c in counts)

    def metrics(self) -> dict[str, float]:
        """MLflow metrics: ``cache.hits.<name>``, ``cache.misses.<name>`` and the totals."""
        out: dict[str, float] = {}
        for name, c in self.counts.items():
            out[f"cache.hits.{name}"] = float(c.hits)
            out[f"cache.misses.{name}"] = float(c.misses)
        hits, misses = self._totals()
        out["cache.hits"], out["cache.misses"] = float(hits), float(misses)
        rows = self.rows.counts
        if rows.hits or rows.misses:
            out["cache.hits.correlation"] = float(rows.hits)
            out["cache.misses.correlation"] = float(rows.misses)
        return out

    def log_summary(self) -> None:
        if not self.counts:
            return
        parts = [f"{k} {c.hits} hit/{c.misses} miss" for k, c in self.counts.items()]
        log.info(
            "score cache %s: %d hits, %d misses (%s)", self.root, *self._totals(), "; ".join(parts)
        )
