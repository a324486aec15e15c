"""Through ``MlflowClient`` only; a hash of the outputs makes relogging return the existing run."""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from paraeval.pipeline.files import output_digest
from paraeval.pipeline.names import show
from paraeval.pipeline.secrets import credentials_in_env, redact
from paraeval.pipeline.stages.compare import comparison_order, source_columns
from paraeval.pipeline.tracking.payload import RunPayload, frame_digest
from paraeval.pipeline.tracking.run_view import (
    COEFFICIENT_TAG,
    DESCRIPTION_TAG,
    EXPERIMENT_KIND_TAG,
    MODEL_DEVELOPMENT,
    REFERENCE_FREE_TAG,
    alpha_lines,
    best_metric_lines,
    best_systems_line,
    correlation_metrics,
    finite,
    headline_coefficient,
    key,
    paraphrase_line,
    split_cache,
    system_line,
    system_metric_order,
    truthy,
)
from paraeval.pipeline.tracking.store import (
    check_reachable,
    check_store,
    driver_uri,
    experiment_id,
    resolve_tracking_uri,
    run_page,
    store_lock,
)

log = logging.getLogger("paraeval.pipeline.tracking")

CONTENT_HASH_TAG = "paraeval.content_hash"
RUN_UID_TAG = "paraeval.run_uid"
REPLACES_TAG = "paraeval.replaces"
ROLE_TAG = "paraeval.role"
SWEEP_TAGS = ("paraeval.sweep", "paraeval.sweep_job", "paraeval.hydra.launcher")
RECORD_TAGS = tuple(f"paraeval.{k}" for k in ("data", "output_dir", "overrides", "versions"))
# with REPLACES_TAG, all of paraeval's own tags a run may have; the rest are tables and params
OWN_TAGS = (RUN_UID_TAG, CONTENT_HASH_TAG, ROLE_TAG, COEFFICIENT_TAG, *RECORD_TAGS, *SWEEP_TAGS)
PARAM_MAX = 6000  # MLflow's limit on a param value
PARAMS_PER_REQUEST = 100  # MLflow's ``log_batch`` limit (metrics count towards the entries only)
TAGS_PER_REQUEST = 100
ENTRIES_PER_REQUEST = 1000

CORRELATION_TABLE = "tables/correlations.json"
COMPARISON_TABLE = "tables/system_comparison.json"
SIGNATURE_TABLE = "tables/signatures.json"
CACHE_TABLE = "tables/cache_counts.csv"
LOGGED_ARTIFACTS_TAG = "mlflow.loggedArtifacts"  # how the UI and ``load_table`` find tables
COMPARISON_STATS = ("ci_low", "ci_high", "p_bootstrap", "p_ar", "cluster")
SYSTEM_ALPHA_METRIC = "ibleu_by_alpha"

History = list[tuple[int, float]]  # (step, value)


@dataclass
class Logged:
    run_id: str
    uri: str
    already: bool  # logged before: nothing new was created
    page: str  # the run's address in MLflow's UI


def description(run: RunPayload, coefficient: str | None, lead: str) -> str:
    """The run's description in Markdown, ``lead`` (what was evaluated) first."""
    blocks: list[list[str]] = [[lead]]
    best = paraphrase_line(run.paraphrase) or best_systems_line(run.systems, run.comparison)
    if best:
        blocks.append([best])
    best_metrics = best_metric_lines(run.correlations, run.signatures, coefficient)
    blocks += [lines for lines in (best_metrics, alpha_lines(run.record.metrics)) if lines]
    blocks.append(["Every table is an artifact; `report.html` shows them all."])
    return "\n\n".join("\n".join(block) for block in blocks)


def system_metrics(systems: pd.DataFrame, comparison: pd.DataFrame) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for row in systems.to_dict("records"):
        system = str(row.pop("system"))
        row.pop("control", None)  # a role, tagged on the run, not a score
        out[system] = {key(str(k)): float(v) for k, v in row.items() if finite(v)}
    for row in comparison.to_dict("records"):
        values = out.setdefault(str(row["system"]), {})
        for stat in COMPARISON_STATS:
            if stat in row and finite(row[stat]):
                values[key(str(row["metric"]), stat)] = float(row[stat])
    return {system: system_metric_order(values) for system, values in out.items()}


def alpha_steps(alphas: Iterable[float]) -> dict[float, int]:
    """α × 100, or α × 10,000 for a finer grid, so that every α keeps a step of its own."""
    grid = sorted({float(a) for a in alphas})
    for scale in (100, 10_000):
        steps = {a: round(a * scale) for a in grid}
        if len(set(steps.values())) == len(grid):
            return steps
    return {a: k for k, a in enumerate(grid)}


def alpha_curve_histories(curve: pd.DataFrame) -> dict[str, History]:
    def name(row: dict[Any, Any]) -> str:
        parts = key(*(str(row[k]) for k in ("level", "coefficient", "aspect")))
        return f"alpha_curve.{parts}.{key(str(row['split']))}_by_alpha"

    return _histories(curve, "value", name)


def _histories(
    frame: pd.DataFrame, column: str, name: Callable[[dict[Any, Any]], str]
) -> dict[str, History]:
    if frame.empty:
        return {}
    steps = alpha_steps(frame["alpha"])
    out: dict[str, History] = {}
    for row in frame.to_dict("records"):
        if finite(row[column]):
            out.setdefault(name(row), []).append((steps[float(row["alpha"])], float(row[column])))
    return out


def _log_batch(
    client: Any,
    run_id: str,
    metrics: Mapping[str, float] | None = None,
    params: Mapping[str, str] | None = None,
    tags: Mapping[str, str] | None = None,
    histories: Mapping[str, History] | None = None,
) -> None:
    """In as few ``log_batch`` requests as MLflow's limits allow: each is a round trip."""
    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    ms = [Metric(key(k), float(v), now, 0) for k, v in (metrics or {}).items() if finite(v)]
    for name, history in (histories or {}).items():
        ms += [Metric(key(name), value, now, step) for step, value in history]
    ps = [Param(key(k), str(v)[:PARAM_MAX]) for k, v in (params or {}).items()]
    ts = [RunTag(key(k), str(v)[:PARAM_MAX]) for k, v in (tags or {}).items()]
    while ms or ps or ts:
        p_part, ps = ps[:PARAMS_PER_REQUEST], ps[PARAMS_PER_REQUEST:]
        t_part, ts = ts[:TAGS_PER_REQUEST], ts[TAGS_PER_REQUEST:]
        room = ENTRIES_PER_REQUEST - len(p_part) - len(t_part)
        m_part, ms = ms[:room], ms[room:]
        client.log_batch(run_id, metrics=m_part, params=p_part, tags=t_part)


def _log_tables(
    client: Any,
    run_id: str,
    tables: Mapping[str, pd.DataFrame],
    csv_files: Mapping[str, pd.DataFrame] | None = None,
) -> dict[str, str]:
    """One upload (``log_table`` makes a request per table); returns the tag listing the tables."""
    logged = [(name, frame) for name, frame in tables.items() if not frame.empty]
    files = [(name, frame) for name, frame in (csv_files or {}).items() if not frame.empty]
    if not logged and not files:
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, frame in logged + files:
            path = Path(tmp, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            if name.endswith(".csv"):
                frame.to_csv(path, index=False)
            else:
                frame.to_json(path, orient="split", index=False, date_format="iso")
        client.log_artifacts(run_id, tmp)
    if not logged:
        return {}
    listed = [{"path": name, "type": "table"} for name, _ in logged]
    return {LOGGED_ARTIFACTS_TAG: json.dumps(listed)}


def dataset_input(payload: RunPayload, digest: str) -> Any:
    from mlflow.data.pandas_dataset import from_pandas
    from mlflow.entities import Dataset, DatasetInput, InputTag

    record = payload.record
    described = from_pandas(payload.dataset, name=record.data_name, digest=digest).to_dict()
    # as MLflow's local source: from_pandas given a path string matches two sources and warns
    if record.data_source:
        described.update(source_type="local", source=json.dumps({"uri": record.data_source}))
    fields = ("name", "digest", "source_type", "source", "schema", "profile")
    entity = Dataset(**{k: described.get(k) for k in fields})  # type: ignore[arg-type]
    return DatasetInput(entity, tags=[InputTag("mlflow.data.context", "evaluation")])


@dataclass
class SystemRun:
    name: str
    tags: dict[str, str]
    metrics: Mapping[str, float]
    params: dict[str, str]
    histories: dict[str, History] = field(default_factory=dict)
    dataset: Any = None


def log_system_runs(
    client: Any,
    exp_id: str,
    runs: list[SystemRun],
    start: int | None,
    end: int | None,
    checkpoint: Callable[[], None] = lambda: None,
) -> None:
    """``checkpoint`` raises an interrupt deferred while the store was writing."""
    for k, run in enumerate(runs):
        checkpoint()
        # a millisecond apart, in order: the store lists them in the comparison's order
        begun = None if start is None else start + k
        child_id = client.create_run(
            exp_id, run_name=run.name, start_time=begun, tags=run.tags
        ).info.run_id
        _log_batch(
            client, child_id, metrics=run.metrics, params=run.params, histories=run.histories
        )
        if run.dataset is not None:
            client.log_inputs(child_id, [run.dataset])
        client.set_terminated(child_id, end_time=end)


def log_payload(payload: RunPayload, tracking: Mapping[str, Any] | None = None) -> Logged:
    """One parent run, one child per system; ``tracking`` overrides the record's settings."""
    import mlflow
    from mlflow.tracking import MlflowClient

    record, out_dir = payload.record, payload.out_dir
    tracking = dict(record.tracking if tracking is None else tracking)
    uri, artifact_location = resolve_tracking_uri(tracking)
    # no password, the driver named (what `mlflow ui` needs)
    shown = redact(driver_uri(uri))
    check_reachable(uri)
    check_store(uri)
    content_hash = output_digest(out_dir, record.run_uid)
    metrics = correlation_metrics(payload.correlations, record.tags.get(COEFFICIENT_TAG))
    run_metrics, cache_counts = split_cache(record.metrics)
    metrics.update(run_metrics)
    per_system = system_metrics(payload.systems, payload.comparison)
    groups = dict(zip(*(payload.signatures.get(c, ()) for c in ("column", "group")), strict=True))
    order = comparison_order(payload.comparison, source_columns(groups))
    per_system = {s: per_system[s] for s in dict.fromkeys([*order, *per_system]) if s in per_system}
    by_alpha = _histories(payload.alpha_systems, "ibleu", lambda row: str(row["system"]))
    tags = parent_tags(payload) | {CONTENT_HASH_TAG: content_hash}

    # the password goes through the environment: MLflow quotes the URI of a failed request
    with store_lock(uri), credentials_in_env(driver_uri(uri)) as target:
        mlflow.set_tracking_uri(target)
        client = MlflowClient(target)
        name = str(tracking.get("experiment") or "paraeval")
        exp_id = experiment_id(client, name, artifact_location)
        if EXPERIMENT_KIND_TAG not in client.get_experiment(exp_id).tags:
            client.set_experiment_tag(exp_id, EXPERIMENT_KIND_TAG, MODEL_DEVELOPMENT)
        existing = client.search_runs(
            [exp_id],
            filter_string=f"tags.`{CONTENT_HASH_TAG}` = '{content_hash}' "
            "and attributes.status = 'FINISHED'",
            max_results=1,
        )
        if existing:
            payload.finish_outputs()
            run_id = str(existing[0].info.run_id)
            return Logged(run_id, shown, True, run_page(shown, exp_id, run_id))
        leftovers = close_leftovers(client, exp_id, record.run_uid)
        start, end = record.started_ms or None, record.ended_ms or None
        if leftovers:
            tags[REPLACES_TAG] = ",".join(leftovers)
        try:
            # tagged first: an interrupted logging is found and closed by the next one
            parent_id = client.create_run(
                exp_id,
                run_name=record.run_name,
                start_time=start,
                tags={RUN_UID_TAG: record.run_uid, "paraeval.output_dir": str(out_dir.resolve())},
            ).info.run_id
            # the user's settings, not the classes they name; the params one request takes,
            # the rest go with the last request's tags
            params = [(k, v) for k, v in record.params.items() if not k.endswith("_target_")]
            _log_batch(
                client,
                parent_id,
                metrics=metrics,
                params=dict(params[:PARAMS_PER_REQUEST]),
                histories=alpha_curve_histories(payload.alpha_curve),
            )
            dataset = dataset_input(payload, frame_digest(payload.dataset))
            client.log_inputs(parent_id, [dataset])
            shared = {k: v for k, v in tags.items() if k in SWEEP_TAGS[:2]}
            controls = control_systems(payload.systems)
            roles = {s: "control" if s in controls else "system" for s in per_system}
            children = [
                SystemRun(
                    name=show(system),  # nested under the invocation: the name says it all
                    tags={
                        "mlflow.parentRunId": parent_id,
                        DESCRIPTION_TAG: system_line(
                            system, roles[system], values, payload.paraphrase
                        ),
                        "paraeval.system": system,
                        ROLE_TAG: roles[system],
                        **shared,
                    },
                    metrics=values,
                    params={"system": system},
                    histories={SYSTEM_ALPHA_METRIC: by_alpha[system]} if system in by_alpha else {},
                    dataset=dataset,
                )
                for system, values in per_system.items()
            ]
            log_system_runs(client, exp_id, children, start, end, payload.context.raise_deferred)
            tables = {
                CORRELATION_TABLE: payload.correlations,
                COMPARISON_TABLE: payload.comparison,
                SIGNATURE_TABLE: payload.signatures,
            }
            tags.update(_log_tables(client, parent_id, tables, {CACHE_TABLE: cache_counts}))
            payload.context.raise_deferred()
            payload.finish_outputs()
            client.log_artifacts(parent_id, str(out_dir))
            # the content tag goes last: a run interrupted before here is not taken as logged
            payload.context.raise_deferred()
            _log_batch(client, parent_id, params=dict(params[PARAMS_PER_REQUEST:]), tags=tags)
            client.set_terminated(parent_id, end_time=end)
        except BaseException as exc:
            # never left RUNNING: KILLED for an interrupt (Ctrl-C, SIGTERM), FAILED otherwise
            status = "FAILED" if isinstance(exc, Exception) else "KILLED"
            with suppress(Exception):
                end_unfinished(client, exp_id, record.run_uid, status)
            raise
    return Logged(parent_id, shown, False, run_page(shown, exp_id, parent_id))


def parent_tags(payload: RunPayload) -> dict[str, str]:
    """MLflow's and :data:`OWN_TAGS` of the record (an older one holds more), the description."""
    record, systems = payload.record, payload.systems
    mine = {k: v for k, v in record.tags.items() if k in OWN_TAGS or k.startswith("mlflow.")}
    tags = {k: v for k, v in mine.items() if v}
    tags[ROLE_TAG] = "invocation"
    coefficient = headline_coefficient(payload.correlations, record.tags.get(COEFFICIENT_TAG))
    if coefficient is not None:
        tags[COEFFICIENT_TAG] = coefficient
    items = payload.dataset["item_id"].nunique() if "item_id" in payload.dataset else 0
    n_metrics = len(str(record.params.get("metrics.selected", "")).split(","))
    lead = f"**{record.data_name}**: {len(systems)} systems × {items} items, {n_metrics} metrics"
    note = record.tags.get(REFERENCE_FREE_TAG)
    tags[DESCRIPTION_TAG] = description(payload, coefficient, f"{lead}. {note}" if note else lead)
    return tags


def control_systems(systems: pd.DataFrame) -> set[str]:
    if systems.empty or not {"system", "control"} <= set(systems):
        return set()
    return set(systems.loc[truthy(systems["control"]), "system"].astype(str))


def _runs_of(client: Any, exp_id: str, run_uid: str, where: str = "") -> Iterator[Any]:
    found = client.search_runs([exp_id], filter_string=f"tags.`{RUN_UID_TAG}` = '{run_uid}'{where}")
    for parent in found:
        by_parent = f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
        yield parent, [*client.search_runs([exp_id], filter_string=by_parent), parent]


def end_unfinished(client: Any, exp_id: str, run_uid: str, status: str) -> None:
    """Found by ``run_uid``: an interrupt can come after a run is created, before its id."""
    for _, runs in _runs_of(client, exp_id, run_uid):
        for run in runs:
            if run.info.status == "RUNNING":
                client.set_terminated(run.info.run_id, status=status)


def close_leftovers(client: Any, exp_id: str, run_uid: str) -> list[str]:
    """Ended as KILLED, then deleted (restorable in MLflow); returns the parents' ids."""
    closed = []
    for parent, runs in _runs_of(client, exp_id, run_uid, " and attributes.status != 'FINISHED'"):
        for run in runs:
            if run.info.status == "RUNNING":
                client.set_terminated(run.info.run_id, status="KILLED")
            client.delete_run(run.info.run_id)
        log.info("closed the unfinished MLflow run %s of this output directory", parent.info.run_id)
        closed.append(str(parent.info.run_id))
    return closed
