"""A generated WMT-sized test set in mt-metrics-eval's layout, for ``bench_mtme.py``.

One language pair (en-de), one reference (refA), ``systems`` x ``segments`` outputs, MQM-like
segment scores (negated error weights in steps of 0.5, so that many pairs tie; some segments not
rated: ``None`` for every system, as WMT's unrated segments) with their system means, and
``metrics`` precomputed metrics: ``<Name>-refA`` (and a few ``<Name>-src``) segment scores and
system scores, each the latent quality plus noise of its own level, so that the metrics rank with
structure (close metrics tie in clusters, far ones separate). The system scores of a metric are
its segment mean plus a small system-level noise: given, not the mean. Deterministic: one seeded
``numpy.random.Generator``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

LP = "en-de"
REF = "refA"
GOLD = "mqm"
_WORDS_TEXT = (
    "the a of to in and is was for on that with by as at from it be this are were which an or "
    "government people year city report price market house children country world time day man "
    "woman said told asked began bought quickly large small new old good great high long little "
    "river bridge winter summer council teacher doctor engine village letter garden window"
)
WORDS = _WORDS_TEXT.split()


@dataclass(frozen=True)
class Layout:
    """What was written: the folder and the names the files use."""

    root: Path
    systems: list[str]
    metrics: list[str]  # full names, e.g. Metric07-refA, Metric38-src
    segments: int


def metric_names(n: int, n_src: int = 0) -> list[str]:
    """``n`` full names, the last ``n_src`` of them reference-free (``-src``)."""
    n_src = min(n_src, n)
    return [f"Metric{k + 1:02d}-{REF if k < n - n_src else 'src'}" for k in range(n)]


def _sentence(rng: np.random.Generator, n: int) -> list[str]:
    return [WORDS[i] for i in rng.integers(0, len(WORDS), size=n)]


def _write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _write_scores(path: Path, systems: list[str], scores: np.ndarray) -> None:
    """``SYSTEM SCORE`` lines, system by system (ReadScoreFile's format); NaN is ``None``."""
    lines = [
        f"{s} {'None' if np.isnan(v) else repr(float(v))}"
        for s, row in zip(systems, scores.reshape(len(systems), -1), strict=True)
        for v in row
    ]
    _write_lines(path, lines)


def generate(
    root: Path,
    systems: int = 15,
    segments: int = 2000,
    metrics: int = 40,
    src_metrics: int = 4,
    unrated: float = 0.06,
    seed: int = 53,
) -> Layout:
    """Writes the test set under ``root`` (the folder holding ``sources/``...)."""
    rng = np.random.default_rng(seed)
    names = [f"sys{k:02d}" for k in range(systems)]
    full = metric_names(metrics, src_metrics)
    domains = ["news", "social", "speech", "literary"]
    docs, sources, refs = [], [], []
    for i in range(segments):
        doc = i // 20
        docs.append(f"{domains[doc % len(domains)]} doc{doc:04d}")
        words = _sentence(rng, int(rng.integers(6, 30)))
        sources.append(" ".join(words))
        refs.append(" ".join(w if rng.random() < 0.8 else str(rng.choice(WORDS)) for w in words))
    _write_lines(root / "documents" / f"{LP}.docs", docs)
    _write_lines(root / "sources" / f"{LP}.txt", sources)
    _write_lines(root / "references" / f"{LP}.{REF}.txt", refs)

    quality = np.sort(rng.normal(0.0, 0.6, size=systems))[::-1]
    difficulty = rng.normal(0.0, 1.0, size=segments)
    latent = quality[:, None] + difficulty[None, :] + rng.normal(0.0, 1.0, (systems, segments))
    keep = 1.0 / (1.0 + np.exp(-latent))  # chance that a reference word survives
    for s, name in enumerate(names):
        out = []
        for i, ref in enumerate(refs):
            words = ref.split()
            flips = rng.random(len(words)) > keep[s, i]
            out.append(
                " ".join(
                    str(rng.choice(WORDS)) if f else w for w, f in zip(words, flips, strict=True)
                )
            )
        _write_lines(root / "system-outputs" / LP / f"{name}.txt", out)

    errors = np.clip(np.round(2.0 * (1.5 - latent)) / 2.0, 0.0, 25.0)
    mqm = -errors
    mqm[:, rng.random(segments) < unrated] = np.nan
    _write_scores(root / "human-scores" / f"{LP}.{GOLD}.seg.score", names, mqm)
    _write_scores(root / "human-scores" / f"{LP}.{GOLD}.sys.score", names, np.nanmean(mqm, axis=1))

    noise = np.linspace(0.4, 3.0, metrics)
    folder = root / "metric-scores" / LP
    for k, name in enumerate(full):
        scale, shift = rng.uniform(0.05, 1.0), rng.uniform(-1.0, 1.0)
        bias = rng.normal(0.0, 0.1 * noise[k], (systems, 1))  # its own view of the systems
        seg = scale * (latent + bias + rng.normal(0.0, noise[k], latent.shape)) + shift
        seg = np.round(seg, 4)  # as stored scores are: a few digits, so some of them tie
        given = seg.mean(axis=1) + rng.normal(0.0, 0.02 * scale, systems)
        _write_scores(folder / f"{name}.seg.score", names, seg)
        _write_scores(folder / f"{name}.sys.score", names, given)
    return Layout(root, names, full, segments)
