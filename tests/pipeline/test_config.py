"""Compose every option of every config group and instantiate it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from paraeval.pipeline.config.compose import config_dir
from paraeval.pipeline.config.nodes import DataSettings
from paraeval.pipeline.data.load import load_data
from paraeval.pipeline.stages.aggregate import Normalizer
from paraeval.pipeline.stages.score import build_metric, build_metrics, score
from tests.pipeline.test_mtme import write_mtme

CONF = config_dir()


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def _compose(overrides: list[str]) -> DictConfig:
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=False)


def test_default_config_composes() -> None:
    cfg = _compose([])
    assert list(cfg.metrics) == [
        "bleu",
        "ibleu",
        "self_bleu",
        "chrf",
        "ter",
        "nist",
        "meteor",
        "rouge1",
        "rouge2",
        "rougeL",
        "rougeLsum",
        "rougeW",
        "rougeS",
        "rougeSU",
        "cider",
        "bertscore",
        "cosine",
        "wmd",
        "parascore",
        "parascore_free",
        "bert_ibleu",
        "pinc",
    ]
    assert cfg.metrics.ibleu.alpha == 0.8
    assert cfg.seed == 1234


def test_job_name_is_paraeval() -> None:
    raw = OmegaConf.load(CONF / "config.yaml")
    assert raw.hydra.job.name == "paraeval"


@pytest.mark.slow
@pytest.mark.parametrize("metric_id", options("metrics"))
def test_every_metric_option_composes_and_instantiates(metric_id: str, tmp_path: Path) -> None:
    cfg = _compose([f"metrics=[{metric_id}]"])
    node = OmegaConf.to_container(cfg.metrics[metric_id], resolve=True)
    assert isinstance(node, dict)
    if metric_id == "bleurt":
        # no checkpoint configured by default: one clear error (loading is tested on a tiny
        # checkpoint in tests/metrics/test_bleurt.py)
        from paraeval.pipeline.errors import ConfigError

        with pytest.raises(ConfigError, match="checkpoint"):
            build_metric(metric_id, node)
        return
    metric = build_metric(metric_id, node)
    assert metric.name == metric_id or metric_id in metric.output_columns or metric.output_columns
    assert metric.signature().split("|")[0] == metric.name


@pytest.mark.parametrize("option", options("normalize"))
def test_every_normalize_option(option: str) -> None:
    cfg = _compose([f"normalize={option}"])
    node = OmegaConf.to_container(cfg.normalize, resolve=True)
    assert isinstance(node, dict)
    assert node.pop("_target_") == "paraeval.pipeline.stages.aggregate.Normalizer"
    Normalizer(**node)


@pytest.mark.parametrize("option", options("tracking"))
def test_every_tracking_option(option: str) -> None:
    cfg = _compose([f"tracking={option}"])
    assert {"enabled", "uri", "experiment"} <= set(cfg.tracking)


@pytest.mark.parametrize("option", options("correlation"))
def test_every_correlation_option(option: str) -> None:
    from paraeval.correlation import COEFFICIENTS, LEVELS

    cfg = _compose([f"correlation={option}"])
    assert set(cfg.correlation.levels) <= set(LEVELS)
    assert set(cfg.correlation.coefficients) <= set(COEFFICIENTS)


def _data_overrides(option: str, tmp_path: Path) -> list[str]:
    if option == "table":
        path = tmp_path / "t.tsv"
        path.write_text(
            "item_id\tsystem\tsource\treferences\tcandidate\thuman_x\n"
            "1\ta\tthe cat\ta cat\tthe cat\t3\n",
            encoding="utf-8",
        )
        return [f"data.path={path}"]
    if option == "text":
        for name, text in {"src": "a b c\n", "ref": "a b d\n", "sys": "a b\n"}.items():
            (tmp_path / f"{name}.txt").write_text(text, encoding="utf-8")
        return [
            f"data.source={tmp_path / 'src.txt'}",
            f"data.references=[{tmp_path / 'ref.txt'}]",
            f"data.systems={{s: {tmp_path / 'sys.txt'}}}",
        ]
    if option == "mtme":
        return [f"data.path={write_mtme(tmp_path)}", "data.lp=en-de"]
    return []


@pytest.mark.parametrize("option", options("data"))
def test_every_data_option(option: str, tmp_path: Path, shared_data_or_none: Path | None) -> None:
    overrides = [f"data={option}", *_data_overrides(option, tmp_path)]
    cfg = _compose(overrides)
    if option in ("parabank", "stsb") and shared_data_or_none is None:
        pytest.skip("real-data config: ../shared/data is absent")
    if option in ("parabank", "stsb"):
        return  # loading the real files is tested in tests/pipeline/test_real_data.py
    df = load_data(DataSettings.from_node(OmegaConf.to_container(cfg.data, resolve=True)))
    assert {"item_id", "system", "source", "references", "candidate"} <= set(df.columns)


@pytest.mark.parametrize("option", options("experiment"))
def test_every_experiment_option(option: str) -> None:
    cfg = _compose([f"experiment={option}"])
    assert "metrics" in cfg and "data" in cfg


def test_quick_experiment_drops_cosine() -> None:
    from paraeval.pipeline.stages.score import build_metrics

    cfg = _compose(["experiment=quick"])
    built = build_metrics(OmegaConf.to_container(cfg.metrics, resolve=True))  # type: ignore[arg-type]
    assert "cosine" not in built and "bleu" in built
    assert cfg.tracking.enabled is False


@pytest.mark.parametrize("option", options("compare"))
def test_every_compare_option(option: str) -> None:
    from paraeval.pipeline.config.nodes import CompareSettings

    cfg = _compose([f"compare={option}"])
    node = OmegaConf.to_container(cfg.compare, resolve=True)
    assert isinstance(node, dict)
    assert node["seed"] == cfg.seed
    assert CompareSettings.from_node(node) is not None


def test_rouge_n_composes_with_its_order_as_the_column() -> None:
    cfg = _compose(["metrics=[rougeN]"])
    assert cfg.metrics.rougeN.n == 3
    metrics = build_metrics(OmegaConf.to_container(cfg.metrics, resolve=True))  # type: ignore[arg-type]
    assert metrics["rougeN"].output_columns == ("rouge3",)
    cfg = _compose(["metrics=[bleu,rougeN]", "metrics.rougeN.n=4", "metrics.rougeN.measure=recall"])
    metrics = build_metrics(OmegaConf.to_container(cfg.metrics, resolve=True))  # type: ignore[arg-type]
    table = pd.DataFrame(
        {
            "item_id": ["1", "1"],
            "system": ["a", "b"],
            "source": ["the cat sat on the mat", "the cat sat on the mat"],
            "references": [["a cat sat on the mat today"]] * 2,
            "candidate": ["a cat sat on the mat", "the dog sat on the mat"],
        }
    )
    scores = score(table, metrics, progress=False)
    # the reference has four 4-grams: the first candidate shares three, the second one
    assert list(scores.segments["rouge4"]) == pytest.approx([3 / 4, 1 / 4], abs=1e-12)
    info = scores.columns["rouge4"]
    assert info.metric == "rougeN" and info.signature.startswith("rouge4|")
    assert "measure:recall" in info.signature


@pytest.mark.parametrize("n", ["0", "-1", "2.5"])
def test_rouge_n_order_below_one_or_fractional_is_a_config_error(n: str) -> None:
    from paraeval.pipeline.errors import ConfigError

    cfg = _compose(["metrics=[rougeN]", f"metrics.rougeN.n={n}"])
    node = OmegaConf.to_container(cfg.metrics.rougeN, resolve=True)
    assert isinstance(node, dict)
    with pytest.raises(ConfigError, match=r"metric 'rougeN': n must be"):
        build_metric("rougeN", node)


def test_two_metrics_giving_one_column_are_a_config_error() -> None:
    from paraeval.pipeline.errors import ConfigError

    cfg = _compose(["metrics=[rouge2,rougeN]", "metrics.rougeN.n=2"])
    nodes = OmegaConf.to_container(cfg.metrics, resolve=True)
    with pytest.raises(ConfigError, match=r"'rouge2' and 'rougeN' both give the column 'rouge2'"):
        build_metrics(nodes)  # type: ignore[arg-type]
    # settings that differ do not help: the columns would still overwrite each other
    cfg = _compose(
        ["metrics=[rouge1,rougeN]", "metrics.rougeN.n=1", "metrics.rouge1.measure=recall"]
    )
    with pytest.raises(ConfigError, match=r"column 'rouge1'"):
        build_metrics(OmegaConf.to_container(cfg.metrics, resolve=True))  # type: ignore[arg-type]


def test_the_metrics_of_a_run_share_one_encoder_and_runs_share_none() -> None:
    cfg = _compose(["metrics=[bertscore,cosine,parascore]"])
    nodes = OmegaConf.to_container(cfg.metrics, resolve=True)
    first = build_metrics(nodes)  # type: ignore[arg-type]
    encoders = {id(first["bertscore"].encoder), id(first["cosine"].encoder)}  # type: ignore[attr-defined]
    encoders.add(id(first["parascore"].bertscore.encoder))  # type: ignore[attr-defined]
    assert len(encoders) == 1
    second = build_metrics(nodes)  # type: ignore[arg-type]
    assert id(second["cosine"].encoder) not in encoders  # type: ignore[attr-defined]


def test_the_run_encoders_argument_is_not_a_user_setting() -> None:
    from paraeval.pipeline.errors import ConfigError

    cfg = _compose(["metrics=[cosine]"])
    node = {**OmegaConf.to_container(cfg.metrics.cosine, resolve=True), "encoders": "x"}  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"metrics\.cosine: unknown setting\(s\) \['encoders'\]"):
        build_metric("cosine", node)


@pytest.mark.slow
@pytest.mark.parametrize("metric_id", options("metrics"))
def test_metric_class_defaults_equal_its_conf_file(metric_id: str) -> None:
    """The library API (``paraeval.metrics.BLEU()``) and a run compute with the same settings:
    every constructor default of the class is the value its conf/metrics file gives."""
    import inspect

    from paraeval.pipeline.config.targets import metric_class

    node = OmegaConf.to_container(_compose([f"metrics=[{metric_id}]"]).metrics[metric_id])
    assert isinstance(node, dict)
    cls = metric_class(str(node.pop("_target_")), metric_id, allow_external=False)
    params = inspect.signature(cls).parameters
    differ = {
        key: (params[key].default, value)
        for key, value in node.items()
        if key in params
        and params[key].default is not inspect.Parameter.empty
        and not (isinstance(value, str) and "${" in value)  # an interpolation: the run's value
        and params[key].default != (tuple(value) if isinstance(value, list) else value)
        and params[key].default != value
    }
    assert differ == {}
