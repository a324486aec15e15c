"""Content-addressed caches; each entry is written atomically and carries its key."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd

from paraeval.metrics.base import Decomposed, Metric, MetricResult
from paraeval.pipeline.version import __version__

log = logging.getLogger(__name__)

FORMAT = "paraeval-score-cache/4"
_SEG = "seg__"
# where an entry carries its own key: a valid file not this key's (copied, renamed) is not served
KEY_FIELD = "key"
# bumped by hand when the correlation code's numbers change (with paraeval's version, the key of
# every cached correlation row; the metrics' own versions are in their cache signatures)
ROWS_VERSION = "1"


@dataclass
class Counts:
    hits: int = 0
    misses: int = 0


def write_atomically(path: Path, write: Callable[[BinaryIO], object], sync: bool = False) -> None:
    """``write(file)`` into a temporary file renamed into place (``sync``: on disk first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:16]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


class CorrelationRows:
    """Keyed by everything rows come from: an α sweep recorrelates only iBLEU and its average."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.counts = Counts()
        self._write_failed = False

    code = f"{ROWS_VERSION}|{__version__}"

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.parquet"

    def get(self, key: str) -> pd.DataFrame | None:
        try:
            rows = pd.read_parquet(self.path(key))
        except (OSError, ValueError):
            return None
        return rows if rows.attrs.get(KEY_FIELD) == key else None

    def put(self, key: str, rows: pd.DataFrame) -> None:
        if self._write_failed:
            return
        rows = rows.copy()
        rows.attrs = {KEY_FIELD: key}  # stored in the file's pandas metadata
        path = self.path(key)
        data = rows.to_parquet(index=False)
        try:
            write_atomically(path, lambda fh: fh.write(data or b""))
        except OSError as exc:
            self._write_failed = True
            log.warning("correlation cache: cannot write %s (%s)", path, exc)

    def count(self, hits: int, misses: int) -> None:
        """Columns served from / computed for the cache (``cache.*.correlation``)."""
        self.counts.hits += hits
        self.counts.misses += misses
        log.info("correlation cache: %d columns cached, %d computed", hits, misses)


def cache_signature(metric: Metric) -> str:
    """A decomposed metric's without α: its cached components are combined per lookup, so α
    sweeps reuse them."""
    decomposed = isinstance(metric, Decomposed)
    signature = metric.components_signature() if decomposed else metric.signature()
    return f"{type(metric).__module__}.{type(metric).__qualname__}|v{metric.version}|{signature}"


def texts_digest(
    candidates: Sequence[str], references: Sequence[Sequence[str]], sources: Sequence[str] | None
) -> str:
    """The whole call's texts: CIDEr, NIST and BERTScore's idf depend on the call's corpus."""
    refs = [list(r) for r in references]
    return _hash([list(candidates), refs, None if sources is None else list(sources)])


def key_of(signature: str, digest: str) -> str:
    return _hash([FORMAT, signature, digest])


def _hash(value: object) -> str:
    # JSON: an unambiguous encoding of nested lists of strings (["ab", "c"] != ["a", "bc"])
    payload = json.dumps(value, ensure_ascii=False)
    return hashlib.blake2b(payload.encode("utf-8", "surrogatepass"), digest_size=32).hexdigest()


def cache_key(
    metric: Metric,
    candidates: Sequence[str],
    references: Sequence[Sequence[str]],
    sources: Sequence[str] | None,
    digest: str | None = None,
) -> str:
    """Key of one entry (``digest``: :func:`texts_digest` of these texts, when known)."""
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
    """Plain files (they behave on network file systems), read with ``allow_pickle=False``."""

    def __init__(self, directory: str | Path) -> None:
        self.root = Path(directory).expanduser() / "scores" / "v1"
        self.counts: dict[str, Counts] = {}
        self._write_failed = False
        self._read_warned = False
        self.rows = CorrelationRows(self.root.parent / "correlations")

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.npz"

    def get(self, name: str, metric: Metric, key: str, n: int) -> MetricResult | None:
        """The entry under ``key`` (from :func:`cache_key`) of a call of ``n`` rows, or None."""
        counts = self.counts.setdefault(name, Counts())
        entry = self._read(self.path(key), n, key)
        if entry is None:
            counts.misses += 1
            return None
        counts.hits += 1
        return metric.from_components(entry) if isinstance(metric, Decomposed) else entry

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
        if isinstance(metric, Decomposed):
            if result.stats is None or not result.extra:
                return
            # the entry's own signature is the cache's (with the class), as the key's
            result = replace(metric.components(result), signature=cache_signature(metric))
        key = cache_key(metric, candidates, references, sources, digest)
        path = self.path(key)
        try:
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
        named = {f".{k}": c for k, c in self.counts.items()} | {"": Counts(*self._totals())}
        if self.rows.counts.hits or self.rows.counts.misses:
            named[".correlation"] = self.rows.counts
        return {
            f"cache.{kind}{name}": float(value)
            for name, c in named.items()
            for kind, value in (("hits", c.hits), ("misses", c.misses))
        }

    def log_summary(self) -> None:
        if not self.counts:
            return
        parts = [f"{k} {c.hits} hit/{c.misses} miss" for k, c in self.counts.items()]
        log.info(
            "score cache %s: %d hits, %d misses (%s)", self.root, *self._totals(), "; ".join(parts)
        )
