"""The run's summary on the terminal, 100 columns wide: the columns people read first (group
averages, human ratings, the leading metrics) and how many it left out of the output files'."""

from __future__ import annotations

import io
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from paraeval import __version__
from paraeval.pipeline.report.plots import AVERAGES, LOWER_MARK
from paraeval.pipeline.stages.headline import headline_coefficient
from paraeval.pipeline.terminal import Status, printable

if TYPE_CHECKING:
    from paraeval.pipeline.stages.evaluation import Evaluation

__all__ = ["Status", "print_summary", "render_summary"]

WIDTH = 100


def _number(value: object, digits: int) -> str:
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return printable(value)
    return "–" if not math.isfinite(v) else f"{v:.{digits}f}"


def _digits(values: pd.Series) -> int:
    finite = pd.to_numeric(values, errors="coerce").abs().dropna()
    return 1 if len(finite) and finite.max() >= 10 else 3


def _header(ev: Evaluation, column: str) -> str:
    info = ev.aggregated.columns if ev.aggregated is not None else {}
    lower = column in info and info[column].higher_is_better is False
    return column.removeprefix("human_") + (f" {LOWER_MARK}" if lower else "")


def _table(title: str, first: str) -> Table:
    # the title is printed above the table by render_summary: a narrow table would wrap it
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column(first, no_wrap=True)
    return table


def _more(table: Table, rows: int, max_rows: int) -> None:
    if rows > max_rows:
        table.add_row(Text(f"… {rows - max_rows} more"), *[""] * (len(table.columns) - 1))


# a table and the note printed under it (as wide as the page, not as the table)
Block = tuple[Table, str]


def system_columns(ev: Evaluation) -> tuple[list[str], int]:
    """The columns of the system summary: averages and human ratings first, then metrics in the
    order they were configured, as many as fit; and how many columns were left out."""
    systems = ev.systems
    humans = [c for c in systems.columns if c.startswith("human_")]
    averages = [c for c in AVERAGES if c in systems.columns]
    shown = [c for c in systems.columns if not c.endswith("_src") and systems[c].notna().any()]
    metrics = [c for c in shown if c not in humans and c not in averages and c != "n_items"]
    # each column takes its width plus two characters of padding
    used = max([len(printable(s)) for s in systems.index] + [6]) + 2
    chosen: list[str] = []
    for c in averages + humans + metrics:
        used += max(len(c.removeprefix("human_")) + 2, 7) + 2
        if used > WIDTH:
            break
        chosen.append(c)
    order = [c for c in metrics if c in chosen] + [c for c in averages + humans if c in chosen]
    return order, sum(1 for c in systems.columns if c != "n_items" and c not in chosen)


def paraphrase_block(ev: Evaluation, max_rows: int) -> Block | None:
    """The headline: per system adequacy, diversity, the paraphrase score with its interval and
    cluster, the copy rate and the human ratings; the controls last, labelled."""
    view = ev.paraphrase
    if view is None:
        return None
    t = view.table
    humans = [c for c in t.columns if str(c).startswith("human_")]
    table = _table("Paraphrase: meaning kept and wording changed", "system")
    columns = ["adequacy", "diversity"]
    if "edit_distance" in t:
        columns.append("edit_distance")
    headers = {"adequacy": "adequacy", "diversity": "diversity", "edit_distance": "edit"}
    for c in columns:
        table.add_column(headers[c], justify="right", no_wrap=True)
    if view.paraphrase:
        table.add_column(view.paraphrase, justify="right", no_wrap=True)
        table.add_column("cluster", justify="right", no_wrap=True)
    table.add_column("copy", justify="right", no_wrap=True)
    for c in humans:
        table.add_column(c.removeprefix("human_"), justify="right", no_wrap=True)
    digits = {c: _digits(t[c]) for c in [*columns, *humans]}
    for _, r in t.head(max_rows).iterrows():
        name = printable(r["system"])
        name += " (control)" if r["control"] else (" ◆" if r["frontier"] else "")
        cells = [_number(r[c], digits[c]) for c in columns]
        if view.paraphrase:
            cluster = str(int(r["cluster"])) if math.isfinite(r["cluster"]) else "–"
            cells += [_number(r["paraphrase"], 3), cluster]
        cells.append(f"{r['copy_rate']:.0%}" if math.isfinite(r["copy_rate"]) else "–")
        cells += [_number(r[c], digits[c]) for c in humans]
        table.add_row(Text(name), *cells)
    _more(table, len(t), max_rows)
    against = "source" if view.reference_free else "references"
    diversity = "PINC" if view.diversity == "pinc" else "100 - self_bleu"
    edit = ", edit (ParaScore's)" if "edit_distance" in t else ""
    notes = [
        f"adequacy: {view.adequacy} vs the {against}; "
        f"diversity ({diversity}){edit} from the source",
        "◆ frontier: none better on both axes beyond the intervals; controls unranked; "
        "paraphrase.csv",
    ]
    return table, "\n".join(notes)


def systems_block(ev: Evaluation, max_rows: int) -> Block:
    systems = ev.systems
    columns, left_out = system_columns(ev)
    more = f"{left_out} more columns in system_scores.csv; " if left_out else ""
    table = _table(f"Systems ({len(systems)}, corpus level)", "system")
    for c in columns:
        table.add_column(_header(ev, c), justify="right", no_wrap=True)
    digits = {c: _digits(systems[c]) for c in columns}
    for name, row in systems.head(max_rows).iterrows():
        label = printable(name) + (" (control)" if name in ev.roles.controls else "")
        table.add_row(Text(label), *[_number(row[c], digits[c]) for c in columns])
    _more(table, len(systems), max_rows)
    return table, f"{more}{LOWER_MARK} = lower is better"


def _correlation_cell(value: float, level: str, n: float) -> str:
    """``+0.812``; at the system level with its number of systems, ``+1.000 n=3``."""
    if not math.isfinite(float(value)):
        return "n/a"
    n_text = f" n={int(n)}" if level == "system" and math.isfinite(float(n)) else ""
    return f"{float(value):+.3f}{n_text}"


def correlations_block(ev: Evaluation, max_rows: int) -> Block | None:
    corr = ev.correlations
    if corr.empty:
        return None
    coefficient = headline_coefficient(ev.settings.correlation, corr["coefficient"])
    sub = corr[corr["coefficient"] == coefficient]
    pivot = {"index": "metric", "columns": ["aspect", "level"], "aggfunc": "first", "sort": False}
    wide = sub.pivot_table(values="value", **pivot)
    n_by_level = sub.groupby("level", sort=False)["n"].max() if "n" in sub.columns else None
    others = [c for c in dict.fromkeys(corr["coefficient"]) if c != coefficient]
    caption = f"intervals, p-values{''.join(f', {c}' for c in others)} in correlations.csv"
    if n_by_level is not None and "system" in n_by_level.index:
        caption += f"; system level on n = {int(n_by_level['system'])} systems"
    table = _table(f"Correlation with human ratings ({coefficient})", "metric")
    for aspect, level in wide.columns:
        table.add_column(f"{aspect.removeprefix('human_')}\n{level}", justify="right")
    # a system-level value on a handful of systems says little: its n stands beside it
    n_wide = sub.pivot_table(values="n", **pivot) if "n" in sub.columns else pd.DataFrame()
    n_wide = n_wide.reindex(index=wide.index, columns=wide.columns)
    for metric, row in wide.head(max_rows).iterrows():
        cells = [
            _correlation_cell(v, level, n)
            for v, (_, level), n in zip(row, wide.columns, n_wide.loc[metric], strict=True)
        ]
        table.add_row(Text(_header(ev, str(metric))), *cells)
    _more(table, len(wide), max_rows)
    return table, caption


def _comparison_cells(sub: pd.DataFrame, system: str, alpha: float) -> tuple[str, str]:
    """``score [low, high] (cluster)`` and the marks of a significant difference, in two cells:
    a right-justified cell loses its trailing blanks, so a row without marks would shift."""
    if system not in sub.index:
        return "", ""
    r: Any = sub.loc[system]
    d = _digits(sub["score"])
    mark = ("*" if r.p_bootstrap < alpha else "") + ("†" if r.p_ar < alpha else "")
    cluster = f" ({int(r.cluster)})" if math.isfinite(r.cluster) else " (–)"  # a control
    interval = f"[{_number(r.ci_low, d)}, {_number(r.ci_high, d)}]"
    return f"{_number(r.score, d)} {interval}{cluster}", mark


def comparison_block(ev: Evaluation, max_rows: int) -> Block | None:
    compared = ev.compared
    if compared is None or compared.table.empty:
        return None
    t = compared.table
    metrics = list(dict.fromkeys(t["metric"]))
    chosen = [m for m in AVERAGES if m in metrics] or metrics[:2]
    alpha = compared.config.alpha
    table = _table("System comparison", "system")
    caption = (
        f"score [{round(100 * compared.config.confidence)}% bootstrap interval] (cluster); "
        f"* paired bootstrap, † approximate randomization: p < {alpha:g} vs the baseline; "
        "every column in system_comparison.csv"
    )
    for m in chosen:
        table.add_column(m, justify="right", no_wrap=True)
        table.add_column("", justify="left", no_wrap=True, min_width=2)
    systems = list(dict.fromkeys(t["system"]))
    by_metric = {m: t[t["metric"] == m].set_index("system") for m in chosen}
    for s in systems[:max_rows]:
        cells = [c for m in chosen for c in _comparison_cells(by_metric[m], s, alpha)]
        role = [
            r
            for r, on in (("control", s in ev.roles.controls), ("baseline", s == compared.baseline))
            if on
        ]
        label = printable(s) + (f" ({', '.join(role)})" if role else "")
        table.add_row(Text(label), *cells)
    _more(table, len(systems), max_rows)
    return table, caption


def where_lines(out_dir: Path, run_id: str | None, tracking_uri: str | None) -> list[str]:
    lines = [f"Outputs:      {printable(out_dir.resolve())}"]
    if tracking_uri:
        lines.append(f"MLflow store: {printable(tracking_uri)}  (run {run_id})")
        if not tracking_uri.startswith(("http://", "https://")):  # a SQL store
            lines.append(f"Open it with: mlflow ui --backend-store-uri {printable(tracking_uri)}")
        else:
            lines.append(f"Open it in a browser: {printable(tracking_uri)}")
    return lines


def render_summary(
    ev: Evaluation,
    out_dir: Path,
    run_id: str | None,
    tracking_uri: str | None,
    *,
    tables: bool = True,
) -> str:
    """The summary as plain text, at most WIDTH columns wide."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=WIDTH, color_system=None, highlight=False, emoji=False)
    if tables:
        max_rows = ev.settings.report.max_rows
        console.print()
        console.print(Text(headline(ev)))
        for line in (ev.roles.note(), ev.paraphrase.best if ev.paraphrase else ""):
            if line:
                console.print(Text(line))
        correlations = correlations_block(ev, max_rows)
        # the paraphrase table is the systems' headline; without one, their corpus scores
        headline_block = paraphrase_block(ev, max_rows) or systems_block(ev, max_rows)
        blocks = (
            headline_block,
            correlations,
            comparison_block(ev, max_rows),
        )
        for block in blocks:
            if block is not None:
                console.print()
                console.print(Text(str(block[0].title), style="bold"))
                block[0].title = None
                console.print(block[0])
                console.print(Text(block[1], style="dim"))
        if correlations is None:
            console.print()
            console.print(Text("No human ratings: nothing to correlate."))
        console.print()
    body = buffer.getvalue()
    text = "\n".join(line.rstrip() for line in body.splitlines()) + "\n" if body else ""
    # never wrapped: a path or command cut in two cannot be copied
    return text + "".join(line + "\n" for line in where_lines(out_dir, run_id, tracking_uri))


def headline(ev: Evaluation) -> str:
    t = ev.table
    return (
        f"paraeval {__version__} · {printable(ev.settings.data.name)}: {len(t)} rows, "
        f"{t['item_id'].nunique()} items × {t['system'].nunique()} systems · "
        f"{len(ev.metrics)} metrics"
    )


def print_summary(
    result: Evaluation, out_dir: Path, run_id: str | None, tracking_uri: str | None
) -> None:
    """The summary on stdout; the output folder and the MLflow store are always printed, the
    tables only with ``report.print_tables``."""
    tables = result.settings.report.print_tables
    sys.stdout.write(render_summary(result, out_dir, run_id, tracking_uri, tables=tables))
    sys.stdout.flush()
