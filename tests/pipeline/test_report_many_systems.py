"""The page at ParaBank-Eval's width: 36 systems read on a few screens in headless Chromium."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import paraeval
from paraeval.pipeline.data.load import demo_path, read_table
from tests.pipeline.test_report_page import CHEAP, CONTROLS, METRICS, _layout, _tables


def _many_systems(n: int) -> pd.DataFrame:
    """The demo's items answered by ``n`` systems: the copy, and the others' candidates cut short
    by a word or more, their ratings shifted (seeded)."""
    demo = read_table(demo_path())
    rng = np.random.default_rng(0)
    bases = [s for s in dict.fromkeys(demo["system"]) if s != "copy"]
    parts = [demo[demo["system"] == "copy"]]
    for k in range(1, n):
        part = demo[demo["system"] == bases[k % len(bases)]].copy()
        cut = k // len(bases) % 4
        part["candidate"] = [
            " ".join(c.split()[: max(2, len(c.split()) - cut)]) for c in part["candidate"]
        ]
        part["system"] = f"sys{k:02d}"
        for aspect in ("human_meaning", "human_fluency"):
            part[aspect] = part[aspect] + rng.normal(0, 0.3, len(part)) - 0.1 * cut
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """36 systems, an adequacy measure among the metrics: the page at ParaBank-Eval's width."""
    metrics = [*METRICS, "bertscore"]
    ev = paraeval.evaluate(_many_systems(36), metrics, overrides=CONTROLS, **CHEAP)
    return ev.write(tmp_path_factory.mktemp("page_36"))


@pytest.mark.slow
def test_36_systems_read_on_a_few_screens(many: Path) -> None:
    """Contents with working links, the answers on the first two screens (1,400 x 1,000),
    nothing wider than the window, every figure decoded and shown at a readable size."""
    assert pd.read_csv(many / "system_scores.csv")["system"].nunique() == 36
    layout, dom = _layout(many)
    assert layout["width"] == 1400 and layout["bad"] == [], layout
    assert layout["height"] <= 9000, layout["height"]
    assert layout["contents"] >= 8 and layout["broken"] == [], layout
    assert {"agreement", "paraphrase", "rankings"} <= set(layout["tops"])
    assert max(layout["tops"].values()) < 2000, layout["tops"]
    assert layout["shrunk"] == [], layout["shrunk"]
    loaded = re.findall(r'data-loaded="(yes|no)"', dom)
    assert len(loaded) == len(list((many / "plots").iterdir())) and set(loaded) == {"yes"}
    # the comparison: one matrix of clusters in the ranking figure's order, details folded
    html = (many / "report.html").read_text(encoding="utf-8")
    matrix = re.search(r'<table[^>]*class="matrix".*?</table>', html, re.S)
    assert matrix is not None
    ((_, shown),) = _tables(matrix.group(0))
    assert len(shown) == 36 and shown["system"].iloc[-1] == "copy (control, baseline)"
    comparison = pd.read_csv(many / "system_comparison.csv")
    bleu = comparison[comparison["metric"] == "bleu"].set_index("system")["cluster"]
    names = shown["system"].str.split(" ").str[0]
    assert list(shown["bleu"].iloc[:-1]) == [str(int(bleu[s])) for s in names.iloc[:-1]]
    folded = html[html.index('id="comparison"') : html.index('id="correlations"')]
    assert folded.count("<details>") == 1
    assert folded.count("<table") == 1 + comparison["metric"].nunique()
    # the human ratings summarised: a row per aspect, each system folded
    humans = html[html.index('id="humans"') :]
    (_, summary), *_ = _tables(humans)
    assert list(summary["aspect"]) == ["meaning", "fluency"]
