"""Load stage: files -> the tidy (item, system) table of DESIGN.md.

Columns: ``item_id``, ``system``, ``source``, ``references`` (list of str, possibly empty, count may
vary per item), ``candidate``, ``human_<aspect>`` (float, NaN = not rated), ``metric_<name>``
(precomputed scores) and ``origin`` (``file:row`` of the row, for error messages).

Validation happens here, once; every message names the file, the row and the column.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import math
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from paraeval.memo import Memo
from paraeval.pipeline.errors import ConfigError, DataError

log = logging.getLogger(__name__)

TIDY = ["item_id", "system", "source", "references", "candidate"]
HUMAN_PREFIX = "human_"
METRIC_PREFIX = "metric_"
AGGREGATIONS = ("mean", "median", "zscore")


# --------------------------------------------------------------------------- reading files
# Files read by the load in progress (see memoized_load); None outside one.
_FILES_READ: list[Path] | None = None


def in_order(values: pd.Series) -> list[Any]:
    """The distinct values of a column in order of first appearance, as Python objects:
    ``list(dict.fromkeys(values))`` without a Python step per row (iterating an Arrow-backed
    column costs a microsecond a row, a fiftieth of a second per pass at ParaBank-Eval's size)."""
    return list(pd.unique(values).tolist())


def row_groups(values: pd.Series) -> list[tuple[Any, np.ndarray]]:
    """Each distinct value of a column (missing ones left out) in order of first appearance,
    with its row positions, ascending: the groups of ``groupby(sort=False)``, from one
    factorisation rather than a comparison of every row per value."""
    codes, uniques = pd.factorize(values)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
    return [(u, order[bounds[k] : bounds[k + 1]]) for k, u in enumerate(uniques.tolist())]


def _note_read(path: Path) -> None:
    if _FILES_READ is not None:
        _FILES_READ.append(path)


def _column_at(raw: bytes, offset: int, sep: bytes) -> str | None:
    """The header name of the field holding byte ``offset`` of a delimited file (quoted
    separators aside: good enough to point at the cell)."""
    start = raw.rfind(b"\n", 0, offset) + 1
    index = raw[start:offset].count(sep)
    header = raw.split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r").split(sep.decode())
    return header[index].strip('"') if index < len(header) else None


def _read_text(path: Path, label: str, sep: str | None = None) -> str:
    """The file decoded as UTF-8 (a BOM dropped); a bad byte is reported with its row (and, for
    a delimited file, its column)."""
    if not path.is_file():
        raise DataError(f"file not found ({label}); check the path", file=str(path))
    _note_read(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read file ({exc.strerror})", file=str(path)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = _column_at(raw, exc.start, sep.encode()) if sep and line > 1 else None
        raise DataError(
            f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "re-save the file as UTF-8",
            file=str(path),
            row=line,
            column=column,
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def _read_text_lines(path: Path, label: str, sep: str | None = None) -> list[str]:
    lines = _read_text(path, label, sep).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln.rstrip("\r") for ln in lines]


@dataclass(frozen=True)
class Reader:
    """One input format: the file name suffixes it claims, how it reads a file into a frame of
    strings/objects (never executing code: no pickle, no eval), and the row number of the first
    data row (a CSV header is line 1)."""

    suffixes: tuple[str, ...]
    read: Callable[[Path], pd.DataFrame]
    first_row: int = 1


def _read_delimited(p: Path, sep: str, quoting: int) -> pd.DataFrame:
    # decoded once: the UTF-8 check names the row and column of a bad byte, and pandas parses
    # the same text instead of reading the file again
    text = _read_text(p, "data.path", sep)
    _check_fields(text, p, sep, quoting)
    return pd.read_csv(
        io.StringIO(text),
        sep=sep,
        dtype=str,
        keep_default_na=False,
        quoting=quoting,
    )


def _check_fields(text: str, p: Path, sep: str, quoting: int) -> None:
    """What pandas would pass silently: a header naming a column twice (pandas renames the
    second ``x.1`` and the first is used), and a row with fewer fields than the header (pandas
    fills them with empty values; in a TSV, read without quotes, that is a line break inside a
    quoted field, which splits one row into two)."""
    reader = csv.reader(io.StringIO(text), delimiter=sep, quoting=quoting)
    header = next(reader, None)
    if not header:
        return
    seen: dict[str, int] = {}
    for index, name in enumerate(header):
        if name in seen:
            raise DataError(
                f"the header names column '{name}' twice (fields {seen[name] + 1} and "
                f"{index + 1}); rename one",
                file=str(p),
                row=1,
                column=name,
            )
        seen[name] = index
    for record in reader:
        if record and len(record) < len(header):
            hint = (
                "; a line break inside a quoted field? TSV is read without quotes, so each row "
                "must be on one line"
                if quoting == csv.QUOTE_NONE
                else ""
            )
            raise DataError(
                f"{len(record)} field{'s' if len(record) != 1 else ''} but the header has "
                f"{len(header)}{hint}",
                file=str(p),
                row=reader.line_num,
                column=header[len(record)],
            )


class _Absent:
    """A key that a JSON line lacks while other lines have it (not an empty value)."""

    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()


def _read_jsonl(p: Path) -> pd.DataFrame:
    rows = []
    for i, line in enumerate(_read_text_lines(p, "data.path"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"invalid JSON ({exc.msg})", file=str(p), row=i) from None
        if not isinstance(obj, dict):
            raise DataError("each line must be a JSON object", file=str(p), row=i)
        rows.append(obj)
    keys = list(dict.fromkeys(k for row in rows for k in row))
    return pd.DataFrame([{k: row.get(k, ABSENT) for k in keys} for row in rows], columns=keys)


def _read_parquet(p: Path) -> pd.DataFrame:
    _note_read(p)
    return pd.read_parquet(p)


# the input formats of a long table, by the name `data.format` takes; a new format is one entry
READERS: dict[str, Reader] = {
    "csv": Reader((".csv",), lambda p: _read_delimited(p, ",", csv.QUOTE_MINIMAL), first_row=2),
    # sentences contain quotes: a TSV is read without quote processing
    "tsv": Reader((".tsv", ".tab"), lambda p: _read_delimited(p, "\t", csv.QUOTE_NONE), 2),
    "jsonl": Reader((".jsonl", ".json", ".ndjson"), _read_jsonl),
    "parquet": Reader((".parquet", ".pq"), _read_parquet),
}


def _formats() -> str:
    names = list(READERS)
    return ", ".join(names[:-1]) + " or " + names[-1]


def _detect_format(path: Path, fmt: str | None) -> str:
    if fmt:
        fmt = fmt.lower()
        if fmt not in READERS:
            raise ConfigError(f"data.format must be {_formats()}, got '{fmt}'")
        return fmt
    suffix = path.suffix.lower()
    if suffix in (".gz", ".bz2", ".xz", ".zst"):
        suffix = Path(path.stem).suffix.lower()
    for name, reader in READERS.items():
        if suffix in reader.suffixes:
            return name
    raise ConfigError(
        f"cannot tell the format of '{path}' from its extension; set data.format to {_formats()}"
    )


def read_table(path: str | Path, fmt: str | None = None) -> pd.DataFrame:
    """Read a long table with the reader of its format."""
    p = Path(path)
    if not p.is_file():
        raise DataError("file not found; check data.path", file=str(p))
    kind = _detect_format(p, fmt)
    try:
        return READERS[kind].read(p)
    except DataError:
        raise
    except pd.errors.ParserError as exc:
        raise DataError(f"cannot parse {kind.upper()}: {str(exc).strip()}", file=str(p)) from None
    except (OSError, ValueError) as exc:
        raise DataError(
            f"cannot read {kind} file: {str(exc).splitlines()[0]}", file=str(p)
        ) from None


# --------------------------------------------------------------------------- cell conversion
def _is_missing(value: Any) -> bool:
    if value is None or value is ABSENT:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and value.strip() == ""


def _to_text(value: Any, *, file: str, row: int, column: str, allow_empty: bool) -> str:
    if value is ABSENT:
        raise DataError(
            f"this line has no '{column}' key (other lines have one); give every line the key "
            'and use "" for an empty text',
            file=file,
            row=row,
            column=column,
        )
    if _is_missing(value):
        if allow_empty:
            return ""
        raise DataError("empty value", file=file, row=row, column=column)
    if isinstance(value, str | int | np.integer):
        return str(value)
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    raise DataError(f"expected text, got {type(value).__name__}", file=file, row=row, column=column)


def _to_refs(value: Any, *, file: str, row: int, column: str) -> list[str]:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list | tuple):
        refs = []
        for v in value:
            if _is_missing(v):
                continue
            if not isinstance(v, str):
                raise DataError("references must be strings", file=file, row=row, column=column)
            refs.append(v)
        return refs
    if _is_missing(value):
        return []
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            try:
                parsed = json.loads(stripped)
            except json.JSONDecodeError:
                return [value]
            if isinstance(parsed, list):
                return _to_refs(parsed, file=file, row=row, column=column)
        return [value]
    raise DataError(
        f"expected a reference string or a list, got {type(value).__name__}",
        file=file,
        row=row,
        column=column,
    )


def _to_score(
    value: Any,
    *,
    file: str,
    row: int,
    column: str,
    nan_text: dict[str, list[str]] | None = None,
) -> float:
    if _is_missing(value):
        return float("nan")
    if isinstance(value, str) and value.strip().lower() == "nan":
        # spreadsheets and pandas exports write a missing rating as the text NaN: it is one
        # (``nan_text`` collects where, for one warning line)
        if nan_text is not None:
            nan_text.setdefault(column, []).append(f"{file}, row {row}")
        return float("nan")
    if isinstance(value, bool):
        raise DataError("expected a number, got a boolean", file=file, row=row, column=column)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DataError(
            f"expected a number, got '{str(value)[:40]}'; leave the cell empty for a missing score",
            file=file,
            row=row,
            column=column,
        ) from None
    if math.isinf(number):
        raise DataError("infinite score", file=file, row=row, column=column)
    return number


def _warn_nan_text(nan_text: dict[str, list[str]]) -> None:
    for column, where in nan_text.items():
        log.warning(
            "%s: %d %s 'NaN' (first: %s); treated as missing ratings, like an empty cell",
            column,
            len(where),
            "cell says" if len(where) == 1 else "cells say",
            where[0],
        )


# --------------------------------------------------------------------------- validation
def validate(df: pd.DataFrame, file: str) -> pd.DataFrame:
    """Checks shared by every loader; returns the table sorted by (item, system)."""
    dup = df.duplicated(subset=["item_id", "system"], keep=False)
    if dup.any():
        rows = df.loc[dup, ["item_id", "system", "origin"]].head(2)
        first, second = rows.iloc[0], rows.iloc[1]
        raise DataError(
            f"duplicate (item_id, system) = ({first.item_id}, {first.system}) also at "
            f"{second.origin}; keep one row per item and system, or set data.annotator for "
            "per-annotator ratings",
            file=file,
            row=_row_of(first.origin),
            column="item_id",
        )
    _check_item_spellings(df, file)
    sources = df.groupby("item_id", sort=False)["source"].nunique()
    bad = sources[sources > 1]
    if len(bad):
        item = bad.index[0]
        origin = df.loc[df.item_id == item, "origin"].iloc[1]
        raise DataError(
            f"item '{item}' has different source sentences in different rows",
            file=file,
            row=_row_of(origin),
            column="source",
        )
    empty = df["candidate"].str.strip() == ""
    if empty.any():
        per_system = df.loc[empty, "system"].value_counts().to_dict()
        log.warning(
            "%d empty or whitespace-only candidates (scored as given): %s",
            int(empty.sum()),
            per_system,
        )
    if df.empty:
        raise DataError("no rows to evaluate", file=file)
    return df.sort_values(["item_id", "system"], kind="stable").reset_index(drop=True)


def _check_item_spellings(df: pd.DataFrame, file: str) -> None:
    """Item ids that are the same number written differently (``01`` and ``1``: a spreadsheet
    dropped the zeros, or JSON has a number where another file has text) would be two items."""
    ids = pd.Series(df["item_id"].unique())
    numeric = ids[ids.str.fullmatch(r"[0-9]+")]
    if numeric.empty:
        return
    canonical = numeric.str.lstrip("0").replace("", "0")
    clashes = canonical[canonical.duplicated(keep=False)]
    if clashes.empty:
        return
    spellings = list(numeric[canonical == clashes.iloc[0]])  # in the order of the rows
    first, second = spellings[0], spellings[1]
    origin = {i: df.loc[df.item_id == i, "origin"].iloc[0] for i in (first, second)}
    raise DataError(
        f"item ids '{first}' ({origin[first]}) and '{second}' ({origin[second]}) differ only in "
        "leading zeros and would be two items; write every id the same way",
        file=origin[second].rsplit(":", 1)[0],
        row=_row_of(origin[second]),
        column="item_id",
    )


def _row_of(origin: str) -> int | None:
    try:
        return int(origin.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return None


def _check_annotator_rows(
    df: pd.DataFrame, annotator: str, keys: list[str], repeats_allowed: bool = False
) -> None:
    """Per-annotator rows of one (item, system) must agree on the texts, and an annotator rates
    it once: otherwise the first text would be scored silently, or a rating counted twice."""
    # one row may stand for several systems (ParaBank's sys_id lists): the same row twice is
    # one rating; two rows are two
    rows_of = df.drop_duplicates([*keys, annotator, "origin"])
    twice = rows_of.duplicated(subset=[*keys, annotator], keep=False)
    if twice.any() and not repeats_allowed:
        first = rows_of.loc[twice].iloc[0]
        same = (rows_of[[*keys, annotator]] == first[[*keys, annotator]]).all(axis=1)
        second = rows_of.loc[same].iloc[1]
        raise DataError(
            f"annotator '{first[annotator]}' rates (item_id, system) = ({first.item_id}, "
            f"{first.system}) twice, also at {second.origin}; keep one rating per annotator",
            file=first.origin.rsplit(":", 1)[0],
            row=_row_of(first.origin),
            column=annotator,
        )
    for column in ("candidate", "source"):
        if column not in df:
            continue
        counts = df.groupby(keys, sort=False)[column].nunique()
        bad = counts[counts > 1]
        if bad.empty:
            continue
        item, system = bad.index[0]
        rows = df[(df.item_id == item) & (df.system == system)]
        texts = rows[column]
        other = rows.loc[texts != texts.iloc[0]].iloc[0]
        raise DataError(
            f"the annotator rows of (item_id, system) = ({item}, {system}) disagree on the "
            f"{column} text: '{str(texts.iloc[0])[:40]}' here, '{str(other[column])[:40]}' at "
            f"{other.origin}; every row of one item and system must carry the same text",
            file=rows.origin.iloc[0].rsplit(":", 1)[0],
            row=_row_of(rows.origin.iloc[0]),
            column=column,
        )


def _aggregate_annotators(
    df: pd.DataFrame, annotator: str, human_cols: list[str], how: str, repeats_allowed: bool = False
) -> pd.DataFrame:
    if how not in AGGREGATIONS:
        raise ConfigError(f"data.aggregate must be one of {list(AGGREGATIONS)}, got '{how}'")
    if how == "zscore":
        df = df.copy()
        for col in human_cols:
            grouped = df.groupby(annotator)[col]
            mean = grouped.transform("mean")
            sd = grouped.transform("std", ddof=0)
            df[col] = (df[col] - mean) / sd.where(sd > 0)
        how = "mean"
    keys = ["item_id", "system"]
    _check_annotator_rows(df, annotator, keys, repeats_allowed)
    first = df.groupby(keys, sort=False).first().reset_index()
    agg = df.groupby(keys, sort=False)[human_cols].agg(how).reset_index()
    counts = df.groupby(keys, sort=False)[human_cols].count().reset_index()
    out = first.drop(columns=human_cols).merge(agg, on=keys)
    for col in human_cols:
        out[f"n_{col}"] = counts[col].to_numpy()
    return out.drop(columns=[annotator])


# --------------------------------------------------------------------------- loaders
def load_table(
    path: str,
    format: str | None = None,
    columns: Mapping[str, Any] | None = None,
    human: Sequence[str] | None = None,
    annotator: str | None = None,
    aggregate: str = "mean",
    name: str = "table",
) -> pd.DataFrame:
    """A long table with a column mapping (see conf/data/table.yaml)."""
    file = str(path)
    raw = read_table(path, format)
    offset = READERS[_detect_format(Path(path), format)].first_row
    return tidy_table(raw, file, offset, columns, human, annotator, aggregate, name)


def load_frame(
    frame: pd.DataFrame,
    columns: Mapping[str, Any] | None = None,
    human: Sequence[str] | None = None,
    annotator: str | None = None,
    aggregate: str = "mean",
    name: str = "dataframe",
) -> pd.DataFrame:
    """A DataFrame in the long layout, checked like a file (rows are numbered from 0, as its
    positions); references may be a column of lists."""
    return tidy_table(frame, "<DataFrame>", 0, columns, human, annotator, aggregate, name)


def tidy_table(
    raw: pd.DataFrame,
    file: str,
    offset: int,
    columns: Mapping[str, Any] | None,
    human: Sequence[str] | None,
    annotator: str | None,
    aggregate: str,
    name: str,
) -> pd.DataFrame:
    """The tidy table from a long table's rows (``offset``: the row number of the first row)."""
    mapping = {
        "item_id": "item_id",
        "system": "system",
        "source": "source",
        "candidate": "candidate",
        "references": "references",
    }
    mapping.update(dict(columns or {}))
    # data.columns.human: {aspect: file column}, for ratings whose column lacks the prefix
    human_map = mapping.pop("human", None)
    present = list(raw.columns)

    def need(col: str, key: str, optional: bool = False) -> str | None:
        if col in present:
            return col
        if optional:
            return None
        raise DataError(
            f"column '{col}' not found (data.columns.{key}); the file has columns {present}",
            file=file,
            column=col,
        )

    item_col = need(str(mapping["item_id"]), "item_id")
    system_col = need(str(mapping["system"]), "system")
    cand_col = need(str(mapping["candidate"]), "candidate")
    src_col = need(str(mapping["source"]), "source", optional=True)
    ref_spec = mapping.get("references")
    ref_cols: list[str]
    if ref_spec is None:
        ref_cols = []
    elif isinstance(ref_spec, str):
        found = need(ref_spec, "references", optional=True)
        ref_cols = [found] if found else []
    else:
        ref_cols = [c for c in (need(str(c), "references") for c in ref_spec) if c]
    # (file column, tidy aspect column) for every rating column
    human_cols: list[tuple[str, str]]
    if human_map is not None:
        if not isinstance(human_map, Mapping):
            raise ConfigError(
                "data.columns.human must map aspects to file columns, e.g. "
                "data.columns.human={meaning: score}"
            )
        human_cols = [
            (str(need(str(col), f"human.{aspect}")), _aspect_column(str(aspect)))
            for aspect, col in human_map.items()
        ]
    elif human is None:
        human_cols = [(c, str(c)) for c in present if str(c).startswith(HUMAN_PREFIX)]
    else:
        human_cols = [(str(need(str(c), "human")), _aspect_column(str(c))) for c in human]
    metric_cols = [c for c in present if str(c).startswith(METRIC_PREFIX)]
    if annotator is not None:
        need(annotator, "annotator")

    records: list[dict[str, Any]] = []
    nan_text: dict[str, list[str]] = {}
    for i, rec in enumerate(raw.to_dict("records")):
        row = i + offset
        out: dict[str, Any] = {
            "item_id": _to_text(
                rec[item_col], file=file, row=row, column=item_col, allow_empty=False
            ),
            "system": _to_text(
                rec[system_col], file=file, row=row, column=system_col, allow_empty=False
            ),
            "source": _to_text(rec[src_col], file=file, row=row, column=src_col, allow_empty=True)
            if src_col
            else "",
            "candidate": _to_text(
                rec[cand_col], file=file, row=row, column=cand_col, allow_empty=True
            ),
        }
        refs: list[str] = []
        for col in ref_cols:
            refs.extend(_to_refs(rec[col], file=file, row=row, column=col))
        out["references"] = refs
        for col, aspect in human_cols:
            out[aspect] = _to_score(rec[col], file=file, row=row, column=col, nan_text=nan_text)
        for col in metric_cols:
            out[str(col)] = _to_score(rec[col], file=file, row=row, column=col, nan_text=nan_text)
        if annotator is not None:
            out[annotator] = rec[annotator]
        out["origin"] = f"{file}:{row}"
        records.append(out)
    _warn_nan_text(nan_text)
    df = pd.DataFrame.from_records(records)
    if df.empty:
        raise DataError("the table has no rows", file=file)
    if annotator is not None:
        aspects = [c for c in df.columns if c.startswith(HUMAN_PREFIX)]
        df = _aggregate_annotators(df, annotator, aspects, aggregate)
    df.attrs["data_files"] = [file]
    df.attrs["data_name"] = name
    df.attrs["columns_seen"] = [str(c) for c in present]
    return validate(df, file)


def _aspect_column(aspect: str) -> str:
    return aspect if aspect.startswith(HUMAN_PREFIX) else f"{HUMAN_PREFIX}{aspect}"


def load_text(
    source: str,
    systems: Mapping[str, str],
    references: Sequence[str] | str | None = None,
    human: Mapping[str, Mapping[str, str]] | None = None,
    name: str = "text",
) -> pd.DataFrame:
    """sacrebleu-style line-aligned files: line i of every file is item i."""
    if not isinstance(systems, Mapping) or not systems:
        raise ConfigError("data.systems must map system names to files, e.g. {a: a.txt, b: b.txt}")
    if isinstance(references, str):
        references = [references]
    references = list(references or [])
    src_lines = _read_text_lines(Path(source), "data.source")
    n = len(src_lines)

    def aligned(path: str, label: str) -> list[str]:
        lines = _read_text_lines(Path(path), label)
        if len(lines) != n:
            raise DataError(
                f"{len(lines)} lines but the source file {source} has {n}; every file must have "
                "one line per source sentence",
                file=path,
                row=min(len(lines), n) + 1,
                column=label,
            )
        return lines

    ref_lines = [aligned(p, f"data.references[{k}]") for k, p in enumerate(references)]
    human_scores: dict[str, dict[str, list[float]]] = {}
    nan_text: dict[str, list[str]] = {}
    for aspect, per_system in (human or {}).items():
        col = aspect if aspect.startswith(HUMAN_PREFIX) else f"{HUMAN_PREFIX}{aspect}"
        human_scores[col] = {}
        for system, path in per_system.items():
            if system not in systems:
                raise ConfigError(
                    f"data.human.{aspect} names system '{system}' not in data.systems"
                )
            lines = aligned(path, f"data.human.{aspect}.{system}")
            human_scores[col][system] = [
                _to_score(v, file=path, row=i + 1, column=col, nan_text=nan_text)
                for i, v in enumerate(lines)
            ]
    _warn_nan_text(nan_text)
    records = []
    width = len(str(n))
    for system, path in systems.items():
        lines = aligned(path, f"data.systems.{system}")
        for i, cand in enumerate(lines):
            rec: dict[str, Any] = {
                "item_id": str(i + 1).zfill(width),
                "system": str(system),
                "source": src_lines[i],
                "references": [r[i] for r in ref_lines if r[i].strip()],
                "candidate": cand,
            }
            for col, per_sys in human_scores.items():
                rec[col] = per_sys[system][i] if system in per_sys else float("nan")
            rec["origin"] = f"{path}:{i + 1}"
            records.append(rec)
    df = pd.DataFrame.from_records(records)
    df.attrs["data_files"] = [source, *references, *systems.values()]
    df.attrs["data_name"] = name
    return validate(df, source)


# Loads already done by this process, by loader and settings, with the files each read, their
# (mtime, size), and the log records it emitted. The jobs of a Hydra multirun share one process
# and usually load the same data: a job whose files did not change gets a copy of the table and
# the same log lines, without parsing and validating the files again.
_Load = tuple[list[tuple[Path, int, int]], pd.DataFrame, list[logging.LogRecord]]
_LOADS: Memo[str, _Load] = Memo("load.tables", max_entries=4)


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _copy_table(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    if "references" in out:
        out["references"] = [list(r) for r in out["references"]]
    return out


def memoized_load(fn: Callable[..., pd.DataFrame], settings: Mapping[str, Any]) -> pd.DataFrame:
    """``fn(**settings)``, or a copy of this process's earlier result of the same call when every
    file it read is unchanged (same mtime and size); its log records are emitted again."""
    global _FILES_READ
    key = json.dumps(
        [getattr(fn, "__module__", ""), getattr(fn, "__qualname__", repr(fn)), dict(settings)],
        sort_keys=True,
        default=str,
    )
    hit = _LOADS.get(key)
    if hit is not None and hit[0] and all(_stat(p) == (m, n) for p, m, n in hit[0]):
        for record in hit[2]:
            logging.getLogger(record.name).handle(record)
        return _with_token(_copy_table(hit[1]), key, hit[0])
    capture = _Capture()
    log.addHandler(capture)
    _FILES_READ = []
    try:
        df = fn(**settings)
        read = list(dict.fromkeys(_FILES_READ))
    finally:
        _FILES_READ = None
        log.removeHandler(capture)
    stats = [(p, _stat(p)) for p in read]
    if all(st is not None for _, st in stats):
        files = [(p, st[0], st[1]) for p, st in stats if st is not None]
        _LOADS.put(key, (files, _copy_table(df), capture.records))
        if files:
            _with_token(df, key, files)
    return df


# The tables memoized_load returned, by identity, with a digest of what they were read from
# (the loader, its settings, and each file read with its mtime and size): equal digests, equal
# tables. Taken once, by the run that loaded the table (take_load_token), before anything else
# can change it; a table never taken is dropped with the oldest.
_TOKENS: dict[int, tuple[weakref.ref[pd.DataFrame], str]] = {}
_MAX_TOKENS = 8


def _with_token(df: pd.DataFrame, key: str, files: list[tuple[Path, int, int]]) -> pd.DataFrame:
    payload = json.dumps([key, [(str(p), m, n) for p, m, n in files]])
    while len(_TOKENS) >= _MAX_TOKENS:
        _TOKENS.pop(next(iter(_TOKENS)))
    token = hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()
    _TOKENS[id(df)] = (weakref.ref(df), token)
    return df


def take_load_token(df: pd.DataFrame) -> str | None:
    """The digest of what ``df`` was read from, if it is a table :func:`memoized_load` has just
    returned (the first call for it); None for any other table. A run takes it right after
    loading, so that later stages can key their per-process memos by it (the jobs of a sweep
    load the same data) without hashing the table's texts again."""
    hit = _TOKENS.pop(id(df), None)
    if hit is None or hit[0]() is not df:
        return None
    return hit[1]


def load_data(target: str, options: Mapping[str, Any]) -> pd.DataFrame:
    """The tidy table from the loader named by a data config's ``_target_`` (one of
    :data:`LOADERS`), memoized per process (:func:`memoized_load`)."""
    loader = LOADERS.get(target)
    if loader is None:
        raise ConfigError(f"data._target_ must be one of {sorted(LOADERS)}, got '{target}'")
    try:
        return memoized_load(loader, options)
    except TypeError as exc:
        raise ConfigError(f"data: {exc}") from None


def demo_path() -> Path:
    return Path(__file__).resolve().parent / "demo" / "demo.jsonl"


def load_demo(name: str = "demo") -> pd.DataFrame:
    """The embedded demo (illustrative ratings, see scripts/make_demo.py)."""
    return load_table(str(demo_path()), name=name)


# --------------------------------------------------------------------------- real research data
def _shared_dir(path: str, name: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_dir():
        raise DataError(
            f"{name} folder not found; set data.path (or PARAEVAL_SHARED_DATA) to the folder that "
            "holds the files",
            file=str(p),
        )
    return p


def load_parabank(
    path: str,
    aggregate: str = "mean",
    references: str = "source",
    max_items: int | None = None,
    name: str = "parabank",
) -> pd.DataFrame:
    """ParaBank-Eval (Hu et al. 2019): 400 sources, 36 systems, per-worker meaning scores.

    One row per (source, system): a candidate produced by several systems (``sys_id`` is a
    space-separated list) counts for each of them. Per-worker ``human_score`` (0-100 meaning
    similarity to the source) and ``gm`` (grammaticality 0-2) are aggregated over workers into
    ``human_meaning`` and ``human_grammaticality``. There are no separate references:
    ``references: source`` scores every reference-based metric against the source sentence (the
    natural use of this data); ``references: none`` leaves them empty. ``max_items`` keeps the
    first N sources (by ref_id order in ref.tsv), for quick looks.
    """
    folder = _shared_dir(path, "ParaBank-Eval")
    ref_file = folder / "ref.tsv"
    cand_file = folder / "candidates.tsv"
    refs = read_table(ref_file, "tsv")
    cands = read_table(cand_file, "tsv")
    for df, file, cols in (
        (refs, ref_file, ["ref_id", "ref_sent"]),
        (
            cands,
            cand_file,
            ["worker_id_anon", "ref_id", "sys_id", "candidate", "human_score", "gm"],
        ),
    ):
        for col in cols:
            if col not in df.columns:
                raise DataError(f"column '{col}' not found", file=str(file), column=col)
    if max_items is not None:
        refs = refs.head(int(max_items))
    source_of = dict(zip(refs["ref_id"], refs["ref_sent"], strict=True))
    records = []
    for i, rec in enumerate(cands.to_dict("records")):
        row = i + 2
        ref_id = rec["ref_id"]
        if max_items is not None and ref_id not in source_of:
            continue
        if ref_id not in source_of:
            raise DataError(
                f"ref_id '{ref_id}' is not in ref.tsv",
                file=str(cand_file),
                row=row,
                column="ref_id",
            )
        meaning = _to_score(rec["human_score"], file=str(cand_file), row=row, column="human_score")
        gm = _to_score(rec["gm"], file=str(cand_file), row=row, column="gm")
        for system in str(rec["sys_id"]).split():
            records.append(
                {
                    "item_id": str(ref_id),
                    "system": f"sys{int(system):02d}",
                    "source": source_of[ref_id],
                    "candidate": rec["candidate"],
                    "worker": rec["worker_id_anon"],
                    "human_meaning": meaning,
                    "human_grammaticality": gm,
                    "origin": f"{cand_file}:{row}",
                }
            )
    df = pd.DataFrame.from_records(records)
    # the release holds repeated judgments by one anonymized worker id; their mean is the
    # published aggregation, so repeats are averaged here as they always were
    df = _aggregate_annotators(
        df, "worker", ["human_meaning", "human_grammaticality"], aggregate, repeats_allowed=True
    )
    if references == "source":
        df["references"] = [[s] for s in df["source"]]
    elif references == "none":
        df["references"] = [[] for _ in range(len(df))]
    else:
        raise ConfigError(f"data.references must be 'source' or 'none', got '{references}'")
    df["item_id"] = df["item_id"].str.zfill(3)
    df.attrs["data_files"] = [str(ref_file), str(cand_file)]
    df.attrs["data_name"] = name
    return validate(df, str(cand_file))


def load_stsb(
    path: str,
    split: str = "test",
    name: str = "stsb",
) -> pd.DataFrame:
    """STS Benchmark: one sentence pair per row, similarity 0-5. sentence1 is the reference (and
    the source), sentence2 the candidate of the single system ``stsb``; the score becomes
    ``human_similarity``. Segment-level correlation only: there are no systems to compare."""
    folder = _shared_dir(path, "STS Benchmark")
    if split not in ("train", "dev", "test"):
        raise ConfigError(f"data.split must be train, dev or test, got '{split}'")
    file = folder / f"sts-{split}.csv"
    records = []
    for i, line in enumerate(_read_text_lines(file, "data.path"), start=1):
        parts = line.split("\t")
        if len(parts) < 7:
            raise DataError(
                f"expected 7 tab-separated fields, found {len(parts)}", file=str(file), row=i
            )
        score = _to_score(parts[4], file=str(file), row=i, column="score")
        records.append(
            {
                "item_id": f"{split}-{i:05d}",
                "system": "stsb",
                "source": parts[5],
                "references": [parts[5]],
                "candidate": parts[6],
                "human_similarity": score,
                "origin": f"{file}:{i}",
            }
        )
    df = pd.DataFrame.from_records(records)
    df.attrs["data_files"] = [str(file)]
    df.attrs["data_name"] = name
    return validate(df, str(file))


# the loaders a data config may name in `_target_`: an exact allow-list, not a module prefix
LOADERS: dict[str, Callable[..., pd.DataFrame]] = {
    f"{__name__}.{fn.__name__}": fn
    for fn in (load_demo, load_table, load_text, load_parabank, load_stsb, load_frame)
}
