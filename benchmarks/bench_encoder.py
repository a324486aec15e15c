"""Benchmark: where the encoder pass goes, per device, against the pass as it was built before
(the anchor, measured in the same run) and against the model's forward alone.

    python benchmarks/bench_encoder.py                                  # CPU, 10,000 sentences
    python benchmarks/bench_encoder.py --device cuda --sentences 24000 --precisions fp32,bf16
    python benchmarks/bench_encoder.py --device cuda --check            # pass/fail lines

The sentences are generated (benchmarks/semantic_texts.py), unique, BERTScore's layer of the
packaged all-MiniLM-L6-v2 kept. Phases, each over every sentence in the pass's own batches:
tokenize (the Rust backend's batch call; the anchor: transformers' tokenizer call, an array per
text), build (the padded batches on the host; the anchor: row by row), transfer (host to device),
forward (the model), pool (its sentence embeddings), copy-out (the kept layer packed where it is;
the anchor: copied to the host, an array per sentence), matching (BERTScore's greedy
matching and the cosines of pairs of the packed outputs). Then the pass end to end against the
forward alone, and BERTScore + cosine cold (no cache) over the sentences against that forward.

Budgets (``--check`` prints one PASS/FAIL line each, exit 1 on a FAIL): tokenize + build + copy-out
at most a quarter of the anchor's; the pass at most 1.05x the forward on the CPU; on CUDA the pass
at least 30,000 sentences/s at fp32 and 60,000 at bf16, and BERTScore + cosine cold at most 2x the
forward.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from results import row, write_rows
from semantic_texts import paraphrase, sentence

from paraeval.metrics.bertscore import BERTScore, greedy_match, padding_floors, token_weights
from paraeval.metrics.cosine import Cosine
from paraeval.metrics.encoder import Encoder, Encoders
from paraeval.metrics.encoder_match import pair_cosines, to_device
from paraeval.metrics.encoder_model import batch_inputs, length_batches, pool

LAYER = 6


def sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` unique generated sentences, references and paraphrases of them."""
    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < n:
        ref = sentence(rng)
        out[ref] = None
        out[paraphrase(ref, rng, [ref])] = None
    return list(out)[:n]


class Clock:
    """Seconds per phase; CUDA work is waited for before a phase's clock stops."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.seconds: dict[str, float] = {}

    def __call__(self, phase: str, work: Callable[[], Any]) -> Any:
        self.sync()
        start = time.perf_counter()
        out = work()
        self.sync()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start
        return out

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()


def anchor_tokenize(enc: Encoder, texts: list[str]) -> list[np.ndarray]:
    """The pass before: transformers' tokenizer call, an array per text."""
    ids = enc.tokenizer(
        [t.strip() for t in texts], add_special_tokens=True, max_length=512, truncation=True
    )["input_ids"]
    return [np.asarray(x, dtype=np.int32) for x in ids]


def anchor_build(ids: list[np.ndarray], pad_id: int) -> tuple[Any, Any]:
    """The pass before: a padded batch filled row by row."""
    import torch

    width = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for k, x in enumerate(ids):
        input_ids[k, : len(x)] = torch.from_numpy(x.astype(np.int64))
        mask[k, : len(x)] = 1
    return input_ids, mask


def phases(enc: Encoder, texts: list[str], clock: Clock, anchor: Clock) -> None:
    """Each phase of the pass over ``texts``, now (``clock``) and before (``anchor``)."""
    import torch

    model, device, pad_id = enc.model, enc.device, enc.tokenizer.pad_token_id or 0
    tokens = clock("tokenize", lambda: enc.tokenize(texts))
    old_ids = anchor("tokenize", lambda: anchor_tokenize(enc, texts))
    assert all(a.tolist() == tokens[i].tolist() for i, a in enumerate(old_ids))
    with torch.inference_mode():
        for batch in map(np.asarray, length_batches(tokens.lengths.tolist(), enc.batch_size)):
            host = clock("build", lambda b=batch: batch_inputs(tokens, b, pad_id, "cpu"))
            anchor("build", lambda b=batch: anchor_build([old_ids[i] for i in b], pad_id))
            x, m = clock("transfer", lambda h=host: [to_device(t.numpy(), device) for t in h])
            out = clock("forward", lambda x=x, m=m: model(input_ids=x, attention_mask=m, **HIDDEN))

            vecs = clock("pool", lambda o=out, m=m: pool(o.last_hidden_state, m, enc.pooling))
            lengths = tokens.lengths[batch]
            clock("copy-out", lambda o=out, n=lengths: enc.pack(o, n, [LAYER]))

            def copy_out(out: Any = out, b: np.ndarray = batch, vecs: Any = vecs) -> None:
                arr = out.hidden_states[LAYER].float().cpu().numpy()
                sent = vecs.float().cpu().numpy()
                for k, i in enumerate(b):
                    np.array(arr[k, : len(old_ids[i])], dtype=np.float32)
                    sent[k].copy()

            anchor("copy-out", copy_out)


HIDDEN = {"output_hidden_states": True}


def matching(enc: Encoder, texts: list[str], clock: Clock) -> None:
    """BERTScore's matching and the cosines of consecutive sentences, on the packed outputs."""
    packed = enc.fetch(texts, [LAYER], sentence=True)
    rows = packed.rows(texts)
    cand, ref = rows[0 : len(rows) - 1 : 2], rows[1::2]
    table = ({enc.tokenizer.sep_token_id: 0.0, enc.tokenizer.cls_token_id: 0.0}, 1.0)
    weights = token_weights(packed.ids, table)
    floors = padding_floors(packed.lengths[cand], packed.lengths[ref], 64)
    clock("matching", lambda: greedy_match(packed, LAYER, weights, cand, ref, floors))
    clock("matching", lambda: pair_cosines(packed.sent, cand, ref))


def end_to_end(texts: list[str], args: argparse.Namespace, precision: str) -> dict[str, float]:
    """The pass (tokenize to packed outputs) and the forward alone on its prepared batches, the
    best of ``--repeats`` each, alternated; and BERTScore + cosine cold over the texts."""
    import torch

    clock = Clock(args.device)
    best: dict[str, float] = {}
    for _ in range(args.repeats):
        enc = Encoder(
            use_cache=False, batch_size=args.batch_size, device=args.device, precision=precision
        )
        enc.model  # noqa: B018 - loading is not part of the pass
        enc.encode(texts[:64], enc.tokenize(texts[:64]), [LAYER])  # kernels chosen, not timed
        clock.seconds.clear()
        clock("pass", lambda e=enc: e.encode(texts, e.tokenize(texts), [LAYER]))
        tokens = enc.tokenize(texts)
        batches = map(np.asarray, length_batches(tokens.lengths.tolist(), enc.batch_size))
        pad = enc.tokenizer.pad_token_id or 0
        inputs = [batch_inputs(tokens, b, pad, args.device) for b in batches]
        model = enc.model

        def forward(model: Any = model, inputs: list[Any] = inputs) -> None:
            for x, m in inputs:
                model(input_ids=x, attention_mask=m, **HIDDEN)

        with torch.inference_mode():
            clock("forward", forward)
        for key, value in clock.seconds.items():
            best[key] = min(best.get(key, value), value)
    if args.skip_cold:
        return best
    encoders = Encoders()
    settings = {"use_cache": False, "batch_size": args.batch_size, "device": args.device}
    bert = BERTScore(encoders=encoders, precision=precision, **settings)
    cos = Cosine(encoders=encoders, precision=precision, **settings)
    bert.encoder.memo.max_bytes = args.memo_gib << 30
    bert.encoder.model  # noqa: B018 - loading is not timed
    cands, refs = texts[0 : len(texts) - 1 : 2], [[r] for r in texts[1::2]]

    def cold() -> None:
        bert.prepare(texts)
        bert.score(cands, refs)
        cos.score(cands, refs)

    clock.seconds.clear()
    clock("cold", cold)
    best["cold"] = clock.seconds["cold"]
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sentences", type=int, default=10_000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precisions", default="fp32", help="comma-separated, fp32 first")
    ap.add_argument("--repeats", type=int, default=2, help="end-to-end timings, best kept")
    ap.add_argument("--memo-gib", type=int, default=1, help="the encoder's memo for the cold run")
    ap.add_argument("--skip-cold", action="store_true", help="no BERTScore + cosine cold run")
    ap.add_argument("--check", action="store_true", help="PASS/FAIL lines for the budgets")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args()
    texts = sentences(args.sentences)
    n = len(texts)
    enc = Encoder(use_cache=False, batch_size=args.batch_size, device=args.device)
    enc.require_layer(LAYER)
    enc.encode(texts[:64], enc.tokenize(texts[:64]), [LAYER])  # loaded and warm, not timed
    clock, anchor = Clock(args.device), Clock(args.device)
    phases(enc, texts, clock, anchor)
    matching(enc, texts, clock)
    print(f"{n:,} unique sentences, {args.device}, batch {args.batch_size}; seconds per 10,000:")
    print(f"  {'phase':10s} {'now':>8s} {'before':>8s}")
    for phase, seconds in clock.seconds.items():
        before = anchor.seconds.get(phase)
        was = f"{before / n * 1e4:8.3f}" if before is not None else f"{'':8s}"
        print(f"  {phase:10s} {seconds / n * 1e4:8.3f} {was}")
    outside = ("tokenize", "build", "copy-out")
    now = sum(clock.seconds[p] for p in outside)
    before = sum(anchor.seconds[p] for p in outside)
    checks = [(f"tokenize + build + copy-out {now / before:.3f}x the anchor's", now <= before / 4)]
    rows = [
        row(
            "bench_encoder",
            f"tokenize + build + copy-out, {n:,} sentences, {args.device}",
            now,
            "s",
            "the pass before (an array per text and layer)",
            before,
        )
    ]
    cuda = args.device.startswith("cuda")
    for precision in args.precisions.split(","):
        t = end_to_end(texts, args, precision)
        speed = n / t["pass"]
        print(
            f"  {precision}: pass {t['pass']:.2f} s ({speed:,.0f} sentences/s), forward alone "
            f"{t['forward']:.2f} s, pass / forward {t['pass'] / t['forward']:.3f}; BERTScore + "
            f"cosine cold {t['cold']:.2f} s ({t['cold'] / t['forward']:.2f}x the forward)"
        )
        what = f"the encoder pass, {n:,} sentences, {args.device}, {precision}"
        rows.append(row("bench_encoder", what, t["pass"], "s", "the forward alone", t["forward"]))
        if not cuda and precision == "fp32":
            ratio = t["pass"] / t["forward"]
            checks.append((f"pass / forward {ratio:.3f} on the CPU", ratio <= 1.05))
        if cuda and precision in ("fp32", "bf16"):
            floor = 30_000 if precision == "fp32" else 60_000
            checks.append(
                (f"{precision} pass {speed:,.0f} sentences/s >= {floor:,}", speed >= floor)
            )
            ratio = t["cold"] / t["forward"]
            checks.append(
                (f"{precision} BERTScore + cosine cold {ratio:.2f}x the forward", ratio <= 2)
            )
    write_rows(args.json, rows)
    if args.check:
        for label, ok in checks:
            print(f"{'PASS' if ok else 'FAIL'}: {label}")
        return 0 if all(ok for _, ok in checks) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
