"""Checks of the arguments the API is given, before it reads or writes: names to look up by,
ids, filters and page bounds. Each returns the problems found, or raises the error a caller
of the API gets."""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

from goatbeat_celery.core.rules.audit import reason_problems
from goatbeat_celery.core.rules.controls import MAX_PREVIEW
from goatbeat_celery.core.rules.validation import (
    MAX_REASON_LENGTH,
    calendar_name_problems,
    description_problem,
    limit_problem,
    name_problems,
    nul_problem,
    shown_value,
)
from goatbeat_celery.core.types.errors import (
    BackfillNotFound,
    CalendarNotFound,
    ConfigurationError,
    ScheduleNotFound,
)
from goatbeat_celery.core.types.listing import RunOrderCursor, ScheduleOrder
from goatbeat_celery.core.types.problems import Problem, listed
from goatbeat_celery.core.types.spec import ScheduleSource, quoted_name


def _check_reason(reason: object, subject: str) -> None:
    problems = reason_problems(reason)
    if problems:
        raise ConfigurationError(problems, subject=f"schedule {quoted_name(subject)}")


def _schedule_name(name: str) -> str:
    """``name``, to look a schedule up by; ConfigurationError for one that is not a string (a
    database would fail comparing it with a text column, or match another name: ``0`` and
    ``'0'``), ScheduleNotFound for one that no stored schedule can have (a NUL, which no
    database column holds: sent to one, it fails there)."""
    problems = _lookup_problems(name)
    if problems:
        raise ConfigurationError(problems, subject=f"schedule {quoted_name(name)}")
    if nul_problem(name, "name") is not None:
        raise ScheduleNotFound(name)
    return name


def _lookup_problems(name: object) -> list[Problem]:
    """The problem of a schedule name given to look one up by: only its type. Its other rules
    are judged when a schedule is stored: a row written by hand may break them and is still
    looked up by its name."""
    return [] if isinstance(name, str) else name_problems(name)


#: The largest id a store can hold (a 64-bit integer): of a backfill, of an audit entry.
_MAX_ROW_ID = _MAX_BACKFILL_ID = 2**63 - 1


def _backfill_id(backfill_id: int) -> int:
    """``backfill_id``, to look a backfill up by; BackfillNotFound for what no backfill can
    have (not an integer from 1 to the largest a database holds)."""
    if (isinstance(backfill_id, bool) or not isinstance(backfill_id, int)
            or not 1 <= backfill_id <= _MAX_BACKFILL_ID):
        raise BackfillNotFound(backfill_id)
    return backfill_id


def _calendar_name(name: str) -> str:
    """``name``, to look a calendar up by; ConfigurationError for one that is not a string (as
    for a schedule's), CalendarNotFound for one holding a NUL."""
    if not isinstance(name, str):
        raise ConfigurationError(calendar_name_problems(name), subject=f"calendar {name!r}")
    if nul_problem(name, "name") is not None:
        raise CalendarNotFound(name)
    return name


def _text_problems(value: object, label: str, *, optional: bool = True) -> list[Problem]:
    """Problems of text to filter by: a string (or None when ``optional``) without NUL."""
    if value is None and optional:
        return []
    if not isinstance(value, str):
        return [Problem(label, f"expected text, got {shown_value(value)}")]
    return listed(nul_problem(value, label))


def _limit_problems(limit: object, *, optional: bool = False) -> list[Problem]:
    return listed(limit_problem(limit, "limit", optional=optional))


def _after_problems(after: object, order: ScheduleOrder | None) -> list[Problem]:
    """Problems of where a page of :meth:`Schedules.list` starts: the last name seen, or by
    next run a :class:`RunOrderCursor`."""
    if after is None or order is None:
        return []
    if order is ScheduleOrder.NEXT_RUN:
        if not isinstance(after, RunOrderCursor):
            return [Problem("after", "schedules listed by next_run page on from a "
                            f"RunOrderCursor, got {shown_value(after)}")]
        found = _text_problems(after.name, "after.name", optional=False)
        at = after.next_run_at
        if at is not None and (not isinstance(at, datetime) or at.utcoffset() is None):
            found.append(Problem("after.next_run_at", "expected an aware datetime or None, "
                                 f"got {shown_value(at)}"))
        return found
    if not isinstance(after, str):
        return [Problem("after", "schedules listed by name page on from the last name seen, "
                        f"got {shown_value(after)}")]
    return listed(nul_problem(after, "after"))


_E = TypeVar("_E", ScheduleSource, ScheduleOrder)


def _choice(kind: type[_E], value: object, label: str, noun: str,
            problems: list[Problem]) -> _E | None:
    """``value`` as a member of ``kind``; None, with a problem naming ``label`` and the
    members, for anything else."""
    try:
        return kind(value)
    except (ValueError, TypeError):
        choices = ", ".join(member.value for member in kind)
        problems.append(Problem(label, f"unknown {noun} {shown_value(value)}",
                                f"use one of: {choices}"))
        return None


def _count_problem(count: object) -> Problem | None:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PREVIEW:
        return Problem("count", f"must be an integer from 1 to {MAX_PREVIEW}, got {count!r}")
    return None


def _note_problems(note: str | None) -> list[Problem]:
    """A pause's or an alert's note: shown text, at most MAX_REASON_LENGTH characters."""
    if note is None:
        return []
    problem = description_problem(note, "note")
    if problem is None and len(note) > MAX_REASON_LENGTH:
        problem = Problem("note", f"{len(note)} characters",
                          f"at most {MAX_REASON_LENGTH} are allowed")
    return [] if problem is None else [problem]
