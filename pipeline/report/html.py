"""``report.html``: the run on one self-contained page (tables, figures, signatures, config),
readable offline in a browser. Figures are embedded as data URIs; nothing is fetched."""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from paraeval import __version__
from paraeval.pipeline.files import PLOTS_DIR, REPORT_NAME, atomic_write
from paraeval.pipeline.report.figures import figure_style
from paraeval.pipeline.report.plots import MARKS_NOTE, FigureStyle

if TYPE_CHECKING:
    from paraeval.pipeline.stages.evaluation import Evaluation

_MIME = {".png": "image/png", ".svg": "image/svg+xml"}

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
.meta { color: #555; }
table { border-collapse: collapse; margin: 0.6em 0; font-variant-numeric: tabular-nums; }
th, td { padding: 0.2em 0.6em; border-bottom: 1px solid #eee; text-align: right;
         white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
th { background: #f5f5f5; position: sticky; top: 0; }
.scroll { overflow-x: auto; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 12px; }
td.sig { text-align: left; font-family: monospace; font-size: 12px; }
.note { color: #555; font-size: 0.9em; }
"""

# Marks every figure with whether it decoded (a test reads the marks from the rendered page).
_SCRIPT = """
window.addEventListener('load', function () {
  document.querySelectorAll('img').forEach(function (img) {
    img.setAttribute('data-loaded', img.complete && img.naturalWidth > 0 ? 'yes' : 'no');
  });
});
"""


def _e(value: object) -> str:
    return html.escape(str(value))


def _cell(value: object) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return "–"
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3f}"
    return _e(value)


def _table(frame: pd.DataFrame, index: bool = True) -> str:
    names = ([frame.index.name or ""] if index else []) + list(frame.columns)
    head = "".join(f"<th>{_e(name)}</th>" for name in names)
    # the values as iterrows gives them (one dtype for the whole frame), without a Series per row
    keys = [f"<td>{_e(key)}</td>" for key in frame.index] if index else [""] * len(frame)
    rows = [
        "<tr>" + key + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>"
        for key, row in zip(keys, frame.to_numpy().tolist(), strict=True)
    ]
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _style(ev: Evaluation) -> FigureStyle:
    return figure_style(ev) if ev.aggregated is not None else FigureStyle()


def _interval_cell(value: float, low: float, high: float) -> str:
    if not math.isfinite(value):
        return "–"
    interval = f" [{low:+.2f}, {high:+.2f}]" if math.isfinite(low) and math.isfinite(high) else ""
    return f"{value:+.3f}{interval}"


def _correlations(ev: Evaluation) -> str:
    corr = ev.correlations
    if corr.empty:
        return "<p>No human ratings: nothing to correlate.</p>"
    parts, label = [], _style(ev).label
    for coefficient, sub in corr.groupby("coefficient", sort=False):
        values = (sub[c].astype(float) for c in ("value", "ci_low", "ci_high"))
        sub["cell"] = [_interval_cell(*v) for v in zip(*values, strict=True)]
        wide = sub.pivot_table(
            index="metric", columns=["aspect", "level"], values="cell", aggfunc="first", sort=False
        )
        ns = sub.groupby(["aspect", "level"], sort=False)["n"].max() if "n" in sub else None
        wide.columns = [
            f"{a.removeprefix('human_')} / {lv}"
            + (f" (n = {int(ns[(a, lv)])})" if ns is not None and lv != "segment" else "")
            for a, lv in wide.columns
        ]
        wide.index = pd.Index([label(str(m)) for m in wide.index], name="metric")
        parts.append(f"<h3>{_e(coefficient)}</h3>" + _table(wide))
    return "".join(parts)


def _figures(out: Path) -> Iterator[bytes]:
    """The figures' part of the page, piece by piece: several megabytes of images are encoded
    straight into the file, never joined into one text with the page."""
    plots = out / PLOTS_DIR
    files = sorted(p for p in plots.glob("*") if p.is_file()) if plots.is_dir() else []
    if not files:
        yield b"<p>No figures were drawn.</p>"
        return
    for p in files:
        mime = _MIME.get(p.suffix)
        if mime is None:  # PDF: browsers do not show it inline everywhere; link it
            yield f'<p><a href="plots/{_e(p.name)}">{_e(p.name)}</a> (PDF)</p>'.encode()
            continue
        yield f'<figure><img alt="{_e(p.stem)}" src="data:{mime};base64,'.encode()
        yield base64.b64encode(p.read_bytes())
        yield f'"><figcaption>{_e(p.name)}</figcaption></figure>'.encode()


def page_around_figures(ev: Evaluation) -> tuple[str, str]:
    """The page before and after its figures, which :func:`write_html` puts between them."""
    t = ev.table
    data = ev.settings.data
    systems = ev.systems.copy()
    if "n_items" in systems:
        systems["n_items"] = systems["n_items"].astype("Int64")
    systems.columns = [_style(ev).label(str(c)) for c in systems.columns]
    comparison = ev.comparison
    config = "\n".join(f"{k}: {v}" for k, v in sorted(ev.settings.params.items()))
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    sections = [
        f"<h1>paraeval report: {_e(data.name)}</h1>",
        f'<p class="meta">paraeval {_e(__version__)} · {len(t)} rows, '
        f"{t['item_id'].nunique()} items × {t['system'].nunique()} systems · "
        f"{len(ev.metrics)} metrics · written {when}</p>",
        f'<p class="note">{_e(MARKS_NOTE)}</p>',
        "<h2>Systems</h2>",
        '<p class="note">Corpus-level scores, group averages and mean human ratings '
        "(system_scores.csv).</p>",
        _table(systems),
        "<h2>Correlation with human ratings</h2>",
        '<p class="note">value [bootstrap interval]; p-values in correlations.csv.</p>',
        _correlations(ev),
        "<h2>System comparison</h2>",
        _table(comparison, index=False)
        if not comparison.empty
        else "<p>No comparison was computed.</p>",
        "<h2>Figures</h2>",
        _FIGURES,
        "<h2>Signatures</h2>",
        '<div class="scroll"><table><thead><tr><th>column</th><th>group</th>'
        "<th>higher is better</th><th>signature</th></tr></thead><tbody>"
        + "".join(
            f"<tr><td>{_e(r.column)}</td><td>{_e(r.group)}</td>"
            f'<td>{_e(r.higher_is_better)}</td><td class="sig">{_e(r.signature)}</td></tr>'
            for r in ev.signature_table().itertuples(index=False)
        )
        + "</tbody></table></div>",
        "<h2>Configuration</h2>",
        f"<pre>{_e(config)}</pre>",
    ]
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>paraeval report: {_e(data.name)}</title>"
        f"<style>{_STYLE}</style><script>{_SCRIPT}</script></head><body>"
        + "\n".join(sections)
        + "</body></html>\n"
    )
    head, _, tail = page.partition(_FIGURES)
    return head, tail


# where the figures go: a tag, which no escaped text of the page can hold
_FIGURES = "<paraeval-figures/>"


def write_html(ev: Evaluation, out: Path, around: tuple[str, str] | None = None) -> Path:
    """``report.html`` in ``out`` with the figures there now; ``around``: the page rendered
    before without them (:func:`page_around_figures`)."""
    path = out / REPORT_NAME
    head, tail = around or page_around_figures(ev)

    def write(p: Path) -> None:
        with p.open("wb") as f:
            f.write(head.encode("utf-8"))
            f.writelines(_figures(out))
            f.write(tail.encode("utf-8"))

    atomic_write(path, write)
    return path
