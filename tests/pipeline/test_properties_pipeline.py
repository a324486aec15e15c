"""Property-based checks of the loaders and the metric suite with random Unicode text (hypothesis).

- Loaders: a table written as JSONL, CSV, TSV or Parquet loads back to exactly the texts, reference
  lists and scores that were written (blank references dropped, blank ratings missing), or fails
  with a DataError; never with anything else.
- Metric suite (every cheap metric of conf/metrics, built through the pipeline's own config path;
  the encoders are left out): no crash on any text, every segment and corpus score a finite
  number, and per-segment scores that follow their (item, system) whatever the row order.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paraeval.metrics.base import Metric, MissingResourceError
from paraeval.pipeline.data.load import load_table
from paraeval.pipeline.errors import DataError
from paraeval.pipeline.stages.score import build_metric, score
from tests.pipeline.helpers import REPO

CHEAP = [
    "bleu",
    "ibleu",
    "self_bleu",
    "chrf",
    "ter",
    "nist",
    "meteor",
    "rouge1",
    "rouge2",
    "rougeN",
    "rougeL",
    "rougeLsum",
    "rougeW",
    "rougeS",
    "rougeSU",
    "cider",
    "pinc",
]
FAST = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# any code point but lone surrogates (not encodable as UTF-8, so not in any file)
unicode_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
nonblank = unicode_text.filter(lambda s: s.strip() != "")
# TSV has no quoting: a field cannot hold a tab or a line break
tsv_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\t\n\r"), max_size=30
)
score_value = st.one_of(
    st.none(), st.floats(allow_nan=False, allow_infinity=False, width=32), st.integers(-5, 100)
)


def _metrics() -> dict[str, Metric]:
    built = {}
    for metric_id in CHEAP:
        node = yaml.safe_load((REPO / "conf" / "metrics" / f"{metric_id}.yaml").read_text())
        settings_ = {
            k: v for k, v in node[metric_id].items() if not isinstance(v, str) or "${" not in v
        }
        try:
            built[metric_id] = build_metric(metric_id, settings_)
        except MissingResourceError:
            continue  # METEOR without WordNet: the other metrics still run
    return built


METRICS = _metrics()


@st.composite
def tables(draw: st.DrawFn, text: st.SearchStrategy[str] = unicode_text) -> list[dict[str, Any]]:
    n_items = draw(st.integers(1, 4))
    systems = draw(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=3, unique=True))
    rows = []
    for i in range(n_items):
        source = draw(text)
        refs = draw(st.lists(text, max_size=3))
        for s in systems:
            rows.append(
                {
                    "item_id": f"item{i}",
                    "system": f"sys_{s}",
                    "source": source,
                    "references": refs,
                    "candidate": draw(text),
                    "human_meaning": draw(score_value),
                }
            )
    return rows


def _write(rows: list[dict[str, Any]], path: Path) -> None:
    kind = path.suffix
    if kind == ".jsonl":
        path.write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
        )
        return
    frame = pd.DataFrame(rows)
    if kind == ".parquet":
        frame["human_meaning"] = frame["human_meaning"].astype(float)
        frame.to_parquet(path, index=False)
        return
    header = ["item_id", "system", "source", "references", "candidate", "human_meaning"]
    cells = [
        [
            *(r[k] for k in header[:3]),
            json.dumps(r["references"], ensure_ascii=False),
            r["candidate"],
            "" if r["human_meaning"] is None else repr(r["human_meaning"]),
        ]
        for r in rows
    ]
    if kind == ".tsv":  # no quoting at all: fields as they are, tab-separated
        lines = ["\t".join(line) + "\n" for line in [header, *cells]]
        path.write_text("".join(lines), encoding="utf-8")
        return
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)  # as spreadsheets write it: quoted where needed, CRLF
        writer.writerow(header)
        writer.writerows(cells)


def _check_loaded(rows: list[dict[str, Any]], path: Path) -> None:
    try:
        df = load_table(str(path))
    except DataError:
        return  # a clear, located error is an acceptable answer; a crash is not
    assert len(df) == len(rows)
    got = df.set_index(["item_id", "system"])
    for r in rows:
        row = got.loc[(r["item_id"], r["system"])]
        # a blank cell is an empty text, whatever whitespace it held
        assert row["candidate"] == (r["candidate"] if r["candidate"].strip() else "")
        assert row["source"] == (r["source"] if r["source"].strip() else "")
        assert list(row["references"]) == [x for x in r["references"] if x.strip()]
        expected = r["human_meaning"]
        if expected is None:
            assert math.isnan(row["human_meaning"])
        else:
            assert row["human_meaning"] == pytest.approx(float(expected), rel=1e-6)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
@FAST
@given(rows=tables())
def test_loaders_round_trip_unicode(
    rows: list[dict[str, Any]], suffix: str, tmp_path: Path
) -> None:
    path = tmp_path / f"t{suffix}"
    _write(rows, path)
    _check_loaded(rows, path)


@FAST
@given(rows=tables(tsv_text))
def test_tsv_loader_round_trip_unicode(rows: list[dict[str, Any]], tmp_path: Path) -> None:
    path = tmp_path / "t.tsv"
    _write(rows, path)
    _check_loaded(rows, path)


@st.composite
def scorable(draw: st.DrawFn) -> pd.DataFrame:
    """The tidy table the score stage receives: every item has a reference and a source."""
    rows = draw(tables())
    by_item: dict[str, tuple[str, list[str]]] = {}
    for r in rows:
        if r["item_id"] not in by_item:
            by_item[r["item_id"]] = (
                draw(nonblank),
                draw(st.lists(nonblank, min_size=1, max_size=3)),
            )
        r["source"], r["references"] = by_item[r["item_id"]]
        r["origin"] = f"t.jsonl:{len(by_item)}"
    return pd.DataFrame(rows)


def _scores(df: pd.DataFrame) -> pd.DataFrame:
    seg = score(df, METRICS, progress=False).segments
    return seg.set_index(["item_id", "system"]).sort_index()


@pytest.mark.slow
@FAST
@given(df=scorable(), seed=st.integers(0, 2**32 - 1))
def test_metric_suite_finite_and_row_order_free(df: pd.DataFrame, seed: int) -> None:
    assert METRICS, "no metric could be built"
    result = score(df, METRICS, progress=False)
    columns = list(result.columns)
    assert set(columns) >= {c for m in METRICS.values() for c in m.output_columns}
    values = result.segments[columns].to_numpy(dtype=float)
    assert np.isfinite(values).all(), result.segments[columns][~np.isfinite(values).all(axis=1)]
    assert np.isfinite(result.corpus[columns].to_numpy(dtype=float)).all(), result.corpus

    shuffled = df.sample(frac=1.0, random_state=np.random.RandomState(seed % 2**32))
    a = result.segments.set_index(["item_id", "system"]).sort_index()[columns]
    b = _scores(shuffled.reset_index(drop=True))[columns]
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-9, atol=1e-9)
