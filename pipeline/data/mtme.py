"""Google's mt-metrics-eval layout (docs/cli.md); ``.jsonl`` where a ``.txt`` is absent."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from paraeval.pipeline.data.readers import check_aligned, read_text_lines
from paraeval.pipeline.data.validate import (
    METRIC_PREFIX,
    SYSTEM_PREFIX,
    aspect_column,
    line_records,
    validate,
)
from paraeval.pipeline.errors import ConfigError, DataError

log = logging.getLogger(__name__)

# mt-metrics-eval's marker of a missing translation (data.NO_TRANSLATION)
NO_TRANSLATION = "[No translation supplied]"
JSONL_FIELDS = {"sources": "source", "references": "target", "system-outputs": "hypothesis"}


def load_mtme(
    path: str,
    lp: str,
    ref: str | None = None,
    gold: str | Sequence[str] | None = None,
    include_human: bool = False,
    outliers: Sequence[str] | None = None,
    domain: str | None = None,
    max_items: int | None = None,
    metric_scores: str | Sequence[str] | None = "all",
    baseline_metrics: Sequence[str] | None = None,
    name: str = "mtme",
) -> pd.DataFrame:
    """One language pair of a test set (conf/data/mtme.yaml): each gold score is an aspect."""
    folder = _test_set(path)
    lp = str(lp)
    for suffix in (".txt", ".jsonl"):
        src_file = folder / "sources" / f"{lp}{suffix}"
        if src_file.is_file():
            break
    else:
        lps = sorted({p.name.split(".")[0] for p in (folder / "sources").iterdir()})
        raise DataError(
            f"no source file for language pair '{lp}' (data.lp); this test set has "
            f"{', '.join(lps) or 'none'}",
            file=str(folder / "sources" / f"{lp}.txt"),
        )
    sources = _read_segments(src_file, "sources")
    n = len(sources)
    if n == 0:
        raise DataError("the source file has no segments", file=str(src_file))

    refs_dir = folder / "references"
    ref_files = _by_name(refs_dir, f"{lp}.") if refs_dir.is_dir() else {}
    chosen = _choose_reference(ref_files, ref, lp)
    references = _aligned(ref_files[chosen], "references", src_file, n) if chosen else None

    outputs_dir = folder / "system-outputs" / lp
    if not outputs_dir.is_dir():
        raise DataError("no system-outputs folder for the language pair", file=str(outputs_dir))
    outputs = _by_name(outputs_dir)
    if not outputs:
        raise DataError("no system output files (<system>.txt)", file=str(outputs_dir))
    outliers = [outliers] if isinstance(outliers, str) else [] if outliers is None else outliers
    left_out = {str(s) for s in outliers}
    systems = _select_systems(outputs, set(ref_files), chosen, include_human, left_out)
    gold_files = _gold_files(folder, lp, gold)
    scores = {
        aspect_column(g): _read_scores(file, set(outputs), n) for g, file in gold_files.items()
    }
    keep = _segments(folder, lp, src_file, n, domain, max_items)
    if not systems:
        raise DataError(
            f"no system outputs to evaluate for {lp} (the folder holds only references or "
            "outliers; see data.include_human and data.outliers)",
            file=str(outputs_dir),
        )
    texts = {s: (outputs[s], _aligned(outputs[s], "system-outputs", src_file, n)) for s in systems}
    records = line_records(texts, sources, [references] if references else [], scores, keep)
    # mt-metrics-eval switches to domain-level files; a filtered set has no system scores to give
    whole = domain is None and max_items is None
    if not whole:
        log.info("data.domain, data.max_items: *.sys.score not read; system level: segment means")
    metrics = _metric_files(folder / "metric-scores" / lp, chosen, metric_scores, whole)
    given = _given_scores(metrics, gold_files if whole else {}, set(outputs), systems, n)
    frame = pd.DataFrame.from_records(records)
    if given:
        # each value broadcast over its system's rows: a system-level score is one value
        cells = {
            c: np.concatenate([np.broadcast_to(v.get(s, [math.nan]), n)[keep] for s in systems])
            for c, v in given.items()
        }
        frame = pd.concat([frame, pd.DataFrame(cells, index=frame.index)], axis=1)
    log.info(
        "mt-metrics-eval %s %s: %d segments x %d systems, reference %s, human scores %s",
        folder.name,
        lp,
        len(keep),
        len(systems),
        chosen or "(none)",
        ", ".join(gold_files) or "(none)",
    )
    files = [src_file, *([ref_files[chosen]] if chosen else []), *(outputs[s] for s in systems)]
    files += [*gold_files.values(), *(f for m in metrics.values() for f in m.values())]
    df = validate(frame, str(src_file), [str(f) for f in files], name)
    df.attrs["baseline_metrics"] = [
        f"{METRIC_PREFIX}{m}" for m in _named(metrics, baseline_metrics)
    ]
    return df


def _test_set(path: str) -> Path:
    folder = Path(str(path)).expanduser()
    if not folder.is_dir():
        raise DataError(
            "mt-metrics-eval test-set folder not found; set data.path to one test set of the "
            "download, e.g. data.path=$HOME/.mt-metrics-eval/mt-metrics-eval-v2/wmt23",
            file=str(folder),
        )
    if not (folder / "sources").is_dir():
        inner = sorted(p.name for p in folder.iterdir() if (p / "sources").is_dir())
        hint = (
            f"it holds the test sets {', '.join(inner)}: set data.path to one of them"
            if inner
            else "set data.path to a test-set folder (it holds sources/, references/, "
            "system-outputs/, human-scores/)"
        )
        raise DataError(
            f"not an mt-metrics-eval test set (no sources/ folder); {hint}", file=str(folder)
        )
    return folder


def _read_segments(file: Path, kind: str) -> list[str]:
    lines = read_text_lines(file, "data.path")
    if file.suffix == ".jsonl":
        lines = [_jsonl_text(line, file, row, kind) for row, line in enumerate(lines, start=1)]
    # as mt-metrics-eval reads them: its metric scores are of the text without trailing space
    return ["" if t.rstrip() == NO_TRANSLATION else t.rstrip() for t in lines]


def _jsonl_text(line: str, file: Path, row: int, kind: str) -> str:
    field = JSONL_FIELDS[kind]
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON ({exc.msg})", file=str(file), row=row) from None
    if not isinstance(obj, dict) or not isinstance(obj.get(field, 0), str | None):
        raise DataError(
            f"expected a JSON object with a text field '{field}'",
            file=str(file),
            row=row,
            column=field,
        )
    return obj[field] or ""


def _aligned(file: Path, kind: str, src_file: Path, n: int) -> list[str]:
    advice = "; every file of the layout has one line per source segment"
    return check_aligned(_read_segments(file, kind), n, src_file, str(file), advice)


def _by_name(folder: Path, prefix: str = "") -> dict[str, Path]:
    """Name -> file of ``<prefix><name>.txt`` (preferred, as mt-metrics-eval does) or .jsonl."""
    files = [p for p in folder.iterdir() if p.suffix in (".txt", ".jsonl")]
    found: dict[str, Path] = {}
    for file in sorted(files, key=lambda p: (p.suffix != ".txt", p.name)):
        if file.name.startswith(prefix):
            found.setdefault(file.name[len(prefix) : -len(file.suffix)], file)
    return found


def _choose_reference(refs: dict[str, Path], ref: str | None, lp: str) -> str | None:
    """Else the first by name (mt-metrics-eval's standard one, in its meta_info.py, may not be)."""
    names = sorted(refs)
    if ref is not None:
        if str(ref) not in refs:
            raise ConfigError(
                f"data.ref '{ref}' is not a reference of {lp}; choose from "
                f"{', '.join(names) or '(none: the test set has no references/ file for it)'}"
            )
        return str(ref)
    if len(names) > 1:
        log.warning(
            "%s has references %s: using %s (the first by name); set data.ref to choose, "
            "e.g. the test set's standard reference",
            lp,
            ", ".join(names),
            names[0],
        )
    return names[0] if names else None


def _select_systems(
    outputs: dict[str, Path],
    references: set[str],
    chosen: str | None,
    include_human: bool,
    outliers: set[str],
) -> list[str]:
    """mt-metrics-eval's default: no human "systems"; never the reference, scored vs itself."""
    left_out = {chosen: "the reference"} if chosen in outputs else {}
    if not include_human:
        left_out |= {s: "a reference" for s in references & set(outputs) if s != chosen}
    left_out |= {s: "an outlier" for s in outliers & set(outputs) if s not in left_out}
    if left_out:
        log.info(
            "left out: %s (data.include_human, data.outliers)",
            ", ".join(f"{s} ({why})" for s, why in sorted(left_out.items())),
        )
    return [s for s in outputs if s not in left_out]


def _gold_files(folder: Path, lp: str, gold: str | Sequence[str] | None) -> dict[str, Path]:
    scores = folder / "human-scores"
    available: dict[str, Path] = {}
    if scores.is_dir():
        suffix = ".seg.score"
        for file in sorted(scores.iterdir()):
            if file.name.startswith(f"{lp}.") and file.name.endswith(suffix):
                available[file.name[len(lp) + 1 : -len(suffix)]] = file
    if gold is None:
        return available
    wanted = [gold] if isinstance(gold, str) else [str(g) for g in gold]
    for g in wanted:
        if g not in available:
            raise ConfigError(
                f"data.gold '{g}': no file {scores / f'{lp}.{g}.seg.score'}; segment-level "
                f"human scores of {lp}: {', '.join(available) or 'none'}"
            )
    return {g: available[g] for g in wanted}


def _read_scores(file: Path, systems: set[str], n: int) -> dict[str, list[float]]:
    """System -> its n segment scores (NaN for None); an unrated system is absent."""
    scores: dict[str, list[float]] = {}
    last_row: dict[str, int] = {}
    error = partial(DataError, file=str(file))
    for row, line in enumerate(read_text_lines(file, "data.gold"), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2:
            raise error(f"expected 'SYSTEM SCORE' (2 fields), found {len(fields)}", row=row)
        system, text = fields
        if system not in systems:
            raise error(
                f"system '{system}' has no output file in system-outputs/; every system a score "
                "file names must have one",
                row=row,
            )
        values = scores.setdefault(system, [])
        if len(values) == n:
            raise error(
                f"{f'more than {n}' if n > 1 else 'two'} scores for system '{system}'", row=row
            )
        try:
            value = math.nan if text == "None" else float(text)
        except ValueError:
            raise error(f"expected a number or None, got '{text[:40]}'", row=row) from None
        if math.isinf(value):
            raise error("infinite score", row=row)
        values.append(value)
        last_row[system] = row
    for system, values in scores.items():
        if len(values) != n:
            raise error(
                f"{len(values)} scores for system '{system}' but the source has {n} segments; "
                "write None for a segment without a score",
                row=last_row[system],
            )
    return scores


def _metric_files(
    folder: Path, ref: str | None, selection: str | Sequence[str] | None, whole: bool
) -> dict[str, dict[str, Path]]:
    """Full name (``COMET-refA``) -> level -> file, of the chosen reference's and the ``-src``
    metrics (mt-metrics-eval's NAME-REF.LEVEL.score), as ``data.metric_scores`` selects them."""
    found: dict[str, dict[str, Path]] = {}
    for file in sorted(folder.iterdir()) if folder.is_dir() and selection != "none" else []:
        metric, _, level = file.name.removesuffix(".score").rpartition(".")
        if level in ("seg", "sys")[: 2 if whole else 1] and metric.rpartition("-")[2] in (
            ref,
            "src",
        ):
            found.setdefault(metric, {})[level] = file
    if selection in (None, "all", "none"):
        return found if selection == "all" else {}
    wanted = [selection] if isinstance(selection, str) else [str(m) for m in selection]
    unknown = [w for w in wanted if not _named(found, [w])]
    if unknown:
        raise ConfigError(
            f"data.metric_scores: no {' or '.join(unknown)} in {folder} for reference "
            f"{ref or '(none)'} or src; it has {', '.join(found) or 'none'}"
        )
    return {m: files for m, files in found.items() if m in _named(found, wanted)}


def _named(metrics: Sequence[str] | dict[str, object], names: Sequence[str] | None) -> list[str]:
    """The full names that ``names`` give as full names or basenames (``COMET``)."""
    names = [str(x) for x in names or []]
    return [m for m in metrics if m in names or m.rpartition("-")[0] in names]


def _given_scores(
    metrics: dict[str, dict[str, Path]],
    gold_files: dict[str, Path],
    outputs: set[str],
    systems: list[str],
    n: int,
) -> dict[str, dict[str, list[float]]]:
    """Column -> system -> its scores (one for a system-level column) of the metric files and
    the gold scores' ``.sys.score`` files; a system a human file leaves out is unrated."""
    given: dict[str, dict[str, list[float]]] = {}
    for gold, seg_file in gold_files.items():
        file = seg_file.with_name(seg_file.name.removesuffix(".seg.score") + ".sys.score")
        if file.is_file():
            given[SYSTEM_PREFIX + aspect_column(gold)] = _read_scores(file, outputs, 1)
    for metric, files in metrics.items():
        given[METRIC_PREFIX + metric] = {}  # all NaN where the metric has system scores only
        lacking: set[str] = set()
        for level, file in files.items():
            scores = _read_scores(file, outputs, n if level == "seg" else 1)
            lacking |= set(systems) - set(scores)
            # mt-metrics-eval's repair (strict=False): 0; the chosen reference is never a system
            column = (
                METRIC_PREFIX + metric
                if level == "seg"
                else f"{SYSTEM_PREFIX}{METRIC_PREFIX}{metric}"
            )
            given[column] = {**{s: [0.0] for s in lacking}, **scores}
        if lacking:
            log.warning(
                "%s has no scores for %s: scored 0, as mt-metrics-eval reads it (strict=False)",
                metric,
                ", ".join(sorted(lacking)),
            )
    return given


def _segments(
    folder: Path, lp: str, src_file: Path, n: int, domain: str | None, max_items: int | None
) -> list[int]:
    keep = list(range(n))
    if domain is not None:
        docs = folder / "documents" / f"{lp}.docs"
        lines = check_aligned(read_text_lines(docs, "data.domain"), n, src_file, str(docs))
        domains = []
        for row, line in enumerate(lines, start=1):
            fields = line.split()
            if len(fields) < 2:
                raise DataError(
                    f"expected 'DOMAIN DOCUMENT', found {len(fields)} field(s)",
                    file=str(docs),
                    row=row,
                )
            domains.append(fields[0])
        if str(domain) not in domains:
            raise ConfigError(
                f"data.domain '{domain}' is not a domain of {lp}; choose from "
                f"{', '.join(sorted(set(domains)))}"
            )
        keep = [i for i in keep if domains[i] == str(domain)]
    if max_items is not None:
        if int(max_items) < 1:
            raise ConfigError(f"data.max_items must be at least 1, got {max_items}")
        keep = keep[: int(max_items)]
    return keep
