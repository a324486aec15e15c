"""What a person reads besides the terminal: report.html rendered by a real browser (headless
Chromium), the figures in each format, the ranking as one figure, directions marked."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import paraeval
from paraeval.pipeline.data.load import demo_path, read_table
from paraeval.pipeline.report.plots import LOWER_MARK, SOURCE_MARK

CHEAP = {
    "correlation": {"n_resamples": 100, "significance": {"n_resamples": 100}},
    "compare": {"n_bootstrap": 100, "n_ar": 200},
    "report": {"progress": False},
    "cache": {"enabled": False},
}
METRICS = ["bleu", "ibleu", "self_bleu", "chrf", "ter"]


def _browser() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Chromium is needed to render report.html: make setup-dev installs it"
    return found


def _rendered_dom(page: Path) -> str:
    """The page's DOM after a headless Chromium loaded it (scripts run, images decoded)."""
    proc = subprocess.run(
        [
            _browser(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
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
        frame, METRICS, **{**CHEAP, "report": {"progress": False, "format": fmt}}
    )
    return ev.write(tmp_path_factory.mktemp(f"page_{fmt}"))


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
        assert f"<td>{system}</td>" in html
    for signature in signatures["signature"]:
        assert signature in html.replace("&#x27;", "'")
    # direction marks on lower-is-better and similarity-to-source columns
    assert f"ter {LOWER_MARK}" in html and f"self_bleu {SOURCE_MARK}" in html
    assert "metrics.ibleu.alpha: 0.8" in html
    # system-level correlations say on how many systems they rest
    assert "/ system (n = 4)" in html


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


def test_table_cells_are_those_of_the_values() -> None:
    """A table's HTML, hand-written for a small frame (one dtype per row, as ``iterrows``
    gives it: the integers of a numeric frame are floats); changed values give their own
    cells."""
    from paraeval.pipeline.report import html as html_report

    frame = pd.DataFrame(
        {"n": [3, 40], "score": [0.12345, float("nan")]}, index=pd.Index(["a<b", "c"], name="sys")
    )
    assert html_report._table(frame) == (
        '<div class="scroll"><table><thead><tr><th>sys</th><th>n</th><th>score</th></tr>'
        "</thead><tbody><tr><td>a&lt;b</td><td>3.000</td><td>0.123</td></tr>"
        "<tr><td>c</td><td>40.0</td><td>–</td></tr></tbody></table></div>"
    )
    changed = html_report._table(frame.assign(score=[12.5, -0.5]), index=False)
    assert "<td>12.5</td>" in changed and "<td>-0.500</td>" in changed and "0.123" not in changed
