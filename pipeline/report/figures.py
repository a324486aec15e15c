"""Figures drawn in forked children (copy-on-write, die with the run); a report.html that reads
offline (figures as data URIs, CSS inline)."""

from __future__ import annotations

import base64
import gc
import html
import logging
import os
import re
import signal
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import jinja2
from markupsafe import Markup

from paraeval.pipeline.errors import RunContext
from paraeval.pipeline.files import PLOTS_DIR, REPORT_NAME, atomic_write
from paraeval.pipeline.lifetime import die_with_parent
from paraeval.pipeline.names import slug
from paraeval.pipeline.report import tables
from paraeval.pipeline.report.plots import (
    COEFFICIENT_NAMES,
    MARKS_NOTE,
    PNG_DPI,
    averages_first,
    correlation_heatmap,
    drawn,
    metric_vs_human,
    plot_alpha_curve,
    scatter_columns,
)
from paraeval.pipeline.report.ranking import frontier_plot, ranking_plot
from paraeval.pipeline.report.tables import (
    agreement,
    alpha_choice,
    figure_style,
    ranked_columns,
)
from paraeval.pipeline.stages.correlate import headline_coefficient
from paraeval.pipeline.stages.evaluation import Evaluation, write_tables
from paraeval.pipeline.version import __version__

HEATMAP_COLUMNS = ["metric", "aspect", "level", "coefficient", "value", "n"]
Plan = list[tuple[Path, partial[bool]]]
log = logging.getLogger(__name__)
_MIME = {".png": "image/png", ".svg": "image/svg+xml"}
TEMPLATES = Path(__file__).parent / "templates"
HEADLINE_FIGURE = "paraphrase_frontier"
PLACED = (HEADLINE_FIGURE, "system_ranking", "correlation_heatmap", "alpha_curve")
# tags no escaped text of the page can hold: where the figures go, streamed from their files
_FIGURE = re.compile(r"<paraeval-figure ([\w-]+)/>")
PX_PER_INCH = 104  # a figure's 7 pt text is 10 px on the page
SCATTER = "scatter"


def figure_plan(ev: Evaluation, out_dir: str | Path) -> Plan:
    style = figure_style(ev)
    agg = ev.aggregated
    assert agg is not None  # figure_style checked it
    draws: list[tuple[str, partial[bool]]] = []
    if not ev.correlations.empty:
        shown = ev.correlations[HEATMAP_COLUMNS]
        headline = headline_coefficient(ev.settings.correlation, shown["coefficient"])
        draw = partial(correlation_heatmap, shown, coefficient=headline, style=style)
        draws.append(("correlation_heatmap", draw))
    for metric in scatter_columns(agg.segments, list(agg.columns)):
        for aspect in ev.aspects:
            draw = partial(metric_vs_human, agg.segments, agg.systems, metric, aspect, style=style)
            draws.append((f"scatter_{slug(metric)}_{slug(aspect)}", draw))
    if ev.paraphrase is not None:
        draws.append((HEADLINE_FIGURE, partial(frontier_plot, ev.paraphrase)))
    if ev.compared is not None:
        draws.append(("system_ranking", partial(ranking_plot, ev.compared, style=style)))
    if ev.alpha_curve is not None:
        draws.append(("alpha_curve", partial(plot_alpha_curve, ev.alpha_curve)))
    plots = Path(out_dir) / PLOTS_DIR
    return [(plots / f"{stem}.{style.fmt}", draw) for stem, draw in draws]


def _draw(plan: Plan) -> list[Path]:
    with warnings.catch_warnings():
        # one system or constant scores give singular axis limits; matplotlib copes and warns
        warnings.simplefilter("ignore", UserWarning)
        return [path for path, draw in plan if drawn(path, draw)]


def write_figures(ev: Evaluation, out_dir: str | Path) -> list[Path]:
    """Draws every figure of ``ev`` into ``out_dir/plots``; returns the files written."""
    return _draw(figure_plan(ev, out_dir))


class Figures:
    """Each figure started in a forked process once its tables exist; :meth:`wait` for all."""

    def __init__(self, out_dir: str | Path, parallel: bool, context: RunContext) -> None:
        self.out_dir = Path(out_dir)
        self.context = context  # told of figures a killed process left missing (exit 4)
        # forked processes die with the run by a Linux-only kernel signal
        self.parallel = parallel and sys.platform == "linux"
        self.started: Plan = []
        self.here: Plan = []  # drawn by wait() where no process can be started
        self.pids: list[int] = []
        self.plans: dict[int, list[Path]] = {}  # each process's figures

    def start_ready(self, ev: Evaluation) -> None:
        """Starts drawing the figures of ``ev``'s tables that are not started yet."""
        if ev.aggregated is None:
            return
        known = {path for path, _ in self.started}
        plan = [(path, draw) for path, draw in figure_plan(ev, self.out_dir) if path not in known]
        if not plan:
            return
        self.started += plan
        if not self.parallel:
            self.here += plan
            return
        for path, _ in plan:
            # a file of an earlier run in this folder would read as drawn
            path.unlink(missing_ok=True)
        pid = _fork(plan)
        self.pids.append(pid)
        self.plans[pid] = [path for path, _ in plan]

    def wait(self) -> list[Path]:
        """Waits for every figure started; the files drawn."""
        try:
            while self.pids:
                code = os.waitstatus_to_exitcode(os.waitpid(self.pids[0], 0)[1])
                plan = self.plans.pop(self.pids.pop(0), [])
                missing = [path.name for path in plan if not path.exists()]
                if code != 0 and missing:
                    how = f"signal {-code}" if code < 0 else f"exit status {code}"
                    self.context.figures_missing.append(self.out_dir)
                    log.warning(
                        "run in %s: the figure process ended with %s; figures missing: %s; "
                        "the tables are written",
                        self.out_dir,
                        how,
                        ", ".join(missing),
                    )
        except BaseException:
            self.stop()  # an interrupt while waiting: the figures are not wanted any more
            raise
        _draw(self.here)
        self.here = []
        return [path for path, _ in self.started if path.exists()]

    def stop(self) -> None:
        """Kills the processes still drawing, and reaps them."""
        while self.pids:
            pid = self.pids.pop()
            self.plans.pop(pid, None)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _fork(plan: Plan) -> int:
    parent = os.getpid()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # else their buffers would be written twice
    pid = os.fork()
    if pid == 0:  # the child: draws and leaves without running the run's exit handlers
        # the collector leaves the run's objects alone: scanning them would copy every shared page
        gc.freeze()
        code = 1
        try:
            die_with_parent(parent)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's to handle
            _draw(plan)
            code = 0
        finally:
            os._exit(code)
    return pid


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
        "their intervals; the frontier and the controls marked, ParaScore's threshold drawn.",
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
    if (agg := ev.aggregated) is not None:
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


def _figures(ev: Evaluation, out: Path, place: str) -> Iterator[bytes]:
    """Piece by piece: megabytes of images are never joined into one text with the page."""
    captions = _captions(ev)
    order = {stem: i for i, stem in enumerate(captions)}
    files = [
        p
        for p in (out / PLOTS_DIR).glob("*")
        if p.is_file() and (p.stem == place or (place == SCATTER and p.stem not in PLACED))
    ]
    for p in sorted(files, key=lambda p: (order.get(p.stem, len(order)), p.name)):
        yield from _figure(p, html.escape(captions.get(p.stem, p.stem.replace("_", " "))))


def _width(p: Path) -> int | None:
    """The figure's width on the page (PX_PER_INCH): shown smaller, its text would not read."""
    head = p.read_bytes()[:2000]
    if p.suffix == ".png":
        return round(int.from_bytes(head[16:20], "big") / PNG_DPI * PX_PER_INCH)
    found = re.search(rb'width="([\d.]+)pt"', head)
    return round(float(found.group(1)) / 72 * PX_PER_INCH) if found else None


def _figure(p: Path, caption: str) -> Iterator[bytes]:
    """A PNG or SVG embedded, a click on it opens the file; a PDF linked: browsers do not all
    show it inline."""
    href = f"plots/{html.escape(p.name)}"
    mime = _MIME.get(p.suffix)
    if mime is None:
        yield f'<p>{caption} <a href="{href}">{html.escape(p.name)}</a> (PDF)</p>'.encode()
        return
    size = f' style="width: {width}px"' if (width := _width(p)) else ""
    image = f'<img alt="{caption}"{size} src="data:{mime};base64,'
    yield f'<figure id="{p.stem}"><a href="{href}">{image}'.encode()
    yield base64.b64encode(p.read_bytes())
    yield f'"></a><figcaption>{caption}</figcaption></figure>'.encode()


def _contents(page: str) -> str:
    """The table of contents: a link to every section and answer the page holds."""
    heads = re.findall(r'<h([23]) id="([\w-]+)">(.*?)</h\1>', page)
    items = "".join(
        f'<li class="h{level}"><a href="#{i}">{title}</a></li>' for level, i, title in heads
    )
    return page.replace("<paraeval-contents/>", f'<nav id="contents"><ol>{items}</ol></nav>')


def page_text(ev: Evaluation) -> str:
    """The page, each figure a tag :func:`write_html` replaces by the figure."""
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
    sig = ev.settings.correlation.significance
    tasks = ", ".join(f"{t.level} {t.coefficient.name}" for t in sig.tasks) if sig else ""

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
        meta=f"paraeval {__version__} · {len(t)} rows, {t['item_id'].nunique()} items × "
        f"{t['system'].nunique()} systems · {len(ev.metrics)} metrics · written {when}",
        marks_note=MARKS_NOTE,
        reference_note=ev.roles.note(),
        best_line=ev.paraphrase.best if ev.paraphrase is not None else "",
        paraphrase=tables.paraphrase_table(ev),
        paraphrase_note=_paraphrase_note(ev),
        figure=lambda place: Markup(f"<paraeval-figure {place}/>"),
        scatter=SCATTER,
        items_note=tables.items_note(ev),
        matrix=tables.comparison_matrix(ev, style),
        rankings=tables.ranking_tables(ev, style, ranked_columns(ev)),
        confidence=round(100 * compare.config.confidence) if compare else 95,
        compare_alpha=f"{compare.config.alpha:g}" if compare else "",
        baseline=compare.baseline if compare else "",
        agreement=by_aspect(best=True),
        agreement_note=f"{coefficient} at the {agree.level} level with its bootstrap "
        f"interval, ranked by agreement whatever a metric's direction (a lower-is-better "
        f"metric's negative correlation counts as agreement); {clusters}.",
        overall=tables.overall_tables(agree, style),
        overall_fold=len(agree.overall) > tables.MAX_BEST * len(agree.by_aspect),
        tasks=tasks,
        alpha_choice=tables.table(choice) if not choice.empty else None,
        systems=tables.system_tables(ev, style),
        comparison=tables.ranking_tables(ev, style, averages_first(ev.comparison["metric"])),
        correlations=tables.correlation_tables(ev, agree.coefficient, style),
        with_controls=tables.controls_tables(ev, agree.coefficient, style),
        controls=", ".join(ev.roles.controls),
        headline=agree.coefficient,
        significance=by_aspect(best=False) if agree.method else [],
        significance_note=f"Every metric ranked by its agreement with each rating "
        f"({coefficient}, {agree.level} level), its cluster, and the {agree.method} test's "
        f"p-value against the best metric and against the next one (sacrebleu's format, * "
        f"p ≤ {agree.alpha:g}); every pair in significance.csv.",
        humans=tables.human_tables(ev),
        signatures=tables.signature_table(ev),
        config="\n".join(f"{k}: {v}" for k, v in sorted(ev.settings.params.items())),
        n_settings=len(ev.settings.params),
    )
    return _contents(page)


def write_html(ev: Evaluation, out: Path) -> Path:
    """``report.html`` in ``out``, with the figures there now."""
    path = out / REPORT_NAME
    pieces = _FIGURE.split(page_text(ev))  # text, figure place, text, ...

    def write(p: Path) -> None:
        with p.open("wb") as f:
            for i, piece in enumerate(pieces):
                f.writelines(_figures(ev, out, piece) if i % 2 else [piece.encode("utf-8")])

    atomic_write(path, write)
    return path


def write_outputs(ev: Evaluation, out_dir: str | Path) -> Path:
    with writing_outputs(out_dir, ev.settings.report.parallel_figures) as outputs:
        outputs.write_tables(ev)
    return outputs.out


class Outputs:
    """:meth:`finish` writes ``report.html`` once the figures are drawn, before a tracker logs."""

    def __init__(
        self, out_dir: str | Path, parallel_figures: bool, context: RunContext | None = None
    ) -> None:
        self.out = Path(out_dir)
        self.figures = Figures(self.out, parallel_figures, context or RunContext())
        self.written: Evaluation | None = None  # the evaluation whose tables are written
        self.finished = False

    def draw_ready(self, ev: Evaluation) -> None:
        self.figures.start_ready(ev)

    def write_tables(self, ev: Evaluation) -> None:
        write_tables(ev, self.out)
        self.written = ev
        self.draw_ready(ev)

    def finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        self.figures.wait()
        if self.written is not None:
            write_html(self.written, self.out)


@contextmanager
def writing_outputs(
    out_dir: str | Path, parallel_figures: bool, context: RunContext | None = None
) -> Iterator[Outputs]:
    """Finished whatever the block did (a failed logging loses no output); an interrupt stops it."""
    outputs = Outputs(out_dir, parallel_figures, context)
    try:
        yield outputs
    except Exception:
        outputs.finish()
        raise
    except BaseException:
        outputs.figures.stop()
        raise
    outputs.finish()
