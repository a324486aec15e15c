"""``paraeval.list_metrics()``: the metrics a run can choose, from the same ``conf/`` the command
line composes (their default settings are the ones a run would use)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from omegaconf import OmegaConf

from paraeval.pipeline.config.compose import compose_config
from paraeval.pipeline.config.targets import metric_class, metric_ids

COLUMNS = ("id", "group", "direction", "needs", "settings")


def list_metrics() -> pd.DataFrame:
    """One row per metric of ``conf/metrics/``: its ``id`` (the name ``metrics=[...]`` takes),
    ``group``, ``direction`` (``higher`` or ``lower`` is better), what it ``needs`` (references,
    sources, an encoder model, WordNet, ...) and its default ``settings`` (but ``_target_``)."""
    ids = metric_ids()
    # composed as a run would compose them: interpolations (the cache folder) resolved
    cfg = compose_config([f"metrics=[{','.join(ids)}]"])
    rows = []
    for metric_id in ids:
        settings: dict[str, Any] = OmegaConf.to_container(cfg.metrics[metric_id], resolve=True)  # type: ignore[assignment]
        cls = metric_class(str(settings.pop("_target_")), metric_id, allow_external=False)
        needs = [
            *(["references"] if cls.needs_references else []),
            *(["sources"] if cls.needs_sources else []),
            *cls.resources,
        ]
        rows.append(
            {
                "id": metric_id,
                "group": settings.get("group") or cls.default_group,
                "direction": "higher" if cls.higher_is_better else "lower",
                "needs": ", ".join(needs),
                "settings": settings,
            }
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))
