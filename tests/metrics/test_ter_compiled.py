"""The compiled TER (metrics/_ter.py) against sacrebleu's TER called directly: the per-segment
statistics exactly equal to ``sacrebleu.metrics.TER._extract_corpus_statistics`` (same numbers,
same Python types), and segment / corpus scores of :class:`paraeval.metrics.sacre.TER` exactly
equal to sacrebleu's ``sentence_score`` / ``corpus_score``, for every setting combination, on real
ParaBank pairs, the varied tokenizer sets, edge cases, and random pairs built to reach sacrebleu's
search limits (the candidate budget, the shift distance, the widened beam)."""

from __future__ import annotations

import csv
import itertools
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sacrebleu.metrics import TER as SacreTER
from sacrebleu.metrics import lib_ter

from paraeval.metrics._ter import ter_statistics
from paraeval.metrics.sacre import TER
from tests.metrics.varied import unzip, varied_sets

SETTINGS = [
    dict(zip(("normalized", "no_punct", "asian_support", "case_sensitive"), flags, strict=True))
    for flags in itertools.product((False, True), repeat=4)
]


def _streams(refs: list[list[str]]) -> list[list[Any]]:
    width = max((len(r) for r in refs), default=0)
    return [[rs[k] if k < len(rs) else None for rs in refs] for k in range(width)]


def _assert_stats_equal(
    hyps: list[str], refs: list[list[str]], opts: dict[str, bool] | None = None
) -> None:
    opts = opts or {}
    streams = _streams(refs)
    ours = ter_statistics(SacreTER(**opts), hyps, streams)
    want = SacreTER(**opts)._extract_corpus_statistics(hyps, streams)
    assert len(ours) == len(want)
    for k, (a, b) in enumerate(zip(ours, want, strict=True)):
        assert a == b, (k, hyps[k], refs[k], a, b)
        assert [type(x) for x in a] == [type(x) for x in b], (k, a, b)


def _assert_scores_equal(
    hyps: list[str], refs: list[list[str]], opts: dict[str, bool] | None = None
) -> None:
    opts = opts or {}
    result = TER(**opts).score(hyps, refs)
    direct = SacreTER(**opts)
    for k, (h, rs) in enumerate(zip(hyps, refs, strict=True)):
        assert result.segment["ter"][k] == direct.sentence_score(h, rs).score, (k, h, rs)
    assert result.corpus["ter"] == direct.corpus_score(hyps, _streams(refs)).score


def _parabank_pairs(root: Path, n: int) -> tuple[list[str], list[list[str]]]:
    """Distinct (candidate, source) pairs of ParaBank-Eval, spread over the file."""
    folder = root / "parabank_eval"
    csv.field_size_limit(1 << 20)
    with open(folder / "ref.tsv", encoding="utf-8") as f:
        sources = {row["ref_id"]: row["ref_sent"] for row in csv.DictReader(f, delimiter="\t")}
    seen: dict[tuple[str, str], None] = {}
    with open(folder / "candidates.tsv", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            seen.setdefault((row["ref_id"], row["candidate"]), None)
    pairs = list(seen)[:: max(1, len(seen) // n)][:n]
    return [c for _, c in pairs], [[sources[r]] for r, _ in pairs]


def test_parabank_pairs_default_settings(shared_data: Path) -> None:
    hyps, refs = _parabank_pairs(shared_data, 300)
    assert len(hyps) == 300
    _assert_stats_equal(hyps, refs)
    _assert_scores_equal(hyps[:60], refs[:60])


@pytest.mark.slow
@pytest.mark.parametrize(
    "opts", SETTINGS, ids=lambda o: "-".join(k for k, v in o.items() if v) or "default"
)
def test_every_setting_on_parabank_and_varied_sets(
    opts: dict[str, bool], shared_data_or_none: Path | None
) -> None:
    # the varied sets carry punctuation, casing, CJK and XML entities, which the settings change
    sets = [s for s in varied_sets(60, seed=29) if len(s[0].split()) <= 25][:40]
    hyps, refs, _ = unzip(sets)
    if shared_data_or_none is not None:
        more_h, more_r = _parabank_pairs(shared_data_or_none, 20)
        hyps, refs = hyps + more_h, refs + more_r
    _assert_stats_equal(hyps, refs, opts)
    _assert_scores_equal(hyps, refs, opts)


EDGE_CASES: list[tuple[str, list[str]]] = [
    ("", ["a reference"]),  # empty hypothesis
    ("a hypothesis", [""]),  # empty reference
    ("", [""]),  # both empty
    ("   ", ["  "]),  # whitespace only
    ("word", ["word"]),
    ("a b", ["b a"]),
    ("the cat sat on the mat", ["on the mat the cat sat", "", "the cat sat"]),  # 3 references
    ("x y z", ["", "x"]),  # an empty reference beside a non-empty one
    ("a a a a a a", ["a a a"]),
    ("b c d e f g h", ["h g f e d c b", "b c d", "c d e f g h b"]),
    ("Hello, World! &amp; more.", ["hello world & more", "HELLO , WORLD !"]),
    ("東京 は 大きい。", ["東京は大きい", "北京"]),
]


def test_edge_cases_and_multiple_references() -> None:
    hyps = [h for h, _ in EDGE_CASES]
    refs = [r for _, r in EDGE_CASES]
    for opts in SETTINGS:
        _assert_stats_equal(hyps, refs, opts)
    _assert_scores_equal(hyps, refs)
    # a ragged reference count (sacrebleu's None padding) and an all-empty corpus
    _assert_scores_equal(["a b c", "d e"], [["a c b"], ["e d", "d", "x"]])
    _assert_stats_equal([""], [[""]])


def _random_pairs() -> Iterator[tuple[str, list[str]]]:
    rng = random.Random(7)

    def words(n: int, vocab: int) -> str:
        return " ".join(f"w{rng.randrange(vocab)}" for _ in range(n))

    # small vocabularies: many matching blocks, many shifts, the candidate budget reached
    yield words(40, 3), [words(40, 3)]
    for _ in range(40):
        n = rng.randint(1, 25)
        yield words(n, rng.choice((2, 3, 5, 8))), [words(rng.randint(0, 25), 5)]
    # length ratio > 2 * beam width: sacrebleu widens its beam
    yield words(2, 6), [words(130, 6)]
    yield words(120, 6), [words(2, 6)]
    # blocks further apart than the shift distance limit
    ref = [f"u{k}" for k in range(70)]
    yield " ".join(ref[58:] + ref[:58]), [" ".join(ref)]
    yield " ".join(ref[5:60] + ref[:5] + ref[60:]), [" ".join(ref), " ".join(ref[::-1])]


def test_random_pairs_reach_sacrebleus_search_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = list(_random_pairs())
    hyps = [h for h, _ in pairs]
    refs = [r for _, r in pairs]
    # observe sacrebleu's own search (the wrapper calls the original unchanged) to show that
    # these pairs reach its limits
    checked: list[int] = []
    original = lib_ter._shift

    def observed(*args: Any) -> Any:
        out = original(*args)
        checked.append(out[2])
        return out

    monkeypatch.setattr(lib_ter, "_shift", observed)
    _assert_stats_equal(hyps, refs)
    assert max(checked) >= lib_ter._MAX_SHIFT_CANDIDATES
    assert any(
        len(h.split()) and len(r[0].split()) / len(h.split()) > 2 * lib_ter._BEAM_WIDTH
        for h, r in pairs
    )
    assert any(len(h.split()) > lib_ter._MAX_SHIFT_DIST + 1 for h in hyps)
