"""Escaping for terminals: user data (names, tasks, reasons, errors) passes through
:func:`shown`, so a control or bidirectional character can neither move the cursor nor reorder
what the operator reads."""

from __future__ import annotations

from goatbeat_celery.core.rules.validation import hidden_characters

_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(char: str) -> str:
    code = ord(char)
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def shown(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` fit for a terminal: each character it would not show as itself (control,
    format and bidirectional characters such as ``U+202E``, line separators) written as a Python
    escape (``\\n``, ``\\x1b``, ``\\u202e``). With ``keep_newlines``, ``\\n`` still breaks the
    line (for multi-line messages built here, never for user data)."""
    if text.isprintable():  # the common case: no such character at all
        return text
    if keep_newlines:
        return "\n".join(shown(line) for line in text.split("\n"))
    return "".join(_escape(char) if hidden_characters(char) else char for char in text)
