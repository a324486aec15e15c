"""Data can be hostile (``human_/../../X``, an ESC in a system name): :func:`slug` before a file
name or MLflow key, :func:`show` before the terminal or a log line."""

from __future__ import annotations

import hashlib
import logging
import re
import warnings

from paraeval.pipeline.secrets import redact

SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
MAX_PART = 96
# C0, DEL, C1, and the bidi embeddings/overrides/isolates (they reorder what a terminal shows)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_NO_NL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def slug(name: object) -> str:
    """Letters, digits, ``_ . -``, no leading dot, no ``..``; a changed name gets a hash suffix."""
    text = str(name)
    if SAFE.fullmatch(text) and ".." not in text and len(text) <= MAX_PART:
        return text
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    base = re.sub(r"[^A-Za-z0-9_.\-]+", "_", text)
    base = re.sub(r"\.{2,}", "_", base).strip("._-")[: MAX_PART - 9] or "x"
    return f"{base}-{digest}"


def show(text: object, keep_newlines: bool = False) -> str:
    """Control characters escaped but tabs (and newlines: ``keep_newlines``); no URI password."""
    return (_CONTROL_NO_NL if keep_newlines else _CONTROL).sub(_escape, redact(str(text)))


def _escape(match: re.Match[str]) -> str:
    ch = match.group(0)
    if ch == "\t":
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class EscapeFilter(logging.Filter):
    """Every record's formatted message escaped (tracebacks, formatted separately, are not)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        escaped = show(message, keep_newlines=True)
        if escaped != message or record.args:
            record.msg, record.args = escaped, None
        return True


def escape_log_output() -> None:
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, EscapeFilter) for f in handler.filters):
            handler.addFilter(EscapeFilter())


def escape_warnings() -> None:
    """Python warnings (a plotting library quoting a label from data) printed escaped."""
    original = warnings.formatwarning
    if getattr(original, "paraeval_escaped", False):
        return

    def formatwarning(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        line: str | None = None,
    ) -> str:
        return show(original(message, category, filename, lineno, line), keep_newlines=True)

    formatwarning.paraeval_escaped = True  # type: ignore[attr-defined]
    warnings.formatwarning = formatwarning
