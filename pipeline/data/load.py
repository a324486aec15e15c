"""Files -> the tidy table of DESIGN.md, read every run (nothing is cached)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from paraeval.pipeline.config.nodes import DataSettings
from paraeval.pipeline.data.mtme import load_mtme
from paraeval.pipeline.data.readers import (
    READERS,
    check_aligned,
    detect_format,
    read_table,
    read_text_lines,
)
from paraeval.pipeline.data.validate import (
    aggregate_annotators,
    aspect_column,
    line_frame,
    tidy_table,
    to_score,
    validate,
    warn_nan_text,
)
from paraeval.pipeline.errors import ConfigError, DataError, not_allowed


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
    raw = read_table(path, format)
    offset = READERS[detect_format(Path(path), format)].first_row
    return tidy_table(raw, str(path), offset, columns, human, annotator, aggregate, name)


def load_frame(
    frame: pd.DataFrame,
    columns: Mapping[str, Any] | None = None,
    human: Sequence[str] | None = None,
    annotator: str | None = None,
    aggregate: str = "mean",
    name: str = "dataframe",
) -> pd.DataFrame:
    """Checked like a file (rows numbered from 0)."""
    return tidy_table(frame, "<DataFrame>", 0, columns, human, annotator, aggregate, name)


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
    references = [references] if isinstance(references, str) else list(references or [])
    src_lines = read_text_lines(Path(source), "data.source")
    n = len(src_lines)

    def aligned(path: str, label: str) -> list[str]:
        advice = "; every file must have one line per source sentence"
        return check_aligned(read_text_lines(Path(path), label), n, source, path, advice, label)

    ref_lines = [aligned(p, f"data.references[{k}]") for k, p in enumerate(references)]
    human_scores: dict[str, dict[str, list[float]]] = {}
    nan_text: dict[str, list[str]] = {}
    for aspect, per_system in (human or {}).items():
        col = aspect_column(aspect)
        human_scores[col] = {}
        for system, path in per_system.items():
            if system not in systems:
                raise ConfigError(
                    f"data.human.{aspect} names system '{system}' not in data.systems"
                )
            human_scores[col][str(system)] = [
                to_score(v, file=path, row=i, column=col, nan_text=nan_text)
                for i, v in enumerate(aligned(path, f"data.human.{aspect}.{system}"), start=1)
            ]
    warn_nan_text(nan_text)
    outputs = {str(s): (p, aligned(p, f"data.systems.{s}")) for s, p in systems.items()}
    frame = line_frame(outputs, src_lines, ref_lines, human_scores, range(n))
    return validate(frame, source, [source, *references, *systems.values()], name)


def demo_path() -> Path:
    return Path(__file__).resolve().parent / "demo" / "demo.jsonl"


def load_demo(name: str = "demo") -> pd.DataFrame:
    """The embedded demo (illustrative ratings, see scripts/make_demo.py)."""
    return load_table(str(demo_path()), name=name)


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
    """ParaBank-Eval (Hu et al. 2019): a candidate counts for each system ``sys_id`` lists."""
    folder = _shared_dir(path, "ParaBank-Eval")
    ref_file, cand_file = str(folder / "ref.tsv"), str(folder / "candidates.tsv")
    refs, cands = read_table(ref_file, "tsv"), read_table(cand_file, "tsv")
    cand_cols = ["worker_id_anon", "ref_id", "sys_id", "candidate", "human_score", "gm"]
    for df, file, cols in ((refs, ref_file, ["ref_id", "ref_sent"]), (cands, cand_file, cand_cols)):
        for col in cols:
            if col not in df.columns:
                raise DataError(f"column '{col}' not found", file=file, column=col)
    if max_items is not None:
        refs = refs.head(int(max_items))
    source_of = dict(zip(refs["ref_id"], refs["ref_sent"], strict=True))
    records = []
    for row, rec in enumerate(cands.to_dict("records"), start=2):
        ref_id = rec["ref_id"]
        if ref_id not in source_of:
            if max_items is not None:
                continue
            raise DataError(
                f"ref_id '{ref_id}' is not in ref.tsv", file=cand_file, row=row, column="ref_id"
            )
        meaning = to_score(rec["human_score"], file=cand_file, row=row, column="human_score")
        gm = to_score(rec["gm"], file=cand_file, row=row, column="gm")
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
    # the release holds repeated judgments by one worker id: averaged, as published
    df = aggregate_annotators(
        df, "worker", ["human_meaning", "human_grammaticality"], aggregate, repeats_allowed=True
    )
    if references not in ("source", "none"):
        raise ConfigError(f"data.references must be 'source' or 'none', got '{references}'")
    df["references"] = [[s] if references == "source" else [] for s in df["source"]]
    df["item_id"] = df["item_id"].str.zfill(3)
    return validate(df, cand_file, [ref_file, cand_file], name)


def load_stsb(path: str, split: str = "test", name: str = "stsb") -> pd.DataFrame:
    """STS Benchmark: sentence1 is the source and reference, sentence2 the candidate."""
    folder = _shared_dir(path, "STS Benchmark")
    if split not in ("train", "dev", "test"):
        raise ConfigError(f"data.split must be train, dev or test, got '{split}'")
    file = folder / f"sts-{split}.csv"
    records = []
    for i, line in enumerate(read_text_lines(file, "data.path"), start=1):
        parts = line.split("\t")
        if len(parts) < 7:
            raise DataError(
                f"expected 7 tab-separated fields, found {len(parts)}", file=str(file), row=i
            )
        records.append(
            {
                "item_id": f"{split}-{i:05d}",
                "system": "stsb",
                "source": parts[5],
                "references": [parts[5]],
                "candidate": parts[6],
                "human_similarity": to_score(parts[4], file=str(file), row=i, column="score"),
                "origin": f"{file}:{i}",
            }
        )
    return validate(pd.DataFrame.from_records(records), str(file), [str(file)], name)


# the loaders a data config may name in `_target_`: an exact allow-list, not a module prefix
LOADERS: dict[str, Callable[..., pd.DataFrame]] = {
    f"{__name__}.{fn.__name__}": fn
    for fn in (load_demo, load_table, load_text, load_parabank, load_stsb, load_mtme, load_frame)
}


def load_data(settings: DataSettings) -> pd.DataFrame:
    loader = LOADERS.get(settings.target)
    if loader is None:
        raise not_allowed("data._target_", settings.target, "data loader", sorted(LOADERS))
    try:
        return loader(**settings.options)
    except TypeError as exc:
        raise ConfigError(f"data: {exc}") from None
