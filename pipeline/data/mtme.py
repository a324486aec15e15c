"""Google's mt-metrics-eval layout (docs/cli.md); ``.jsonl`` where a ``.txt`` is absent."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path

import pandas as pd

from paraeval.pipeline.data.readers import check_aligned, json_object, read_text_lines
from paraeval.pipeline.data.validate import (
    METRIC_PREFIX,
    SYSTEM_PREFIX,
    aspect_column,
    line_frame,
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
    pairs = _by_name(folder / "sources")
    if lp not in pairs:
        raise DataError(
            f"no source file for language pair '{lp}' (data.lp); this test set has "
            f"{', '.join(sorted(pairs)) or 'none'}",
            file=str(folder / "sources" / f"{lp}.txt"),
        )
    src_file = pairs[lp]
    sources = _read_segments(src_file, "sources")
    n = len(sources)
    if n == 0:
        raise DataError("the source file has no segments", file=str(src_file))

    ref_files = _by_name(folder / "references", f"{lp}.")
    chosen = _choose_reference(ref_files, ref, lp)
    references = _aligned(ref_files[chosen], "references", src_file, n) if chosen else None

    outputs_dir = folder / "system-outputs" / lp
    outputs = _by_name(outputs_dir)
    if not outputs:
        raise DataError("no system output files (<system>.txt)", file=str(outputs_dir))
    left_out = {str(s) for s in ([outliers] if isinstance(outliers, str) else outliers or [])}
    systems = _select_systems(outputs, set(ref_files), chosen, include_human, left_out)
    # mt-metrics-eval switches to domain-level files: a filtered set has no system scores to give
    levels = ("seg", "sys") if domain is None and max_items is None else ("seg",)
    if len(levels) == 1:
        log.info("data.domain, data.max_items: *.sys.score not read; system level: segment means")
    gold_files = _gold_files(folder, lp, gold, levels)
    metrics = _metric_files(folder / "metric-scores" / lp, chosen, metric_scores, levels)
    keep = _segments(folder, lp, src_file, n, domain, max_items)
    if not systems:
        raise DataError(
            f"no system outputs to evaluate for {lp} (the folder holds only references or "
            "outliers; see data.include_human and data.outliers)",
            file=str(outputs_dir),
        )
    texts = {s: (outputs[s], _aligned(outputs[s], "system-outputs", src_file, n)) for s in systems}
    given = {aspect_column(g): f for g, f in gold_files.items()}
    given |= {METRIC_PREFIX + m: f for m, f in metrics.items()}
    scores = _read_given(given, set(outputs), systems, n)
    frame = line_frame(texts, sources, [references] if references else [], scores, keep)
    log.info(
        "mt-metrics-eval %s %s: %d segments x %d systems, reference %s, human scores %s",
        *(folder.name, lp, len(keep), len(systems), chosen or "(none)"),
        ", ".join(gold_files) or "(none)",
    )
    files = [src_file, *([ref_files[chosen]] if chosen else []), *(outputs[s] for s in systems)]
    files += [f for levels_read in given.values() for f in levels_read.values()]
    df = validate(frame, str(src_file), [str(f) for f in files], name)
    df.attrs["baseline_metrics"] = [METRIC_PREFIX + m for m in _named(metrics, baseline_metrics)]
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
    text = json_object(line, file, row).get(field, 0)
    if not isinstance(text, str | None):
        raise DataError(f"expected a text field '{field}'", file=str(file), row=row, column=field)
    return text or ""


def _aligned(file: Path, kind: str, src_file: Path, n: int) -> list[str]:
    advice = "; every file of the layout has one line per source segment"
    return check_aligned(_read_segments(file, kind), n, src_file, str(file), advice)


def _by_name(
    folder: Path, prefix: str = "", suffixes: Sequence[str] = (".txt", ".jsonl")
) -> dict[str, Path]:
    """Name -> file of ``<prefix><name><suffix>``, the first suffix preferred (.txt first)."""
    files = sorted(folder.iterdir()) if folder.is_dir() else []
    found: dict[str, Path] = {}
    for suffix in suffixes:
        for file in files:
            if file.name.startswith(prefix) and file.name.endswith(suffix):
                found.setdefault(file.name[len(prefix) : -len(suffix)], file)
    return found


def _score_files(folder: Path, prefix: str, levels: Sequence[str]) -> dict[str, dict[str, Path]]:
    """Name -> level -> file of mt-metrics-eval's ``<prefix><name>.<level>.score``."""
    found: dict[str, dict[str, Path]] = {}
    for level in levels:
        for name, file in _by_name(folder, prefix, (f".{level}.score",)).items():
            found.setdefault(name, {})[level] = file
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


def _gold_files(
    folder: Path, lp: str, gold: str | Sequence[str] | None, levels: Sequence[str]
) -> dict[str, dict[str, Path]]:
    scores = folder / "human-scores"
    # a gold score with system scores only (wmt-z) is no aspect
    available = {g: f for g, f in _score_files(scores, f"{lp}.", levels).items() if "seg" in f}
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
            raise error(f"system '{system}' has no output file in system-outputs/", row=row)
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
    folder: Path, ref: str | None, selection: str | Sequence[str] | None, levels: Sequence[str]
) -> dict[str, dict[str, Path]]:
    """Full name (``COMET-refA``) -> level -> file, of the chosen reference and ``-src``."""
    found = _score_files(folder, "", levels)
    found = {m: f for m, f in found.items() if m.rpartition("-")[2] in (ref, "src")}
    if selection in (None, "all", "none"):
        return found if selection == "all" else {}
    wanted = [selection] if isinstance(selection, str) else [str(m) for m in selection]
    unknown = [w for w in wanted if not _named(found, w)]
    if unknown:
        raise ConfigError(
            f"data.metric_scores: no {' or '.join(unknown)} in {folder} for reference "
            f"{ref or '(none)'} or src; it has {', '.join(found) or 'none'}"
        )
    return {m: found[m] for m in _named(found, wanted)}


def _named(metrics: Iterable[str], names: str | Sequence[str] | None) -> list[str]:
    """The full names that ``names`` give as full names or basenames (``COMET``)."""
    listed = [names] if isinstance(names, str) else [str(x) for x in names or []]
    return [m for m in metrics if m in listed or m.rpartition("-")[0] in listed]


def _read_given(
    given: dict[str, dict[str, Path]], outputs: set[str], systems: list[str], n: int
) -> dict[str, dict[str, list[float]]]:
    """Column -> system -> its scores (one at the system level) from each column's files."""
    read: dict[str, dict[str, list[float]]] = {}
    for column, files in given.items():
        read[column] = {}  # all NaN where a metric has system scores only
        for level, file in files.items():
            scores = _read_scores(file, outputs, n if level == "seg" else 1)
            lacking = [s for s in systems if s not in scores]
            if lacking and column.startswith(METRIC_PREFIX):
                # mt-metrics-eval's repair (strict=False); the chosen reference is never a system
                log.warning(
                    "%s: no scores for %s: 0, as mt-metrics-eval", file.name, " ".join(lacking)
                )
                scores |= {s: [0.0] for s in lacking}
            read[column if level == "seg" else SYSTEM_PREFIX + column] = scores
    return read


def _segments(
    folder: Path, lp: str, src_file: Path, n: int, domain: str | None, max_items: int | None
) -> list[int]:
    keep = list(range(n))
    if domain is not None:
        docs = folder / "documents" / f"{lp}.docs"
        lines = check_aligned(read_text_lines(docs, "data.domain"), n, src_file, str(docs))
        for row, line in enumerate(lines, start=1):
            if len(line.split()) < 2:
                error = f"expected 'DOMAIN DOCUMENT', found {len(line.split())} field(s)"
                raise DataError(error, file=str(docs), row=row)
        domains = [line.split()[0] for line in lines]
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
