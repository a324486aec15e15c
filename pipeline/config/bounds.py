"""Count settings, checked before the data is loaded: each an integer of at least its minimum, or
one config error naming it. What their memory needs once the data's shape is known is checked by
:mod:`paraeval.pipeline.stages.memory_bounds`, after loading and before scoring."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paraeval.pipeline.errors import ConfigError

# count settings of a metric (conf/metrics/*.yaml) and the smallest value each takes
METRIC_COUNTS: dict[str, int] = {
    "batch_size": 1,
    "bert_score_batch_size": 0,  # 0: bert-score's padding rule off
    "max_ngram_order": 1,
    "max_order": 1,
    "char_order": 0,
    "word_order": 0,
    "max_length": 1,
    "n": 1,  # rougeN's order
}
# metrics whose corpus statistics have two counts per n-gram order (and their order setting)
NGRAM_ORDERS = ("max_ngram_order", "max_order")


def count(value: object, key: str, minimum: int = 1) -> int:
    """``value`` as a count of at least ``minimum``: an integer (not a boolean, not 2.5, not
    1e6, which YAML reads as a float), else a ConfigError naming ``key``."""
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "a positive integer" if minimum >= 1 else f"an integer >= {minimum}"
        raise ConfigError(f"{key} must be {kind}, got {value!r}")
    if value < minimum:
        kind = "a positive integer" if minimum >= 1 else f"an integer >= {minimum}"
        raise ConfigError(f"{key} must be {kind}, got {value}")
    return value


def check_counts(tree: Mapping[str, Any]) -> None:
    """The count settings that are not checked elsewhere, before the data is loaded: integers of
    at least their minimum (``correlation`` and ``compare`` check their own)."""
    metrics = tree.get("metrics") or {}
    for metric_id, node in metrics.items():
        if not isinstance(node, Mapping):
            continue
        for key, minimum in METRIC_COUNTS.items():
            if node.get(key) is not None:
                count(node[key], f"metrics.{metric_id}.{key}", minimum)
    data = tree.get("data") or {}
    for key in ("max_items",):
        if isinstance(data, Mapping) and data.get(key) is not None:
            count(data[key], f"data.{key}")
