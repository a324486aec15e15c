"""The tidy table of DESIGN.md, validated once for every loader; ``origin`` names file:row."""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from paraeval.pipeline.data.readers import ABSENT
from paraeval.pipeline.errors import ConfigError, DataError

log = logging.getLogger(__name__)

TIDY = ["item_id", "system", "source", "references", "candidate"]
HUMAN_PREFIX = "human_"
METRIC_PREFIX = "metric_"
SYSTEM_PREFIX = "system_"  # a system-level score as given: one value on every row of a system
AGGREGATIONS = ("mean", "median", "zscore")


def in_order(values: pd.Series) -> list[Any]:
    """``list(dict.fromkeys(values))`` without a slow Python step per row."""
    return list(pd.unique(values).tolist())


def row_groups(values: pd.Series) -> list[tuple[Any, np.ndarray]]:
    """The groups of ``groupby(sort=False)`` (value, row positions), from one factorisation."""
    codes, uniques = pd.factorize(values)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
    return [(u, order[bounds[k] : bounds[k + 1]]) for k, u in enumerate(uniques.tolist())]


def _is_missing(value: Any) -> bool:
    if value is None or value is ABSENT or (isinstance(value, float) and math.isnan(value)):
        return True
    return isinstance(value, str) and value.strip() == ""


def _to_text(value: Any, file: str, row: int, column: str, allow_empty: bool) -> str:
    where = {"file": file, "row": row, "column": column}
    if value is ABSENT:
        raise DataError(
            f"this line has no '{column}' key (other lines have one); give every line the key "
            'and use "" for an empty text',
            **where,
        )
    if _is_missing(value):
        if allow_empty:
            return ""
        raise DataError("empty value", **where)
    if isinstance(value, str | int | np.integer):
        return str(value)
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    raise DataError(f"expected text, got {type(value).__name__}", **where)


def _to_refs(value: Any, file: str, row: int, column: str) -> list[str]:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list | tuple):
        refs = [v for v in value if not _is_missing(v)]
        if not all(isinstance(v, str) for v in refs):
            raise DataError("references must be strings", file=file, row=row, column=column)
        return refs
    if _is_missing(value):
        return []
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            with contextlib.suppress(json.JSONDecodeError):
                parsed = json.loads(stripped)
                if isinstance(parsed, list):
                    return _to_refs(parsed, file, row, column)
        return [value]
    kind = type(value).__name__
    raise DataError(
        f"expected a reference string or a list, got {kind}", file=file, row=row, column=column
    )


def to_score(
    value: Any, *, file: str, row: int, column: str, nan_text: dict[str, list[str]] | None = None
) -> float:
    if _is_missing(value):
        return float("nan")
    if isinstance(value, str) and value.strip().lower() == "nan":
        # a spreadsheet's or pandas' missing rating
        if nan_text is not None:
            nan_text.setdefault(column, []).append(f"{file}, row {row}")
        return float("nan")
    where = {"file": file, "row": row, "column": column}
    if isinstance(value, bool):
        raise DataError("expected a number, got a boolean", **where)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DataError(
            f"expected a number, got '{str(value)[:40]}'; leave the cell empty for a missing score",
            **where,
        ) from None
    if math.isinf(number):
        raise DataError("infinite score", **where)
    return number


def warn_nan_text(nan_text: dict[str, list[str]]) -> None:
    for column, where in nan_text.items():
        log.warning(
            "%s: %d %s 'NaN' (first: %s); treated as missing ratings, like an empty cell",
            column,
            len(where),
            "cell says" if len(where) == 1 else "cells say",
            where[0],
        )


def validate(df: pd.DataFrame, file: str, files: Sequence[object], name: str) -> pd.DataFrame:
    """Checks shared by every loader; the table sorted by (item, system), naming its files."""
    df.attrs.update(data_files=list(files), data_name=name)
    dup = df.duplicated(subset=["item_id", "system"], keep=False)
    if dup.any():
        first, second = (row for _, row in df.loc[dup].head(2).iterrows())
        raise origin_error(
            f"duplicate (item_id, system) = ({first.item_id}, {first.system}) also at "
            f"{second.origin}; keep one row per item and system, or set data.annotator for "
            "per-annotator ratings",
            first.origin,
            "item_id",
            file,
        )
    _check_item_spellings(df, file)
    for col in ["source", *(c for c in df.columns if str(c).startswith(SYSTEM_PREFIX))]:
        key = "item_id" if col == "source" else "system"
        if found := _first_difference(df, [key], col):
            first, row = (df.iloc[k] for k in found)
            raise origin_error(
                f"{key} '{row[key]}' has {col} '{str(row[col])[:40]}' here and "
                f"'{str(first[col])[:40]}' at {first.origin}; every row of one {key} must carry "
                f"the same {col}",
                row.origin,
                col,
                file,
            )
    empty = df["candidate"].str.strip() == ""
    if empty.any():
        log.warning(
            "%d empty or whitespace-only candidates (scored as given): %s",
            int(empty.sum()),
            df.loc[empty, "system"].value_counts().to_dict(),
        )
    if df.empty:
        raise DataError("no rows to evaluate", file=file)
    return df.sort_values(["item_id", "system"], kind="stable").reset_index(drop=True)


def _check_item_spellings(df: pd.DataFrame, file: str) -> None:
    """``01`` and ``1`` (a spreadsheet dropped the zeros) would be two items."""
    ids = pd.Series(df["item_id"].unique())
    numeric = ids[ids.str.fullmatch(r"[0-9]+")]
    canonical = numeric.str.lstrip("0").replace("", "0")
    clashes = canonical[canonical.duplicated(keep=False)]
    if clashes.empty:
        return
    first, second = list(numeric[canonical == clashes.iloc[0]])[:2]  # in the order of the rows
    origin = {i: df.loc[df.item_id == i, "origin"].iloc[0] for i in (first, second)}
    raise origin_error(
        f"item ids '{first}' ({origin[first]}) and '{second}' ({origin[second]}) differ only in "
        "leading zeros and would be two items; write every id the same way",
        origin[second],
        "item_id",
    )


def origin_error(message: str, origin: object, column: str, file: str | None = None) -> DataError:
    name, _, row = str(origin).rpartition(":")
    return DataError(
        message, file=file or name or None, row=int(row) if row.isdigit() else None, column=column
    )


def aggregate_annotators(
    df: pd.DataFrame, annotator: str, human_cols: list[str], how: str, repeats_allowed: bool = False
) -> pd.DataFrame:
    if how not in AGGREGATIONS:
        raise ConfigError(f"data.aggregate must be one of {list(AGGREGATIONS)}, got '{how}'")
    if how == "zscore":
        df = df.copy()
        for col in human_cols:
            grouped = df.groupby(annotator)[col]
            sd = grouped.transform("std", ddof=0)
            df[col] = (df[col] - grouped.transform("mean")) / sd.where(sd > 0)
        how = "mean"
    keys = ["item_id", "system"]
    # otherwise the first text would be scored silently, or a rating counted twice; one row may
    # stand for several systems (ParaBank's sys_id lists): still one rating
    rows_of = df.drop_duplicates([*keys, annotator, "origin"])
    twice = rows_of.duplicated(subset=[*keys, annotator], keep=False)
    if twice.any() and not repeats_allowed:
        first = rows_of.loc[twice].iloc[0]
        same = (rows_of[[*keys, annotator]] == first[[*keys, annotator]]).all(axis=1)
        second = rows_of.loc[same].iloc[1]
        raise origin_error(
            f"annotator '{first[annotator]}' rates (item_id, system) = ({first.item_id}, "
            f"{first.system}) twice, also at {second.origin}; keep one rating per annotator",
            first.origin,
            annotator,
        )
    for column in [c for c in ("candidate", "source") if c in df]:
        if found := _first_difference(df, keys, column):
            first, other = (df.iloc[k] for k in found)
            raise origin_error(
                f"the annotator rows of (item_id, system) = ({first.item_id}, {first.system}) "
                f"disagree on the {column} text: '{str(first[column])[:40]}' here, "
                f"'{str(other[column])[:40]}' at {other.origin}; every row of one item and "
                "system must carry the same text",
                first.origin,
                column,
            )
    groups = df.groupby(keys, sort=False)
    agg = groups[human_cols].agg(how).reset_index()
    counts = groups[human_cols].count().reset_index()
    out = groups.first().reset_index().drop(columns=human_cols).merge(agg, on=keys)
    out = out.assign(**{f"n_{col}": counts[col].to_numpy() for col in human_cols})
    return out.drop(columns=[annotator])


def _first_difference(df: pd.DataFrame, keys: list[str], column: str) -> tuple[int, int] | None:
    """Positions of a group's first row and of the first row that differs in it (NaN == NaN)."""
    groups = df.groupby(keys, sort=False)
    starts = np.flatnonzero(groups.cumcount().to_numpy() == 0)[groups.ngroup().to_numpy()]
    values = df[column].to_numpy()
    differs = (values != values[starts]) & ~(pd.isna(values) & pd.isna(values[starts]))
    at = np.flatnonzero(differs)
    return (int(starts[at[0]]), int(at[0])) if len(at) else None


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
    """``offset``: the row number of the first row."""
    mapping: dict[str, Any] = {**{c: c for c in TIDY}, **(columns or {})}
    human_map = mapping.pop("human", None)
    present = list(raw.columns)

    def need(col: object, key: str) -> str:
        if str(col) in present:
            return str(col)
        raise DataError(
            f"column '{col}' not found (data.columns.{key}); the file has columns {present}",
            file=file,
            column=str(col),
        )

    # (tidy column, file column or None, whether it may be empty); the source is optional
    text_cols = [
        ("item_id", need(mapping["item_id"], "item_id"), False),
        ("system", need(mapping["system"], "system"), False),
        ("source", str(mapping["source"]) if str(mapping["source"]) in present else None, True),
        ("candidate", need(mapping["candidate"], "candidate"), True),
    ]
    ref_spec = mapping.get("references")
    if isinstance(ref_spec, str):  # one column, which may be absent: no references
        ref_spec = [ref_spec] if ref_spec in present else []
    ref_cols = [need(c, "references") for c in ref_spec or []]
    if human_map is not None:
        if not isinstance(human_map, Mapping):
            raise ConfigError(
                "data.columns.human must map aspects to file columns, e.g. "
                "data.columns.human={meaning: score}"
            )
        human_cols = [
            (need(col, f"human.{aspect}"), aspect_column(str(aspect)))
            for aspect, col in human_map.items()
        ]
    elif human is None:
        human_cols = [(c, str(c)) for c in present if str(c).startswith(HUMAN_PREFIX)]
    else:
        human_cols = [(need(c, "human"), aspect_column(str(c))) for c in human]
    given = [c for c in present if str(c).startswith((METRIC_PREFIX, SYSTEM_PREFIX))]
    score_cols = [*human_cols, *((c, str(c)) for c in given)]
    if annotator is not None:
        need(annotator, "annotator")

    records: list[dict[str, Any]] = []
    nan_text: dict[str, list[str]] = {}
    for row, rec in enumerate(raw.to_dict("records"), start=offset):
        out: dict[str, Any] = {
            key: _to_text(rec[col], file, row, col, empty) if col else ""
            for key, col, empty in text_cols
        }
        out["references"] = [ref for col in ref_cols for ref in _to_refs(rec[col], file, row, col)]
        for col, key in score_cols:
            out[key] = to_score(rec[col], file=file, row=row, column=col, nan_text=nan_text)
        if annotator is not None:
            out[annotator] = rec[annotator]
        out["origin"] = f"{file}:{row}"
        records.append(out)
    warn_nan_text(nan_text)
    df = pd.DataFrame.from_records(records)
    if df.empty:
        raise DataError("the table has no rows", file=file)
    if annotator is not None:
        df = aggregate_annotators(df, annotator, human_columns(df), aggregate)
    df.attrs["columns_seen"] = [str(c) for c in present]
    return validate(df, file, [file], name)


def aspect_column(aspect: str) -> str:
    return aspect if aspect.startswith(HUMAN_PREFIX) else f"{HUMAN_PREFIX}{aspect}"


def human_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if str(c).startswith(HUMAN_PREFIX)]


def line_frame(
    outputs: Mapping[str, tuple[object, Sequence[str]]],
    sources: Sequence[str],
    references: Sequence[Sequence[str]],
    scores: Mapping[str, Mapping[str, Sequence[float]]],
    keep: Sequence[int],
) -> pd.DataFrame:
    """Rows of line-aligned files (``outputs``: system -> its file and lines): line i is item i;
    ``scores``: column -> system -> its scores, or one (a system-level score) for all its rows."""
    width = len(str(len(sources)))
    records = [
        {
            "item_id": str(i + 1).zfill(width),
            "system": system,
            "source": sources[i],
            "references": [r[i] for r in references if r[i].strip()],
            "candidate": candidates[i],
            "origin": f"{file}:{i + 1}",
        }
        for system, (file, candidates) in outputs.items()
        for i in keep
    ]
    cells = {
        col: np.concatenate(
            [np.broadcast_to(v.get(s, [math.nan]), len(sources))[keep] for s in outputs]
        )
        for col, v in scores.items()
    }
    return pd.concat([pd.DataFrame.from_records(records), pd.DataFrame(cells)], axis=1)


REPORT_COLUMNS = ["aspect", "system", "n_items", "n_rated", "coverage", "n_single_rating"]
REPORT_COLUMNS += ["mean", "sd", "constant"]


def human_report(segments: pd.DataFrame) -> pd.DataFrame:
    """Per aspect, for all rows and per system (warnings to the log)."""
    rows = []
    groups: list[tuple[Any, Any]] = [("(all)", slice(None)), *row_groups(segments["system"])]
    for aspect in human_columns(segments):
        column = segments[aspect].to_numpy(dtype=float)
        counts = segments.get(f"n_{aspect}", pd.Series(0, index=segments.index))
        ones = (counts == 1).to_numpy(dtype=bool)  # rows resting on one rating
        for group, at in groups:
            values = column[at]
            rated = values[np.isfinite(values)]
            system, n_items, n_rated = str(group), len(values), len(rated)
            single = int(ones[at].sum())
            coverage = n_rated / n_items if n_items else float("nan")
            constant = bool(n_rated > 0 and np.ptp(rated) == 0)
            mean = float(rated.mean()) if n_rated else float("nan")
            sd = float(rated.std(ddof=0)) if n_rated else float("nan")
            rows.append((aspect, system, n_items, n_rated, coverage, single, mean, sd, constant))
            if system == "(all)" and coverage < 1:
                log.warning(
                    "%s: %d of %d rows have no rating (left out of its correlations)",
                    aspect,
                    n_items - n_rated,
                    n_items,
                )
            if system != "(all)" and constant and n_rated > 1:
                log.warning(
                    "%s is constant for system %s: item-level correlations there are undefined",
                    aspect,
                    system,
                )
            if system == "(all)" and single:
                log.info("%s: %d rows rest on a single rating", aspect, single)
    return pd.DataFrame(rows, columns=REPORT_COLUMNS)
