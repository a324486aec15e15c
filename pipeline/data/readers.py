"""Reading input files (UTF-8, errors naming the row and column) and the long table's formats."""

from __future__ import annotations

import csv
import io
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd

from paraeval.pipeline.errors import ConfigError, DataError

Quoting = Literal[0, 1, 2, 3]


def _column_at(raw: bytes, offset: int, sep: bytes) -> str | None:
    index = raw[raw.rfind(b"\n", 0, offset) + 1 : offset].count(sep)
    header = raw.split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r").split(sep.decode())
    return header[index].strip('"') if index < len(header) else None


_NOT_FILES = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
# a pipe can be read only once: kept for the later jobs of a sweep in this process
_PIPED: dict[str, bytes] = {}


def check_input(path: Path, label: str) -> None:
    """A DataError unless ``path`` is a file or a pipe (a FIFO, ``<(zcat data.jsonl.gz)``)."""
    if str(path) in _PIPED:
        return
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise DataError(f"file not found ({label}); check the path", file=str(path)) from None
    except OSError as exc:
        raise DataError(f"cannot read file ({exc.strerror})", file=str(path)) from None
    for test, kind in _NOT_FILES:
        if test(mode):
            raise DataError(
                f"{label} is {kind}; expected a file (or a pipe), check the path", file=str(path)
            )


def read_input(path: Path, label: str) -> bytes:
    """Read once from start to end, no seek, no size from its metadata: a pipe reads like a file."""
    check_input(path, label)
    if str(path) in _PIPED:
        return _PIPED[str(path)]
    try:
        with open(path, "rb") as f:
            raw = f.read()
            if stat.S_ISFIFO(os.fstat(f.fileno()).st_mode):
                _PIPED[str(path)] = raw
    except OSError as exc:
        raise DataError(f"cannot read file ({exc.strerror})", file=str(path)) from None
    return raw


def _read_text(path: Path, label: str, sep: str | None = None) -> str:
    raw = read_input(path, label)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(
            f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "re-save the file as UTF-8",
            file=str(path),
            row=line,
            column=_column_at(raw, exc.start, sep.encode()) if sep and line > 1 else None,
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def read_text_lines(path: Path, label: str) -> list[str]:
    lines = _read_text(path, label).split("\n")
    return [ln.rstrip("\r") for ln in (lines[:-1] if lines[-1] == "" else lines)]


def check_aligned(
    lines: list[str], n: int, source: object, file: str, advice: str = "", column: str | None = None
) -> list[str]:
    if len(lines) != n:
        raise DataError(
            f"{len(lines)} lines but the source file {source} has {n}{advice}",
            file=file,
            row=min(len(lines), n) + 1,
            column=column,
        )
    return lines


@dataclass(frozen=True)
class Reader:
    """An input format: its reader never executes code (no pickle, no eval)."""

    suffixes: tuple[str, ...]
    read: Callable[[Path], pd.DataFrame]
    first_row: int = 1


def _read_delimited(p: Path, sep: str, quoting: Quoting) -> pd.DataFrame:
    text = _read_text(p, "data.path", sep)
    _check_fields(text, p, sep, quoting)
    return pd.read_csv(
        io.StringIO(text), sep=sep, dtype=str, keep_default_na=False, quoting=quoting
    )


def _check_fields(text: str, p: Path, sep: str, quoting: Quoting) -> None:
    """What pandas passes silently: a column named twice, a short row (TSV: a quoted line break)."""
    reader = csv.reader(io.StringIO(text), delimiter=sep, quoting=quoting)
    header = next(reader, None)
    if not header:
        return
    for index, name in enumerate(header):
        if name in header[:index]:
            raise DataError(
                f"the header names column '{name}' twice (fields {header.index(name) + 1} and "
                f"{index + 1}); rename one",
                file=str(p),
                row=1,
                column=name,
            )
    for record in reader:
        if record and len(record) < len(header):
            tsv_hint = "; a line break inside a quoted field? TSV is read without quotes, so"
            hint = f"{tsv_hint} each row must be on one line" if quoting == csv.QUOTE_NONE else ""
            raise DataError(
                f"{len(record)} field{'s' if len(record) != 1 else ''} but the header has "
                f"{len(header)}{hint}",
                file=str(p),
                row=reader.line_num,
                column=header[len(record)],
            )


class _Absent:
    """A key that a JSON line lacks while other lines have it."""

    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()


def json_object(line: str, file: Path, row: int) -> dict[str, object]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON ({exc.msg})", file=str(file), row=row) from None
    if not isinstance(obj, dict):
        raise DataError("each line must be a JSON object", file=str(file), row=row)
    return obj


def _read_jsonl(p: Path) -> pd.DataFrame:
    lines = enumerate(read_text_lines(p, "data.path"), start=1)
    rows = [json_object(line, p, i) for i, line in lines if line.strip()]
    keys = list(dict.fromkeys(k for row in rows for k in row))
    return pd.DataFrame([{k: row.get(k, ABSENT) for k in keys} for row in rows], columns=keys)


READERS: dict[str, Reader] = {
    "csv": Reader((".csv",), lambda p: _read_delimited(p, ",", csv.QUOTE_MINIMAL), first_row=2),
    # sentences contain quotes: a TSV is read without quote processing
    "tsv": Reader((".tsv", ".tab"), lambda p: _read_delimited(p, "\t", csv.QUOTE_NONE), 2),
    "jsonl": Reader((".jsonl", ".json", ".ndjson"), _read_jsonl),
    # Parquet seeks to its footer: read into memory first, so that a pipe works too
    "parquet": Reader(
        (".parquet", ".pq"), lambda p: pd.read_parquet(io.BytesIO(read_input(p, "data.path")))
    ),
}


_FORMATS = ", ".join(list(READERS)[:-1]) + " or " + list(READERS)[-1]


def detect_format(path: Path, fmt: str | None) -> str:
    if fmt:
        fmt = fmt.lower()
        if fmt not in READERS:
            raise ConfigError(f"data.format must be {_FORMATS}, got '{fmt}'")
        return fmt
    suffix = path.suffix.lower()
    if suffix in (".gz", ".bz2", ".xz", ".zst"):
        suffix = Path(path.stem).suffix.lower()
    for name, reader in READERS.items():
        if suffix in reader.suffixes:
            return name
    raise ConfigError(
        f"cannot tell the format of '{path}' from its extension; set data.format to {_FORMATS}"
    )


def read_table(path: str | Path, fmt: str | None = None) -> pd.DataFrame:
    p = Path(path)
    check_input(p, "data.path")
    kind = detect_format(p, fmt)
    try:
        return READERS[kind].read(p)
    except pd.errors.ParserError as exc:
        raise DataError(f"cannot parse {kind.upper()}: {str(exc).strip()}", file=str(p)) from None
    except (OSError, ValueError) as exc:
        raise DataError(
            f"cannot read {kind} file: {str(exc).splitlines()[0]}", file=str(p)
        ) from None
