"""The one exception tree of goatbeat_celery.

::

    GoatbeatError
    ├── ConfigurationError          settings or a schedule spec are invalid (lists every problem)
    ├── ScheduleNotFound            no schedule of that name
    ├── BackfillNotFound            no backfill of that id
    ├── AuditEntryNotFound          no audit entry of that id
    ├── CalendarNotFound            no exclusion calendar of that name
    ├── CalendarInUse               a calendar to delete is observed by schedules
    ├── TokenNotFound               no API token of that name
    ├── AlertNotFound               no alert of that id
    ├── ScheduleConflict            a name is taken, or a compare-and-set lost to a concurrent edit
    ├── LeaseLost                   the fencing token is no longer current: stop claiming
    └── StoreError                  the store failed (driver errors are wrapped here)
        ├── StoreUnavailable        the database cannot be reached right now
        │   └── StoreTimeout        a statement ran past the statement timeout: ask for less
        ├── StoreDenied             the database refused for want of a privilege: grant it
        └── SchemaOutOfDate         the schema is behind the code: run the migrations

Each class carries a :class:`ErrorKind` (``kind``): what a face answers depends on the kind
alone (an HTTP status, a CLI exit code, a form's message), so each face keeps one table from
kind to answer and a new error needs no new ``except`` anywhere.

Adapters wrap their drivers' exceptions with ``raise ... from exc`` so that callers only ever
catch these. A broker's refusal is not among them: a submitter reports it in its
:class:`~goatbeat_celery.core.types.claims.SubmitResult` and never raises, and the engine keeps the
occurrence claimed to send it again.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import ClassVar

from goatbeat_celery.core.types.problems import Problem


class ErrorKind(enum.Enum):
    """What kind of failure an error is, which is all a face needs to answer it."""

    #: The input is invalid; ``ConfigurationError.details`` says every problem. HTTP 422.
    INVALID = "invalid"
    #: The thing named does not exist. HTTP 404.
    NOT_FOUND = "not_found"
    #: The request conflicts with the current state (a name taken, a stale edit, a calendar in
    #: use). HTTP 409.
    CONFLICT = "conflict"
    #: The database cannot be reached now; retrying later may succeed. HTTP 503.
    UNAVAILABLE = "unavailable"
    #: Anything else the store or the lease refuses (a privilege, an old schema, a lost lease):
    #: it fails the same way until an operator acts on the message. HTTP 500.
    FAILED = "failed"


class GoatbeatError(Exception):
    """Base class of every error goatbeat_celery raises on purpose."""

    kind: ClassVar[ErrorKind] = ErrorKind.FAILED


class ConfigurationError(GoatbeatError, ValueError):
    """Invalid settings or schedule specs; ``details`` holds every problem found (each a
    :class:`~goatbeat_celery.core.types.problems.Problem`), ``problems`` their texts.

    Each problem names the field and says how to fix it, so the whole list can be shown to an
    operator at once, and a form can show each beside the field it names.
    """

    kind = ErrorKind.INVALID

    def __init__(self, problems: Iterable[Problem], *,
                 subject: str = "configuration") -> None:
        self.details: tuple[Problem, ...] = tuple(problems)
        self.problems: tuple[str, ...] = tuple(str(problem) for problem in self.details)
        self.subject = subject
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"invalid {subject} ({count} {noun}):\n{lines}")


class ScheduleNotFound(GoatbeatError, LookupError):
    """No schedule has the given name."""

    kind = ErrorKind.NOT_FOUND
    #: What is missing, for a face that says where to list those that exist.
    thing: ClassVar[str] = "schedule"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no schedule named {name!r}")


class BackfillNotFound(GoatbeatError, LookupError):
    """No backfill has the given id."""

    kind = ErrorKind.NOT_FOUND
    #: What is missing, for a face that says where to list those that exist.
    thing: ClassVar[str] = "backfill"

    def __init__(self, backfill_id: int) -> None:
        self.backfill_id = backfill_id
        super().__init__(f"no backfill with id {backfill_id}")

class AuditEntryNotFound(GoatbeatError, LookupError):
    """No audit entry has the given id."""

    kind = ErrorKind.NOT_FOUND
    #: What is missing, for a face that says where to list those that exist.
    thing: ClassVar[str] = "audit entry"

    def __init__(self, entry_id: int) -> None:
        self.entry_id = entry_id
        super().__init__(f"no audit entry with id {entry_id}")


class CalendarNotFound(GoatbeatError, LookupError):
    """No exclusion calendar has the given name."""

    kind = ErrorKind.NOT_FOUND
    #: What is missing, for a face that says where to list those that exist.
    thing: ClassVar[str] = "calendar"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no calendar named {name!r}")


class TokenNotFound(GoatbeatError, LookupError):
    """No API token has the given name."""

    kind = ErrorKind.NOT_FOUND
    #: What is missing, for a face that says where to list those that exist.
    thing: ClassVar[str] = "token"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no API token named {name!r}")


class AlertNotFound(GoatbeatError, LookupError):
    """No alert has the given id."""

    kind = ErrorKind.NOT_FOUND
    #: What is missing, for a face that says where to list those that exist.
    thing: ClassVar[str] = "alert"

    def __init__(self, alert_id: int) -> None:
        self.alert_id = alert_id
        super().__init__(f"no alert with id {alert_id}")


class CalendarInUse(GoatbeatError):
    """A calendar cannot be deleted while schedules observe it; ``schedules`` names them."""

    kind = ErrorKind.CONFLICT

    def __init__(self, name: str, schedules: Iterable[str]) -> None:
        self.name = name
        self.schedules = tuple(schedules)
        shown = ", ".join(repr(s) for s in self.schedules[:10])
        more = "" if len(self.schedules) <= 10 else f" and {len(self.schedules) - 10} more"
        super().__init__(f"calendar {name!r} is observed by {shown}{more}; remove it from "
                         "those schedules first")


class ScheduleConflict(GoatbeatError):
    """A schedule name is already taken, or an edit lost a compare-and-set race."""

    kind = ErrorKind.CONFLICT

    @classmethod
    def taken(cls, kind: str, name: str) -> ScheduleConflict:
        """``name`` is already used by a ``kind`` (schedule, calendar)."""
        return cls(f"a {kind} named {name!r} already exists")

    @classmethod
    def stale(cls, kind: str, name: str, version: int, expected: int | None) -> ScheduleConflict:
        """An edit made against ``expected`` found the ``kind`` at ``version``."""
        return cls(f"{kind} {name!r} is at version {version}, not {expected}: "
                   "reload it and retry")


class LeaseLost(GoatbeatError):
    """The caller's fencing token is stale: another replica holds, or held, the lease since.

    Nothing was changed by the refused operation.
    """


class StoreError(GoatbeatError):
    """The schedule store failed; the original driver error is the ``__cause__``."""


class StoreUnavailable(StoreError):
    """The database could not be reached or dropped the connection; retry later."""

    kind = ErrorKind.UNAVAILABLE


class StoreTimeout(StoreUnavailable):
    """The database answered, but a statement ran past the statement timeout
    (``goatbeat_statement_timeout``) and was cancelled: what was asked reads too much. Beat
    retries as after an outage; a face asked by a person says to ask for less."""


class StoreDenied(StoreError):
    """The database refused a statement for want of a privilege (or a read-only file): it
    fails the same way until someone grants it, so it is no outage to wait out."""


class SchemaOutOfDate(StoreError):
    """The database schema is behind this version of goatbeat_celery."""


def failure_reason(exc: BaseException) -> str:
    """One line saying what went wrong, for logs and a schedule's recorded fault."""
    if isinstance(exc, ConfigurationError):
        # A schedule's problems without its name, which the row says already.
        return "; ".join(problem.text if problem.subject.startswith("schedule ")
                         else str(problem) for problem in exc.details)
    if isinstance(exc, GoatbeatError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"

