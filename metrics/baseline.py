"""Recompute a BERTScore rescaling baseline for any model from any text corpus.

bert-score's method (``get_rescale_baseline.py``): disjoint random pairs of unrelated sentences
under 32 words, scored on every layer without idf, P, R and F averaged per layer, written as
``LAYER,P,R,F`` (usable as ``baseline_path`` here and in bert-score). The corpus is a file of one
sentence per line, or ``pydoc`` (CPython's offline language reference). The shipped
``metrics/assets/bertscore_baseline_all-MiniLM-L6-v2.csv`` was made with::

    python -m paraeval.metrics.baseline --model default --corpus pydoc --rounds 10 --seed 0 \\
        --out metrics/assets/bertscore_baseline_all-MiniLM-L6-v2.csv
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import numpy as np

from paraeval.metrics.base import MetricConfigError, MissingResourceError
from paraeval.metrics.encoder_model import DEFAULT_MODEL_NAME, resolve_model_path

SHIPPED_BASELINES = {DEFAULT_MODEL_NAME: "bertscore_baseline_all-MiniLM-L6-v2.csv"}
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_MAX_WORDS = 32  # bert-score keeps lines with fewer than 32 words


def shipped_baseline(model_name: str) -> Path | None:
    name = SHIPPED_BASELINES.get(model_name)
    if name is None:
        return None
    path = Path(str(resources.files("paraeval.metrics").joinpath("assets", name)))
    return path if path.is_file() else None


def find_baseline(
    baseline_path: str | None, model: str, model_name: str, lang: str, layer: int
) -> tuple[np.ndarray, str]:
    """The (P, R, F) baseline of ``layer`` and its source as the signature names it: the file
    ``baseline_path``, else the one shipped for ``model_name``, else bert-score's own for the
    hub model ``model`` in ``lang``."""
    if baseline_path:
        path = Path(baseline_path).expanduser()
        if not path.is_file():
            raise MissingResourceError(
                f"BERTScore baseline file '{path}' does not exist (make one with "
                "`python -m paraeval.metrics.baseline --model ... --out FILE`)"
            )
        source = f"file-{hashlib.blake2b(path.read_bytes(), digest_size=4).hexdigest()}"
    elif (shipped := shipped_baseline(model_name)) is not None:
        path, source = shipped, "paraeval"
    else:
        import bert_score

        path = Path(bert_score.__file__).parent / "rescale_baseline" / lang / f"{model}.tsv"
        source = f"bert_score-{lang}"
        if not path.is_file():
            raise MissingResourceError(
                f"metric 'bertscore': rescale_with_baseline is on but there is no baseline for "
                f"model '{model}' (lang {lang}); set `baseline_path` to a file made with "
                "`python -m paraeval.metrics.baseline --model <model> --corpus <text file> "
                "--out <file>`"
            )
    return read_baseline(path, layer), source


def read_baseline(path: Path, layer: int) -> np.ndarray:
    """The (P, R, F) baseline of ``layer`` from a ``LAYER,P,R,F`` file."""
    import pandas as pd

    try:
        table = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise MissingResourceError(f"cannot read BERTScore baseline file '{path}': {exc}") from None
    cols = [c.strip() for c in table.columns]
    table.columns = cols
    if not {"P", "R", "F"} <= set(cols):
        raise MetricConfigError(
            f"BERTScore baseline file '{path}' needs the columns LAYER,P,R,F; it has {cols}"
        )
    if "LAYER" in cols:
        rows = table[table["LAYER"] == layer]
    else:  # bert-score reads row ``layer`` by position
        rows = table.iloc[[layer]] if layer < len(table) else table.iloc[[]]
    if len(rows) != 1:
        raise MissingResourceError(f"BERTScore baseline file '{path}' has no row for layer {layer}")
    return rows[["P", "R", "F"]].to_numpy(dtype=np.float64)[0]


def pydoc_sentences() -> list[str]:
    """Prose sentences of Python's bundled language reference (``pydoc_data.topics``)."""
    from pydoc_data.topics import topics

    out: list[str] = []
    for key in sorted(topics):
        for para in re.split(r"\n\s*\n", topics[key]):
            text = " ".join(line.strip() for line in para.splitlines())
            if ">>>" in text or "::=" in text:  # examples and grammar rules
                continue
            for sent in _SENT_SPLIT.split(text):
                sent = sent.strip()
                plain = sum(ch.isalpha() or ch in " \"',;:()-" for ch in sent)
                if (
                    len(sent.split()) >= 4
                    and sent[0].isupper()
                    and sent[-1] in ".!?"
                    and plain / len(sent) > 0.9
                ):
                    out.append(sent)
    return out


def read_corpus(corpus: str) -> list[str]:
    if corpus == "pydoc":
        lines = pydoc_sentences()
    else:
        path = Path(corpus).expanduser()
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    kept = [s for s in lines if 0 < len(s.split(" ")) < _MAX_WORDS and s]
    return list(dict.fromkeys(kept))


def random_pairs(sentences: Sequence[str], rounds: int, seed: int) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    n = len(sentences)
    draws = [rng.choice(n, size=(2, n // 2), replace=False) for _ in range(rounds)]
    return [sentences[i] for d in draws for i in d[0]], [sentences[i] for d in draws for i in d[1]]


def compute_baseline(
    model: str,
    sentences: Sequence[str],
    rounds: int = 10,
    seed: int = 0,
    batch_size: int = 64,
    chunk: int = 1000,
) -> np.ndarray:
    """Mean (P, R, F) of random pairs per layer: shape (n_layers + 1, 3)."""
    import bert_score
    import torch
    from transformers import AutoConfig

    path, _ = resolve_model_path(model)
    n_layers = int(AutoConfig.from_pretrained(path).num_hidden_layers)
    hyp, ref = random_pairs(sentences, rounds, seed)
    if not hyp:
        raise ValueError("the corpus has fewer than two usable sentences")
    total = np.zeros((n_layers + 1, 3), dtype=np.float64)
    for start in range(0, len(hyp), chunk):
        h, r = hyp[start : start + chunk], ref[start : start + chunk]
        scores = bert_score.score(
            h,
            r,
            model_type=path,
            num_layers=n_layers,
            all_layers=True,
            idf=False,
            batch_size=batch_size,
        )
        stacked = torch.stack(scores, dim=0).double()  # (3, layers, pairs)
        total += stacked.sum(dim=-1).numpy().T
        print(f"  {min(start + chunk, len(hyp))}/{len(hyp)} pairs", file=sys.stderr)
    return total / len(hyp)


def write_baseline(values: np.ndarray, out: str | Path) -> None:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = [f"{k},{p!r},{r!r},{f!r}" for k, (p, r, f) in enumerate(values.tolist())]
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text("\n".join(["LAYER,P,R,F", *rows]) + "\n", encoding="utf-8")
    tmp.replace(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m paraeval.metrics.baseline",
        description="BERTScore rescaling baseline (bert-score's method) for any model and corpus",
    )
    ap.add_argument("--model", default="default", help="model directory, hub id or 'default'")
    ap.add_argument("--corpus", default="pydoc", help="text file (a sentence a line) or pydoc")
    ap.add_argument("--rounds", type=int, default=10, help="random pairings of the corpus")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", required=True, help="output file (LAYER,P,R,F)")
    args = ap.parse_args(argv)
    sentences = read_corpus(args.corpus)
    print(f"{len(sentences)} sentences from {args.corpus}", file=sys.stderr)
    values = compute_baseline(args.model, sentences, args.rounds, args.seed, args.batch_size)
    write_baseline(values, args.out)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
