"""``paraeval-score``: sacrebleu-style scores and signatures, as the score stage computes them."""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

# light imports: pandas, Hydra, MLflow and torch are imported only by a metric that needs them
from paraeval.pipeline.config.targets import metric_ids
from paraeval.pipeline.errors import UserError
from paraeval.pipeline.terminal import RawDescriptionHelpFormatter

PROG = "paraeval-score"
STDIN_NAME = "stdin"
EXAMPLES = """examples:
  paraeval-score -r ref.txt -m bleu chrf < hyp.txt
  paraeval-score -r ref1.txt ref2.txt -s src.txt -m bleu ibleu bertscore -i a.txt b.txt -f json
  paraeval-score -r ref.txt -m bleu --set bleu.tokenize=intl -i a.txt
  paraeval-score --list                # the metric ids, what each needs, the default set"""

# what a user with the installed package alone can follow: no pointer into the package's files
HELP = {
    "references": "reference files, one per reference set; an empty line: no reference",
    "source": "the source sentences (iBLEU, PINC, ...)",
    "input": "one file per system, named by its stem (default: one system on stdin)",
    "metrics": "metric ids, each at its default settings; --list names them (default: bleu)",
    "overrides": "change a metric's setting, e.g. --set bleu.tokenize=intl (repeatable); "
    "paraeval --cfg job 'metrics=[METRIC]' shows its settings",
    "format": "text: one aligned line per system and metric; json: a list of objects with the "
    "unrounded scores (default: text)",
    "width": "decimals of every score in text (default: 4 significant digits of each metric's "
    "largest score, the same decimals for all its systems)",
    "list": "list the metrics (id, group, direction, what each needs, whether a run computes it "
    "by default) and exit",
}


class ScoreError(UserError):
    """Printed as one line."""


@dataclass(frozen=True)
class Inputs:
    """Each line's references drop the empty lines of a reference file, as the text loader does."""

    systems: dict[str, list[str]]
    references: list[list[str]]
    sources: list[str] | None


@dataclass(frozen=True)
class Score:
    system: str
    metric: str  # the output column: the metric id, or one of its columns (bertscore_f1)
    score: float
    signature: str


def check_metric_ids(requested: Sequence[str]) -> list[str]:
    known = metric_ids()
    for metric_id in requested:
        if metric_id not in known:
            near = difflib.get_close_matches(metric_id, known, n=1)
            hint = f"did you mean '{near[0]}'? " if near else ""
            raise ScoreError(f"unknown metric '{metric_id}'; {hint}choose from {', '.join(known)}")
    return list(dict.fromkeys(requested))


def _read_lines(path: str, role: str) -> list[str]:
    """As the text loader reads them (pipeline/data/readers.py)."""
    if path == "-":
        raw = sys.stdin.buffer.read()
        path = "<stdin>"
    else:
        try:
            raw = Path(path).read_bytes()
        except FileNotFoundError:
            raise ScoreError(f"{path}: file not found ({role})") from None
        except OSError as exc:
            raise ScoreError(f"{path}: cannot read file ({role}): {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ScoreError(f"{path}: line {line} is not valid UTF-8 ({role})") from None
    lines = text.removeprefix("\ufeff").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln.rstrip("\r") for ln in lines]


def read_inputs(
    references: Sequence[str], source: str | None, hypotheses: Sequence[str] | None
) -> Inputs:
    files = [(p, "-r") for p in references] + ([(source, "-s")] if source is not None else [])
    texts = {path: _read_lines(path, role) for path, role in files}
    systems: dict[str, list[str]] = {}
    named: dict[str, str] = {}  # system -> its file, for the messages
    for path in hypotheses if hypotheses else ["-"]:
        stem = Path(path).stem  # or the file's path where two stems are the same
        name = STDIN_NAME if path == "-" else path if stem in systems else stem
        systems[name] = _read_lines(path, "-i")
        named[name] = "<stdin>" if path == "-" else path
    every = [*texts.items(), *((named[s], c) for s, c in systems.items())]
    yard, first = every[0]
    for path, lines in every[1:]:
        if len(lines) != len(first):
            raise ScoreError(
                f"{path} has {len(lines)} lines but {yard} has {len(first)}; "
                "every file must have one line per segment"
            )
    if not first:
        raise ScoreError(f"{yard} is empty: nothing to score")
    per_line = [
        [r[i] for r in (texts[p] for p in references) if r[i].strip()] for i in range(len(first))
    ]
    return Inputs(systems, per_line, texts[source] if source is not None else None)


def _placed(conf: Any, defaults: list[str], group: str) -> dict[str, Any]:
    """A defaults list merged without Hydra, whose import the n-gram metrics do not pay for."""
    import yaml

    out: dict[str, Any] = {}
    for entry in defaults:
        if entry == "_self_":
            continue
        name = entry.split("@")[0]
        where, _, stem = (name[1:] if name.startswith("/") else f"{group}/{name}").rpartition("/")
        node = yaml.safe_load((conf / where / f"{stem}.yaml").read_text(encoding="utf-8"))
        out |= _placed(conf, node.pop("defaults", []), where) | node
    return out


def metric_settings(ids: Sequence[str], overrides: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The cache is off: this command writes nothing."""
    import yaml
    from omegaconf import OmegaConf

    conf = resources.files("paraeval.conf")
    nodes = {}
    for m in ids:
        # keyed by its metric id, as Hydra's multi-select group merges them
        node = yaml.safe_load((conf / "metrics" / f"{m}.yaml").read_text(encoding="utf-8"))
        nodes[m] = {**_placed(conf, node.pop("defaults", []), "metrics"), **node[m]}
    root = OmegaConf.create({"cache": {"enabled": False, "dir": None}, "metrics": nodes})
    for override in overrides:
        key, eq, value = override.partition("=")
        metric_id, dot, setting = key.partition(".")
        if not (eq and dot and setting):
            raise ScoreError(
                f"--set {override}: expected METRIC.KEY=VALUE, e.g. bleu.tokenize=intl"
            )
        if metric_id not in nodes:
            raise ScoreError(
                f"--set {override}: metric '{metric_id}' is not among -m {' '.join(ids)}"
            )
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            parsed = value
        OmegaConf.update(root, f"metrics.{key}", parsed, merge=True)
    out = OmegaConf.to_container(root.metrics, resolve=True)
    assert isinstance(out, dict)
    return {str(k): dict(v) for k, v in out.items()}


def _check_needs(metrics: dict[str, Any], inputs: Inputs, source: str | None) -> None:
    for metric_id, metric in metrics.items():
        if metric.needs_references:
            missing = next((i for i, r in enumerate(inputs.references) if not r), None)
            if missing is not None:
                where = f"line {missing + 1} is empty in every -r file"
                if not any(inputs.references):
                    where = "no -r file given"
                raise ScoreError(f"metric '{metric_id}' needs references: {where}")
        if metric.needs_sources or metric.against_source:
            if inputs.sources is None:
                raise ScoreError(
                    f"metric '{metric_id}' needs the source sentences: give them with -s SRC.txt"
                )
            empty = next((i for i, s in enumerate(inputs.sources) if not s.strip()), None)
            if empty is not None:
                raise ScoreError(
                    f"{source}: line {empty + 1} is empty but metric '{metric_id}' needs a source"
                )


def _run_texts(inputs: Inputs) -> list[str]:
    """In the order of the score stage's ``RunTexts.unique``: encoders batch them so."""
    candidates = [c for cands in inputs.systems.values() for c in cands]
    refs = [r for _ in inputs.systems for line in inputs.references for r in line]
    return list(dict.fromkeys([*candidates, *(inputs.sources or []), *refs]))


def _results(metric: Any, calls: list[Any], run_texts: list[str], vs_source: bool) -> list[Any]:
    """A metric made of parts (iBLEU) from its parts' results, as the score stage does."""
    from paraeval.metrics.base import Composed

    if isinstance(metric, Composed):
        done = []
        for part, on_src in metric.parts():
            part_calls = calls
            if on_src and not vs_source:
                part_calls = [(cands, [[s] for s in srcs], srcs) for cands, _, srcs in calls]
            done.append(_results(part, part_calls, run_texts, vs_source or on_src))
        return [metric.from_parts([d[k] for d in done]) for k in range(len(calls))]
    metric.prepare(run_texts)
    return list(metric.score_systems(calls))


def score_inputs(
    inputs: Inputs, settings: dict[str, dict[str, Any]], source: str | None
) -> list[Score]:
    """In the score stage's order (columns against the source, ``<id>_src``, last)."""
    from paraeval.pipeline.engine.build import build_metrics

    metrics = build_metrics(settings)
    _check_needs(metrics, inputs, source)
    counts = {len(r) for r in inputs.references}
    nrefs = counts.pop() if len(counts) == 1 else None  # sacrebleu's nrefs:var where it varies
    run_texts = _run_texts(inputs)
    jobs = [(m, False) for m in metrics.values()]
    jobs += [(m, True) for m in metrics.values() if m.against_source]
    columns: list[tuple[str, list[float], str]] = []
    for metric, vs_source in jobs:
        suffix, vs = ("_src", "|vs:source") if vs_source else ("", "")
        refs = [[s] for s in inputs.sources or []] if vs_source else inputs.references
        calls = [(cands, refs, inputs.sources) for cands in inputs.systems.values()]
        results = _results(metric, calls, run_texts, vs_source)
        signature = metric.signature(1 if vs_source else nrefs, segment=False) + vs
        for col in metric.output_columns:
            columns.append((col + suffix, [float(r.corpus[col]) for r in results], signature))
    return [
        Score(system, name, values[k], signature)
        for k, system in enumerate(inputs.systems)
        for name, values, signature in columns
    ]


def aligned(rows: Sequence[Sequence[str]], right: int = -1) -> str:
    """Columns padded to their widest cell, but the last; column ``right`` right-aligned."""
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]) - 1)]
    line = "".join(f"{{:{'>' if k == right else '<'}{w}}}  " for k, w in enumerate(widths))
    return "\n".join(f"{line}{{}}".format(*r) for r in rows)


def format_text(scores: Sequence[Score], width: int | None) -> str:
    """Every system of a metric with its decimals: ``width``, else 4 significant digits of the
    metric's largest score (sacrebleu's ``-w`` is one width for its metrics, all 0-100)."""
    top = dict.fromkeys((s.metric for s in scores), 0.0)
    for s in scores:
        top[s.metric] = max(top[s.metric], abs(s.score) if math.isfinite(s.score) else 0.0)
    rows = [("system", "metric", "score", "signature")]
    for s in scores:
        places = max(0, 3 - math.floor(math.log10(top[s.metric] or 1))) if width is None else width
        rows.append((s.system, s.metric, f"{s.score:.{places}f}", s.signature))
    return aligned(rows, right=2)


def format_json(scores: Sequence[Score]) -> str:
    """As ``sacrebleu -f json`` gives one per metric, but unrounded."""
    nan = {"score": None}
    out = [asdict(s) | (nan if math.isnan(s.score) else {}) for s in scores]
    return json.dumps(out, indent=1, ensure_ascii=False)


def format_list() -> str:
    from paraeval.pipeline.config.compose import list_metrics

    rows = [("id", "group", "direction", "needs", "default")]
    for m in list_metrics().itertuples():
        rows.append((m.id, m.group, m.direction, m.needs or "-", "yes" if m.default else "no"))
    return aligned(rows)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Corpus-level scores of line-aligned text files, with their signatures\n"
        "(nothing is written or logged).",
        epilog=EXAMPLES,
        formatter_class=RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "-r", "--references", nargs="+", default=[], metavar="REF", help=HELP["references"]
    )
    p.add_argument("-s", "--source", metavar="SRC", help=HELP["source"])
    p.add_argument("-i", "--input", nargs="+", metavar="HYP", help=HELP["input"])
    p.add_argument(
        "-m", "--metrics", nargs="+", default=["bleu"], metavar="METRIC", help=HELP["metrics"]
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        dest="overrides",
        metavar="METRIC.KEY=VALUE",
        help=HELP["overrides"],
    )
    p.add_argument("-f", "--format", choices=["text", "json"], default="text", help=HELP["format"])
    p.add_argument("-w", "--width", type=int, metavar="N", help=HELP["width"])
    p.add_argument("--list", action="store_true", help=HELP["list"])
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.list:
        print(format_list())
        return 0
    # transformers' "Loading weights" bar and the hub's download bars (read at their import)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        if not args.input and sys.stdin.isatty():
            raise ScoreError("no hypotheses: give -i FILE ... or pipe one system on stdin")
        ids = check_metric_ids(args.metrics)
        settings = metric_settings(ids, args.overrides)
        inputs = read_inputs(args.references, args.source, args.input)
        scores = score_inputs(inputs, settings, args.source)
    except (UserError, ValueError, RuntimeError) as exc:
        from paraeval.metrics.base import MetricConfigError, MissingResourceError

        if not isinstance(exc, UserError | MetricConfigError | MissingResourceError):
            raise
        print(f"paraeval: error: {exc}", file=sys.stderr)
        return 2
    print(format_json(scores) if args.format == "json" else format_text(scores, args.width))
    return 0


if __name__ == "__main__":
    sys.exit(main())
