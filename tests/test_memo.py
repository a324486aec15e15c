"""The one memo mechanism: bounded by entries and bytes, least recently used out first."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from paraeval.memo import Memo, arrow_key, clear_all, memo_sizes


def test_entry_bound_drops_least_recently_used() -> None:
    memo: Memo[str, int] = Memo("test.entries", max_entries=2)
    memo.put("a", 1)
    memo.put("b", 2)
    assert memo.get("a") == 1  # a is now the most recent
    memo.put("c", 3)
    assert "b" not in memo and memo.get("a") == 1 and memo.get("c") == 3


def test_byte_bound_and_oversized_entries() -> None:
    memo: Memo[str, bytes] = Memo("test.bytes", max_entries=10, max_bytes=10, size=len)
    memo.put("a", b"12345")
    memo.put("b", b"123456")  # 11 bytes in all: a leaves
    assert "a" not in memo and memo.nbytes == 6
    memo.put("huge", b"x" * 11)  # larger than the whole budget: not kept
    assert "huge" not in memo and memo.get("b") == b"123456"
    memo.put("b", b"1")  # replacing an entry frees its old bytes
    assert memo.nbytes == 1


def test_get_or_compute_computes_once() -> None:
    memo: Memo[str, list[int]] = Memo("test.compute", max_entries=4)
    calls: list[int] = []

    def compute() -> list[int]:
        calls.append(1)
        return [len(calls)]

    assert memo.get_or_compute("k", compute) == [1]
    assert memo.get_or_compute("k", compute) == [1]
    assert len(calls) == 1


def test_clear_all_and_sizes() -> None:
    memo: Memo[str, int] = Memo("test.registry", max_entries=3)
    memo.put("a", 1)
    assert memo_sizes()["test.registry"] == (1, 0)
    clear_all()
    assert len(memo) == 0


def test_byte_bound_needs_a_size() -> None:
    with pytest.raises(ValueError, match="size function"):
        Memo("test.bad", max_entries=1, max_bytes=5)


def test_arrow_key_follows_content_not_layout_or_object() -> None:
    texts = ["a copy", "b", None, "dé jà", ""]
    base = pa.array(texts, type=pa.string())
    same = pa.array(list(texts), type=pa.string())
    assert arrow_key(base) == arrow_key(same)
    # a pandas column backed by Arrow is read without a copy, as its Arrow array
    series = pd.Series(texts, dtype=pd.ArrowDtype(pa.string()))
    assert arrow_key(series) == arrow_key(pa.chunked_array([base]))
    # any change of a value, a null, the type, the order or the columns' order is another key
    keys = {
        arrow_key(base),
        arrow_key(pa.array(["a copy", "b", None, "dé jà", " "], type=pa.string())),
        arrow_key(pa.array(["a copy", "b", "", "dé jà", ""], type=pa.string())),
        arrow_key(pa.array(texts, type=pa.large_string())),
        arrow_key(pa.array(texts[::-1], type=pa.string())),
        arrow_key(base, same[:4]),
        arrow_key(same[:4], base),
    }
    assert len(keys) == 7
    # a slice is told by its offset and length, not only by the buffers it shares
    assert arrow_key(base[1:3]) != arrow_key(base[2:4])
    assert arrow_key(base[1:3]) == arrow_key(base[1:3])
    # nested columns (references: lists of strings) include their children's buffers
    refs = pa.array([["x", "y"], ["z"]])
    assert arrow_key(refs) != arrow_key(pa.array([["x"], ["y", "z"]]))
    table = pa.table({"candidate": base, "n": pa.array(np.arange(5))})
    assert arrow_key(table) != arrow_key(table.rename_columns(["source", "n"]))


def test_arrow_key_refuses_what_is_not_arrow() -> None:
    with pytest.raises(TypeError, match="not Arrow data"):
        arrow_key(np.arange(3))
    with pytest.raises(TypeError, match="not Arrow data"):
        arrow_key(pd.Series(["a", "b"], dtype=object))


def test_threads_share_a_memo_without_losing_its_bounds() -> None:
    """The correlation's worker threads read and fill memos at once: under concurrent gets,
    puts and evictions nothing raises, and the bounds and byte count stay exact."""
    import sys
    import threading

    memo: Memo[int, bytes] = Memo("test.threads", max_entries=8, max_bytes=64, size=len)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(20000):
                key = int(rng.integers(0, 40))
                if memo.get(key) is None:
                    memo.put(key, b"x" * int(rng.integers(1, 12)))
                if rng.random() < 0.05:
                    memo.discard(int(rng.integers(0, 40)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns between almost every bytecode
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert len(memo) <= 8
    assert memo.nbytes == sum(len(v) for v, _ in memo._entries.values()) <= 64


def test_an_entrys_size_is_the_bytes_of_its_arrays() -> None:
    from paraeval.memo import nbytes_of

    a, b = np.zeros((3, 5)), np.zeros(7, dtype=np.int32)
    assert nbytes_of(a) == 120
    assert nbytes_of((a, b)) == 120 + 28
    memo: Memo[str, tuple[np.ndarray, np.ndarray]] = Memo(
        "test.nbytes", max_entries=4, max_bytes=200, size=nbytes_of
    )
    memo.put("x", (a, b))
    assert memo.nbytes == 148
    memo.put("y", (a, b))  # 296 bytes in all: x leaves
    assert "x" not in memo and memo.nbytes == 148
