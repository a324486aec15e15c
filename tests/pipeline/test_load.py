"""Loaders: every input layout gives the same tidy table; validation names file, row, column."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from paraeval.pipeline.data.load import load_demo, load_table, load_text
from paraeval.pipeline.errors import DataError

ROWS = [
    {
        "id": "1",
        "sys": "a",
        "src": "the cat sat",
        "r1": "a cat sat",
        "r2": "the cat was sitting",
        "cand": "a cat is sitting",
        "human_meaning": 4.0,
        "human_fluency": 5.0,
    },
    {
        "id": "1",
        "sys": "b",
        "src": "the cat sat",
        "r1": "a cat sat",
        "r2": "the cat was sitting",
        "cand": "cat",
        "human_meaning": 1.5,
        "human_fluency": 2.0,
    },
    {
        "id": "2",
        "sys": "a",
        "src": "it rains",
        "r1": "it is raining",
        "r2": "",
        "cand": "rain falls",
        "human_meaning": 3.0,
        "human_fluency": "",
    },
    {
        "id": "2",
        "sys": "b",
        "src": "it rains",
        "r1": "it is raining",
        "r2": "",
        "cand": "it rains",
        "human_meaning": 2.0,
        "human_fluency": 4.0,
    },
]
MAPPING = {
    "item_id": "id",
    "system": "sys",
    "source": "src",
    "candidate": "cand",
    "references": ["r1", "r2"],
}


def _check(df: pd.DataFrame) -> None:
    assert list(df["item_id"]) == ["1", "1", "2", "2"]
    assert list(df["system"]) == ["a", "b", "a", "b"]
    assert df.loc[0, "references"] == ["a cat sat", "the cat was sitting"]
    assert df.loc[2, "references"] == ["it is raining"]  # ragged: the empty cell is dropped
    assert df.loc[1, "candidate"] == "cat"
    assert df["human_meaning"].tolist() == [4.0, 1.5, 3.0, 2.0]
    assert np.isnan(df["human_fluency"].to_numpy(dtype=float)[2])  # an empty cell: no rating


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
def test_formats_with_reference_columns(tmp_path: Path, fmt: str) -> None:
    frame = pd.DataFrame(ROWS)
    path = tmp_path / f"data.{fmt}"
    if fmt == "csv":
        frame.to_csv(path, index=False)
    elif fmt == "tsv":
        frame.to_csv(path, sep="\t", index=False)
    elif fmt == "jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame["human_fluency"] = pd.to_numeric(frame["human_fluency"]).astype(float)
        frame.to_parquet(path)
    _check(load_table(str(path), columns=MAPPING))


def test_reference_list_column(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    with path.open("w") as f:
        for r in ROWS:
            rec = dict(r)
            rec["refs"] = [x for x in (rec.pop("r1"), rec.pop("r2")) if x]
            f.write(json.dumps(rec) + "\n")
    _check(load_table(str(path), columns={**MAPPING, "references": "refs"}))


def test_reference_json_list_in_csv(tmp_path: Path) -> None:
    frame = pd.DataFrame(ROWS)
    frame["refs"] = [json.dumps([a, b]) for a, b in zip(frame.r1, frame.r2, strict=True)]
    path = tmp_path / "d.csv"
    frame.drop(columns=["r1", "r2"]).to_csv(path, index=False)
    _check(load_table(str(path), columns={**MAPPING, "references": "refs"}))


def test_per_annotator_aggregation(tmp_path: Path) -> None:
    rows = []
    for ann, scores in (("x", [1.0, 3.0]), ("y", [3.0, 5.0]), ("z", [2.0, None])):
        for sys_name, score in zip(("a", "b"), scores, strict=True):
            rows.append(
                {
                    "item_id": "1",
                    "system": sys_name,
                    "source": "s",
                    "references": ["r"],
                    "candidate": f"c{sys_name}",
                    "annotator": ann,
                    "human_q": score,
                }
            )
    path = tmp_path / "ann.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    mean = load_table(str(path), annotator="annotator").set_index("system")
    assert mean.loc["a", "human_q"] == pytest.approx(2.0)
    assert mean.loc["b", "human_q"] == pytest.approx(4.0)  # the missing rating is skipped
    assert mean.loc["b", "n_human_q"] == 2
    med = load_table(str(path), annotator="annotator", aggregate="median").set_index("system")
    assert med.loc["a", "human_q"] == pytest.approx(2.0)
    z = load_table(str(path), annotator="annotator", aggregate="zscore").set_index("system")
    # annotator x: (1-2)/1 = -1 and (3-2)/1 = +1; y: -1, +1; z rated one item: sd 0 -> no z-score
    assert z.loc["a", "human_q"] == pytest.approx(-1.0)
    assert z.loc["b", "human_q"] == pytest.approx(1.0)


def test_text_files(tmp_path: Path) -> None:
    (tmp_path / "src.txt").write_text("the cat sat\nit rains\n")
    (tmp_path / "r1.txt").write_text("a cat sat\nit is raining\n")
    (tmp_path / "r2.txt").write_text("the cat was sitting\n\n")
    (tmp_path / "a.txt").write_text("a cat is sitting\nrain falls\n")
    (tmp_path / "b.txt").write_text("cat\nit rains\n")
    (tmp_path / "a.meaning").write_text("4\n3\n")
    (tmp_path / "b.meaning").write_text("1.5\n2\n")
    df = load_text(
        str(tmp_path / "src.txt"),
        {"a": str(tmp_path / "a.txt"), "b": str(tmp_path / "b.txt")},
        [str(tmp_path / "r1.txt"), str(tmp_path / "r2.txt")],
        {"meaning": {"a": str(tmp_path / "a.meaning"), "b": str(tmp_path / "b.meaning")}},
    )
    df["item_id"] = df["item_id"].astype(int).astype(str)
    df["human_fluency"] = [5.0, 2.0, np.nan, 4.0]
    _check(df)


def test_bad_cells_name_file_row_column(tmp_path: Path) -> None:
    frame = pd.DataFrame(ROWS)
    frame["human_meaning"] = frame["human_meaning"].astype(object)
    frame.loc[2, "human_meaning"] = "n/a"
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(DataError) as err:
        load_table(str(path), columns=MAPPING)
    assert str(err.value).startswith(f"{path}, row 4, column 'human_meaning': expected a number")


def test_demo_shape() -> None:
    df = load_demo()
    assert df["item_id"].nunique() >= 40
    assert set(df["system"]) == {"copy", "strong", "medium", "weak"}
    assert df["references"].map(len).between(1, 3).all()
    assert df["references"].map(len).nunique() == 3
    assert {"human_meaning", "human_fluency"} <= set(df.columns)
    copy = df[df.system == "copy"]
    assert (copy["candidate"] == copy["source"]).all()


def test_real_parabank(shared_data: Path) -> None:
    from paraeval.pipeline.data.load import load_parabank

    df = load_parabank(str(shared_data / "parabank_eval"))
    assert df["item_id"].nunique() == 400
    assert df["system"].nunique() == 36
    copy = df[df.system == "sys00"]
    assert (copy["candidate"] == copy["source"]).mean() > 0.95
    rated = df["human_meaning"].dropna()
    assert len(rated) >= len(df) - 5  # a few candidates have no meaning rating at all
    assert rated.between(0, 100).all()


def test_real_stsb(shared_data: Path) -> None:
    from paraeval.pipeline.data.load import load_stsb

    df = load_stsb(str(shared_data / "stsbenchmark"), split="dev")
    assert len(df) == 1500
    assert df["human_similarity"].between(0, 5).all()
