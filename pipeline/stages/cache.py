"""Content-addressed on-disk cache of metric results.

One entry per (metric, system call): the key is a blake2b hash of the metric's cache signature and
the exact texts it saw (candidates, per-segment reference lists, sources), so a changed setting, a
changed sentence or a different reference count is a different key and a stale number is never
served. An entry holds the per-segment columns, the corpus values, ``MetricResult.extra`` and the
per-segment sufficient statistics, so ``corpus_from_stats`` (bootstrap, dev/test splits) works on a
hit exactly as on a fresh result.

Corpus-dependent metrics (CIDEr's document frequencies, NIST's information weights, BERTScore's
idf) compute those from the texts of the one system call they are given; the key is the whole
call's texts, so they are cached at the level where they are valid and never per segment.
``Metric.prepare`` only batches work (encoders) and must not change scores, which is why it is not
part of the key.

iBLEU is cached without α: its entry holds the BLEU of each candidate against the references and
against the source (segment scores, corpus scores, statistics), and the α combination is redone on
every lookup. A sweep over α therefore recomputes nothing from text.

Correlation rows are cached per metric column too (:func:`correlate_cached`), keyed by the
column's scores and statistics, the human scores, the correlation settings, the random generator's
state and a hash of the correlation code; in an α sweep only iBLEU and the group average that
contains it are correlated again.

Storage: one NumPy ``.npz`` per entry under ``<dir>/scores/v1/<2 hex>/<key>.npz``, read with
``allow_pickle=False`` (nothing in the cache can execute code), written to a temporary file in the
same folder and renamed into place, so a crash never leaves a half entry and parallel jobs writing
the same key both leave a complete, identical file. Plain files (no database) also behave on the
network file systems of clusters. Deleting the folder only means the next run recomputes.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import sys
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xxhash

from paraeval.memo import Memo
from paraeval.metrics.base import Metric, MetricResult
from paraeval.metrics.sacre import IBLEU
from paraeval.pipeline.stages.correlate import advance_like_correlate, correlate, correlated_columns

if TYPE_CHECKING:  # score imports this module: the types only, for checking
    from paraeval.pipeline.stages.aggregate import Aggregated
    from paraeval.pipeline.stages.score import Scores

log = logging.getLogger(__name__)

FORMAT = "paraeval-score-cache/3"
_SEG = "seg__"


@dataclass
class Counts:
    hits: int = 0
    misses: int = 0


def cache_signature(metric: Metric) -> str:
    """The part of the key that describes the metric: its signature, except for iBLEU, whose entry
    does not depend on α (the α combination is recomputed from the cached components)."""
    cls = f"{type(metric).__module__}.{type(metric).__qualname__}"
    if isinstance(metric, IBLEU):
        return f"{cls}|{metric.components_signature()}"
    return f"{cls}|{metric.signature()}"


def texts_digest(
    candidates: Sequence[str],
    references: Sequence[Sequence[str]],
    sources: Sequence[str] | None,
) -> str:
    """Hash of the exact texts one metric call sees. Every metric that scores a system sees the
    same texts, so the caller hashes them once per system rather than once per metric."""
    # JSON is an unambiguous encoding of nested lists of strings (["ab", "c"] != ["a", "bc"])
    # and is built in C: hashing the texts of a large system stays a few milliseconds
    payload = json.dumps(
        [
            list(candidates),
            [list(r) for r in references],
            None if sources is None else list(sources),
        ],
        ensure_ascii=False,
    )
    return hashlib.blake2b(payload.encode("utf-8", "surrogatepass"), digest_size=32).hexdigest()


def key_of(signature: str, digest: str) -> str:
    """:func:`cache_key` from the metric's :func:`cache_signature` and the texts' digest."""
    payload = json.dumps([FORMAT, signature, digest], ensure_ascii=False)
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


# --------------------------------------------------------------------------- entry <-> arrays
KEY_FIELD = "key"


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
    names = [str(s) for s in arrays["segment_names"].tolist()]
    return MetricResult(
        segment={name: np.array(arrays[f"{_SEG}{i}"]) for i, name in enumerate(names)},
        corpus={
            str(k): float(v)
            for k, v in zip(
                arrays["corpus_names"].tolist(), arrays["corpus_values"].tolist(), strict=True
            )
        },
        signature=str(arrays["signature"]),
        stats=np.array(arrays["stats"]) if "stats" in arrays else None,
        extra={
            str(k): float(v)
            for k, v in zip(
                arrays["extra_names"].tolist(), arrays["extra_values"].tolist(), strict=True
            )
        },
    )


# Entries already read by this process, by path, checked against the file's size and mtime: the
# jobs of a Hydra multirun share one process, and a sweep's later jobs read the same entries.
# Bounded by bytes; _from_arrays copies every array, so callers never share the memo's arrays.
# Bounded by bytes only, as many entries as fit.
_Entry = tuple[int, int, dict[str, np.ndarray]]  # (mtime_ns, size, arrays)


def _entry_bytes(entry: _Entry) -> int:
    return sum(a.nbytes for a in entry[2].values())


_MEMO: Memo[str, _Entry] = Memo(
    "cache.entries", max_entries=sys.maxsize, max_bytes=512 * 2**20, size=_entry_bytes
)


# Whether the entries this process writes go into _MEMO as well, as if read back: set for a Hydra
# multirun, whose later jobs read what its first job wrote (the second job of a ParaBank-Eval
# sweep read its 648 entries back from disk: half a second). A single run keeps nothing it
# writes, so its peak memory does not grow by the entries.
KEEP_WRITTEN = False


def _keep_written(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """The arrays of the entry just written to ``path`` in _MEMO, as :func:`_load_arrays` would
    read them: each array as ``np.savez`` stores it (``np.asanyarray``), copied, so that the
    result they came from may change without changing the entry."""
    st = os.stat(path)
    kept = {k: np.array(np.asanyarray(v), copy=True) for k, v in arrays.items()}
    _MEMO.put(str(path), (st.st_mtime_ns, st.st_size, kept))


def _load_arrays(path: Path) -> dict[str, np.ndarray]:
    st = os.stat(path)
    key = str(path)
    hit = _MEMO.get(key)
    if hit is not None and hit[0] == st.st_mtime_ns and hit[1] == st.st_size:
        return hit[2]
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    return _MEMO.put(key, (st.st_mtime_ns, st.st_size, arrays))[2]


class ScoreCache:
    """Metric results by content. ``counts`` records hits and misses per output name (the metric id,
    ``<id>_src`` for the against-source pass). A broken or unwritable cache folder is reported once
    and then bypassed: the run never fails because of its cache."""

    def __init__(self, directory: str | Path) -> None:
        self.root = Path(directory).expanduser() / "scores" / "v1"
        self.counts: dict[str, Counts] = {}
        self._write_failed = False
        self._read_warned = False
        self.correlation = Counts()

    @classmethod
    def from_config(cls, node: Mapping[str, Any] | None) -> ScoreCache | None:
        if not node or not node.get("enabled", True) or not node.get("dir"):
            return None
        return cls(str(node["dir"]))

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.npz"

    def _count(self, name: str) -> Counts:
        return self.counts.setdefault(name, Counts())

    # ------------------------------------------------------------------ lookup / store
    def get(
        self,
        name: str,
        metric: Metric,
        candidates: Sequence[str],
        references: Sequence[Sequence[str]],
        sources: Sequence[str] | None,
        digest: str | None = None,
    ) -> MetricResult | None:
        """The cached result or None (a miss); every call counts as one hit or one miss."""
        key = cache_key(metric, candidates, references, sources, digest)
        return self.get_by_key(name, metric, key, len(candidates))

    def get_by_key(self, name: str, metric: Metric, key: str, n: int) -> MetricResult | None:
        """:meth:`get` by the entry's :func:`cache_key` and the number of segments."""
        entry = self._read(self.path(key), n, key)
        if entry is None:
            self._count(name).misses += 1
            return None
        self._count(name).hits += 1
        if isinstance(metric, IBLEU):
            return metric.from_components(entry)
        return entry

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
            self._write(path, arrays)
            if KEEP_WRITTEN:
                _keep_written(path, arrays)
        except OSError as exc:
            self._write_failed = True
            log.warning("score cache: cannot write to %s (%s); continuing without it", path, exc)

    def _read(self, path: Path, n: int, key: str) -> MetricResult | None:
        try:
            arrays = _load_arrays(path)
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

    @staticmethod
    def _write(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:16]}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, **arrays)  # type: ignore[arg-type]
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            with suppress(OSError):
                os.unlink(tmp)
            raise

    @staticmethod
    def _write_bytes(path: Path, data: bytes | None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:16]}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data or b"")
            os.replace(tmp, path)
        except BaseException:
            with suppress(OSError):
                os.unlink(tmp)
            raise

    def count_rows(self, hits: int, misses: int) -> None:
        """Correlation columns served from / computed for the cache (``cache.*.correlation``)."""
        self.correlation.hits += hits
        self.correlation.misses += misses
        log.info("correlation cache: %d columns cached, %d computed", hits, misses)

    # ------------------------------------------------------------------ reporting
    def summary(self) -> dict[str, dict[str, int]]:
        return {k: {"hits": c.hits, "misses": c.misses} for k, c in self.counts.items()}

    def metrics(self) -> dict[str, float]:
        """MLflow metrics: ``cache.hits.<name>``, ``cache.misses.<name>`` and the totals."""
        out: dict[str, float] = {}
        for name, c in self.counts.items():
            out[f"cache.hits.{name}"] = float(c.hits)
            out[f"cache.misses.{name}"] = float(c.misses)
        out["cache.hits"] = float(sum(c.hits for c in self.counts.values()))
        out["cache.misses"] = float(sum(c.misses for c in self.counts.values()))
        if self.correlation.hits or self.correlation.misses:
            out["cache.hits.correlation"] = float(self.correlation.hits)
            out["cache.misses.correlation"] = float(self.correlation.misses)
        return out

    def log_summary(self) -> None:
        if not self.counts:
            return
        parts = [f"{k} {c.hits} hit/{c.misses} miss" for k, c in self.counts.items()]
        total_h = sum(c.hits for c in self.counts.values())
        total_m = sum(c.misses for c in self.counts.values())
        log.info(
            "score cache %s: %d hits, %d misses (%s)", self.root, total_h, total_m, "; ".join(parts)
        )


# --------------------------------------------------------------------------- correlation rows
_CODE_DIGEST: str | None = None


def _code_digest() -> str:
    """Hash of the code that computes correlation rows: a changed coefficient, bootstrap or corpus
    statistic invalidates every cached row."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        root = Path(__file__).resolve().parents[2]
        files = [
            *sorted((root / "correlation").glob("*.py")),
            root / "pipeline" / "stages" / "correlate.py",
            root / "metrics" / "base.py",
            root / "metrics" / "sacre.py",
            root / "metrics" / "_sacre_batched.py",
        ]
        h = hashlib.blake2b(digest_size=16)
        for f in files:
            with suppress(OSError):
                h.update(f.name.encode() + b"\x1f" + f.read_bytes())
        _CODE_DIGEST = h.hexdigest()
    return _CODE_DIGEST


def _frame_bytes(frame: pd.DataFrame) -> bytes:
    return bytes(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())


# correlation rows this process read or computed, by cache key: the jobs of a multirun read
# each unchanged column's rows once, not once per job (a file read each, a tenth of a second
# per job on the demo). Rows are never changed in place: they are concatenated into new tables.
_ROWS: Memo[str, pd.DataFrame] = Memo("cache.correlation_rows", max_entries=4096)


def correlate_cached(
    agg: Aggregated,
    cfg: Mapping[str, Any],
    rng: np.random.Generator,
    scores: Scores,
    cache: ScoreCache,
) -> pd.DataFrame:
    """``pipeline.correlate.correlate`` with its rows cached per metric column.

    Valid because ``correlation_table`` draws its resamples per (aspect, level) before any metric
    is looked at: the rows of one column depend on that column's scores (and statistics), the
    human scores, the settings and the generator's state, not on which other columns are present,
    and the generator ends in the same state whatever the columns. In an α sweep only iBLEU and
    the group average that contains it change, so only their rows are recomputed.
    """
    seg = agg.segments
    aspects = [c for c in seg.columns if str(c).startswith("human_")]
    cols = correlated_columns(agg)
    if not aspects or not cols:
        return correlate(agg, cfg, rng, scores)
    # xxh3-128, not blake2b: the key hashes every column's scores and statistics in every job of
    # a sweep (20 MB on ParaBank-Eval), and a local cache needs no protection against made
    # collisions; the entry's own key is checked when it is read
    shared = xxhash.xxh3_128()
    shared.update(json.dumps([FORMAT, "correlation", _code_digest()]).encode())
    shared.update(json.dumps(dict(cfg), sort_keys=True, default=str).encode())
    shared.update(json.dumps(rng.bit_generator.state, sort_keys=True, default=str).encode())
    shared.update(json.dumps([str(s) for s in agg.systems.index]).encode())
    shared.update(_frame_bytes(seg[["item_id", "system", *aspects]]))
    keys: dict[str, str] = {}
    for col in cols:
        info = agg.columns[col]
        h = shared.copy()
        h.update(json.dumps([col, info.metric, info.signature, info.higher_is_better]).encode())
        h.update(_frame_bytes(seg[[col]]))
        if col in agg.systems.columns:
            h.update(np.asarray(agg.systems[col], dtype=float).tobytes())
        suffix = "_src" if col.endswith("_src") else ""
        for system in agg.systems.index:
            st = scores.stats.get((f"{info.metric}{suffix}", system)) if scores else None
            if st is not None:
                h.update(np.ascontiguousarray(st, dtype=float).tobytes())
        keys[col] = h.hexdigest()

    root = cache.root.parent / "correlations"
    cached: dict[str, pd.DataFrame] = {}
    for col, key in keys.items():
        kept = _ROWS.get(key)
        if kept is not None:
            cached[col] = kept
            continue
        path = root / key[:2] / f"{key}.parquet"
        try:
            rows = pd.read_parquet(path)
        except (OSError, ValueError):
            continue
        if rows.attrs.get(KEY_FIELD) == key:  # an entry serves only its own key
            cached[col] = _ROWS.put(key, rows)
    todo = [c for c in cols if c not in cached]
    if todo:
        sub = copy.copy(agg)
        sub.columns = {c: agg.columns[c] for c in todo}
        fresh = correlate(sub, cfg, rng, scores)
    else:
        # every row is cached: draw what the table would draw, so the generator ends in the
        # state of an uncached run
        advance_like_correlate(agg, cfg, rng)
        fresh = next(iter(cached.values())).iloc[:0]
    cache.count_rows(len(cols) - len(todo), len(todo))
    parts = []
    for col in todo:
        rows = fresh[fresh["metric"] == col]
        parts.append(rows)
        _ROWS.put(keys[col], rows)
        if not cache._write_failed:
            key = keys[col]
            path = root / key[:2] / f"{key}.parquet"
            rows = rows.copy()
            rows.attrs = {KEY_FIELD: key}  # stored in the file's pandas metadata
            try:
                ScoreCache._write_bytes(path, rows.to_parquet(index=False))
            except OSError as exc:
                log.warning("correlation cache: cannot write %s (%s)", path, exc)
    parts += [cached[c] for c in cols if c in cached]
    out = pd.concat(parts, ignore_index=True) if parts else fresh.iloc[:0]
    out = out[list(fresh.columns)] if set(fresh.columns) <= set(out.columns) else out
    # the order of an uncached run: aspect, level, then metric, coefficients as computed
    order = {
        "aspect": {a: i for i, a in enumerate(aspects)},
        "level": {lv: i for i, lv in enumerate(cfg.get("levels", ["segment", "system"]))},
        "metric": {c: i for i, c in enumerate(cols)},
    }
    rank = pd.DataFrame({k: out[k].map(v) for k, v in order.items()})
    out = out.iloc[np.lexsort((np.arange(len(out)), rank["metric"], rank["level"], rank["aspect"]))]
    return out.reset_index(drop=True)
