"""A worker's traceback as run tracking records it (the ``run_traceback`` column): the whole
traceback of the exception a run ended with, cleaned as its error line is and bounded."""

from __future__ import annotations

import traceback
import unicodedata

from goatbeat_celery.core.rules.validation import HIDDEN_CATEGORIES

__all__ = ["MAX_TRACEBACK_LENGTH", "TRACEBACK_CUT", "traceback_text"]

#: A traceback is cut to about this many characters (16 KiB): the frames of a deep recursion
#: would otherwise fill the executions table.
MAX_TRACEBACK_LENGTH = 16_384
#: What stands where a long traceback was cut (``{count}``: the characters left out).
TRACEBACK_CUT = "\n[... {count} characters cut ...]\n"
#: The line breaks and tabs a traceback keeps; every other hidden character is escaped, as in
#: an error line (:func:`~goatbeat_celery.core.rules.runs.error_summary`).
_KEPT = frozenset("\n\t")


def traceback_text(error: BaseException | str | None) -> str | None:
    """The traceback of ``error`` (its chained causes included) as text, hidden characters
    escaped as in an error line (``\\u202e``; line breaks and tabs kept), at most about
    :data:`MAX_TRACEBACK_LENGTH` characters: a longer one keeps its head (where the run
    started) and its tail (where it failed, and the exception), with :data:`TRACEBACK_CUT`
    between. None when there is nothing to show: no error, or an exception never raised
    (no frames)."""
    if error is None:
        return None
    if isinstance(error, BaseException):
        if error.__traceback__ is None:
            return None
        try:
            text = "".join(traceback.format_exception(error))
        except Exception:  # a __str__ that fails must not fail the report
            return None
    else:
        text = str(error)
    return _bounded(_escaped(text.rstrip("\n")))


def _escaped(text: str) -> str:
    if text.isascii() and all(char.isprintable() or char in _KEPT for char in text):
        return text  # the common case, checked without looking each character up
    return "".join(char if char in _KEPT or unicodedata.category(char) not in HIDDEN_CATEGORIES
                   else f"\\u{ord(char):04x}" for char in text)


def _bounded(text: str) -> str:
    if len(text) <= MAX_TRACEBACK_LENGTH:
        return text
    head = MAX_TRACEBACK_LENGTH // 4
    tail = MAX_TRACEBACK_LENGTH - head
    marker = TRACEBACK_CUT.format(count=len(text) - head - tail)
    return text[:head] + marker + text[-tail:]
