"""Scores as systems x items matrices: equal to pandas' pivot + reindex on shuffled, gappy
tables; a (system, item) given twice is pandas' duplicate-entries error."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from paraeval.pipeline.stages.correlate import to_matrices


def _pivot(seg: pd.DataFrame, column: str, systems: list[str], items: list[str]) -> np.ndarray:
    table = seg.pivot(index="system", columns="item_id", values=column)
    return table.reindex(index=systems, columns=items).to_numpy(dtype=float)


@pytest.mark.parametrize("seed", range(25))
def test_matrices_equal_pandas_pivot(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_sys, n_items = int(rng.integers(1, 8)), int(rng.integers(1, 30))
    systems = [f"s{i}" for i in range(n_sys)]
    items = [f"i{j}" for j in rng.permutation(n_items)]
    cells = [(s, i) for s in systems for i in items if rng.random() < 0.8] or [
        (systems[0], items[0])
    ]
    order = rng.permutation(len(cells))
    seg = pd.DataFrame([cells[k] for k in order], columns=["system", "item_id"])
    seg["bleu"] = rng.random(len(seg))
    seg.loc[rng.random(len(seg)) < 0.1, "bleu"] = np.nan
    seg["human_meaning"] = rng.integers(1, 6, len(seg)).astype(float)
    got = to_matrices(seg, ["bleu", "human_meaning"], systems, items)
    for column in ("bleu", "human_meaning"):
        expected = _pivot(seg, column, systems, items)
        assert np.array_equal(got[column], expected, equal_nan=True)


def test_a_cell_given_twice_is_pandas_error() -> None:
    seg = pd.DataFrame({"system": ["a", "a"], "item_id": ["1", "1"], "bleu": [0.1, 0.2]})
    with pytest.raises(ValueError, match="duplicate"):
        to_matrices(seg, ["bleu"], ["a"], ["1"])
