"""The one sanitizer for names and text from data (pipeline/names.py)."""

from __future__ import annotations

import logging
import re

import pytest

from paraeval.pipeline.names import EscapeFilter, show, slug

HOSTILE = [
    "human_/../../../X",
    "../x",
    "..",
    ".",
    "/etc/passwd",
    "a/b",
    "nul\x00byte",
    "esc\x1b[2J",
    "osc\x1b]0;title\x07",
    "rtl\u202eabc",
    "",
    " ",
    "ünïcode",
    "x" * 300,
    "con:colon",
]


@pytest.mark.parametrize("name", ["bleu", "human_meaning", "metric_my-score.v2", "rougeL", "s01"])
def test_safe_names_are_unchanged(name: str) -> None:
    assert slug(name) == name


@pytest.mark.parametrize("name", HOSTILE)
def test_unsafe_names_become_one_safe_file_name(name: str) -> None:
    out = slug(name)
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*", out), out
    assert ".." not in out and "/" not in out and len(out) <= 96
    assert slug(name) == out  # stable


def test_different_names_never_share_a_slug() -> None:
    names = [*HOSTILE, "human_/../X", "human_..X", "human__X", "a_b", "a\\b", "a b"]
    slugs = [slug(n) for n in names]
    assert len(set(slugs)) == len(names)


def test_show_escapes_control_characters() -> None:
    assert show("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert show("t\x1b]0;pwned\x07") == "t\\x1b]0;pwned\\x07"
    assert show("n\x00l") == "n\\x00l"
    assert show("r\u202eabc") == "r\\u202eabc"
    assert show("c1\x9b31m") == "c1\\x9b31m"
    assert show("del\x7f") == "del\\x7f"
    assert show("line\nnext") == "line\\x0anext"
    assert show("line\nnext", keep_newlines=True) == "line\nnext"
    assert show("tab\tok") == "tab\tok"
    assert show("plain ünïcode 中文") == "plain ünïcode 中文"


def test_log_filter_escapes_formatted_messages() -> None:
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "system %s", ("e\x1b[2J",), None)
    assert EscapeFilter().filter(record)
    assert record.getMessage() == "system e\\x1b[2J"
    assert EscapeFilter().filter(record)  # a second handler sees the same text
    assert record.getMessage() == "system e\\x1b[2J"
