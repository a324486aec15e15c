"""One class per metric, each scoring the candidates of one system against their references.

``from paraeval.metrics import BLEU`` works for every metric; defining modules are imported on
first use, so ``import paraeval.metrics`` stays cheap (no torch, transformers or numba). Every
metric has the same call, ``BLEU().score(candidates, references, sources=None) -> MetricResult``,
``references[i]`` being the references of ``candidates[i]``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from paraeval.metrics.base import Metric, MetricConfigError, MetricResult, MissingResourceError
    from paraeval.metrics.bertscore import BERTScore
    from paraeval.metrics.bleurt import BLEURT
    from paraeval.metrics.cider import CIDEr
    from paraeval.metrics.cosine import Cosine
    from paraeval.metrics.diversity import PINC, Distinct1, Distinct2, InterBLEU, SemanticDiversity
    from paraeval.metrics.meteor import METEOR
    from paraeval.metrics.nist import NIST
    from paraeval.metrics.paraphrase import BERTiBLEU, ParaScore, ParaScoreFree
    from paraeval.metrics.rouge import (
        Rouge1,
        Rouge2,
        RougeL,
        RougeLsum,
        RougeN,
        RougeS,
        RougeSU,
        RougeW,
    )
    from paraeval.metrics.sacre import BLEU, CHRF, IBLEU, TER, SelfBLEU
    from paraeval.metrics.wmd import WMD

# public name -> submodule (under paraeval.metrics) that defines it
_MODULES: dict[str, str] = {
    name: module
    for module, names in {
        "base": "Metric MetricResult MetricConfigError MissingResourceError",
        "sacre": "BLEU IBLEU SelfBLEU CHRF TER",
        "nist": "NIST",
        "meteor": "METEOR",
        "rouge": "Rouge1 Rouge2 RougeN RougeL RougeLsum RougeW RougeS RougeSU",
        "cider": "CIDEr",
        "bertscore": "BERTScore",
        "cosine": "Cosine",
        "wmd": "WMD",
        "bleurt": "BLEURT",
        "paraphrase": "ParaScore ParaScoreFree BERTiBLEU",
        "diversity": "PINC Distinct1 Distinct2 InterBLEU SemanticDiversity",
    }.items()
    for name in names.split()
}

# the metric classes (every name above except the base class, the result type and the errors)
METRICS: tuple[str, ...] = tuple(name for name, module in _MODULES.items() if module != "base")

__all__ = [
    "BLEU",
    "BLEURT",
    "CHRF",
    "IBLEU",
    "METEOR",
    "METRICS",
    "NIST",
    "PINC",
    "TER",
    "WMD",
    "BERTScore",
    "BERTiBLEU",
    "CIDEr",
    "Cosine",
    "Distinct1",
    "Distinct2",
    "InterBLEU",
    "Metric",
    "MetricConfigError",
    "MetricResult",
    "MissingResourceError",
    "ParaScore",
    "ParaScoreFree",
    "Rouge1",
    "Rouge2",
    "RougeL",
    "RougeLsum",
    "RougeN",
    "RougeS",
    "RougeSU",
    "RougeW",
    "SelfBLEU",
    "SemanticDiversity",
]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'paraeval.metrics' has no attribute {name!r}")
    value = getattr(import_module(f"paraeval.metrics.{module}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
