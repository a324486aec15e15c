"""The encoder's packed outputs and the memo of their chunks (no model needed)."""

from __future__ import annotations

import numpy as np
import torch

from paraeval.metrics.encoder_store import Memo, Packed, concat, gather_index, pad_positions


def _packed(texts: list[str], lengths: list[int], dim: int = 3, seed: int = 0) -> Packed:
    """Texts whose token ids are 100 * (row + 1) + position, laid out in reverse row order (as a
    pass's length-sorted batches may), with random layer-2 vectors and sentence rows."""
    n = np.asarray(lengths, dtype=np.int64)
    starts = np.empty(len(n), dtype=np.int64)
    offset = 0
    for i in reversed(range(len(n))):
        starts[i] = offset
        offset += n[i]
    ids = np.zeros(offset, dtype=np.int32)
    for i, (s, k) in enumerate(zip(starts, n, strict=True)):
        ids[s : s + k] = 100 * (i + 1) + np.arange(k)
    gen = torch.Generator().manual_seed(seed)
    tok = {2: torch.randn(offset, dim, generator=gen)}
    return Packed(texts, ids, starts, n, tok, torch.randn(len(n), dim, generator=gen))


def test_gather_index_packs_rows_in_the_order_asked() -> None:
    # rows at 5..7 (3 tokens) and 0..1 (2 tokens), then an empty one
    assert gather_index(np.array([5, 0, 9]), np.array([3, 2, 0])).tolist() == [5, 6, 7, 0, 1]
    assert gather_index(np.array([], dtype=np.int64), np.array([], dtype=np.int64)).size == 0
    where, mask = pad_positions(np.array([4, 0]), np.array([1, 3]))
    assert where.tolist() == [[4, 0, 0], [0, 1, 2]]
    assert mask.tolist() == [[True, False, False], [True, True, True]]


def test_take_and_concat_keep_each_texts_tokens_and_vectors() -> None:
    a = _packed(["x", "yy", "zzz"], [1, 2, 3])
    b = _packed(["w"], [4], seed=1)
    part = a.take(a.rows(["zzz", "x"]))
    assert part.texts == ["zzz", "x"] and part.starts.tolist() == [0, 3]
    joined = concat([part, b])
    for text, source in (("zzz", a), ("x", a), ("w", b)):
        i, j = joined.row[text], source.row[text]
        np.testing.assert_array_equal(joined.ids[joined.span(text)], source.ids[source.span(text)])
        s, n = joined.starts[i], joined.lengths[i]
        t, m = source.starts[j], source.lengths[j]
        assert torch.equal(joined.tok[2][s : s + n], source.tok[2][t : t + m])
        assert torch.equal(joined.sent[i], source.sent[j])
    assert a.take(np.arange(3)) is a  # nothing to gather
    assert joined.has([2], True) and not joined.has([3], False)
    # a layer only one part has is not in the whole
    b.tok[5] = torch.zeros(4, 3)
    assert set(concat([a, b]).tok) == {2}


def test_the_memo_serves_texts_from_their_newest_chunk_and_evicts_whole_chunks() -> None:
    first, second = _packed(["a", "b"], [2, 2]), _packed(["b", "c"], [3, 1], seed=1)
    memo = Memo(max_bytes=first.nbytes + second.nbytes)
    memo.put(first)
    memo.put(second)
    assert len(memo) == 3 and memo.nbytes == first.nbytes + second.nbytes
    parts, missing = memo.find(["b", "a", "d", "b"], [2], sentence=True)
    assert missing == ["d"]
    found = concat(parts)
    assert sorted(found.texts) == ["a", "b"]
    assert found.ids[found.span("b")].tolist() == second.ids[second.span("b")].tolist()  # newest
    assert memo.find(["a"], [7], sentence=False)[1] == ["a"]  # a layer it lacks
    # "first" was used last: the next chunk evicts "second", the least recently used, and the
    # texts it served
    memo.put(_packed(["e"], [1], seed=2))
    assert "a" in memo and "e" in memo and "b" not in memo and "c" not in memo
    assert memo.find(["a", "b"], [2], sentence=True)[1] == ["b"]
    assert memo.nbytes <= memo.max_bytes
    # a chunk larger than the bound is not kept
    memo.put(_packed([str(i) for i in range(50)], [30] * 50))
    assert len(memo) == 0 and memo.nbytes == 0
