"""``report.html``: the run on one self-contained page, answers first, then the details. Rendered
from the jinja2 template in ``templates/``, tables by pandas' ``Styler``; figures are embedded as
data URIs and the CSS inline, so the page reads offline: nothing is fetched."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2
from markupsafe import Markup

from paraeval.pipeline.files import PLOTS_DIR, REPORT_NAME, atomic_write
from paraeval.pipeline.names import slug
from paraeval.pipeline.report import tables
from paraeval.pipeline.report.figures import figure_style
from paraeval.pipeline.report.human_plots import scatter_columns
from paraeval.pipeline.report.plots import COEFFICIENT_NAMES, MARKS_NOTE
from paraeval.pipeline.report.tables import agreement, alpha_choice, ranked_columns
from paraeval.pipeline.stages.headline import headline_coefficient
from paraeval.pipeline.version import __version__

if TYPE_CHECKING:
    from paraeval.pipeline.stages.evaluation import Evaluation

_MIME = {".png": "image/png", ".svg": "image/svg+xml"}
TEMPLATES = Path(__file__).parent / "templates"

# Marks every figure with whether it decoded (a test reads the marks from the rendered page).
_SCRIPT = """
window.addEventListener('load', function () {
  document.querySelectorAll('img').forEach(function (img) {
    img.setAttribute('data-loaded', img.complete && img.naturalWidth > 0 ? 'yes' : 'no');
  });
});
"""


HEADLINE_FIGURE = "paraphrase_frontier"


def _headline_figure(ev: Evaluation, out: Path) -> Markup:
    """The frontier figure, shown beside the paraphrase table (a click opens the file)."""
    found = sorted((out / PLOTS_DIR).glob(f"{HEADLINE_FIGURE}.*"))
    if not found:
        return Markup("")
    caption = html.escape(_captions(ev)[HEADLINE_FIGURE])
    attrs = ' class="headline" id="frontier"'
    return Markup(b"".join(_figure(found[0], caption, attrs, link=True)).decode("utf-8"))


def _paraphrase_note(ev: Evaluation) -> str:
    view = ev.paraphrase
    if view is None:
        return ""
    against = "the source" if view.reference_free else "the references"
    diversity = "PINC" if view.diversity == "pinc" else "100 − self-BLEU"
    parts = [
        f"adequacy: {view.adequacy}, similarity to {against} (meaning kept)",
        f"diversity: {diversity}, distance from the source (0 = a copy)",
    ]
    if "edit_distance" in view.table:
        parts.append("edit_distance: ParaScore's character edit distance to the source")
    if view.paraphrase:
        parts.append(f"{view.paraphrase} weighs both at once; its clusters rank the systems")
    return (
        "; ".join(parts) + ". Frontier: no ranked system is better on both axes of the figure "
        "beyond the intervals. Controls are shown apart and never ranked (paraphrase.csv)."
    )


def _captions(ev: Evaluation) -> dict[str, str]:
    """Each figure's caption by file stem, in the page's order: systems, metrics, iBLEU's α."""
    captions = {
        HEADLINE_FIGURE: "Each system's adequacy against its distance from the source, with "
        "their intervals; the frontier and the controls marked, ParaScore's threshold drawn. "
        "Click to enlarge.",
        "system_ranking": "The systems on every compared column, with their bootstrap "
        "intervals and significance clusters.",
    }
    corr = ev.correlations
    if not corr.empty:
        name = headline_coefficient(ev.settings.correlation, corr["coefficient"])
        captions["correlation_heatmap"] = (
            f"{COEFFICIENT_NAMES.get(name, name)} of every metric with every human rating at "
            "every level."
        )
    if ev.aggregated is not None:
        agg = ev.aggregated
        for metric in scatter_columns(agg.segments, list(agg.columns)):
            for aspect in ev.aspects:
                captions[f"scatter_{slug(metric)}_{slug(aspect)}"] = (
                    f"{metric} against the human {aspect.removeprefix('human_')} rating, "
                    "segment by segment, with each system's mean."
                )
    captions["alpha_curve"] = (
        "iBLEU's agreement with the human ratings as α varies, on the dev and test halves of "
        "the items."
    )
    return captions


_WIDE_FIGURES = frozenset({"system_ranking", "correlation_heatmap"})


def _figures(ev: Evaluation, out: Path) -> Iterator[bytes]:
    """The figures' part of the page in the story's order, piece by piece: several megabytes of
    images are encoded straight into the file, never joined into one text with the page."""
    plots = out / PLOTS_DIR
    # the headline figure is shown with the answers
    files = [p for p in plots.glob("*") if p.is_file() and p.stem != HEADLINE_FIGURE]
    if not files:
        yield b"<p>No figures were drawn.</p>"
        return
    captions = _captions(ev)
    order = {stem: i for i, stem in enumerate(captions)}
    yield b'<div class="figures">'
    for p in sorted(files, key=lambda p: (order.get(p.stem, len(order)), p.name)):
        caption = html.escape(captions.get(p.stem, p.stem.replace("_", " ")))
        # the many-panel figures take the page's width; the others go two to a row
        yield from _figure(p, caption, ' class="wide"' if p.stem in _WIDE_FIGURES else "")
    yield b"</div>"


def _figure(p: Path, caption: str, attrs: str = "", link: bool = False) -> Iterator[bytes]:
    """One figure of the page, piece by piece: a PNG or SVG embedded as a data URI (``link``:
    a click opens the file), a PDF linked (browsers do not all show it inline)."""
    href = f"plots/{html.escape(p.name)}"
    mime = _MIME.get(p.suffix)
    if mime is None:
        yield f'<p>{caption} <a href="{href}">{html.escape(p.name)}</a> (PDF)</p>'.encode()
        return
    opening = f'<a href="{href}">' if link else ""
    yield f'<figure{attrs}>{opening}<img alt="{caption}" src="data:{mime};base64,'.encode()
    yield base64.b64encode(p.read_bytes())
    yield f'">{"</a>" if link else ""}<figcaption>{caption}</figcaption></figure>'.encode()


def page_around_figures(ev: Evaluation, out: Path) -> tuple[str, str]:
    """The page before and after its figures, which :func:`write_html` puts between them."""
    t = ev.table
    style = figure_style(ev)
    agree = agreement(ev)
    compare = ev.compared
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    coefficient = COEFFICIENT_NAMES.get(agree.coefficient, agree.coefficient)
    clusters = (
        f"clusters from the {agree.method} test (p < {agree.alpha:g}): metrics in one cluster "
        "do not agree significantly differently"
        if agree.method
        else "no significance test was run (correlation.significance.enabled)"
    )
    choice = alpha_choice(ev)

    def by_aspect(best: bool) -> list[tuple[str, Markup]]:
        return [
            (a.removeprefix("human_"), tables.agreement_table(agree, a, style, best))
            for a in agree.by_aspect
        ]

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    page = environment.get_template("report.html.j2").render(
        name=ev.settings.data.name,
        css=Markup((TEMPLATES / "report.css").read_text(encoding="utf-8")),
        script=Markup(_SCRIPT),
        meta=f"paraeval {__version__} · {len(t)} rows, {t['item_id'].nunique()} items × "
        f"{t['system'].nunique()} systems · {len(ev.metrics)} metrics · written {when}",
        marks_note=MARKS_NOTE,
        reference_note=ev.roles.note(),
        best_line=ev.paraphrase.best if ev.paraphrase is not None else "",
        paraphrase=tables.paraphrase_table(ev),
        paraphrase_note=_paraphrase_note(ev),
        frontier=_headline_figure(ev, out),
        rankings=tables.ranking_tables(ev, style, ranked_columns(ev)),
        confidence=round(100 * compare.config.confidence) if compare else 95,
        compare_alpha=f"{compare.config.alpha:g}" if compare else "",
        baseline=compare.baseline if compare else "",
        agreement=by_aspect(best=True),
        agreement_note=f"{coefficient} at the {agree.level} level with its bootstrap "
        f"interval, ranked by agreement whatever a metric's direction (a lower-is-better "
        f"metric's negative correlation counts as agreement); {clusters}.",
        alpha_choice=tables.table(choice) if not choice.empty else None,
        systems=tables.system_tables(ev, style),
        comparison=tables.comparison_tables(ev, style),
        correlations=tables.correlation_tables(ev, agree.coefficient, style),
        with_controls=tables.controls_tables(ev, agree.coefficient, style),
        controls=", ".join(ev.roles.controls),
        headline=agree.coefficient,
        significance=by_aspect(best=False) if agree.method else [],
        significance_note=f"Every metric ranked by its agreement with each rating "
        f"({coefficient}, {agree.level} level), its cluster, and the {agree.method} test's "
        f"p-value against the best metric and against the next one (sacrebleu's format, * "
        f"p ≤ {agree.alpha:g}); every pair in significance.csv.",
        humans=tables.human_table(ev),
        figures=Markup(_FIGURES),
        signatures=tables.signature_table(ev),
        config="\n".join(f"{k}: {v}" for k, v in sorted(ev.settings.params.items())),
        n_settings=len(ev.settings.params),
    )
    head, _, tail = page.partition(_FIGURES)
    return head, tail


# where the figures go: a tag, which no escaped text of the page can hold
_FIGURES = "<paraeval-figures/>"


def write_html(ev: Evaluation, out: Path) -> Path:
    """``report.html`` in ``out``, with the figures there now."""
    path = out / REPORT_NAME
    head, tail = page_around_figures(ev, out)

    def write(p: Path) -> None:
        with p.open("wb") as f:
            f.write(head.encode("utf-8"))
            f.writelines(_figures(ev, out))
            f.write(tail.encode("utf-8"))

    atomic_write(path, write)
    return path
