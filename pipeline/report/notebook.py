"""An evaluation as a notebook shows it: a repr of one line (what was evaluated, where its files
are) and a compact HTML summary (the systems ranked, the metric that agrees best with each human
aspect), small tables only; the figures and full tables are in ``report.html``."""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from paraeval.pipeline.names import show
from paraeval.pipeline.report.plots import AVERAGES
from paraeval.pipeline.stages.headline import RANKED_GROUPS, best_agreeing, headline_coefficient

if TYPE_CHECKING:
    from paraeval.pipeline.stages.evaluation import Evaluation

MAX_SYSTEMS = 10
MAX_NAMES = 6  # metric ids named in the repr; the others counted


def short_repr(ev: Evaluation, out_dir: Path | None) -> str:
    t = ev.table
    data = ev.settings.data
    path = data.options.get("path")
    # a file is named by its name: "table" says only which loader read it
    shown = f"{data.name}:{Path(str(path)).name}" if isinstance(path, str) and path else data.name
    ids = list(ev.metrics) or [str(k) for k in ev.settings.metrics]
    names = ", ".join(ids[:MAX_NAMES]) + (
        f", +{len(ids) - MAX_NAMES} more" if len(ids) > MAX_NAMES else ""
    )
    return (
        f"Evaluation(data={show(shown)!r}, systems={t['system'].nunique()}, "
        f"items={t['item_id'].nunique()}, metrics=[{names}], "
        f"out_dir={show(out_dir) if out_dir is not None else None!r})"
    )


def ranked_systems(ev: Evaluation) -> pd.DataFrame:
    """The systems by their first group average (higher is better: averages are of normalized,
    direction-aligned scores), with the other averages and the mean human ratings; the controls
    last, unranked (rank "control")."""
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
    """For each human aspect (row) and level (column), the metric whose scores agree best with
    the ratings under the headline coefficient, and its correlation: a lower-is-better metric
    (WMD, TER) agrees when its correlation is negative, so it is ranked with the sign turned."""
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
    parts = [f"<p><code>{html.escape(short_repr(ev, out_dir))}</code></p>"]
    more = len(ranked) - MAX_SYSTEMS
    parts.append(
        f"<p><b>Systems</b>{f' (top {MAX_SYSTEMS} of {len(ranked)})' if more > 0 else ''}</p>"
    )
    parts.append(ranked.head(MAX_SYSTEMS).to_html(float_format="{:.3f}".format, border=0))
    best = best_metrics(ev)
    if best.empty:
        parts.append("<p>No human ratings: nothing to correlate.</p>")
    else:
        parts.append("<p><b>Metric that agrees best with each human aspect</b></p>")
        parts.append(best.to_html(border=0))
    return "\n".join(parts)
