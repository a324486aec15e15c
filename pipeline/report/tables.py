"""report.html's answers and tables, by pandas' ``Styler``: one precision a column, text escaped."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd
from markupsafe import Markup

from paraeval.pipeline.report.plots import AVERAGES, FigureStyle, averages_first
from paraeval.pipeline.stages.compare import comparison_order, source_columns
from paraeval.pipeline.stages.correlate import headline_coefficient, headline_level

if TYPE_CHECKING:
    from paraeval.pipeline.stages.evaluation import Evaluation

INTEGER_COLUMNS = frozenset({"n", "rank", "cluster", "seed"})
MAX_COLUMNS = 10  # a wider table is split into several (1,400 px hold about ten)
DASH = "–"
RIGHT_ALIGNED = ("p ", "interval")  # text columns that hold numbers
_IDS = itertools.count(1)  # each table's id in the page: Styler's CSS selects its cells by it
MIN_BEST, MAX_BEST = 3, 8  # the metrics an answer shows of the best cluster
ALPHA_COLUMNS = ["aspect", "level", "coefficient", "chosen_alpha", "dev", "test"]
ALPHA_COLUMNS += ["configured_alpha", "test_at_configured", "n_dev_items", "n_test_items"]
ALPHA_HEADERS = {
    "chosen_alpha": "α chosen on dev",
    "configured_alpha": "configured α",
    "test_at_configured": "test at the configured α",
    "n_dev_items": "dev items",
    "n_test_items": "test items",
}
HUMAN_HEADERS = {"n_items": "items", "n_rated": "rated", "n_single_rating": "one rating only"}


def figure_style(ev: Evaluation) -> FigureStyle:
    assert ev.aggregated is not None
    info = ev.aggregated.columns.items()
    lower = frozenset(c for c, i in info if not i.higher_is_better)
    source = source_columns({c: i.group for c, i in info})
    return FigureStyle(ev.settings.report.format, lower, source)


def sacrebleu_p(p: object, alpha: float = 0.05) -> str:
    """A p-value as sacrebleu's paired tests print it: ``0.0123*`` where ``p <= alpha``."""
    try:
        v = float(p)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return DASH
    return DASH if not math.isfinite(v) else f"{v:.4f}" + ("*" if v <= alpha else "")


def ranked_columns(ev: Evaluation) -> list[str]:
    """The compared columns the systems are ranked by: the group averages, else the first two."""
    if ev.compared is None or ev.compared.table.empty:
        return []
    metrics = list(dict.fromkeys(ev.compared.table["metric"]))
    return [m for m in AVERAGES if m in metrics] or metrics[:2]


def system_ranking(ev: Evaluation, metric: str) -> pd.DataFrame:
    """One compared column's systems best first, with the paired p-values against the baseline."""
    assert ev.compared is not None
    alpha = ev.compared.config.alpha
    t = ev.compared.table
    sub = t[t["metric"] == metric].sort_values(["rank", "score"], ascending=[True, False])
    baseline = sub["system"] == ev.compared.baseline

    def p_values(column: str) -> list[str]:
        pairs = zip(baseline, sub[column], strict=True)
        return ["baseline" if b else sacrebleu_p(p, alpha) for b, p in pairs]

    out = sub[["rank", "system", "score", "ci_low", "ci_high", "cluster"]].reset_index(drop=True)
    out = out.astype({"score": float, "ci_low": float, "ci_high": float})
    labels = zip(sub["system"], sub["control"].astype(bool), strict=True)
    out["system"] = [f"{s} (control)" if c else str(s) for s, c in labels]
    out["p (bootstrap)"] = p_values("p_bootstrap")
    out["p (AR)"] = p_values("p_ar")
    return out


@dataclass
class Agreement:
    """Ranked by cluster, then by correlation (a lower-is-better metric's sign turned)."""

    coefficient: str = ""
    level: str = ""
    alpha: float = 0.05
    method: str = ""
    by_aspect: dict[str, pd.DataFrame] = field(default_factory=dict)
    overall: pd.DataFrame = field(default_factory=pd.DataFrame)  # metric_ranking.csv's

    def best(self, aspect: str) -> pd.DataFrame:
        """The best cluster's metrics (at least MIN_BEST, at most MAX_BEST)."""
        ranked = self.by_aspect[aspect]
        in_best = int((ranked["cluster"] == ranked["cluster"].min()).sum())  # 0 if all NaN
        return ranked.head(min(max(in_best, MIN_BEST), MAX_BEST))


def agreement(ev: Evaluation) -> Agreement:
    corr = ev.correlations
    if corr.empty:
        return Agreement()
    cfg = ev.settings.correlation
    coefficient = headline_coefficient(cfg, corr["coefficient"])
    sub = corr[corr["coefficient"] == coefficient]
    level = headline_level(cfg, sub["level"])
    sub = sub[sub["level"] == level]
    ranking = ev.ranking
    test = (ranking["coefficient"] == coefficient) & (ranking["level"] == level)
    clusters = ranking[test].set_index(["aspect", "metric"])["cluster"].astype(float)
    sig = ev.significance
    if not sig.empty:
        sig = sig[(sig["coefficient"] == coefficient) & (sig["level"] == level)]
    info = ev.aggregated.columns if ev.aggregated is not None else {}
    alpha = Agreement.alpha if cfg.significance is None else cfg.significance.alpha
    out = Agreement(coefficient, level, alpha, str(sig["method"].iloc[0]) if not sig.empty else "")
    out.overall = ranking[ranking["level"] == "overall"]
    for aspect, rows in sub.groupby("aspect", sort=False):
        sign = [-1.0 if m in info and not info[m].higher_is_better else 1.0 for m in rows["metric"]]
        frame = pd.DataFrame(
            {c: rows[c].to_numpy(dtype=float) for c in ("value", "ci_low", "ci_high")}
        )
        frame.insert(0, "metric", rows["metric"].to_numpy())
        frame["agreement"] = frame["value"].to_numpy() * sign
        frame["n"] = rows["n"].to_numpy()
        pairs = sig[sig["aspect"] == aspect] if not sig.empty else sig
        frame["cluster"] = frame["metric"].map(clusters[aspect]) if not pairs.empty else math.nan
        frame = frame.sort_values(
            ["cluster", "agreement"], ascending=[True, False], na_position="last", kind="stable"
        ).reset_index(drop=True)
        if not pairs.empty:
            metrics = list(frame["metric"])
            frame["p vs best"] = _p_against(pairs, metrics, metrics[:1] * len(metrics))
            frame["p vs next"] = _p_against(pairs, metrics, [*metrics[1:], None])
        out.by_aspect[str(aspect)] = frame
    return out


def _p_against(pairs: pd.DataFrame, metrics: list[str], others: list[str | None]) -> list[float]:
    """Each metric's p-value against its partner in ``others``."""
    p = {
        frozenset((str(a), str(b))): float(v)
        for a, b, v in zip(pairs["metric_a"], pairs["metric_b"], pairs["p_value"], strict=True)
    }
    return [
        p.get(frozenset((str(m), str(o))), math.nan) if o is not None and o != m else math.nan
        for m, o in zip(metrics, others, strict=True)
    ]


def alpha_choice(ev: Evaluation) -> pd.DataFrame:
    """``alpha_choice.csv``, the columns a reader needs (empty when no α curve was computed)."""
    if ev.alpha_curve is None or ev.alpha_curve.choice.empty:
        return pd.DataFrame()
    choice = ev.alpha_curve.choice.copy()
    choice["aspect"] = choice["aspect"].astype(str).str.removeprefix("human_")
    return choice[ALPHA_COLUMNS].rename(columns=ALPHA_HEADERS)


def digits(values: pd.Series) -> int:
    """One decimal for a column reaching 10 (a 0-100 scale), three otherwise."""
    finite = pd.to_numeric(values, errors="coerce").abs()
    finite = finite[finite.map(math.isfinite)]
    return 1 if len(finite) and finite.max() >= 10 else 3


def _number(d: int, signed: bool = False) -> Callable[[object], str]:
    sign = "+" if signed else ""

    def fmt(v: object) -> str:
        f = float(v)  # type: ignore[arg-type]
        if not math.isfinite(f):
            return DASH
        # a value that rounds to zero is written without a sign ("-0.0" reads as a typo)
        return f"{0.0 if round(f, d) == 0 else f:{sign}.{d}f}"

    return fmt


def _integer(v: object) -> str:
    f = float(v)  # type: ignore[arg-type]
    return DASH if not math.isfinite(f) else str(round(f))


def _formatter(name: str, values: pd.Series, signed: bool) -> Callable[[object], str] | None:
    if pd.api.types.is_bool_dtype(values):
        return lambda v: "yes" if v else "no"
    if pd.api.types.is_integer_dtype(values) or (
        (name in INTEGER_COLUMNS or name.startswith("n_")) and pd.api.types.is_numeric_dtype(values)
    ):
        return _integer
    if pd.api.types.is_numeric_dtype(values):
        return _number(digits(values), signed)
    return None


def table(
    frame: pd.DataFrame,
    signed: frozenset[str] = frozenset(),
    css: str = "",
    right: frozenset[str] = frozenset(),
) -> Markup:
    """Index hidden; text left-aligned but intervals, p-values and ``right``."""
    formats: dict[Any, str | Callable[[object], str] | None] = {
        c: f for c in frame.columns if (f := _formatter(str(c), frame[c], c in signed)) is not None
    }
    names: list[Hashable] = [
        c
        for c in frame.columns
        if not pd.api.types.is_numeric_dtype(frame[c])
        and not str(c).startswith(RIGHT_ALIGNED)
        and c not in right
    ]
    styler = frame.style.format(formats, na_rep=DASH, escape="html").hide(axis="index")
    styler = styler.set_properties(subset=names, **{"text-align": "left"})
    styler = styler.set_table_styles(
        {c: [{"selector": "th", "props": "text-align: left"}] for c in names}, overwrite=False
    )
    body = styler.to_html(
        table_uuid=f"t{next(_IDS)}", table_attributes=f'class="{css}"' if css else None
    )
    return Markup(f'<div class="scroll">{body}</div>')


def _interval(lo: float, hi: float, fmt: Callable[[object], str]) -> str:
    return f"[{fmt(lo)}, {fmt(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else ""


def with_interval(frame: pd.DataFrame, value: str, signed: bool = False) -> pd.DataFrame:
    """``ci_low``/``ci_high`` as one column ``[low, high]`` at ``value``'s precision."""
    fmt = _number(digits(frame[value]), signed)
    lows, highs = frame["ci_low"].astype(float), frame["ci_high"].astype(float)
    cells = [_interval(lo, hi, fmt) or DASH for lo, hi in zip(lows, highs, strict=True)]
    out = frame.drop(columns=["ci_low", "ci_high"])
    out.insert(int(frame.columns.get_loc("ci_low")), "interval", cells)  # type: ignore[arg-type]
    return out


def interval_cells(
    values: pd.Series, lows: pd.Series, highs: pd.Series, fmt: Callable[[object], str]
) -> list[str]:
    """``value [low, high]`` cells: the value alone without an interval, a dash without it."""
    cells = zip(values.astype(float), lows.astype(float), highs.astype(float), strict=True)
    return [
        DASH if not math.isfinite(v) else f"{fmt(v)} {_interval(lo, hi, fmt)}".rstrip()
        for v, lo, hi in cells
    ]


def system_tables(ev: Evaluation, style: FigureStyle) -> list[tuple[str, Markup]]:
    """system_scores.csv as tables: the averages with the human ratings, then each group."""
    systems = ev.systems
    info = ev.aggregated.columns if ev.aggregated is not None else {}
    groups: dict[str, list[str]] = {}
    for c in systems.columns:
        if c in info and info[c].group != "average" and systems[c].notna().any():
            groups.setdefault(info[c].group, []).append(c)
    summary = [c for c in AVERAGES if c in systems.columns]
    summary += [c for c in systems.columns if c.startswith("human_")]
    summary += [c for c in systems.columns if c not in info and c not in summary]
    summary = [c for c in summary if systems[c].notna().any()]
    out = []
    for title, columns in [("Averages, human ratings and counts", summary), *groups.items()]:
        columns = [c for c in columns if c != "n_items"] or columns
        step = math.ceil(len(columns) / math.ceil(len(columns) / MAX_COLUMNS)) if columns else 1
        parts = [columns[i : i + step] for i in range(0, len(columns), step)]
        for i, part in enumerate(parts, 1):
            frame = systems[part].copy()
            frame.columns = [style.label(str(c)).removeprefix("human_") for c in part]
            frame.insert(0, "system", [str(s) for s in systems.index])
            suffix = f" ({i} of {len(parts)})" if len(parts) > 1 else ""
            out.append((title + suffix, table(frame)))
    return out


def correlation_tables(
    ev: Evaluation, headline: str, style: FigureStyle
) -> list[tuple[str, Markup]]:
    """Per coefficient (the headline first) and aspect: ``value [interval]`` by metric and level."""
    corr = ev.correlations
    if corr.empty:
        return []
    order = [headline] + [c for c in dict.fromkeys(corr["coefficient"]) if c != headline]
    fmt = _number(3, signed=True)
    out = []
    for coefficient in order:
        for aspect, sub in corr[corr["coefficient"] == coefficient].groupby("aspect", sort=False):
            sub = sub.assign(cell=interval_cells(sub["value"], sub["ci_low"], sub["ci_high"], fmt))
            wide = sub.pivot_table(
                index="metric", columns="level", values="cell", aggfunc="first", sort=False
            )
            ns = sub.groupby("level", sort=False)["n"].max()
            wide.columns = [
                f"{lv} (n = {int(ns[lv])})" if math.isfinite(ns[lv]) else lv for lv in wide.columns
            ]
            frame = wide.reset_index()
            frame["metric"] = [style.label(str(m)) for m in frame["metric"]]
            out.append((f"{coefficient}: {str(aspect).removeprefix('human_')}", table(frame)))
    return out


def controls_tables(ev: Evaluation, headline: str, style: FigureStyle) -> list[tuple[str, Markup]]:
    """Per aspect, each metric's ``headline`` correlation without the controls and with them."""
    with_controls = ev.correlations_with_controls
    if with_controls.empty:
        return []
    keys = ["metric", "aspect", "level"]
    pick = [*keys, "value", "n"]
    without, within = (
        c[c["coefficient"] == headline][pick] for c in (ev.correlations, with_controls)
    )
    both = without.merge(within, on=keys, suffixes=(" without", " with"), sort=False)
    out = []
    for aspect, sub in both.groupby("aspect", sort=False):
        metrics = list(dict.fromkeys(sub["metric"]))
        frame = pd.DataFrame({"metric": [style.label(str(m)) for m in metrics]})
        for level, rows in sub.groupby("level", sort=False):
            rows = rows.set_index("metric").reindex(metrics)
            for side in ("without", "with"):
                n = pd.to_numeric(rows[f"n {side}"], errors="coerce").max()
                label = f"{level} {side}" + (f" (n = {int(n)})" if math.isfinite(n) else "")
                frame[label] = rows[f"value {side}"].to_numpy(dtype=float)
        signed = frozenset(frame.columns[1:])
        out.append((str(aspect).removeprefix("human_"), table(frame, signed=signed)))
    return out


def ranking_tables(
    ev: Evaluation, style: FigureStyle, metrics: Iterable[str]
) -> list[tuple[str, Markup]]:
    """One small table per compared column (its own precision), the systems ranked."""
    return [(style.label(m), table(with_interval(system_ranking(ev, m), "score"))) for m in metrics]


def comparison_matrix(ev: Evaluation, style: FigureStyle) -> Markup | None:
    """Each system's cluster on every compared column, in the ranking figure's system order."""
    if ev.compared is None or ev.compared.table.empty:
        return None
    t = ev.compared.table
    metrics = averages_first(t["metric"])
    wide = t.pivot_table(index="system", columns="metric", values="cluster", aggfunc="first")
    systems = comparison_order(t, style.source)
    wide = wide.reindex(index=systems, columns=metrics).round().astype("Int64")
    wide.columns = [style.label(m) for m in metrics]
    controls = set(t.loc[t["control"].astype(bool), "system"])
    wide.insert(0, "system", [role_label(s, controls, ev.compared.baseline) for s in systems])
    return table(wide, css="matrix")


def role_label(system: str, controls: Iterable[str], baseline: str) -> str:
    """``sys00 (control, baseline)``: a system's name with its roles."""
    on = (("control", system in controls), ("baseline", system == baseline))
    roles = ", ".join(r for r, yes in on if yes)
    return f"{system} ({roles})" if roles else str(system)


def items_note(ev: Evaluation) -> str:
    """Where the comparison rests on fewer items than the systems' scores, how many."""
    if ev.compared is None or ev.compared.table.empty:
        return ""
    n, every = int(ev.compared.table["n_items"].iloc[0]), ev.table["item_id"].nunique()
    if n == every:
        return f"On all {n} items."
    return (
        f"On the {n} items every system has, of {every}: the scores differ from the systems' "
        f"tables, which use each system's own items."
    )


def agreement_table(agree: Agreement, aspect: str, style: FigureStyle, best: bool) -> Markup:
    """One aspect's metrics ranked: the answer's top (``best``) or all with their p-values."""
    frame = agree.best(aspect) if best else agree.by_aspect[aspect]
    frame = with_interval(frame.drop(columns=["agreement"]), "value", signed=True)
    frame.insert(0, "rank", range(1, len(frame) + 1))
    frame["metric"] = [style.label(str(m)) for m in frame["metric"]]
    for c in frame.columns.intersection(["p vs best", "p vs next"]):
        frame[c] = [sacrebleu_p(p, agree.alpha) for p in frame[c]]
    if best:
        frame = frame.drop(columns=[c for c in ("p vs best", "p vs next", "n") if c in frame])
    if frame["cluster"].isna().all():  # no significance test was run
        frame = frame.drop(columns=["cluster"])
    frame = frame.rename(columns={"value": agree.coefficient})
    return table(frame, signed=frozenset({agree.coefficient}))


def overall_tables(agree: Agreement, style: FigureStyle) -> list[tuple[str, Markup]]:
    """Per aspect, the overall ranking over the significance tasks (metric_ranking.csv)."""
    out: list[tuple[str, Markup]] = []
    for aspect, rows in agree.overall.groupby("aspect", sort=False) if len(agree.overall) else ():
        ranks = zip(rows["order"], rows["cluster"], strict=True)
        frame = rows[["metric", "value", "source", "baseline"]].reset_index(drop=True)
        frame["metric"] = [style.label(str(m)) for m in frame["metric"]]
        frame.insert(0, "rank (cluster)", [f"{o} ({DASH if pd.isna(c) else c})" for o, c in ranks])
        right = frozenset({"rank (cluster)"})
        out.append((f"{str(aspect).removeprefix('human_')}, overall", table(frame, right=right)))
    return out


def human_tables(ev: Evaluation) -> tuple[Markup, Markup] | None:
    """Each rating over all systems with the spread of the systems' means; every system apart."""
    if ev.humans.empty:
        return None
    frame = ev.humans.rename(columns=HUMAN_HEADERS)
    frame["aspect"] = frame["aspect"].astype(str).str.removeprefix("human_")
    every = frame["system"] == "(all)"
    means = frame[~every].groupby("aspect", sort=False)["mean"]
    summary = frame[every].drop(columns=["system"]).set_index("aspect")
    d = digits(summary["mean"])
    lows, highs = means.min().map(_number(d)), means.max().map(_number(d))
    summary["system means"] = (lows + " to " + highs).reindex(summary.index).fillna(DASH)
    summary["systems constant"] = frame[~every].groupby("aspect", sort=False)["constant"].sum()
    return table(summary.reset_index(), right=frozenset({"system means"})), table(frame)


def signature_table(ev: Evaluation) -> Markup:
    frame = ev.signature_table()[["column", "group", "higher_is_better", "signature"]]
    return table(frame, css="signatures")


def paraphrase_table(ev: Evaluation) -> Markup | None:
    """The headline table: a row per system, each measure with its interval, the controls last."""
    view = ev.paraphrase
    if view is None:
        return None
    t = view.table
    frame = pd.DataFrame({"system": t["system"].astype(str)})
    roles = zip(t["control"], t["frontier"], strict=True)
    frame["role"] = ["control" if c else ("frontier" if f else "") for c, f in roles]
    shown = []
    for m in [m for m in ("adequacy", "diversity", "edit_distance", "paraphrase") if m in t]:
        name = view.paraphrase if m == "paraphrase" else m.replace("_", " ")
        fmt = _number(digits(t[m]))
        frame[name] = interval_cells(t[m], t[f"{m}_low"], t[f"{m}_high"], fmt)
        shown.append(name)
    if "cluster" in t:
        frame["cluster"] = t["cluster"].to_numpy()
    frame["copy rate"] = [f"{v:.0%}" if math.isfinite(v) else DASH for v in t["copy_rate"]]
    for c in [c for c in t.columns if str(c).startswith("human_")]:
        frame[str(c).removeprefix("human_")] = t[c].to_numpy()
    return table(frame, css="paraphrase", right=frozenset([*shown, "copy rate"]))
