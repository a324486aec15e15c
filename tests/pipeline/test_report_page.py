"""What a person reads besides the terminal: report.html rendered by a real browser (headless
Chromium), the figures in each format, the ranking as one figure, directions marked."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import paraeval
from paraeval.pipeline.data.load import demo_path, read_table
from paraeval.pipeline.report.plots import (
    COEFFICIENT_NAMES,
    LOWER_MARK,
    SOURCE_MARK,
    FigureStyle,
)

CHEAP = {
    "correlation": {"n_resamples": 100, "significance": {"n_resamples": 100}},
    "compare": {"n_bootstrap": 100, "n_ar": 200},
    "report": {"progress": False},
    "cache": {"enabled": False},
}
METRICS = ["bleu", "ibleu", "self_bleu", "chrf", "ter"]
CONTROLS = ["data.controls=[copy]"]  # the demo's system that returns its input


def _browser() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Chromium is needed to render report.html: make setup-dev installs it"
    return found


def _rendered_dom(page: Path) -> str:
    """The page's DOM after a headless Chromium 1,400 px wide loaded it (scripts run, images
    decoded)."""
    proc = subprocess.run(
        [
            _browser(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--window-size=1400,1000",
            "--hide-scrollbars",
            "--virtual-time-budget=10000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.fixture(scope="module", params=["png", "svg"])
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    fmt = request.param
    frame = read_table(demo_path())
    ev = paraeval.evaluate(
        frame,
        METRICS,
        overrides=CONTROLS,
        **{**CHEAP, "report": {"progress": False, "format": fmt}},
    )
    return ev.write(tmp_path_factory.mktemp(f"page_{fmt}"))


@pytest.mark.slow
def test_every_figure_loads_in_a_browser(written: Path) -> None:
    page = written / "report.html"
    figures = sorted((written / "plots").iterdir())
    assert len(figures) >= 6, figures
    suffixes = {p.suffix for p in figures}
    assert len(suffixes) == 1 and suffixes <= {".png", ".svg"}
    html = page.read_text(encoding="utf-8")
    # self-contained: nothing is fetched from anywhere
    assert not re.search(r"""(src|href)=["'](https?:|//)""", html)
    dom = _rendered_dom(page)
    loaded = re.findall(r'data-loaded="(yes|no)"', dom)
    assert loaded.count("yes") == len(figures), (len(figures), loaded)
    assert "no" not in loaded


def test_the_page_holds_tables_signatures_and_config(written: Path) -> None:
    html = (written / "report.html").read_text(encoding="utf-8")
    systems = pd.read_csv(written / "system_scores.csv")
    signatures = pd.read_csv(written / "signatures.csv")
    for system in systems["system"]:
        assert re.search(rf">{system}</td>", html)
    for signature in signatures["signature"]:
        assert signature in html.replace("&#x27;", "'")
    # direction marks on lower-is-better and similarity-to-source columns
    assert f"ter {LOWER_MARK}" in html and f"self_bleu {SOURCE_MARK}" in html
    assert "metrics.ibleu.alpha: 0.8" in html
    # system-level correlations say on how many systems they rest (the control left out)
    assert "system (n = 3)</th>" in html


def test_figure_formats(written: Path) -> None:
    for p in (written / "plots").iterdir():
        head = p.read_bytes()[:200]
        if p.suffix == ".png":
            assert head.startswith(b"\x89PNG")
        else:
            assert b"<svg" in head or b"<?xml" in head


def test_pdf_figures(tmp_path: Path) -> None:
    frame = read_table(demo_path())
    ev = paraeval.evaluate(
        frame,
        ["bleu", "chrf"],
        **{
            **CHEAP,
            "report": {"progress": False, "format": "pdf"},
            "alpha_curve": {"enabled": False},
        },
    )
    out = ev.write(tmp_path)
    pdfs = sorted((out / "plots").iterdir())
    assert pdfs and all(p.suffix == ".pdf" and p.read_bytes()[:5] == b"%PDF-" for p in pdfs)
    # PDFs are linked from the page, not embedded
    html = (out / "report.html").read_text(encoding="utf-8")
    assert 'href="plots/system_ranking.pdf"' in html


def test_ranking_is_one_figure_with_every_column(written: Path) -> None:
    import matplotlib.image as mpimg

    ranking = [p for p in (written / "plots").iterdir() if p.stem == "system_ranking"]
    assert len(ranking) == 1
    comparison = pd.read_csv(written / "system_comparison.csv")
    columns = list(dict.fromkeys(comparison["metric"]))
    if ranking[0].suffix == ".svg":
        text = ranking[0].read_text(encoding="utf-8")
        # matplotlib writes each title as text in an SVG comment-free <g> with its glyphs;
        # the panels are axes groups
        assert text.count('id="axes_') >= len(columns)
    else:
        image = mpimg.imread(ranking[0])
        # one panel row per three columns, each at least ~1 inch tall at 200 dpi
        assert image.shape[0] >= 200 * (len(columns) // 3)


def test_bad_format_is_one_config_error() -> None:
    from paraeval.pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match=r"report.format must be one of \['png', 'pdf', 'svg'\]"):
        paraeval.evaluate(read_table(demo_path()), ["bleu"], report={"format": "jpeg"})


class _Tables(HTMLParser):
    """Every table of a page as rows of cell texts, each under the ``data-ranking`` or
    ``data-aspect`` of the answer box (or the section id) that holds it."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[list[str]]]] = []
        self.where: list[str] = []
        self.stack: list[str] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag in ("div", "section"):
            label = a.get("data-ranking") or a.get("data-aspect") or a.get("id") or ""
            self.stack.append(label)
            if label:
                self.where.append(label)
        elif tag == "table":
            self.tables.append((self.where[-1] if self.where else "", []))
        elif tag == "tr" and self.tables:
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("div", "section") and self.stack and self.stack.pop():
            self.where.pop()
        elif tag in ("td", "th") and self.cell is not None:
            self.tables[-1][1][-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def _tables(html: str) -> list[tuple[str, pd.DataFrame]]:
    parser = _Tables()
    parser.feed(html)
    return [(where, pd.DataFrame(rows[1:], columns=rows[0])) for where, rows in parser.tables]


def _sacrebleu_p(p: float, alpha: float = 0.05) -> str:
    # sacrebleu.utils prints a paired test's p-value as f"(p = {p:.4f})", "*" when p <= 0.05
    return f"{p:.4f}" + ("*" if p <= alpha else "")


# Written into a copy of the page: what the browser laid out at 1,400 px, as JSON in the DOM
_LAYOUT_CHECK = """<script>
window.addEventListener('load', function () {
  var doc = document.documentElement, bad = [];
  if (doc.scrollWidth > doc.clientWidth) bad.push('page ' + doc.scrollWidth);
  var tables = document.querySelectorAll('table');
  tables.forEach(function (t, i) {
    var box = t.parentElement, right = t.getBoundingClientRect().right;
    if (box.scrollWidth > box.clientWidth || right > doc.clientWidth) {
      bad.push('table ' + i + ': ' + right + ', ' + box.scrollWidth + ' > ' + box.clientWidth);
    }
  });
  var broken = Array.from(document.querySelectorAll('nav a')).filter(function (a) {
    return !document.getElementById(a.getAttribute('href').slice(1));
  }).map(function (a) { return a.getAttribute('href'); });
  var tops = {};
  ['best-system', 'agreement', 'paraphrase', 'rankings'].forEach(function (id) {
    var e = document.getElementById(id);
    if (e) tops[id] = e.getBoundingClientRect().top + window.scrollY;
  });
  // a PNG shown smaller than 104 px an inch (200 dpi: 0.52 of its pixels) does not read
  var shrunk = Array.from(document.querySelectorAll('img')).filter(function (i) {
    var shown = i.closest('details') === null || i.getBoundingClientRect().width > 0;
    return shown && i.src.indexOf('image/png') > 0 &&
      i.getBoundingClientRect().width < 0.515 * i.naturalWidth;
  }).map(function (i) { return i.alt; });
  var out = document.createElement('pre');
  out.id = 'layout-check';
  out.textContent = JSON.stringify({
    width: doc.clientWidth, height: doc.scrollHeight, tables: tables.length, bad: bad,
    contents: document.querySelectorAll('nav a').length, broken: broken, tops: tops,
    shrunk: shrunk});
  document.body.appendChild(out);
});
</script>"""


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo with the default metric set (28 columns in system_scores.csv)."""
    ev = paraeval.evaluate(read_table(demo_path()), overrides=CONTROLS, **CHEAP)
    return ev.write(tmp_path_factory.mktemp("page_full"))


def _layout(written: Path) -> tuple[dict[str, Any], str]:
    """What the browser laid out at 1,400 px, and the DOM (each figure marked decoded or not)."""
    page = written / "report.html"
    checked = written / "checked.html"
    checked.write_text(
        page.read_text(encoding="utf-8").replace("</body>", _LAYOUT_CHECK + "</body>"),
        encoding="utf-8",
    )
    dom = _rendered_dom(checked)
    found = re.search(r'<pre id="layout-check">(.*?)</pre>', dom)
    assert found, dom[-2000:]
    return json.loads(found.group(1).replace("&gt;", ">")), dom


def _without_matrix(html: str) -> str:
    return re.sub(r'<table[^>]*class="matrix".*?</table>', "", html, flags=re.S)


@pytest.mark.slow
def test_no_table_is_cut_off_at_1400_px_and_every_figure_decodes(full: Path) -> None:
    layout, dom = _layout(full)
    assert layout["width"] == 1400 and layout["tables"] >= 15, layout
    assert layout["bad"] == [], layout["bad"]
    loaded = re.findall(r'data-loaded="(yes|no)"', dom)
    assert loaded and set(loaded) == {"yes"}, loaded
    # the systems table is split: no table but the clusters' matrix has more than ten values
    html = _without_matrix((full / "report.html").read_text(encoding="utf-8"))
    assert max(len(t.columns) for _, t in _tables(html)) <= 11


def test_the_answers_come_first_and_rank_as_the_tables_do(written: Path) -> None:
    html = (written / "report.html").read_text(encoding="utf-8")
    answers, details = html.index('<section id="answers">'), html.index('<section id="details">')
    assert answers < details and "<table" not in html[:answers]
    systems = pd.read_csv(written / "system_scores.csv").set_index("system")
    ranked = systems[~systems["control"]]
    # no adequacy measure among these metrics: no paraphrase table, and no best-system line
    assert 'id="best-system"' not in html
    tables = _tables(html)
    ranking = next(t for where, t in tables if where == "syntactic")
    # the control (the demo's copy) last, labelled, without rank or cluster
    expected = list(ranked["syntactic"].sort_values(ascending=False).index)
    assert list(ranking["system"]) == [*expected, "copy (control)"]
    assert list(ranking["rank"]) == [*(str(i) for i in range(1, len(ranked) + 1)), "–"]
    # scores of a 0-1 average at three decimals, clusters as integers
    assert all(re.fullmatch(r"\d\.\d{3}", s) for s in ranking["score"])
    assert all(re.fullmatch(r"\d+", c) for c in ranking["cluster"][:-1])
    assert ranking["cluster"].iloc[-1] == "–"
    comparison = pd.read_csv(written / "system_comparison.csv")
    rows = comparison[comparison["metric"] == "syntactic"].set_index("system")
    for system, p_boot, p_ar in zip(
        ranking["system"].str.removesuffix(" (control)"),
        ranking["p (bootstrap)"],
        ranking["p (AR)"],
        strict=True,
    ):
        expected = rows.loc[system, ["p_bootstrap", "p_ar"]].astype(float)
        if system == rows["baseline"].iloc[0]:
            assert p_boot == p_ar == "baseline"
        else:
            assert [p_boot, p_ar] == [_sacrebleu_p(v) for v in expected]
    # BLEU, a 0-100 score, at one decimal in its own comparison table
    bleu = next(t for where, t in tables if where == "bleu")
    assert all(re.fullmatch(r"-?\d+\.\d", v) for v in bleu["score"])


def test_best_metrics_are_ranked_whatever_their_direction(written: Path) -> None:
    """The metric-vs-metric table ranks TER (lower is better) by its agreement, not its sign:
    the order of the significance test's clusters, then of the direction-adjusted value."""
    html = (written / "report.html").read_text(encoding="utf-8")
    corr = pd.read_csv(written / "correlations.csv")
    sig = pd.read_csv(written / "significance.csv")
    signatures = pd.read_csv(written / "signatures.csv").set_index("column")
    level, coefficient = sig["level"].iloc[0], sig["coefficient"].iloc[0]
    assert f"{COEFFICIENT_NAMES[coefficient]} at the {level}" in html
    tables = [(w, t) for w, t in _tables(html) if coefficient in t.columns and "p vs best" in t]
    assert {w for w, _ in tables} == {"meaning", "fluency"}
    for aspect, shown in tables:
        pairs = sig[sig["aspect"] == f"human_{aspect}"]
        cluster = dict(zip(pairs["metric_a"], pairs["cluster_a"], strict=True))
        cluster.update(zip(pairs["metric_b"], pairs["cluster_b"], strict=True))
        values = corr[
            (corr["aspect"] == f"human_{aspect}")
            & (corr["level"] == level)
            & (corr["coefficient"] == coefficient)
        ].set_index("metric")["value"]
        sign = {m: 1 if signatures.loc[m, "higher_is_better"] else -1 for m in values.index}
        expected = sorted(values.index, key=lambda m: (cluster[m], -sign[m] * values[m]))
        metrics = [m.split(" ")[0] for m in shown["metric"]]
        assert metrics == expected
        assert list(shown["cluster"]) == [str(int(cluster[m])) for m in expected]
        best = expected[0]
        for m, p in zip(metrics[1:], shown["p vs best"].iloc[1:], strict=True):
            pair = pairs[(pairs["metric_a"] == best) & (pairs["metric_b"] == m)]
            assert p == _sacrebleu_p(float(pair["p_value"].iloc[0]))
    # TER's negative correlation counts as agreement: it ranks above self-BLEU on meaning here
    # (by its signed value it would be last)
    meaning = dict(tables)["meaning"]
    names = [m.split(" ")[0] for m in meaning["metric"]]
    assert names.index("ter") < names.index("self_bleu"), names


def test_each_figure_is_in_its_section_captioned_and_linked(written: Path) -> None:
    html = (written / "report.html").read_text(encoding="utf-8")
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", html)
    assert len(captions) == len(list((written / "plots").iterdir()))
    assert not any(".png" in c for c in captions)
    place = {
        stem: html.index(f'<figure id="{stem}">') for stem in ("alpha_curve", "system_ranking")
    }
    place["heatmap"] = html.index('<figure id="correlation_heatmap">')
    assert html.index('id="alpha"') < place["alpha_curve"] < html.index('<section id="details">')
    assert html.index('id="comparison"') < place["system_ranking"] < html.index('id="correlations"')
    assert html.index('id="correlations"') < place["heatmap"]
    scatter = [m.start() for m in re.finditer(r'<figure id="scatter_', html)]
    assert scatter and min(scatter) > html.index('id="scatter"')
    heatmap = html[place["heatmap"] :]
    assert re.search(r"<figcaption>Pearson r of every metric", heatmap)
    # a click opens the file, full size
    for stem in re.findall(r'<figure id="([\w-]+)">', html):
        assert re.search(rf'<figure id="{stem}"><a href="plots/{stem}\.(png|svg)"><img', html)
    # the α choice with headers written for people; the settings folded
    assert "α chosen on dev" in html and "chosen_alpha" not in html.split("<pre>")[0]
    assert re.search(r"<details><summary>Every setting of the run \(\d+\)</summary>\s*<pre>", html)


def test_table_columns_have_one_precision_each() -> None:
    """A column has one precision whatever each value's size; counts are integers; text is
    escaped."""
    from paraeval.pipeline.report.tables import table

    frame = pd.DataFrame(
        {
            "system": ["a<b", "c", "d"],
            "n_items": [3, 40, 7],
            "bleu": [1.339, 52.6, -0.03],
            "score": [0.12345, math.nan, -0.5],
            "cluster": [1.0, 2.0, math.nan],
        }
    )
    rows = next(t for _, t in _tables(table(frame)))
    assert list(rows.columns) == ["system", "n_items", "bleu", "score", "cluster"]
    assert rows.to_numpy().tolist() == [
        ["a<b", "3", "1.3", "0.123", "1"],
        ["c", "40", "52.6", "–", "2"],
        ["d", "7", "0.0", "-0.500", "–"],
    ]
    assert "a&lt;b" in table(frame)


def test_without_the_significance_test_metrics_rank_by_direction_adjusted_value() -> None:
    from paraeval.pipeline.report.tables import agreement, agreement_table

    ev = paraeval.evaluate(
        read_table(demo_path()),
        ["bleu", "ter"],
        **{**CHEAP, "correlation": {"n_resamples": 50, "significance": {"enabled": False}}},
    )
    agree = agreement(ev)
    assert (agree.coefficient, agree.level, agree.method) == ("pearson", "segment", "")
    ranked = agree.by_aspect["human_meaning"]
    assert ranked["agreement"].is_monotonic_decreasing
    # TER's r is negative: its agreement is -r, above BLEU's r
    ter = ranked.set_index("metric").loc["ter"]
    assert ter["value"] < 0 and ter["agreement"] == -ter["value"]
    assert list(ranked["metric"]).index("ter") < list(ranked["metric"]).index("bleu")
    shown = next(
        t for _, t in _tables(agreement_table(agree, "human_meaning", FigureStyle(), True))
    )
    assert "cluster" not in shown.columns and len(shown) == 3


def test_the_overall_ranking_over_the_significance_tasks_is_a_table_per_aspect(
    tmp_path: Path,
) -> None:
    """With several significance tasks (wmt24), the agreement answers rank the metrics over them
    too: per aspect, as metric_ranking.csv's overall block orders them."""
    ev = paraeval.evaluate(
        read_table(demo_path()),
        ["rouge1", "rouge2", "rougeL", "pinc"],  # segment means: wmt24's tests permute items
        overrides=["correlation=wmt24", *CONTROLS],
        **{**CHEAP, "correlation": {"n_resamples": 50, "significance": {"n_resamples": 50}}},
    )
    html = (ev.write(tmp_path) / "report.html").read_text(encoding="utf-8")
    note = html.index("Over the significance tasks (item acc23, system soft_pairwise_accuracy)")
    assert html.index('id="agreement"') < note < html.index('<section id="details">')
    tables = dict(_tables(html))
    overall = ev.ranking[ev.ranking["level"] == "overall"]
    assert set(overall["aspect"]) == {"human_meaning", "human_fluency"}
    for aspect, rows in overall.groupby("aspect"):
        shown = tables[f"{str(aspect).removeprefix('human_')}, overall"]
        assert list(shown.columns) == ["rank (cluster)", "metric", "value", "source", "baseline"]
        assert list(shown["metric"]) == [
            FigureStyle(source=frozenset({"pinc"})).label(m) for m in rows["metric"]
        ]
        ranks = zip(rows["order"], rows["cluster"], strict=True)
        assert list(shown["rank (cluster)"]) == [f"{o} ({c})" for o, c in ranks]
        assert list(shown["value"]) == [f"{v:.3f}" for v in rows["value"]]
        assert set(shown["source"]) == {"paraeval"} and set(shown["baseline"]) == {"no"}
    assert "The overall ranking (" not in html  # five metrics an aspect: not folded


@pytest.mark.slow
def test_the_paraphrase_table_and_its_figure_come_first(full: Path) -> None:
    """The default metric set: the first table of the answers is the paraphrase table, the
    frontier figure beside it decodes in the browser, and the copy is apart, never best."""
    html = (full / "report.html").read_text(encoding="utf-8")
    answers = html.index('<section id="answers">')
    paraphrase = html.index('id="paraphrase"')
    assert answers < paraphrase < html.index('id="rankings"')
    assert html.index('<figure id="paraphrase_frontier">') < html.index('<section id="details">')
    _, first = _tables(html[paraphrase:])[0]
    view = pd.read_csv(full / "paraphrase.csv")
    assert list(first["system"]) == list(view["system"])
    assert list(first["role"])[-1] == "control" and list(first["system"])[-1] == "copy"
    assert {"adequacy", "diversity", "parascore", "cluster", "copy rate", "meaning"} <= set(
        first.columns
    )
    best = re.search(r'id="best-system">([^<]*)<', html)
    assert best and "copy" not in best.group(1)
    dom = _rendered_dom(full / "report.html")
    frontier = re.search(r'<figure id="paraphrase_frontier">.*?</figure>', dom, re.S)
    assert frontier and 'data-loaded="yes"' in frontier.group(0)
