"""The one memo mechanism: bounded by entries and bytes, least recently used out first."""

from __future__ import annotations

import pytest

from paraeval.memo import Memo, clear_all, memo_sizes


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
