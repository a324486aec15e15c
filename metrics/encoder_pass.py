"""The encoder's forward pass over a chunk of texts: length-sorted batches under a token budget,
the token embeddings of the registered layers and the pooled sentence embedding of each text.
Loading and tokenization are :mod:`metrics.encoder_model`'s, the memo and the disk cache
:mod:`metrics.encoder`'s: this module only turns token ids into arrays."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from types import MappingProxyType
from typing import Any

import numpy as np

from paraeval.metrics.base import Estimator
from paraeval.metrics.encoder_model import (
    HALF,
    EncoderModel,
    check_half_precision,
    precision_context,
)
from paraeval.metrics.encoder_store import Entry

TOKENS_PER_ROW = 128  # padded tokens per batch row allowed on average (token budget)


# an encoder as large as the estimates allow for (BERT-large, RoBERTa-large): its hidden size,
# attention heads and longest input
LARGE_HIDDEN, LARGE_HEADS, MAX_WIDTH = 1024, 16, 512


def batch_nbytes(batch_size: int, n_sentences: int) -> int:
    """Peak bytes of one forward pass of :func:`encode` over a batch of :func:`length_batches`:
    its padded tokens (at most ``batch_size * TOKENS_PER_ROW``, and no more batch rows than
    sentences to encode) times what a token holds in a layer of a large encoder (a dozen float32
    vectors of the hidden size: hidden states, query, key, value, the feed-forward's four, their
    outputs) and its attention scores (one float32 per head and position of its row)."""
    tokens = min(batch_size, max(1, n_sentences)) * TOKENS_PER_ROW
    return tokens * 4 * (12 * LARGE_HIDDEN + LARGE_HEADS * MAX_WIDTH)


# :attr:`Metric.memory` of a metric that encodes in batches of its ``batch_size`` setting
ENCODER_MEMORY: Mapping[str, Estimator] = MappingProxyType(
    {"batch_size": lambda size, sizes: batch_nbytes(size, sizes.sentences)}
)


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Length-sorted batches of at most ``batch_size`` sentences and ``batch_size * 128``
    padded tokens (a long sentence pads no short ones); longest first, to fail fast on OOM."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    budget = batch_size * TOKENS_PER_ROW
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = lengths[current[0]] if current else lengths[i]
        full = len(current) >= batch_size or width * (len(current) + 1) > budget
        if current and full:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def pool(hidden: Any, mask: Any, mode: str) -> Any:
    """sentence-transformers' Pooling module for the cls/max/mean modes."""
    import torch

    if mode == "cls":
        return hidden[:, 0]
    expanded = mask.unsqueeze(-1).expand(hidden.size()).to(hidden.dtype)
    if mode == "max":
        masked = hidden.clone()
        masked[expanded == 0] = -1e9
        return torch.max(masked, 1)[0]
    summed = torch.sum(hidden * expanded, 1)
    counts = torch.clamp(expanded.sum(1), min=1e-9)
    return summed / counts


def encode(
    enc: EncoderModel, texts: list[str], ids: list[np.ndarray], layers: Iterable[int]
) -> dict[str, Entry]:
    """One entry per text: its ids, the token embeddings of ``layers`` and its sentence
    embedding (a text longer than sentence-transformers' limit gets a truncated pass for it)."""
    import torch

    model, tok, pooling, st_max = enc.model, enc.tokenizer, enc.pooling, enc.sentence_max_length
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    layers = sorted(set(layers))
    out: dict[str, Entry] = {}
    too_long: list[str] = []
    with torch.inference_mode(), precision_context(enc.precision, enc.device):
        for batch in length_batches([len(x) for x in ids], enc.batch_size):
            width = max(len(ids[i]) for i in batch)
            input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                input_ids[row, : len(ids[i])] = torch.from_numpy(ids[i].astype(np.int64))
                mask[row, : len(ids[i])] = 1
            device_mask = mask.to(enc.device)
            if enc.precision in HALF and not enc.precision_checked:
                # once per encoder, on its first batch, outside the run's autocast
                enc.precision_checked = True
                with torch.autocast(device_type=str(enc.device).split(":")[0], enabled=False):
                    sample = partial(
                        model, input_ids=input_ids.to(enc.device), attention_mask=device_mask
                    )
                    check_half_precision(sample, enc.precision, enc.device)
            result = model(
                input_ids=input_ids.to(enc.device),
                attention_mask=device_mask,
                output_hidden_states=True,
            )
            hidden = result.hidden_states
            per_layer = {layer: hidden[layer].float().cpu().numpy() for layer in layers}
            pooled = pool(result.last_hidden_state, device_mask, pooling).float().cpu().numpy()
            for row, i in enumerate(batch):
                text, n = texts[i], len(ids[i])
                entry = out[text] = Entry(ids=ids[i])
                for layer, arr in per_layer.items():
                    entry.tok[layer] = np.array(arr[row, :n], dtype=np.float32)
                if n <= st_max:
                    entry.sent = pooled[row].copy()
                else:
                    too_long.append(text)
            enc.forward_sentences += len(batch)
    if too_long:
        for text, vec in sentence_pass(enc, too_long).items():
            out[text].sent = vec
    return out


def sentence_pass(enc: EncoderModel, texts: list[str]) -> dict[str, np.ndarray]:
    """Sentence embeddings of texts longer than sentence-transformers' limit, truncated the
    way it truncates them."""
    import torch

    out: dict[str, np.ndarray] = {}
    tok, model, pooling = enc.tokenizer, enc.model, enc.pooling
    with torch.inference_mode(), precision_context(enc.precision, enc.device):
        for s in range(0, len(texts), enc.batch_size):
            chunk = texts[s : s + enc.batch_size]
            batch = tok(
                [t.strip() for t in chunk],
                padding=True,
                truncation=True,
                max_length=enc.sentence_max_length,
                return_tensors="pt",
            ).to(enc.device)
            hidden = model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).last_hidden_state
            vecs = pool(hidden, batch["attention_mask"], pooling).float().cpu().numpy()
            for text, vec in zip(chunk, vecs, strict=True):
                out[text] = vec.copy()
            enc.forward_sentences += len(chunk)
    return out
