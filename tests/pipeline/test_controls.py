"""Paraphrase data as the field evaluates it: controls (a copy of the input, an off-topic system)
declared and kept out of every ranking, cluster, "best" line and, by default, the correlations;
reference-free data said once and scored without iBLEU; the paraphrase table and its frontier."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import paraeval
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.stages.paraphrase_table import ParaphraseTable, frontier
from paraeval.pipeline.stages.roles import find_roles, reference_kind

SOURCES = [
    "the committee approved the new budget on monday",
    "she walked her dog along the river every morning",
    "the museum will reopen after the renovation is finished",
    "heavy rain caused flooding in several villages",
    "the company hired twenty engineers last year",
    "he forgot his keys at the office again",
    "the train was delayed because of a signal failure",
    "students must submit their essays by friday",
    "the old bridge was closed for safety reasons",
    "our neighbours planted tomatoes in the garden",
    "the concert was cancelled due to the storm",
    "the doctor advised him to rest for a week",
]
OFF_TOPIC = "purple elephants rarely dance on frozen lakes"

# rewrites of each source, from close to far: each system keeps a different share of the words
SYSTEMS = {
    "close": lambda s: s.replace("the ", "a ", 1),
    "middle": lambda s: " ".join(reversed(s.split()[:3])) + " " + " ".join(s.split()[3:]),
    "far": lambda s: "it is said that " + " ".join(w[::-1] if len(w) > 5 else w for w in s.split()),
    # the source's first half: every n-gram is the source's (no diversity) and half the meaning
    "truncated": lambda s: " ".join(s.split()[: len(s.split()) // 2]),
}
CHEAP = {
    "correlation": {"n_resamples": 50, "significance": {"enabled": False}},
    "compare": {"n_bootstrap": 200, "n_ar": 200},
    "report": {"progress": False},
    "cache": {"enabled": False},
}
# the semantic average without an encoder: chrF counted as a semantic metric
METRICS = ["bleu", "ibleu", "self_bleu", "chrf", "pinc"]
SEMANTIC_CHRF = ["+metrics.chrf.group=semantic"]


def _table(references: str = "source") -> pd.DataFrame:
    rng = np.random.default_rng(3)
    rows = []
    meaning = {
        "copy": 5.0,
        "off_topic": 1.0,
        "close": 4.5,
        "middle": 3.5,
        "far": 2.0,
        "truncated": 2.5,
    }
    for i, src in enumerate(SOURCES):
        cands = {"copy": src, "off_topic": OFF_TOPIC} | {k: f(src) for k, f in SYSTEMS.items()}
        for system, cand in cands.items():
            refs = [src] if references == "source" else [f"people say {src}"]
            rows.append(
                {
                    "item_id": f"s{i}",
                    "system": system,
                    "source": src,
                    "references": refs,
                    "candidate": cand,
                    "human_meaning": meaning[system] + float(rng.normal(0, 0.3)),
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def reference_free() -> paraeval.Evaluation:
    return paraeval.evaluate(
        _table(),
        METRICS,
        overrides=["data.controls=[copy,off_topic]", *SEMANTIC_CHRF],
        **CHEAP,
    )


def test_reference_free_data_is_recognized() -> None:
    assert reference_kind(_table("source")) == "the references are the sources"
    assert reference_kind(_table("own")) == ""
    no_refs = _table().assign(references=[[] for _ in range(len(_table()))])
    assert reference_kind(no_refs) == "there are no references"


def test_reference_free_runs_leave_ibleu_and_the_alpha_curve_out_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        ev = paraeval.evaluate(
            _table(), METRICS, overrides=["data.controls=[copy,off_topic]", *SEMANTIC_CHRF], **CHEAP
        )
    assert "ibleu" not in ev.metrics and "ibleu" not in ev.segments
    assert ev.alpha_curve is None
    said = [r.getMessage() for r in caplog.records if "reference-free" in r.getMessage()]
    assert len(said) == 1 and "ibleu" in said[0] and "alpha" in said[0]
    assert ev.roles.reference_free and "similarity to the source" not in ev.roles.note()
    assert "meaning kept from the source" in ev.roles.note()
    # the same table with references of its own keeps iBLEU and its curve
    own = paraeval.evaluate(_table("own"), METRICS, overrides=SEMANTIC_CHRF, **CHEAP)
    assert "ibleu" in own.metrics and own.alpha_curve is not None and not own.roles.note()


def test_controls_are_never_ranked_clustered_or_best(reference_free: paraeval.Evaluation) -> None:
    ev = reference_free
    t = ev.comparison
    controls = t[t["system"].isin(["copy", "off_topic"])]
    assert controls["control"].all() and controls[["rank", "cluster"]].isna().all().all()
    ranked = t[~t["control"]]
    for _, per_metric in ranked.groupby("metric"):
        assert sorted(per_metric["rank"]) == [1.0, 2.0, 3.0, 4.0]
    # the copy tops every similarity to the source, and is still not ranked
    systems = ev.systems
    assert systems["chrf"].idxmax() == "copy" and systems.loc["copy", "control"]
    view = ev.paraphrase
    assert view is not None
    assert list(view.table["system"][-2:]) == ["copy", "off_topic"]
    assert "copy" not in view.best and "off_topic" not in view.best
    assert view.table.loc[view.table["control"], "frontier"].eq(False).all()
    # the trade-off: close (meaning), middle, far (wording) are each best somewhere; the
    # truncation keeps every n-gram of the source and loses meaning: close beats it on both
    frontier = dict(zip(view.table["system"], view.table["frontier"], strict=True))
    assert frontier == {
        "close": True,
        "middle": True,
        "far": True,
        "truncated": False,
        "copy": False,
        "off_topic": False,
    }


@pytest.mark.slow
def test_controls_stay_out_of_the_correlations_unless_asked(
    reference_free: paraeval.Evaluation, tmp_path: Path
) -> None:
    corr = reference_free.correlations
    system = corr[(corr["level"] == "system") & (corr["coefficient"] == "pearson")]
    assert set(system["n"]) == {4}
    segment = corr[(corr["level"] == "segment") & (corr["coefficient"] == "pearson")]
    assert set(segment["n"]) == {4 * len(SOURCES)}
    both = paraeval.evaluate(
        _table(),
        METRICS,
        overrides=[
            "data.controls=[copy,off_topic]",
            "correlation.include_controls=both",
            *SEMANTIC_CHRF,
        ],
        **CHEAP,
    )
    # the table without controls is the one a run without "both" has
    pd.testing.assert_frame_equal(both.correlations, corr)
    with_controls = both.correlations_with_controls
    assert set(with_controls.loc[with_controls["level"] == "system", "n"]) == {6}

    # one point with top similarity and top rating pulls system-level agreement up
    def chrf(frame: pd.DataFrame) -> float:
        row = frame[
            (frame["metric"] == "chrf")
            & (frame["level"] == "system")
            & (frame["coefficient"] == "pearson")
        ]
        return float(row["value"].iloc[0])

    assert chrf(with_controls) != chrf(corr)
    # report.html shows both side by side; both tables are files
    out = both.write(tmp_path / "both")
    html = (out / "report.html").read_text(encoding="utf-8")
    section = html[html.index('id="with-controls"') :]
    assert "system without (n = 4)" in section and "system with (n = 6)" in section
    written = pd.read_csv(out / "correlations_with_controls.csv")
    assert len(written) == len(with_controls)
    put_back = paraeval.evaluate(
        _table(),
        METRICS,
        overrides=[
            "data.controls=[copy,off_topic]",
            "correlation.include_controls=true",
            *SEMANTIC_CHRF,
        ],
        **CHEAP,
    )
    assert chrf(put_back.correlations) == pytest.approx(chrf(with_controls))


def test_an_undeclared_copy_is_reported_never_excluded(caplog: pytest.LogCaptureFixture) -> None:
    table = _table("own")
    with caplog.at_level(logging.WARNING):
        roles = find_roles(table)
    assert roles.controls == () and roles.likely_controls == {"copy": 1.0}
    assert any("'copy' copies its source in 100%" in r.getMessage() for r in caplog.records)
    # the comparison's named baseline is a control by default, and not when told otherwise
    assert find_roles(table, (), "far").controls == ("far",)
    assert find_roles(table, (), "far", baseline_is_control=False).controls == ()


def test_an_unknown_control_is_one_error_naming_the_nearest() -> None:
    with pytest.raises(
        ConfigError, match=r"data.controls: 'copi' is not a system; did you mean 'copy'"
    ):
        paraeval.evaluate(_table(), ["bleu"], overrides=["data.controls=[copi]"], **CHEAP)


def test_the_frontier_by_hand() -> None:
    # (x, y) with intervals of ±0.05: b is beaten on both axes beyond the intervals by a;
    # c is beaten on x only; d is better than a on y; e has no value
    x = np.array([0.8, 0.5, 0.2, 0.6, np.nan])
    y = np.array([0.8, 0.5, 0.9, 0.85, 0.3])
    half = 0.05
    on = frontier(x, x - half, x + half, y, y - half, y + half)
    assert on.tolist() == [True, False, True, True, False]
    # without intervals the points themselves decide: d (0.6, 0.85) beats nothing, b is beaten
    on_points = frontier(x, x * np.nan, x * np.nan, y, y * np.nan, y * np.nan)
    assert on_points.tolist() == [True, False, True, True, False]
    # intervals that overlap keep a point on it
    wide = frontier(x, x - 0.2, x + 0.2, y, y - 0.2, y + 0.2)
    assert wide.tolist() == [True, True, True, True, False]


def test_the_best_line_needs_one_system_alone_in_the_first_cluster() -> None:
    table = pd.DataFrame(
        {
            "system": ["a", "b", "c", "copy"],
            "control": [False, False, False, True],
            "cluster": [1.0, 2.0, 2.0, np.nan],
            "paraphrase": [0.8, 0.7, 0.69, 0.95],
        }
    )
    view = ParaphraseTable(table, "bertscore_f1", "pinc", "parascore_free", True)
    assert view.best == "Best system: a, alone in the first cluster of parascore_free."
    view.table = table.assign(cluster=[1.0, 1.0, 2.0, np.nan])
    assert view.best == (
        "No single best system: 2 systems share the first cluster of parascore_free (a, b)."
    )
    # no comparison, no clusters: no sentence at all
    view.table = table.assign(cluster=np.nan)
    assert view.best == ""


def test_a_run_without_a_combined_score_names_no_best_system(
    reference_free: paraeval.Evaluation,
) -> None:
    view = reference_free.paraphrase
    assert view is not None and view.paraphrase == "" and view.best == ""
    assert view.adequacy == "semantic" and view.diversity == "pinc"


@pytest.mark.slow
def test_a_reference_free_run_says_so_in_mlflow_and_names_no_control(tmp_path: Path) -> None:
    """The MLflow description: what was evaluated and the reference-free sentence, then the
    paraphrase score's first cluster (ParaScore without references, on the encoder), never a
    control; the control's system run is tagged as one."""
    from mlflow.tracking import MlflowClient

    ev = paraeval.evaluate(
        _table(),
        ["bleu", "pinc", "bertscore", "parascore_free"],
        overrides=["data.controls=[copy,off_topic]"],
        **CHEAP,
    )
    view = ev.paraphrase
    assert view is not None and view.paraphrase == "parascore_free"
    assert view.adequacy == "bertscore_f1" and view.x_axis == "edit_distance"
    store = tmp_path / "store"
    run_id = ev.log(tmp_path / "out", tracking={"store_dir": str(store), "uri": None})
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    run = client.get_run(run_id)
    note = run.data.tags["mlflow.note.content"]
    assert note.splitlines()[0].endswith(f"metrics. {ev.roles.note()}")
    assert "Best system" in note or "No single best system" in note
    best = note.splitlines()[2]
    assert "copy" not in best and "off_topic" not in best
    assert "paraeval.reference_free" not in run.data.tags  # said in the description
    children = client.search_runs(
        [run.info.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{run_id}'"
    )
    roles = {c.data.tags["paraeval.system"]: c.data.tags["paraeval.role"] for c in children}
    assert roles == {
        "copy": "control",
        "off_topic": "control",
        "close": "system",
        "middle": "system",
        "far": "system",
        "truncated": "system",
    }
