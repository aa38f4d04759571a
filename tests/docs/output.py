"""Comparing a command's output with the output a page shows.

What changes from run to run is replaced on both sides before comparing: instants, database
URLs, lease holder identities, durations measured on a clock, and column padding (tables are
aligned to their widest cell). ``...`` in the page's output matches any text within a line, and
a line of just ``...`` matches any number of lines.
"""

from __future__ import annotations

import re

_REPLACEMENTS = (
    # Database URLs first: a SQLite path may contain anything an instant pattern would take.
    (re.compile(r"\b(?:sqlite|postgres(?:ql)?)(?:\+\w+)?://[^\s;'\"]*"), "<database>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:\d{2})?"),
     "<instant>"),
    (re.compile(r"\((?:in [^()]*|[^()]* ago)\)"), "(<relative>)"),
    (re.compile(r"\b[\w.-]+:\d+:[0-9a-f]{8}\b"), "<holder>"),
    (re.compile(r"\b(?:\d+[dhm])*\d+\.\d+s\b"), "<duration>"),
    (re.compile(r'"(seconds_left|lag_seconds|lateness_seconds|silent_seconds'
                r'|seen_seconds_ago)": -?[\d.e+-]+'),
     r'"\1": <seconds>'),
    (re.compile(r"[ \t]+"), " "),
)

ANY_LINES = "..."


def normalise(line: str) -> str:
    for pattern, replacement in _REPLACEMENTS:
        line = pattern.sub(replacement, line)
    return line.strip()


def _pattern(line: str) -> re.Pattern[str]:
    parts = [re.escape(part) for part in normalise(line).split(ANY_LINES)]
    return re.compile(".*".join(parts) + r"\Z")


def _trimmed(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    return lines


def matches(expected: list[str] | tuple[str, ...], actual: str) -> bool:
    """Whether ``actual`` output fits the ``expected`` lines of a page."""
    want = _trimmed(list(expected))
    got = [normalise(line) for line in _trimmed(actual.splitlines())]
    patterns: list[re.Pattern[str] | None] = [
        None if line.strip() == ANY_LINES else _pattern(line) for line in want
    ]
    return _match(patterns, got)


def contains(expected: list[str] | tuple[str, ...], actual: str) -> bool:
    """Whether the ``expected`` lines appear, one after the other, somewhere in ``actual``
    (what a process still running has printed so far)."""
    return matches([ANY_LINES, *_trimmed(list(expected)), ANY_LINES], actual)


def _match(patterns: list[re.Pattern[str] | None], lines: list[str]) -> bool:
    # Backtracking over "..." lines; pages show a few dozen lines at most.
    if not patterns:
        return not lines
    head, rest = patterns[0], patterns[1:]
    if head is None:
        return any(_match(rest, lines[skip:]) for skip in range(len(lines) + 1))
    return bool(lines) and head.match(lines[0]) is not None and _match(rest, lines[1:])
