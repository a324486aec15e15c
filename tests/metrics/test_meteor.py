"""METEOR against nltk.translate.meteor_score with the same WordNet; finding WordNet offline."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nltk.translate.meteor_score import meteor_score, single_meteor_score

from paraeval.metrics._ngram import WordTokenizer
from paraeval.metrics.base import MissingResourceError
from paraeval.metrics.meteor import METEOR
from paraeval.metrics.wordnet import find_wordnet, load_wordnet
from tests.metrics.varied import unzip, varied_sets

REPO = Path(__file__).resolve().parents[2]
SETS = varied_sets(240, seed=7)
CANDS, REFS, SOURCES = unzip(SETS)
TOL = 1e-9


@pytest.fixture(scope="module")
def wordnet() -> object:
    return load_wordnet()


def _identity(word: str) -> str:
    return word


@pytest.mark.slow
@pytest.mark.parametrize(("tokenize", "lowercase"), [("13a", True), ("whitespace", False)])
def test_equals_nltk(wordnet: object, tokenize: str, lowercase: bool) -> None:
    tok = WordTokenizer(tokenize, lowercase=False)
    preprocess = str.lower if lowercase else _identity
    want = [
        meteor_score(
            [list(tok(r)) for r in refs], list(tok(c)), preprocess=preprocess, wordnet=wordnet
        )
        for c, refs in zip(CANDS, REFS, strict=True)
    ]
    result = METEOR(tokenize=tokenize, lowercase=lowercase).score(CANDS, REFS, SOURCES)
    np.testing.assert_allclose(result.segment["meteor"], want, rtol=0, atol=TOL)
    assert abs(result.corpus["meteor"] - float(np.mean(want))) <= TOL
    # the sets exercise all three modules: some pairs match only through stems or synonyms
    assert any(0 < w < 1 for w in want)


@pytest.mark.slow
def test_fast_reader_reads_what_nltk_reads(wordnet: Any) -> None:
    # the reference side is NLTK's own reader, built from the same files without paraeval's code
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    with pytest.warns(UserWarning):  # NLTK: no multilingual WordNet given
        plain = WordNetCorpusReader(find_wordnet(), None)
    assert wordnet._lemma_pos_offset_map == plain._lemma_pos_offset_map
    assert wordnet._exception_map == plain._exception_map
    assert wordnet._lexnames == plain._lexnames
    assert wordnet.satellite_offsets == plain.satellite_offsets
    assert len(wordnet.satellite_offsets) > 10_000  # WordNet 3.0 has 10,693
    words = [*sorted(plain._lemma_pos_offset_map)[::97], "geese", "went", "better", "running"]

    def synsets(reader: Any, word: str) -> list[tuple[str, list[str]]]:
        return [(s.name(), [lemma.name() for lemma in s.lemmas()]) for s in reader.synsets(word)]

    assert all(synsets(wordnet, w) == synsets(plain, w) for w in words)
    tok = WordTokenizer("13a")
    want = [
        meteor_score([list(tok(r)) for r in refs], list(tok(c)), wordnet=plain)
        for c, refs in zip(CANDS, REFS, strict=True)
    ]
    got = METEOR().score(CANDS, REFS, SOURCES).segment["meteor"]
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL)


def test_systems_sharing_candidates_equal_nltk(wordnet: object) -> None:
    # one metric scores three systems in turn; later ones meet pairs of earlier ones (in another
    # order, twice in one call) next to new ones
    tok = WordTokenizer("13a")
    metric = METEOR()
    for rows in (
        [*range(0, 50)],
        [7, 7, *range(49, 20, -1), *range(50, 70)],
        [3, *range(90, 70, -1)],
    ):
        cands = [CANDS[i] for i in rows]
        refs = [REFS[i] for i in rows]
        want = [
            meteor_score([list(tok(r)) for r in rs], list(tok(c)), wordnet=wordnet)
            for c, rs in zip(cands, refs, strict=True)
        ]
        got = metric.score(cands, refs, [SOURCES[i] for i in rows]).segment["meteor"]
        np.testing.assert_allclose(got, want, rtol=0, atol=TOL)


@pytest.mark.slow
@pytest.mark.parametrize(("alpha", "beta", "gamma"), [(0.5, 1.0, 0.3), (0.85, 2.0, 0.6)])
def test_parameters_equal_nltk(wordnet: object, alpha: float, beta: float, gamma: float) -> None:
    tok = WordTokenizer("13a")
    metric = METEOR(alpha=alpha, beta=beta, gamma=gamma)
    for c, refs, _ in SETS[:80]:
        for r in refs:
            want = single_meteor_score(
                list(tok(r)), list(tok(c)), wordnet=wordnet, alpha=alpha, beta=beta, gamma=gamma
            )
            assert abs(metric.single(tok(c), tok(r)) - want) <= TOL


@pytest.mark.slow
def test_stem_and_synonym_modules(wordnet: object) -> None:
    metric = METEOR(tokenize="whitespace")
    # "auto" matches "car" only through WordNet, "running" matches "run" only through stems
    for hyp, ref in [("the auto", "the car"), ("he is running", "he is run")]:
        got = metric.score([hyp], [[ref]]).segment["meteor"][0]
        want = meteor_score([ref.split()], hyp.split(), wordnet=wordnet)
        assert got == pytest.approx(want, abs=TOL)
        # all words aligned in one chunk: (1 - 0.5 * (1/n)^3) * 1
        n = len(hyp.split())
        assert got == pytest.approx(1 - 0.5 * (1 / n) ** 3)


@pytest.mark.slow
def test_fragmentation_penalty_worked_example() -> None:
    """A fully reversed five-word candidate: P = R = 1, 5 chunks of 5 matches, penalty
    0.5 * (5/5)^3 = 0.5, score 0.5."""
    ref = "one two three four five"
    hyp = "five four three two one"
    got = METEOR(tokenize="whitespace").score([hyp], [[ref]]).segment["meteor"][0]
    assert got == pytest.approx((1 - 0.5 * (5 / 5) ** 3) * 1.0)


def test_fmean_weights_recall_nine_times() -> None:
    # 2 of 4 candidate words match a 2-word reference in one chunk: P = 1/2, R = 1
    got = METEOR(tokenize="whitespace").score(["a b x y"], [["a b"]]).segment["meteor"][0]
    p, r = 0.5, 1.0
    fmean = 10 * p * r / (r + 9 * p)
    assert got == pytest.approx(fmean * (1 - 0.5 * (1 / 2) ** 3))


def test_signature_names_wordnet_version() -> None:
    sig = METEOR().signature()
    assert "wordnet:3.0" in sig and "tok:13a" in sig and "refs:max" in sig


def test_missing_wordnet_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(MissingResourceError) as err:
        METEOR(wordnet_dir=str(tmp_path))
    message = str(err.value)
    assert "\n" not in message
    assert "scripts/setup_wordnet.py" in message and "wordnet-base" in message


def test_wordnet_search_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = find_wordnet()
    # a folder named by NLTK_DATA comes before the project's cache
    setup = _setup_module()
    src = Path(str(found))
    setup.copy_wordnet(src, tmp_path / "nltk_data")
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "nltk_data"))
    assert Path(str(find_wordnet())) == tmp_path / "nltk_data" / "corpora" / "wordnet"
    # the explicit setting wins over the environment; a dict folder itself is accepted too
    assert Path(str(find_wordnet(src))) == src


def _setup_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "setup_wordnet", REPO / "scripts/setup_wordnet.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_setup_script_copies_and_writes_lexnames(tmp_path: Path) -> None:
    setup = _setup_module()
    text = setup.lexnames_text()
    lines = text.splitlines()
    assert len(lines) == 45
    assert lines[0] == "00\tadj.all\t3" and lines[3] == "03\tnoun.Tops\t1"
    assert lines[44] == "44\tadj.ppl\t3"
    fake = tmp_path / "src"
    fake.mkdir()
    for name in setup.REQUIRED:
        (fake / name).write_text(name)
    target = tmp_path / "data"
    rc = setup.main(["--source", str(fake), "--target", str(target), "--no-apt"])
    assert rc == 0
    dest = target / "corpora" / "wordnet"
    assert (dest / "lexnames").read_text() == text
    assert (
        not (dest / "index.noun").is_symlink() and (dest / "index.noun").read_text() == "index.noun"
    )
    # idempotent
    assert setup.main(["--source", str(fake), "--target", str(target), "--no-apt"]) == 0
    missing = setup.main(["--source", str(tmp_path / "none"), "--target", str(target), "--no-apt"])
    assert missing == 1
    assert os.listdir(dest)
