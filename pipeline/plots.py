"""Plots written to ``plots/`` in the output directory (matplotlib, no display needed)."""

from __future__ import annotations

import hashlib
import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from paraeval.memo import Memo
from paraeval.pipeline.names import slug

log = logging.getLogger(__name__)


def _plt():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, dpi: int) -> None:
    """PNG through a temporary file and a rename (the format is given: the temporary name has no
    .png suffix), so a crash never leaves a truncated image under the final name."""
    from paraeval.pipeline.files import atomic_write

    atomic_write(path, lambda p: fig.savefig(p, dpi=dpi, format="png"))


# PNGs this process has drawn, by a digest of the drawing function, the plotting code and the
# plotted data. A Hydra multirun runs its jobs in one process, and most figures of an α sweep's
# jobs show data that did not change: those are written again, not drawn again.
_PNGS: Memo[str, bytes] = Memo("plots.png", max_entries=128)
_CODE: str | None = None


def _code_digest() -> str:
    global _CODE
    if _CODE is None:
        import matplotlib

        h = hashlib.blake2b(matplotlib.__version__.encode(), digest_size=16)
        for name in ("plots.py", "compare_plots.py", "sweep.py"):
            h.update((Path(__file__).parent / name).read_bytes())
        _CODE = h.hexdigest()
    return _CODE


def _feed(h: Any, part: Any) -> None:
    if isinstance(part, pd.DataFrame | pd.Series):
        frame = part.to_frame() if isinstance(part, pd.Series) else part
        h.update(repr([list(map(str, frame.columns)), list(map(str, frame.dtypes))]).encode())
        h.update(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes())
    elif isinstance(part, np.ndarray):
        h.update(repr((part.shape, part.dtype.str)).encode() + part.tobytes())
    elif isinstance(part, list | tuple):
        h.update(b"[")
        for p in part:
            _feed(h, p)
        h.update(b"]")
    else:
        h.update(repr(part).encode())
    h.update(b"\x1f")


def render(path: Path, kind: str, draw: Callable[[Path], object], *inputs: Any) -> None:
    """``draw(path)``, unless this process already drew a ``kind`` figure from the same
    ``inputs`` (everything the figure depends on): then those PNG bytes are written."""
    h = hashlib.blake2b(digest_size=32)
    h.update(f"{_code_digest()}|{kind}".encode())
    for part in inputs:
        _feed(h, part)
    key = h.hexdigest()
    png = _PNGS.get(key)
    if png is not None:
        from paraeval.pipeline.files import atomic_write

        atomic_write(path, lambda p: p.write_bytes(png))
        return
    draw(path)
    if not path.exists():  # nothing to draw
        return
    _PNGS.put(key, path.read_bytes())


def correlation_heatmap(corr: pd.DataFrame, path: Path, coefficient: str | None = None) -> None:
    """Metrics x (aspect, level) for one coefficient; NaN cells are left blank."""
    if corr.empty:
        return
    coefficient = coefficient or (
        "kendall_b" if "kendall_b" in set(corr["coefficient"]) else corr["coefficient"].iloc[0]
    )
    sub = corr[corr["coefficient"] == coefficient]
    table = sub.pivot_table(
        index="metric", columns=["aspect", "level"], values="value", aggfunc="first", sort=False
    )
    plt = _plt()
    # fixed margins sized from the labels: a layout engine measures every text twice and cost
    # as much as the drawing
    left = 0.3 + 0.07 * max((len(str(m)) for m in table.index), default=4)
    width = left + 1.1 * table.shape[1] + 1.3
    height = 1.2 + 0.38 * table.shape[0]
    fig, ax = plt.subplots(figsize=(width, height))
    fig.subplots_adjust(
        left=left / width, right=1 - 0.2 / width, bottom=0.55 / height, top=1 - 0.4 / height
    )
    data = table.to_numpy(dtype=float)
    im = ax.imshow(np.ma.masked_invalid(data), cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    ax.set_xticks(
        range(table.shape[1]),
        [f"{str(a).removeprefix('human_')}\n{lv}" for a, lv in table.columns],
        fontsize=8,
    )
    ax.set_yticks(range(table.shape[0]), list(table.index), fontsize=8)
    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            if np.isfinite(data[i, j]):
                ax.text(
                    j,
                    i,
                    f"{data[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if abs(data[i, j]) > 0.6 else "black",
                )
    ax.set_title(f"{coefficient} with human ratings")
    fig.colorbar(im, ax=ax, shrink=0.8)
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def metric_vs_human(
    segments: pd.DataFrame, systems: pd.DataFrame, metric: str, aspect: str, path: Path
) -> None:
    """Segment-level points coloured by system, system means as large markers."""
    plt = _plt()
    # fixed margins: a layout engine costs more than the drawing itself on small plots
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.13, top=0.92, wspace=0.25)
    order = list(dict.fromkeys(segments["system"]))
    if len(order) <= 12:
        for system, sub in segments.groupby("system", sort=False):
            axes[0].scatter(sub[metric], sub[aspect], s=10, alpha=0.6, label=str(system))
    else:
        # without a legend one collection draws the same colours as one call per system
        # (cycled through the default colour cycle in order of appearance), much faster
        cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        code = segments["system"].map({s: i for i, s in enumerate(order)}).to_numpy()
        x = segments[metric].to_numpy(dtype=float)
        y = segments[aspect].to_numpy(dtype=float)
        # one marker line per colour: Agg stamps a cached marker, far faster than a scatter
        # collection with a colour per point (same size, s=10 points^2)
        for k, color in enumerate(cycle):
            pick = code % len(cycle) == k
            if pick.any():
                axes[0].plot(x[pick], y[pick], "o", ms=10**0.5, mew=0, alpha=0.6, color=color)
    axes[0].set_xlabel(metric)
    axes[0].set_ylabel(aspect)
    axes[0].set_title("segments")
    if len(systems) <= 12:
        axes[0].legend(fontsize=7, markerscale=1.5)
    if metric in systems and aspect in systems:
        axes[1].scatter(systems[metric], systems[aspect], s=40)
        for name, row in systems.iterrows():
            axes[1].annotate(
                str(name),
                (row[metric], row[aspect]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
    axes[1].set_xlabel(f"{metric} (corpus)")
    axes[1].set_ylabel(f"mean {aspect}")
    axes[1].set_title("systems")
    save_figure(fig, path, dpi=90)
    plt.close(fig)


def scatter_columns(
    segments: pd.DataFrame, metric_cols: list[str], max_scatter: int = 4
) -> list[str]:
    """The columns that get a metric-vs-human scatter plot: the group averages first."""
    chosen = [c for c in ("syntactic", "semantic") if c in segments] + [
        c for c in metric_cols if c not in ("syntactic", "semantic") and c in segments
    ]
    return chosen[:max_scatter]


def write_plots(
    out_dir: Path,
    segments: pd.DataFrame,
    systems: pd.DataFrame,
    corr: pd.DataFrame,
    metric_cols: list[str],
    aspects: list[str],
    max_scatter: int = 4,
) -> list[Path]:
    plots = out_dir / "plots"
    written = []
    try:
        with warnings.catch_warnings():
            # one system or constant scores give singular axis limits; matplotlib copes and warns
            warnings.simplefilter("ignore", UserWarning)
            if not corr.empty:
                p = plots / "correlation_heatmap.png"
                shown = corr[["metric", "aspect", "level", "coefficient", "value"]]
                render(
                    p,
                    "correlation_heatmap",
                    lambda q: correlation_heatmap(shown, q),
                    shown.reset_index(drop=True),
                )
                written.append(p)
            for metric in scatter_columns(segments, metric_cols, max_scatter):
                for aspect in aspects:
                    p = plots / f"scatter_{slug(metric)}_{slug(aspect)}.png"  # names from data
                    seg = segments[["system", metric, aspect]]
                    sys_view = (
                        systems.reindex(columns=[metric, aspect])
                        if (metric in systems and aspect in systems)
                        else None
                    )
                    render(
                        p,
                        "metric_vs_human",
                        lambda q, m=metric, a=aspect, sg=seg: metric_vs_human(sg, systems, m, a, q),
                        metric,
                        aspect,
                        seg.reset_index(drop=True),
                        sys_view,
                    )
                    written.append(p)
    except Exception as exc:  # a plot must never cost the numbers
        log.warning("plotting failed (%s); the tables are written", exc)
    return written
