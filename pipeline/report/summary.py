"""What the terminal shows: a short summary of a run that fits 100 columns, and the stage status
lines on stderr. The full tables are in the output files; the summary keeps the columns people
read first (group averages, human ratings, the leading metrics) and says how many it left out.
"""

from __future__ import annotations

import io
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from paraeval.pipeline.terminal import Status, printable

if TYPE_CHECKING:
    from paraeval.pipeline.stages.evaluation import Evaluation

__all__ = ["Status", "print_summary", "render_summary"]

WIDTH = 100
AVERAGES = ("syntactic", "semantic")
LOWER = "↓"  # marks a column where lower is better


def _number(value: object, digits: int) -> str:
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return printable(value)
    return "–" if not math.isfinite(v) else f"{v:.{digits}f}"


def _digits(values: pd.Series) -> int:
    finite = pd.to_numeric(values, errors="coerce").abs().dropna()
    return 1 if len(finite) and finite.max() >= 10 else 3


def _header(column: str, higher_is_better: bool | None) -> str:
    name = column.removeprefix("human_")
    return f"{name} {LOWER}" if higher_is_better is False else name


def _table(title: str) -> Table:
    # the title is printed above the table by render_summary: a narrow table would wrap it
    return Table(
        title=title,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
    )


# a table and the note printed under it (as wide as the page, not as the table)
Block = tuple[Table, str]


def _fits(widths: Sequence[int], limit: int = WIDTH) -> bool:
    # each column takes its width plus two characters of padding
    return sum(w + 2 for w in widths) <= limit


def system_columns(ev: Evaluation) -> tuple[list[str], int]:
    """The columns of the system summary: averages and human ratings first, then metrics in the
    order they were configured, as many as fit; and how many columns were left out."""
    systems = ev.systems
    humans = [c for c in systems.columns if c.startswith("human_")]
    averages = [c for c in AVERAGES if c in systems.columns]
    metrics = [
        c
        for c in systems.columns
        if c not in humans
        and c not in averages
        and c != "n_items"
        and not c.endswith("_src")
        and systems[c].notna().any()
    ]
    name_width = max([len(printable(s)) for s in systems.index] + [6])
    chosen: list[str] = []
    widths = [name_width]
    for c in averages + humans + metrics:
        w = max(len(c.removeprefix("human_")) + 2, 7)
        if not _fits([*widths, w]):
            break
        chosen.append(c)
        widths.append(w)
    order = [c for c in metrics if c in chosen] + [c for c in averages + humans if c in chosen]
    left_out = sum(1 for c in systems.columns if c != "n_items" and c not in chosen)
    return order, left_out


def systems_block(ev: Evaluation, max_rows: int) -> Block:
    systems = ev.systems
    columns, left_out = system_columns(ev)
    info = ev.aggregated.columns if ev.aggregated is not None else {}
    caption = (
        f"{left_out} more columns in system_scores.csv; {LOWER} = lower is better"
        if left_out
        else f"{LOWER} = lower is better"
    )
    table = _table(f"Systems ({len(systems)}, corpus level)")
    table.add_column("system", no_wrap=True)
    for c in columns:
        hib = info[c].higher_is_better if c in info else None
        table.add_column(_header(c, hib), justify="right", no_wrap=True)
    digits = {c: _digits(systems[c]) for c in columns}
    for name, row in systems.head(max_rows).iterrows():
        table.add_row(Text(printable(name)), *[_number(row[c], digits[c]) for c in columns])
    if len(systems) > max_rows:
        table.add_row(Text(f"… {len(systems) - max_rows} more"), *[""] * len(columns))
    return table, caption


def _correlation_cell(value: float, level: str, n: float) -> str:
    """``+0.812``; at the system level with its number of systems, ``+1.000 n=3``."""
    if not math.isfinite(float(value)):
        return "n/a"
    text = f"{float(value):+.3f}"
    if level == "system" and math.isfinite(float(n)):
        text += f" n={int(n)}"
    return text


def correlations_block(ev: Evaluation, max_rows: int) -> Block | None:
    corr = ev.correlations
    if corr.empty:
        return None
    coefficient = str(corr["coefficient"].iloc[0])
    sub = corr[corr["coefficient"] == coefficient]
    wide = sub.pivot_table(
        index="metric", columns=["aspect", "level"], values="value", aggfunc="first", sort=False
    )
    n_by_level = sub.groupby("level", sort=False)["n"].max() if "n" in sub.columns else None
    others = [c for c in dict.fromkeys(corr["coefficient"]) if c != coefficient]
    caption = "intervals, p-values" + (f", {', '.join(others)}" if others else "")
    caption += " in correlations.csv"
    if n_by_level is not None and "system" in n_by_level.index:
        caption += f"; system level on n = {int(n_by_level['system'])} systems"
    table = _table(f"Correlation with human ratings ({coefficient})")
    info = ev.aggregated.columns if ev.aggregated is not None else {}
    table.add_column("metric", no_wrap=True)
    for aspect, level in wide.columns:
        table.add_column(f"{aspect.removeprefix('human_')}\n{level}", justify="right")
    # a system-level value on a handful of systems says little: its n stands beside it
    n_wide = (
        sub.pivot_table(
            index="metric", columns=["aspect", "level"], values="n", aggfunc="first", sort=False
        )
        if "n" in sub.columns
        else pd.DataFrame()
    ).reindex(index=wide.index, columns=wide.columns)
    for metric, row in wide.head(max_rows).iterrows():
        hib = info[str(metric)].higher_is_better if str(metric) in info else None
        cells = [
            _correlation_cell(v, level, n)
            for v, (_, level), n in zip(
                row.to_numpy(), wide.columns, n_wide.loc[metric].to_numpy(), strict=True
            )
        ]
        table.add_row(Text(_header(str(metric), hib)), *cells)
    if len(wide) > max_rows:
        table.add_row(Text(f"… {len(wide) - max_rows} more"), *[""] * len(wide.columns))
    return table, caption


def comparison_block(ev: Evaluation, max_rows: int) -> Block | None:
    compared = ev.compared
    if compared is None or compared.table.empty:
        return None
    t = compared.table
    metrics = list(dict.fromkeys(t["metric"]))
    chosen = [m for m in AVERAGES if m in metrics] or metrics[:2]
    alpha = compared.config.alpha
    table = _table("System comparison")
    caption = (
        f"score [{round(100 * compared.config.confidence)}% bootstrap interval] (cluster); "
        f"* paired bootstrap, † approximate randomization: p < {alpha:g} vs the baseline; "
        "every column in system_comparison.csv"
    )
    table.add_column("system", no_wrap=True)
    for m in chosen:
        table.add_column(m, justify="right", no_wrap=True)
    systems = list(dict.fromkeys(t["system"]))
    by_metric = {m: t[t["metric"] == m].set_index("system") for m in chosen}
    for s in systems[:max_rows]:
        cells = []
        for m in chosen:
            sub = by_metric[m]
            if s not in sub.index:
                cells.append("")
                continue
            r = sub.loc[s]
            d = _digits(sub["score"])
            mark = ("*" if r.p_bootstrap < alpha else "") + ("†" if r.p_ar < alpha else "")
            cl = f" ({int(r.cluster)})" if math.isfinite(r.cluster) else ""
            cells.append(
                f"{_number(r.score, d)} [{_number(r.ci_low, d)}, {_number(r.ci_high, d)}]"
                f"{cl}{mark or '  '}"
            )
        label = printable(s) + (" (baseline)" if s == compared.baseline else "")
        table.add_row(Text(label), *cells)
    if len(systems) > max_rows:
        table.add_row(Text(f"… {len(systems) - max_rows} more"), *[""] * len(chosen))
    return table, caption


def where_lines(out_dir: Path, run_id: str | None, tracking_uri: str | None) -> list[str]:
    lines = [f"Outputs:      {printable(out_dir.resolve())}"]
    if tracking_uri:
        lines.append(f"MLflow store: {printable(tracking_uri)}  (run {run_id})")
        if tracking_uri.startswith("sqlite:"):
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
    width: int = WIDTH,
) -> str:
    """The summary as plain text, at most ``width`` columns wide."""
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=width, color_system=None, highlight=False, emoji=False, soft_wrap=False
    )
    if tables:
        max_rows = ev.settings.report.max_rows
        console.print()
        console.print(Text(headline(ev)))
        correlations = correlations_block(ev, max_rows)
        for block in (systems_block(ev, max_rows), correlations, comparison_block(ev, max_rows)):
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
    from paraeval import __version__

    table = ev.table
    data = ev.settings.data
    n_metrics = len(ev.metrics)
    return (
        f"paraeval {__version__} · {printable(data.name)}: {len(table)} rows, "
        f"{table['item_id'].nunique()} items × {table['system'].nunique()} systems · "
        f"{n_metrics} metrics"
    )


def print_summary(
    result: Evaluation, out_dir: Path, run_id: str | None, tracking_uri: str | None
) -> None:
    """The summary on stdout; the output folder and the MLflow store are always printed, the
    tables only with ``report.print_tables``."""
    text = render_summary(
        result, out_dir, run_id, tracking_uri, tables=result.settings.report.print_tables
    )
    sys.stdout.write(text)
    sys.stdout.flush()
