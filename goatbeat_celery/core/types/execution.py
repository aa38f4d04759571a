"""One claimed occurrence of a schedule: its execution row, its state, and its key."""

from __future__ import annotations

import enum
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

from goatbeat_celery.core.types.instants import UTC, ensure_aware
from goatbeat_celery.core.types.quick import quick_init
from goatbeat_celery.core.types.runs import RunRecord


class ExecutionState(str, enum.Enum):
    """Life of one claimed occurrence: ``claimed`` then ``submitted``.

    ``abandoned`` marks a claim given up before the broker took it: its schedule was deleted,
    or its message could not be sent after the last attempt. ``expired`` marks a claim whose
    starting deadline passed before the broker took it: it is never sent.

    The overlap policy (:class:`~goatbeat_celery.core.types.policies.OverlapPolicy`) adds two:
    ``held``, a claim that waits for the run before it to finish and then becomes ``claimed``
    (``buffer_one``), and ``skipped``, an occurrence recorded but never sent because the run
    before it had not finished (``skip``), its reason in ``last_error``.
    """

    CLAIMED = "claimed"
    SUBMITTED = "submitted"
    ABANDONED = "abandoned"
    EXPIRED = "expired"
    HELD = "held"
    SKIPPED = "skipped"


#: How the reason recorded on an occurrence the misfire rule gave up begins (it is ``skipped``,
#: never sent; :attr:`~goatbeat_celery.core.rules.misfire.MisfirePlan.given_up`): the
#: ``missed`` alert tells it by this from an occurrence skipped for another reason.
GIVEN_UP = "missed by the misfire rule"

#: Characters a key never holds as they are: each result backend Celery ships keeps a result
#: under its task id, the file system backend as a file name and others in a URL or a key path,
#: where a slash, a backslash, NUL or a control character breaks the path; ``%`` is encoded too,
#: so that the encoding stays one-to-one.
_UNSAFE_IN_KEY = frozenset("/\\%")


def key_name(schedule_name: str) -> str:
    """The schedule name as a key carries it: the name itself, except that each character
    unsafe in a file name or a backend key (``/``, ``\\``, ``%``, NUL and every other control
    character) is percent-encoded (its UTF-8 bytes, ``reports/daily`` → ``reports%2Fdaily``).
    A name without them is its own key name, so keys written before the rule keep their value."""
    if schedule_name.isprintable() and not _UNSAFE_IN_KEY.intersection(schedule_name):
        return schedule_name  # the common case, checked once for the whole name
    return "".join(quote(char, safe="") if char in _UNSAFE_IN_KEY
                   or unicodedata.category(char) == "Cc" else char
                   for char in schedule_name)


def idempotency_key(schedule_name: str, occurrence: datetime) -> str:
    """``"<key name>:<occurrence instant in UTC, ISO-8601>"``, the claim's unique key and its
    Celery task id (:func:`key_name`: the schedule name, safe for every result backend)."""
    return f"{key_name(schedule_name)}:{_utc_text(occurrence)}"


#: The last occurrence written in a key, in UTC, and its text, as one tuple (threads share
#: it): the schedules claimed together are mostly due at one instant.
_last_utc_text: tuple[datetime, str] = (datetime.min.replace(tzinfo=UTC), "")


def _utc_text(occurrence: datetime) -> str:
    global _last_utc_text
    last = _last_utc_text
    if type(occurrence) is datetime and occurrence.tzinfo is UTC and occurrence == last[0]:
        return last[1]
    utc = ensure_aware(occurrence, "occurrence")
    text = utc.isoformat()
    _last_utc_text = (utc, text)
    return text


def manual_key(schedule_name: str, requested_at: datetime) -> str:
    """``"<key name>:<instant in UTC, ISO-8601>:manual"``, the key of an extra run.

    A grid key always ends with an instant and a manual key never does, so no name, however
    chosen, makes one equal the other.
    """
    instant = ensure_aware(requested_at, "requested_at").isoformat()
    return f"{key_name(schedule_name)}:{instant}:manual"


def backfill_key(schedule_name: str, occurrence: datetime, backfill_id: int | str) -> str:
    """``"<idempotency key>:backfill-<id>"``: the key of an occurrence run again by a
    backfill. Like a manual key it never ends with an instant, so it never equals a grid key."""
    return f"{idempotency_key(schedule_name, occurrence)}:backfill-{backfill_id}"


# What follows the instant in a manual or a backfill key.
_KEY_SUFFIX = re.compile(r":(?:manual|backfill-[^:]+)\Z")


def is_key_of(key: object, schedule_name: object, occurrence: object) -> bool:
    """Whether ``key`` is a key goatbeat gives a run of ``schedule_name``'s occurrence at
    ``occurrence`` (an ISO-8601 instant, as goatbeat's headers carry it): its grid key, or a
    manual or a backfill key of that instant (or a manual key as 0.1 wrote it,
    ``"<name>:manual:<instant>"``). A worker records a report only for a message whose task
    id and goatbeat headers agree, so a message whose id was set to another schedule's key
    writes nothing onto that run."""
    if not (isinstance(key, str) and isinstance(schedule_name, str)
            and isinstance(occurrence, str)):
        return False
    prefix = f"{key_name(schedule_name)}:"
    if not key.startswith(prefix):
        return False
    instant = _KEY_SUFFIX.sub("", key[len(prefix):]).removeprefix("manual:")
    try:
        keyed, sent = datetime.fromisoformat(instant), datetime.fromisoformat(occurrence)
        return keyed.tzinfo is not None and sent.tzinfo is not None and keyed == sent
    except ValueError:
        return False


#: What a store reads to know a schedule's runs in flight (as
#: :func:`~goatbeat_celery.core.rules.claims.in_flight` takes them): executions in these states
#: whose ``run_state`` is none or one of :data:`LIVE_RUN_STATES`.
IN_FLIGHT_STATES = ("claimed", "submitted", "held")
LIVE_RUN_STATES = ("running", "retrying")


def in_flight_state(state: str, run_state: str | None) -> bool:
    """Whether an execution in ``state`` whose run is in ``run_state`` (stored values) is in
    flight: claimed, sent or held, and not ended (the store's ``IN_FLIGHT_PREDICATE``)."""
    return state in IN_FLIGHT_STATES and (run_state is None or run_state in LIVE_RUN_STATES)


@quick_init
@dataclass(frozen=True, kw_only=True)
class Execution(RunRecord):
    """One claimed occurrence, as recorded in the executions table. Its run columns are the
    fields of :class:`~goatbeat_celery.core.types.runs.RunRecord`: what workers did with it
    (run tracking), written by workers and the leader's lost-run verdicts, never by beat's
    dispatch; ``run_state`` None: not started (yet)."""

    key: str
    schedule_name: str
    occurrence_at: datetime
    due_at: datetime
    token: int
    state: ExecutionState
    claimed_at: datetime
    submitted_at: datetime | None = None
    attempts: int = 0
    last_error: str | None = None
    missed: int = 0
    manual: bool = False
    #: The starting deadline: not sent once past, and carried as the message's ``expires``.
    expires_at: datetime | None = None
    #: Whether its end has been applied to its schedule by the run policies
    #: (:func:`~goatbeat_celery.core.rules.policies.settle`): None when its schedule had no policy
    #: waiting for it when it was claimed, False until it ends and is settled, then True.
    settled: bool | None = None
    #: The queue a rotated schedule's run was sent to (the owner's, or the next one on a
    #: handover; :mod:`~goatbeat_celery.core.rules.rotation`); None: not rotated, or not sent.
    cluster: str | None = None

    @property
    def given_up(self) -> bool:
        """Whether the misfire rule gave this occurrence up: recorded, never sent."""
        return self.state is ExecutionState.SKIPPED and (self.last_error or "").startswith(
            GIVEN_UP)

    @property
    def in_flight(self) -> bool:
        """Claimed, sent or held, and not ended: it may still change without a new claim
        (the store's ``IN_FLIGHT_PREDICATE``)."""
        return in_flight_state(self.state.value,
                               None if self.run_state is None else self.run_state.value)
