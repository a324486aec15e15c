"""The run's summary: first-read columns in 100 terminal columns; a repr and HTML in notebooks."""

from __future__ import annotations

import html
import io
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from paraeval.pipeline.names import show
from paraeval.pipeline.report.plots import AVERAGES, LOWER_MARK
from paraeval.pipeline.report.tables import digits, figure_style, ranked_columns, role_label
from paraeval.pipeline.stages.compare import comparison_order
from paraeval.pipeline.stages.correlate import RANKED_GROUPS, best_agreeing, headline_coefficient
from paraeval.pipeline.terminal import Status, printable
from paraeval.pipeline.version import __version__

if TYPE_CHECKING:
    from paraeval.pipeline.stages.evaluation import Evaluation

__all__ = ["Status", "html_summary", "print_summary", "render_summary", "short_repr"]

WIDTH = 100
MAX_SYSTEMS = 10  # in a notebook
MAX_NAMES = 6  # metric ids named in the repr; the others counted


def _number(value: object, digits: int) -> str:
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return printable(value)
    return "–" if not math.isfinite(v) else f"{v:.{digits}f}"


def _header(ev: Evaluation, column: str) -> str:
    info = ev.aggregated.columns if ev.aggregated is not None else {}
    lower = column in info and info[column].higher_is_better is False
    return column.removeprefix("human_") + (f" {LOWER_MARK}" if lower else "")


def _table(title: str, first: str, right: Iterable[str] = ()) -> Table:
    # the title is printed above the table by render_summary: a narrow table would wrap it
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column(first, no_wrap=True)
    for header in right:
        table.add_column(header, justify="right", no_wrap=True)
    return table


def _more(table: Table, rows: int, max_rows: int) -> None:
    if rows > max_rows:
        table.add_row(Text(f"… {rows - max_rows} more"), *[""] * (len(table.columns) - 1))


Block = tuple[Table, str]  # a table and its note, as wide as the page, not as the table


def system_columns(ev: Evaluation) -> tuple[list[str], int]:
    """The columns that fit, averages and human ratings chosen first; and how many were left out."""
    systems = ev.systems
    humans = [c for c in systems.columns if c.startswith("human_")]
    averages = [c for c in AVERAGES if c in systems.columns]
    shown = [c for c in systems.columns if not c.endswith("_src") and systems[c].notna().any()]
    metrics = [c for c in shown if c not in humans and c not in averages and c != "n_items"]
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
    view = ev.paraphrase
    if view is None:
        return None
    t = view.table
    humans = [c for c in t.columns if str(c).startswith("human_")]
    columns = ["adequacy", "diversity", *(["edit_distance"] if "edit_distance" in t else [])]
    headers = [c.replace("edit_distance", "edit") for c in columns]
    headers += [view.paraphrase, "cluster"] if view.paraphrase else []
    headers += ["copy", *(c.removeprefix("human_") for c in humans)]
    table = _table("Paraphrase: meaning kept and wording changed", "system", headers)
    places = {c: digits(t[c]) for c in [*columns, *humans]}
    for _, r in t.head(max_rows).iterrows():
        name = printable(r["system"])
        name += " (control)" if r["control"] else (" ◆" if r["frontier"] else "")
        cells = [_number(r[c], places[c]) for c in columns]
        if view.paraphrase:
            cluster = str(int(r["cluster"])) if math.isfinite(r["cluster"]) else "–"
            cells += [_number(r["paraphrase"], 3), cluster]
        cells.append(f"{r['copy_rate']:.0%}" if math.isfinite(r["copy_rate"]) else "–")
        cells += [_number(r[c], places[c]) for c in humans]
        table.add_row(Text(name), *cells)
    _more(table, len(t), max_rows)
    against = "source" if view.reference_free else "references"
    diversity = "PINC" if view.diversity == "pinc" else "100 - self_bleu"
    edit = ", edit (ParaScore's)" if "edit_distance" in t else ""
    return table, (
        f"adequacy: {view.adequacy} vs the {against}; diversity ({diversity}){edit} from the "
        "source\n◆ frontier: none better on both axes beyond the intervals; controls unranked; "
        "paraphrase.csv"
    )


def systems_block(ev: Evaluation, max_rows: int) -> Block:
    systems = ev.systems
    columns, left_out = system_columns(ev)
    more = f"{left_out} more columns in system_scores.csv; " if left_out else ""
    headers = [_header(ev, c) for c in columns]
    table = _table(f"Systems ({len(systems)}, corpus level)", "system", headers)
    places = {c: digits(systems[c]) for c in columns}
    for name, row in systems.head(max_rows).iterrows():
        label = printable(name) + (" (control)" if name in ev.roles.controls else "")
        table.add_row(Text(label), *[_number(row[c], places[c]) for c in columns])
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
    n_by_level = sub.groupby("level", sort=False)["n"].max()
    others = [c for c in dict.fromkeys(corr["coefficient"]) if c != coefficient]
    caption = f"intervals, p-values{''.join(f', {c}' for c in others)} in correlations.csv"
    if "system" in n_by_level.index:
        caption += f"; system level on n = {int(n_by_level['system'])} systems"
    table = _table(f"Correlation with human ratings ({coefficient})", "metric")
    for aspect, level in wide.columns:
        table.add_column(f"{aspect.removeprefix('human_')}\n{level}", justify="right")
    # a system-level value on a handful of systems says little: its n stands beside it
    n_wide = sub.pivot_table(values="n", **pivot).reindex(index=wide.index, columns=wide.columns)
    for metric, row in wide.head(max_rows).iterrows():
        cells = [
            _correlation_cell(v, level, n)
            for v, (_, level), n in zip(row, wide.columns, n_wide.loc[metric], strict=True)
        ]
        table.add_row(Text(_header(ev, str(metric))), *cells)
    _more(table, len(wide), max_rows)
    return table, caption


def _comparison_cells(sub: pd.DataFrame, system: str, alpha: float) -> tuple[str, str]:
    """Two cells, the marks apart: a right-justified cell loses its trailing blanks."""
    if system not in sub.index:
        return "", ""
    r: Any = sub.loc[system]
    d = digits(sub["score"])
    mark = ("*" if r.p_bootstrap < alpha else "") + ("†" if r.p_ar < alpha else "")
    cluster = f" ({int(r.cluster)})" if math.isfinite(r.cluster) else " (–)"  # a control
    interval = f"[{_number(r.ci_low, d)}, {_number(r.ci_high, d)}]"
    return f"{_number(r.score, d)} {interval}{cluster}", mark


def comparison_block(ev: Evaluation, max_rows: int) -> Block | None:
    compared = ev.compared
    if compared is None or compared.table.empty:
        return None
    t = compared.table
    chosen = ranked_columns(ev)
    alpha, controls, baseline = compared.config.alpha, ev.roles.controls, compared.baseline
    table = _table("System comparison", "system")
    caption = (
        f"score [{round(100 * compared.config.confidence)}% bootstrap interval] (cluster); "
        f"* paired bootstrap, † approximate randomization: p < {alpha:g} vs the baseline; "
        "every column in system_comparison.csv"
    )
    for m in chosen:
        table.add_column(m, justify="right", no_wrap=True)
        table.add_column("", justify="left", no_wrap=True, min_width=2)
    # the page's and the ranking figure's order
    systems = comparison_order(t, figure_style(ev).source)
    by_metric = {m: t[t["metric"] == m].set_index("system") for m in chosen}
    for s in systems[:max_rows]:
        cells = [c for m in chosen for c in _comparison_cells(by_metric[m], s, alpha)]
        table.add_row(Text(printable(role_label(s, controls, baseline))), *cells)
    _more(table, len(systems), max_rows)
    return table, caption


def render_summary(
    ev: Evaluation,
    out_dir: Path,
    run_id: str | None,
    tracking_uri: str | None,
    *,
    tables: bool = True,
) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=WIDTH, color_system=None, highlight=False, emoji=False)
    if tables:
        max_rows = ev.settings.report.max_rows
        t = ev.table
        console.print()
        counts = f"{len(t)} rows, {t['item_id'].nunique()} items × {t['system'].nunique()} systems"
        name = printable(ev.settings.data.name)
        console.print(
            Text(f"paraeval {__version__} · {name}: {counts} · {len(ev.metrics)} metrics")
        )
        for line in (ev.roles.note(), ev.paraphrase.best if ev.paraphrase else ""):
            if line:
                console.print(Text(line))
        correlations = correlations_block(ev, max_rows)
        headline_block = paraphrase_block(ev, max_rows) or systems_block(ev, max_rows)
        for block in (headline_block, correlations, comparison_block(ev, max_rows)):
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
    lines = [f"Outputs:      {printable(out_dir.resolve())}"]
    if tracking_uri:
        lines.append(f"MLflow store: {printable(tracking_uri)}  (run {run_id})")
        if not tracking_uri.startswith(("http://", "https://")):  # a SQL store
            lines.append(f"Open it with: mlflow ui --backend-store-uri {printable(tracking_uri)}")
        else:
            lines.append(f"Open it in a browser: {printable(tracking_uri)}")
    return text + "".join(line + "\n" for line in lines)


def print_summary(
    result: Evaluation, out_dir: Path, run_id: str | None, tracking_uri: str | None
) -> None:
    """The summary on stdout; the tables only with ``report.print_tables``."""
    tables = result.settings.report.print_tables
    sys.stdout.write(render_summary(result, out_dir, run_id, tracking_uri, tables=tables))
    sys.stdout.flush()


def short_repr(ev: Evaluation, out_dir: Path | None) -> str:
    t = ev.table
    data = ev.settings.data
    path = data.options.get("path")
    # a file is named by its name: "table" says only which loader read it
    shown = f"{data.name}:{Path(str(path)).name}" if isinstance(path, str) and path else data.name
    ids = list(ev.metrics) or [str(k) for k in ev.settings.metrics]
    more = f", +{len(ids) - MAX_NAMES} more" if len(ids) > MAX_NAMES else ""
    names = ", ".join(ids[:MAX_NAMES]) + more
    return (
        f"Evaluation(data={show(shown)!r}, systems={t['system'].nunique()}, "
        f"items={t['item_id'].nunique()}, metrics=[{names}], "
        f"out_dir={show(out_dir) if out_dir is not None else None!r})"
    )


def ranked_systems(ev: Evaluation) -> pd.DataFrame:
    """By the first group average (normalized, higher is better); the controls last, unranked."""
    systems = ev.systems
    averages = [c for c in AVERAGES if c in systems.columns and systems[c].notna().any()]
    humans = [c for c in systems.columns if c.startswith("human_")]
    table = systems[averages + humans]
    if averages:
        table = table.sort_values(averages[0], ascending=False)
    controls = table.index.isin(ev.roles.controls)
    table = pd.concat([table[~controls], table[controls]])
    table = table.rename(columns=lambda c: c.removeprefix("human_"))
    ranks: list[int | str] = list(range(1, int((~controls).sum()) + 1))
    table.insert(0, "rank", ranks + ["control"] * int(controls.sum()))
    table.index.name = "system"
    return table


def best_metrics(ev: Evaluation) -> pd.DataFrame:
    """Per aspect and level; a lower-is-better metric agrees by a negative correlation."""
    corr = ev.correlations
    if corr.empty or ev.aggregated is None:
        return pd.DataFrame()
    coefficient = headline_coefficient(ev.settings.correlation, corr["coefficient"])
    info = ev.aggregated.columns
    lower = [c for c, i in info.items() if i.higher_is_better is False]
    ranked = [c for c, i in info.items() if i.group in RANKED_GROUPS]
    best = best_agreeing(corr, coefficient, lower, ranked)
    if best.empty:
        return pd.DataFrame()
    cells = best["metric"] + " " + best["value"].map("{:+.3f}".format)
    table = cells.set_axis(pd.MultiIndex.from_frame(best[["aspect", "level"]])).unstack("level")
    table = table.reindex(columns=list(dict.fromkeys(best["level"])))
    table = table.reindex(index=list(dict.fromkeys(best["aspect"])))
    table.index = table.index.str.removeprefix("human_")
    table.columns.name = coefficient
    return table


def html_summary(ev: Evaluation, out_dir: Path | None) -> str:
    ranked = ranked_systems(ev)
    top = f" (top {MAX_SYSTEMS} of {len(ranked)})" if len(ranked) > MAX_SYSTEMS else ""
    parts = [
        f"<p><code>{html.escape(short_repr(ev, out_dir))}</code></p>",
        f"<p><b>Systems</b>{top}</p>",
        ranked.head(MAX_SYSTEMS).to_html(float_format="{:.3f}".format, border=0),
    ]
    best = best_metrics(ev)
    if best.empty:
        parts.append("<p>No human ratings: nothing to correlate.</p>")
    else:
        parts.append("<p><b>Metric that agrees best with each human aspect</b></p>")
        parts.append(best.to_html(border=0))
    return "\n".join(parts)
