"""What a tick of the engine passes from the store to the submitter: due batches, what waits
for the leader, planned claims and their results, dispatches and what the broker did with them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.instants import UTC, JSONValue, check_aware
from goatbeat_celery.core.types.policies import OverlapPolicy
from goatbeat_celery.core.types.quick import quick_init
from goatbeat_celery.core.types.schedule import Schedule


@quick_init
@dataclass(frozen=True, kw_only=True)
class Dispatch:
    """What the submitter sends for one execution: the claim and the task to run."""

    execution: Execution
    task: str
    args: tuple[JSONValue, ...]
    kwargs: Mapping[str, JSONValue]
    options: Mapping[str, JSONValue]
    #: The schedule's trigger as stored (``{"kind": ..., **params}``, None where unreadable)
    #: and its run count as the store read it (with a claim: the runs before it; with a
    #: resubmission: the runs so far): what beat hands code that hooks it
    #: (``ScheduleEntry.schedule`` and ``total_run_count``).
    trigger: Mapping[str, JSONValue] | None = None
    total_runs: int = 0
    #: The schedule's rotation as stored (its queues, empty: none, and whether an unconsumed
    #: owner hands over), and the occurrence's index on the trigger's grid, worked out by the
    #: engine before sending (:func:`~goatbeat_celery.core.rules.rotation.occurrence_index`;
    #: None: not rotated, or the trigger could not be built).
    rotate: tuple[str, ...] = ()
    rotate_handover: bool = False
    rotation_index: int | None = None

    @property
    def key(self) -> str:
        return self.execution.key


@dataclass(frozen=True, kw_only=True)
class DueBatch:
    """Due schedules read by the store, with the store's clock at the time of reading.

    ``next_due_at`` is the earliest ``next_run_at`` of all enabled schedules (due or not), so an
    idle tick learns when to wake from the same round trip.
    """

    now: datetime
    schedules: tuple[Schedule, ...]
    next_due_at: datetime | None


@dataclass(frozen=True, kw_only=True)
class Waiting:
    """What waits in the store for its leader, read in one round trip without locking
    (:meth:`~goatbeat_celery.core.protocols.ScheduleStore.waiting`): a leader that heard of no
    change looks no further when nothing does.

    ``next_due_at`` is :attr:`DueBatch.next_due_at`; ``unsettled``: a run's end waits to be
    applied (``finished_runs`` would return it); ``claimed``: a claim waits to be sent
    (``take_pending`` would take it); ``open_runs``: a run exists that may yet be marked lost
    (:func:`goatbeat_celery.core.rules.runs.may_be_lost`); ``alerts_waiting``: an alert is open
    or a run is in flight, so a look at alerts may find something to change (:class:`AlertScope`);
    ``backfills``: a backfill is active (``active_backfills`` would return one).
    """

    now: datetime
    next_due_at: datetime | None
    unsettled: bool
    claimed: bool
    open_runs: bool
    alerts_waiting: bool = True
    backfills: bool = True


@quick_init
@dataclass(frozen=True, kw_only=True)
class PlannedClaim:
    """The claim the engine wants for one schedule, to be applied only if ``version`` still holds.

    ``occurrences`` are ``(occurrence, due)`` pairs to insert as executions; ``missed`` is
    recorded on the last of them (and on the schedule); the schedule then advances to
    ``next_occurrence_at`` / ``next_run_at`` (both ``None`` once the trigger is exhausted).
    """

    schedule_name: str
    version: int
    occurrences: tuple[tuple[datetime, datetime], ...]
    missed: int
    next_occurrence_at: datetime | None
    next_run_at: datetime | None
    #: Each execution expires this long after its due instant (None: never).
    expires_after: timedelta | None = None
    #: The run policies the claim applies (:mod:`goatbeat_celery.core.rules.policies`), with the
    #: global default resolved: what an occurrence does while a run of the schedule has not
    #: finished, the fixed delay (an unfinished run postpones the claim by it instead), and
    #: whether the runs wait to be settled when they end.
    overlap: OverlapPolicy = OverlapPolicy.ALLOW
    delay: timedelta | None = None
    settle: bool = False
    #: The schedule's run limit: the store checks it against ``total_runs`` as locked in the
    #: claim's transaction and claims no run past it (None: no limit).
    max_runs: int | None = None
    #: Occurrences (by their unshifted instant) that an exclusion calendar excludes, with the
    #: reason: recorded ``skipped``, never sent.
    excluded: tuple[tuple[datetime, str], ...] = ()

    @property
    def waits_for_runs(self) -> bool:
        """Whether the store must look at the schedule's unfinished runs to apply it."""
        return self.overlap is not OverlapPolicy.ALLOW or self.delay is not None


@dataclass(frozen=True, kw_only=True)
class ClaimResult:
    """What one claim transaction did.

    ``dispatches`` are the executions it inserted, ready to submit; ``advanced`` counts the
    schedules moved to their next occurrence; ``conflicts`` names the
    schedules whose version changed since planning (their claim was dropped, the edit wins);
    ``duplicates`` counts occurrences already claimed (inserted nothing).
    """

    dispatches: tuple[Dispatch, ...]
    advanced: int = 0
    conflicts: tuple[str, ...] = ()
    duplicates: int = 0
    missed: int = 0
    #: Occurrences the overlap policy recorded as ``skipped`` (reason in ``last_error``) or
    #: ``held`` back, as inserted.
    skipped: tuple[Execution, ...] = ()
    held: tuple[Execution, ...] = ()
    #: The store's clock when it claimed nothing because it was still before the claim's
    #: ``not_before`` (Claims.claim); None otherwise.
    early: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class SubmitResult:
    """What the broker did with a batch: ``accepted`` keys; ``failed`` (key -> reason): not
    taken because the broker is unreachable or timed out, to retry with the whole batch after
    a backoff; ``rejected`` (key -> reason): this message could not be built or was refused for
    itself, while the broker worked."""

    accepted: list[str]
    failed: dict[str, str] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)
    #: The queue each rotated message was sent to (key -> queue), as the run's ``cluster``.
    clusters: dict[str, str] = field(default_factory=dict)


def check_claims_aware(claims: Sequence[PlannedClaim]) -> None:
    """Refuse claims holding a naive instant (ValueError, as
    :func:`~goatbeat_celery.core.types.instants.check_aware`). Every instant of every claim is
    looked at, so the usual one, a datetime in UTC, is passed on the cheapest test."""
    for claim in claims:
        for value in (claim.next_occurrence_at, claim.next_run_at):
            if value is not None and (type(value) is not datetime or value.tzinfo is not UTC):
                check_aware(value)
        for pair in claim.occurrences:
            for value in pair:
                if type(value) is not datetime or value.tzinfo is not UTC:
                    check_aware(value)
