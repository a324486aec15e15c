"""Content-addressed on-disk cache of correlation rows, next to the score cache: one entry per
metric column, the rows of ``correlations.csv`` it gave, under a key the correlate stage makes of
everything they are computed from (:func:`code_digest` included). In an α sweep only iBLEU and the
group average that contains it are correlated again. Storage:
``<dir>/correlations/<2 hex>/<key>.parquet``, the key in the file's pandas metadata (an entry
serves only its own key), written atomically."""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import BinaryIO

import pandas as pd

log = logging.getLogger(__name__)

# the field (or pandas metadata key) in which an entry carries its own key
KEY_FIELD = "key"

# what computes correlation rows: a change in any of these files invalidates every cached row
_CODE = (
    "correlation/*.py",
    "pipeline/stages/correlate*.py",
    "metrics/base.py",
    "metrics/sacre.py",
    "metrics/_sacre_base.py",
    "metrics/_sacre_batched.py",
)


@dataclass
class Counts:
    hits: int = 0
    misses: int = 0


def write_atomically(path: Path, write: Callable[[BinaryIO], object], sync: bool = False) -> None:
    """``write(file)`` into a temporary file renamed into place: a crash or a second writer
    never leaves a half entry. ``sync``: on disk before the rename."""
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


def code_digest() -> str:
    """Hash of the code that computes correlation rows (:data:`_CODE`)."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.blake2b(digest_size=16)
    for f in sorted({p for pattern in _CODE for p in root.glob(pattern)}):
        with suppress(OSError):
            h.update(f.name.encode() + b"\x1f" + f.read_bytes())
    return h.hexdigest()


class CorrelationRows:
    """Correlation rows by key under ``root``. ``counts``: columns served and computed. A folder
    that cannot be written is reported once and then left alone."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.counts = Counts()
        self._write_failed = False

    @cached_property
    def code(self) -> str:
        """:func:`code_digest`, read once per cache object (one run)."""
        return code_digest()

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
