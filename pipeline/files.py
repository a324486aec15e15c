"""Output files, tracked or not: atomic writes, the writability probe, the output digest."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import pandas as pd

from paraeval.pipeline.errors import ConfigError, OutputError

RUN_INFO = "run_info.json"
PLOTS_DIR = "plots"
REPORT_NAME = "report.html"
PARAPHRASE_FILE = "paraphrase.csv"


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Through a temporary file, then renamed: never a truncated file under the final name."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        write(Path(tmp))
        # mkstemp creates 0600; the result gets the mode a plain open() would have given it
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise OutputError(path, exc) from None
    except BaseException:
        _remove(tmp)
        raise


def _remove(tmp: str | None) -> None:
    if tmp is not None:
        with suppress(OSError):
            os.unlink(tmp)


def write_csv(df: pd.DataFrame, path: Path) -> None:
    atomic_write(path, lambda p: df.to_csv(p, index=False))


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    atomic_write(path, lambda p: df.to_parquet(p, index=False))


def check_writable(out_dir: Path, key: str = "hydra.run.dir", shown: str | None = None) -> None:
    """``key``: the setting to change; ``shown``: the folder as the user wrote it."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".paraeval-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"output directory '{shown or out_dir}' is not writable ({exc.strerror}); set {key} "
            "to a writable folder"
        ) from None


def output_digest(out_dir: Path, salt: str = "") -> str:
    """``salt``: the run's id, so two runs stay two. Figures may still be drawing: left out."""
    h = hashlib.blake2b(digest_size=16)
    h.update(salt.encode("utf-8") + b"\x1f")
    root = Path(out_dir)
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file()
        and p.relative_to(root).parts[0] not in (PLOTS_DIR, REPORT_NAME, RUN_INFO)
        and p.suffix != ".log"
        and not p.name.startswith(".paraeval")
        and not p.name.endswith(".tmp")
    )
    for p in files:
        rel = p.relative_to(root).as_posix().encode("utf-8")
        h.update(len(rel).to_bytes(8, "little") + rel)
        data = p.read_bytes()
        h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()
