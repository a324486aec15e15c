"""The score stage's texts as codes (pipeline/engine/texts.py): every row's texts come back as they
were, the encoders' text order is every earlier run's, and the distinct segments are those of the
tuples they stand for, in order of first appearance."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from paraeval.metrics.base import row_slices
from paraeval.pipeline.engine.texts import RunTexts

WORDS = st.sampled_from(["a", "b", "a b", "", "é", "b a"])


def _table(rows: list[tuple[str, list[str], str]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "candidate": pd.array([c for c, _, _ in rows], dtype="string"),
            "references": [list(r) for _, r, _ in rows],
            "source": pd.array([s for _, _, s in rows], dtype="string"),
        }
    )


ROWS = st.lists(
    st.tuples(WORDS, st.lists(WORDS, min_size=0, max_size=3), WORDS), min_size=0, max_size=30
)


@settings(max_examples=200, deadline=None)
@given(ROWS, st.booleans(), st.randoms(use_true_random=False))
def test_texts_and_segments_are_those_of_the_rows(
    rows: list[tuple[str, list[str], str]], vs_source: bool, rng: object
) -> None:
    df = _table(rows)
    codes = RunTexts(df)
    # every text once, candidates first, then sources, then references, each in row order
    refs = [r for _, row_refs, _ in rows for r in row_refs]
    order = [*(c for c, _, _ in rows), *(s for _, _, s in rows), *refs]
    assert codes.unique == list(dict.fromkeys(order))
    picked = np.array(rng.sample(range(len(rows)), len(rows)), dtype=np.intp)  # type: ignore[attr-defined]
    cands, got_refs, srcs = codes.texts(picked, vs_source)
    assert cands == [rows[i][0] for i in picked]
    assert srcs == [rows[i][2] for i in picked]
    want_refs = [[rows[i][2]] if vs_source else rows[i][1] for i in picked]
    assert got_refs == want_refs
    # the distinct segments: what a dict of (candidate, references, source) tuples gives
    firsts, where = codes.segments(picked, vs_source)
    index: dict[tuple[str, tuple[str, ...], str], int] = {}
    want_where = [
        index.setdefault((c, tuple(r), s), len(index))
        for c, r, s in zip(cands, got_refs, srcs, strict=True)
    ]
    assert where.tolist() == want_where
    seg_c, seg_r, seg_s = codes.texts(firsts, vs_source)
    assert list(zip(seg_c, map(tuple, seg_r), seg_s, strict=True)) == list(index)


def test_a_text_is_one_string_however_many_rows_hold_it() -> None:
    df = _table([("same", ["ref"], "src")] * 5)
    codes = RunTexts(df)
    cands, refs, _ = codes.texts(np.arange(5), vs_source=False)
    assert len({id(c) for c in cands}) == 1
    assert len({id(r[0]) for r in refs}) == 1
    assert codes.unique == ["same", "src", "ref"]


def test_row_slices_cover_the_range_in_order() -> None:
    assert row_slices(7, 3) == [slice(0, 3), slice(3, 6), slice(6, 7)]
    assert row_slices(2, 0) == [slice(0, 1), slice(1, 2)]
    assert row_slices(0, 3) == [slice(0, 0)]
