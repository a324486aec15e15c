"""Trackers: every option of conf/tracking/ composes and instantiates through ``_target_``, logs
(or not) a finished output directory, and always leaves run_info.json behind."""

from __future__ import annotations

import json
import logging
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from paraeval.pipeline.cli.relog import relog
from paraeval.pipeline.config.compose import flatten
from paraeval.pipeline.config.nodes import TrackingSettings
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.files import write_csv, write_parquet
from paraeval.pipeline.tracking import trackers as tracking_mod
from paraeval.pipeline.tracking.mlflow_log import Logged
from paraeval.pipeline.tracking.payload import RunPayload, RunRecord, read_run_info
from paraeval.pipeline.tracking.store import resolved_tracking
from paraeval.pipeline.tracking.trackers import (
    TRACKERS,
    MLflowTracker,
    NoTracker,
    Tracker,
    tracker_from_settings,
)
from tests.pipeline.helpers import run_cli
from tests.pipeline.test_config import _compose, options


def tracker_from_config(node: Mapping[str, Any]) -> Tracker:
    return tracker_from_settings(TrackingSettings.from_node(node))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _output_dir(out: Path) -> Path:
    """The files a finished run leaves that the MLflow backend reads."""
    segments = pd.DataFrame(
        {
            "item_id": ["i1", "i1", "i2", "i2"],
            "system": ["a", "b", "a", "b"],
            "source": ["s1", "s1", "s2", "s2"],
            "references": [["r1"], ["r1"], ["r2", "r2b"], ["r2", "r2b"]],
            "candidate": ["c1", "c2", "c3", "c4"],
            "human_fluency": [1.0, 2.0, 3.0, 4.0],
            "bleu": [10.0, 20.0, 30.0, 40.0],
        }
    )
    write_parquet(segments, out / "segment_scores.parquet")
    write_csv(pd.DataFrame({"system": ["a", "b"], "bleu": [20.0, 30.0]}), out / "system_scores.csv")
    write_csv(
        pd.DataFrame(
            [
                {
                    "metric": metric,
                    "aspect": "human_fluency",
                    "level": "segment",
                    "coefficient": "pearson",
                    "value": value,
                }
                for metric, value in (("bleu", 1.0), ("syntactic", 0.5))
            ]
        ),
        out / "correlations.csv",
    )
    return out


def client_download(uri: str, run_id: str, path: str) -> str:
    return MlflowClient(uri).download_artifacts(run_id, path)


def _record(tracker: Tracker) -> RunRecord:
    return RunRecord(
        tracking=tracker.settings,
        params={"seed": "1234"},
        tags={"paraeval.data": "toy"},
        run_name=tracker.run_name or "toy",
        metrics={"cache.hits": 3.0},
        data_name="toy",
    )


def _payload(out: Path, record: RunRecord) -> RunPayload:
    """The run of ``out`` as a tracker receives it (here read from its files)."""
    return RunPayload.from_dir(out, record)


def _node(option: str, overrides: list[str]) -> Any:
    return _compose([f"tracking={option}", *overrides]).tracking


@pytest.mark.slow
@pytest.mark.parametrize("option", options("tracking"))
def test_every_tracking_option_instantiates_and_logs(
    option: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "store"
    overrides = {
        "sqlite": [f"tracking.store_dir={store}"],
        # nothing listens there: the run must go on with one line
        "server": [f"tracking.uri=http://127.0.0.1:{_closed_port()}"],
        "none": [],
    }.get(option, [])
    node = _node(option, overrides)
    tracker = tracker_from_config(node)
    target = str(node["_target_"])
    assert target in TRACKERS
    assert f"{type(tracker).__module__}.{type(tracker).__qualname__}" == target
    # what run_info.json records is what the tracking config said, store_dir made absolute
    plain = OmegaConf.to_container(node, resolve=True)
    assert isinstance(plain, dict)
    assert tracker.settings == resolved_tracking(plain)
    assert "_target_" not in tracker.settings

    out = _output_dir(tmp_path / "out")
    record = _record(tracker)
    with caplog.at_level(logging.INFO, logger="paraeval.pipeline.tracking"):
        logged = tracker.log(_payload(out, record))
    assert read_run_info(out) == record

    if option == "sqlite":
        assert isinstance(logged, Logged) and not logged.already
        assert logged.uri == f"sqlite:///{store / 'mlflow.db'}"
        run = MlflowClient(logged.uri).get_run(logged.run_id)
        assert run.data.params["seed"] == "1234"
        # every column's correlation is a metric; intervals and p-values in the MLflow table
        assert run.data.metrics["corr.fluency.segment.syntactic"] == 0.5
        assert run.data.metrics["corr.fluency.segment.bleu"] == 1.0
        import mlflow

        mlflow.set_tracking_uri(logged.uri)  # load_table searches through the global store
        table = MlflowClient(logged.uri).load_table(
            experiment_id=run.info.experiment_id,
            artifact_file="tables/correlations.json",
            run_ids=[logged.run_id],
        )
        assert set(table["metric"]) == {"bleu", "syntactic"}
        # cache counts are one table, not metrics
        assert "cache.hits" not in run.data.metrics
        cache = pd.read_csv(client_download(logged.uri, logged.run_id, "tables/cache_counts.csv"))
        assert cache.to_dict("records") == [{"stage": "(all metrics)", "hits": 3}]
        assert run.data.tags["paraeval.role"] == "invocation"
        # the same content is not logged twice
        again = tracker.log(_payload(out, record))
        assert again is not None and again.already and again.run_id == logged.run_id
    elif option == "server":
        assert logged is None
        lines = [r.getMessage() for r in caplog.records if "unreachable" in r.getMessage()]
        assert len(lines) == 1 and f"paraeval-log {out}" in lines[0]
    elif option == "none":
        assert logged is None
        assert not (tmp_path / "mlflow").exists()
        assert tracker.settings["store_dir"] == str(tmp_path / "mlflow")


def test_enabled_false_is_no_tracker_with_the_same_settings(tmp_path: Path) -> None:
    node = _node("sqlite", [f"tracking.store_dir={tmp_path}", "tracking.enabled=false"])
    tracker = tracker_from_config(node)
    assert type(tracker) is NoTracker
    assert tracker.settings["store_dir"] == str(tmp_path)
    assert tracker.settings["enabled"] is False


def test_node_without_target_is_mlflow(tmp_path: Path) -> None:
    tracker = tracker_from_config({"enabled": True, "store_dir": str(tmp_path)})
    assert type(tracker) is MLflowTracker
    assert type(tracker_from_config({"enabled": False})) is NoTracker


@pytest.mark.parametrize(
    "target",
    [
        "os.system",
        "subprocess.Popen",
        "paraeval.pipeline.tracking.payload.RunRecord",
        "paraeval.pipeline.tracking.trackers.Tracker",
        "paraeval.pipeline.nonexistent.Tracker",
        "tests.pipeline.test_tracking.Recording",
    ],
)
def test_only_paraeval_trackers_can_be_targets(target: str) -> None:
    with pytest.raises(ConfigError, match="is not a paraeval tracker") as info:
        tracker_from_config({"_target_": target, "enabled": True})
    assert "paraeval.pipeline.tracking.trackers.MLflowTracker" in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_setting_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"tracking \(MLflowTracker\).*'colour'"):
        tracker_from_config(
            {"_target_": "paraeval.pipeline.tracking.trackers.MLflowTracker", "colour": "blue"}
        )


class Recording(Tracker):
    """A toy backend: remembers what it was sent."""

    def __init__(self, *, folder: str, enabled: bool = True) -> None:
        self.folder = folder
        self.sent: list[RunPayload] = []

    @property
    def settings(self) -> dict[str, Any]:
        return {"folder": self.folder}

    def send(self, payload: RunPayload) -> Logged | None:
        self.sent.append(payload)
        return Logged("r1", f"file://{self.folder}", False, f"file://{self.folder}/r1")


def test_a_new_backend_is_one_class_and_one_config_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a class in a paraeval module registers itself; this test module is not one, so it is
    # added to the allow-list by hand
    target = f"{Recording.__module__}.Recording"
    assert target not in TRACKERS
    monkeypatch.setitem(TRACKERS, target, Recording)
    tracker = tracker_from_config({"_target_": target, "folder": str(tmp_path)})
    assert isinstance(tracker, Recording)
    out = _output_dir(tmp_path / "out")
    record = _record(tracker)
    payload = _payload(out, record)
    logged = tracker.log(payload)
    assert logged is not None and logged.run_id == "r1"
    assert tracker.sent == [payload]
    assert json.loads((out / "run_info.json").read_text())["tracking"] == {"folder": str(tmp_path)}


def test_paraeval_subclasses_register_themselves() -> None:
    assert TRACKERS["paraeval.pipeline.tracking.trackers.MLflowTracker"] is MLflowTracker
    assert TRACKERS["paraeval.pipeline.tracking.trackers.NoTracker"] is NoTracker
    assert not any(name.rsplit(".", 1)[-1].startswith("_") for name in TRACKERS)
    assert tracking_mod.tracker_class("paraeval.pipeline.tracking.trackers.NoTracker") is NoTracker


def test_target_is_not_a_run_param() -> None:
    cfg = OmegaConf.to_container(_compose(["tracking=sqlite"]), resolve=True)
    assert isinstance(cfg, dict)
    params = flatten(cfg)
    assert "tracking._target_" not in params
    assert params["tracking.enabled"] == "True" and params["tracking.experiment"] == "paraeval"
    assert "data._target_" in params


def test_no_tracker_directory_logged_later(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tracker = tracker_from_config(_node("none", []))
    out = _output_dir(tmp_path / "out")
    assert tracker.log(_payload(out, _record(tracker))) is None
    logged = relog(out, store_dir=str(tmp_path / "later"))
    assert not logged.already and logged.uri == f"sqlite:///{tmp_path / 'later' / 'mlflow.db'}"
    run = MlflowClient(logged.uri).get_run(logged.run_id)
    assert run.data.params["seed"] == "1234"
    again = relog(out, store_dir=str(tmp_path / "later"))
    assert (again.run_id, again.already, again.page) == (logged.run_id, True, logged.page)


def test_tables_are_logged_as_mlflow_log_table_logs_them(tmp_path: Path) -> None:
    """The correlation and comparison tables: the same artifact bytes and the same
    ``mlflow.loggedArtifacts`` tag as ``MlflowClient.log_table`` gives a run of its own."""
    store = tmp_path / "store"
    out = _output_dir(tmp_path / "out")
    correlations = pd.read_csv(out / "correlations.csv")
    correlations.loc[1, "value"] = float("nan")  # a null in the JSON
    write_csv(correlations, out / "correlations.csv")
    comparison = pd.DataFrame(
        {"system": ["a", "b"], "metric": ["bleu", "bleu"], "p_ar": [None, 0.03], "cluster": [1, 2]}
    ).assign(score=[30.0, 20.0], higher_is_better=True)
    write_csv(comparison, out / "system_comparison.csv")
    tracker = tracker_from_config(_node("sqlite", [f"tracking.store_dir={store}"]))
    logged = tracker.log(_payload(out, _record(tracker)))
    assert isinstance(logged, Logged)
    client = MlflowClient(logged.uri)
    run = client.get_run(logged.run_id)
    reference = client.create_run(run.info.experiment_id).info.run_id
    for name, csv in (
        ("tables/correlations.json", "correlations.csv"),
        ("tables/system_comparison.json", "system_comparison.csv"),
    ):
        frame = pd.read_csv(out / csv, keep_default_na=False, na_values=[""])
        client.log_table(reference, data=frame, artifact_file=name)
        ours = Path(client.download_artifacts(logged.run_id, name, str(tmp_path / "ours")))
        theirs = Path(client.download_artifacts(reference, name, str(tmp_path / "theirs")))
        assert ours.read_bytes() == theirs.read_bytes()
        assert b"null" in ours.read_bytes()
    tag = "mlflow.loggedArtifacts"
    assert json.loads(run.data.tags[tag]) == json.loads(client.get_run(reference).data.tags[tag])


# --------------------------------------------------------------------------- a multirun
SMALL = [
    "metrics=[bleu,ibleu,self_bleu,chrf]",
    "correlation.ci=false",
    "alpha_curve.grid=[0,0.5,1]",
    "report.print_tables=false",
]
RUN_LINE = re.compile(r"\[paraeval\.pipeline\.tracking\]\[INFO\] - MLflow run (\w+) in ")


def check_logged_whole(client: MlflowClient, run_id: str, out: Path, n_systems: int = 4) -> None:
    """The run of ``out`` is finished and whole: its files, its per-system runs, its tags."""
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["paraeval.output_dir"] == str(out.resolve())
    assert run.data.tags["paraeval.content_hash"]
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"report.html", "system_scores.csv", "plots", "tables"} <= artifacts, artifacts
    plots = {Path(a.path).name for a in client.list_artifacts(run_id, "plots")}
    assert {p.name for p in (out / "plots").iterdir()} == plots
    children = client.search_runs(
        [run.info.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{run_id}'"
    )
    assert len(children) == n_systems and {c.info.status for c in children} == {"FINISHED"}


@pytest.mark.slow
def test_multirun_jobs_are_each_logged_whole_and_say_so_in_their_own_log(tmp_path: Path) -> None:
    """Every job of a multirun logs itself, in its own process, before the next starts."""
    store, sweep = tmp_path / "store", tmp_path / "sweep"
    proc = run_cli(
        [
            "-m",
            *SMALL,
            "metrics.ibleu.alpha=0.2,0.5,0.9",
            f"tracking.store_dir={store}",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
        PARAEVAL_CACHE_DIR=str(tmp_path / "cache"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    seen = []
    for job in range(3):
        out = sweep / str(job)
        ids = RUN_LINE.findall((out / "paraeval.log").read_text())
        assert len(ids) == 1, ids  # its own run, in its own log file
        check_logged_whole(client, ids[0], out)
        assert f"(run {ids[0]})" in proc.stdout  # the job's summary names it
        run = client.get_run(ids[0])
        assert run.data.params["metrics.ibleu.alpha"] == ("0.2", "0.5", "0.9")[job]
        assert run.data.tags["paraeval.sweep"] == str(sweep.resolve())
        seen.append(ids[0])
    assert len(set(seen)) == 3
