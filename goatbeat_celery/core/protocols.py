"""The contracts the engine relies on. Adapters implement them; the core imports nothing else.

Every store must pass ``tests/conformance``; these docstrings are the rules that suite checks.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from goatbeat_celery.core.rules.alerts import Alert, AlertChange, AlertEvent
from goatbeat_celery.core.rules.backfill import Backfill, BackfillRequest, BackfillStep
from goatbeat_celery.core.rules.calendars import Calendar
from goatbeat_celery.core.rules.runs import RunEvent, RunRecord
from goatbeat_celery.core.rules.shards import Shard
from goatbeat_celery.core.types.audit import AuditEntry, AuditNote
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.lease import LeaseGrant, LeaseInfo
from goatbeat_celery.core.types.listing import RunOrderCursor, ScheduleCounts, ScheduleOrder
from goatbeat_celery.core.types.outbox import OutboxEntry, OutboxEvent, OutboxRetry
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec, SyncEntry, SyncReport
from goatbeat_celery.core.types.tick import (
    AlertPage,
    AlertScope,
    ClaimResult,
    Dispatch,
    DueBatch,
    FinishedRun,
    PauseNote,
    PlannedClaim,
    RunSettlement,
    SetAside,
    SettleReport,
    SubmitResult,
    Waiting,
)
from goatbeat_celery.core.types.tokens import ApiToken


class LeaseManager(Protocol):
    """Elects the one replica allowed to claim, and hands it a fencing token.

    Expiry is judged by the store's clock (PostgreSQL's ``now()``), never the caller's.
    """

    def acquire(self, name: str, holder: str, ttl: timedelta) -> LeaseGrant | None:
        """Take or renew lease ``name`` for ``holder`` until store-now + ``ttl``.

        Succeeds when the row is absent, released, expired, or already held by ``holder``,
        and before its expiry when the store knows its holder's session is gone
        (core.rules.fence.grant_lease; the store watches it from the refusal on and wakes
        :meth:`ScheduleStore.wait` when it ends). A lease taken by a new holder wakes the
        waiting replicas where the store can, so that they watch the new holder at once. The
        token is kept when ``holder`` already held the lease (renewal) and incremented
        otherwise (``changed_holder`` is then true); the first grant has token 1. Returns
        ``None``, changing nothing, while another holder's lease is live. Raises
        StoreUnavailable when the store cannot be reached.
        """
        ...

    def failover_path(self) -> str:
        """How a crashed holder is detected: ``session: ...`` (its ended session, at once),
        ``file lock: ...`` or ``clock: ...`` (when its lease expires), and why. On PostgreSQL
        a connection is opened once to look for a transaction-pooling proxy in between."""
        ...

    def acquire_many(self, names: Sequence[str], holder: str,
                     ttl: timedelta) -> list[LeaseGrant | None]:
        """:meth:`acquire` each of ``names``, as calls one after the other would: the grants
        (or None) in the same order. A store may renew the leases ``holder`` holds in one
        round trip (an idle leader's lease and its member row)."""
        ...

    def acquire_watching(self, names: Sequence[str], holder: str, ttl: timedelta,
                         prefix: str) -> tuple[list[LeaseGrant | None], bool]:
        """:meth:`acquire_many`, and whether a lease row whose name starts with ``prefix``
        (taken literally, as :meth:`list_leases` takes it) is released or expired by the
        store's clock once they are renewed: a row :meth:`forget` would delete. A store may
        answer both in one round trip; the leader then lists the member rows only when one is
        to be forgotten."""
        ...

    def release(self, grant: LeaseGrant) -> bool:
        """Give the lease up so a standby can take it at once (with token + 1).

        Only releases if ``grant`` is still the current holder and token; returns whether it
        did. Wakes waiting standbys where the store can (NOTIFY on PostgreSQL).
        """
        ...

    def inspect(self, name: str) -> LeaseInfo | None:
        """The lease row as it stands, with the store's clock; ``None`` if never taken."""
        ...

    def list_leases(self, prefix: str) -> list[LeaseInfo]:
        """Every lease row whose name starts with ``prefix`` (taken literally: ``%`` and ``_``
        are no wildcards), by name, each with the store's clock, in one read. A sharded
        replica reads its sharding's shard and member rows with it (core.rules.shards)."""
        ...

    def forget(self, name: str) -> bool:
        """Delete lease row ``name`` if it is released or expired by the store's clock, never
        a live one; returns whether it did. The leader of shard 0 forgets the member rows of
        replicas gone (core.rules.shards), so that they do not pile up."""
        ...


class ScheduleStore(Protocol):
    """Schedules and executions. All instants are aware and returned in UTC.

    Naive datetimes are refused with ConfigurationError before anything is written.
    Driver errors surface as StoreError (StoreUnavailable when the database is unreachable).

    What a write decides is decided in the core, so that no two stores can disagree: a claim's
    rows by :mod:`goatbeat_celery.core.rules.claims`, the lease fence and grants by
    :mod:`goatbeat_celery.core.rules.fence`, a set-aside and what clears a fault by
    :mod:`goatbeat_celery.core.rules.faults`, a config sync by
    :mod:`goatbeat_celery.core.rules.sync`.
    A store reads, asks, and writes what it is told.

    Notifications: the writes an operator makes, and a lease given up, wake the replicas
    waiting in :meth:`wait` once committed (never when they fail or change nothing):
    :meth:`create_schedule`, :meth:`replace_schedule` (an edit, a pause, a resume),
    :meth:`delete_schedule`, :meth:`request_run`, :meth:`create_calendar`,
    :meth:`replace_calendar`, :meth:`create_backfill`, and :meth:`LeaseManager.release` (a
    standby may take the lease at once). The writes of the leader's own loop (:meth:`sync_config`,
    :meth:`claim`, :meth:`set_aside`, :meth:`take_pending`, :meth:`mark_submitted`,
    :meth:`mark_expired`, :meth:`record_failures`, :meth:`prune`) notify no one: the leader
    knows what it wrote, and a standby has nothing to do until it leads.

    Audit: the writes an operator or config sync makes to a schedule take an ``audit``
    :class:`~goatbeat_celery.core.types.audit.AuditNote` (:meth:`create_schedule`,
    :meth:`replace_schedule`, :meth:`delete_schedule`, :meth:`request_run`,
    :meth:`create_backfill`, :meth:`cancel_backfill`); given one, the store writes it as an
    entry of the audit log of the schedule named, at the store's clock, in the transaction of
    the change: both are committed or neither is, and a write refused or that changes nothing
    records nothing. :meth:`sync_config` records an entry for each schedule it changes, as
    :func:`goatbeat_celery.core.rules.audit.sync_notes` says.

    ``wakes_on_every_change``: true when :meth:`wait` is woken by those writes from any
    process, and by the end of a run that a schedule's run policy waits on (a worker's report
    through :class:`goatbeat_celery.core.protocols.RunLog`). The leader then sleeps until the next
    thing it knows of (a due run, a lease renewal); when false, it also looks again every
    ``max_interval`` for what it could not hear.
    """

    wakes_on_every_change: bool

    # -- clock and waiting ---------------------------------------------------------------
    def now(self) -> datetime:
        """The store's clock: PostgreSQL's ``now()``, an injectable clock elsewhere."""
        ...

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a change notification (a schedule edit, a manual
        run, a lease release). Returns true when woken by one. May return early spuriously."""
        ...

    def notify(self) -> None:
        """Wake every replica waiting in :meth:`wait` (best effort)."""
        ...

    # -- schedules -----------------------------------------------------------------------
    def create_schedule(
        self, spec: ScheduleSpec, *, next_occurrence_at: datetime | None,
        next_run_at: datetime | None, audit: AuditNote | None = None,
    ) -> Schedule:
        """Insert a new schedule with version 1. Raises ScheduleConflict if the name exists.
        Notifies waiting replicas. Records ``audit``."""
        ...

    def replace_schedule(
        self, spec: ScheduleSpec, *, next_occurrence_at: datetime | None,
        next_run_at: datetime | None, expected_version: int | None = None,
        pause: PauseNote | None = None, audit: AuditNote | None = None,
    ) -> Schedule:
        """Overwrite a schedule's spec and next times, incrementing its version.

        With ``expected_version``, only if the stored version equals it (else ScheduleConflict,
        nothing changed). The row's ``source`` is kept and its fault, fault_at and faults
        cleared (an edit is the operator's fix); a spec that is enabled also clears
        :data:`~goatbeat_celery.core.rules.settlement.RESUME_CLEARS` (the reason a schedule paused
        itself, its end, its failures in a row). With ``pause``, its reason and end are then
        written in ``paused_reason`` and ``paused_until`` (a pause, or an edit during one).
        Raises ScheduleNotFound. Notifies waiting replicas. Records ``audit``.
        """
        ...

    def delete_schedule(self, name: str, *, audit: AuditNote | None = None) -> None:
        """Delete the schedule (its executions and audit entries stay as history). Raises
        ScheduleNotFound. Notifies waiting replicas. Records ``audit``."""
        ...

    def get_schedule(self, name: str) -> Schedule:
        """The schedule named ``name``. Raises ScheduleNotFound.

        Reading never fails on what a row holds: a column that cannot be read as stored (JSON
        or numbers edited by hand) is replaced by a harmless stand-in and named in
        ``Schedule.damage``, so such a row can still be listed, shown and deleted."""
        ...

    def list_schedules(
        self, *, paused: bool | None = None, source: ScheduleSource | None = None,
        prefix: str | None = None, limit: int | None = None, set_aside: bool | None = None,
        after: str | RunOrderCursor | None = None, order: ScheduleOrder = ScheduleOrder.NAME,
        tags: Sequence[str] = (),
    ) -> list[Schedule]:
        """Schedules filtered as asked (``paused``: those paused at the store's clock, disabled
        or within a pause with an end, :meth:`Schedule.paused_at`, or those not; ``set_aside``:
        those with a fault recorded, or without; ``tags``: those carrying every one of them,
        :func:`~goatbeat_celery.core.rules.controls.has_tags`) in ``order``. ``after`` pages on: a
        name with :attr:`ScheduleOrder.NAME`, a :class:`RunOrderCursor` with
        :attr:`ScheduleOrder.NEXT_RUN` (either other way round is a ``TypeError``). Cost grows
        with ``limit`` and what the filters skip, not with the rows before ``after``; with
        ``tags``, not with the schedules carrying none of them (a tag index, kept in step with
        every write of a schedule's tags, finds those carrying them). Rows are read as
        :meth:`get_schedule` reads them."""
        ...

    # -- exclusion calendars (core.rules.calendars) ------------------------------------------------
    def create_calendar(self, calendar: Calendar) -> Calendar:
        """Insert ``calendar`` (its name, description, dates and ranges) with version 1.
        Raises ScheduleConflict if the name exists. Notifies waiting replicas."""
        ...

    def replace_calendar(self, calendar: Calendar, *,
                         expected_version: int | None = None) -> Calendar:
        """Overwrite a calendar's description, dates and ranges, incrementing its version.
        With ``expected_version``, only if the stored version equals it (else
        ScheduleConflict, nothing changed). Raises CalendarNotFound. Notifies waiting
        replicas: a leader reads calendars each time it plans, so the change applies there."""
        ...

    def delete_calendar(self, name: str) -> None:
        """Delete the calendar. Raises CalendarNotFound, and CalendarInUse (nothing deleted)
        while a schedule observes it, the check and the delete in one transaction."""
        ...

    def schedules_observing(self, name: str) -> list[str]:
        """The names of the schedules observing calendar ``name``, in order (none for a
        calendar that does not exist)."""
        ...

    def get_calendar(self, name: str) -> Calendar:
        """The calendar named ``name``. Raises CalendarNotFound. Never fails on what a row
        holds: what cannot be read is named in ``Calendar.damage``."""
        ...

    def list_calendars(self) -> list[Calendar]:
        """Every calendar, by name, read as :meth:`get_calendar` reads them."""
        ...

    def find_calendars(self, names: Collection[str]) -> dict[str, Calendar]:
        """The calendars of ``names`` that exist, by name, in one read (what a leader reads
        per batch of due schedules observing calendars)."""
        ...

    def count_schedules(self) -> ScheduleCounts:
        """How many schedules there are, in all, paused, set aside and by source, in one
        read."""
        ...

    def sync_config(self, entries: Sequence[SyncEntry], *, lease: LeaseGrant,
                    prune_after: timedelta | None = None) -> SyncReport:
        """Apply config entries as :func:`goatbeat_celery.core.rules.sync.plan_config_sync`
        decides (with ``prune_after``, pruning on: ``prune_before`` = store-now minus it), in
        one transaction fenced by ``lease``
        (:func:`goatbeat_celery.core.rules.fence.check_fence`: LeaseLost if stale, nothing
        changed), with an audit entry for each schedule created, rewritten, disabled or
        deleted (:func:`goatbeat_celery.core.rules.audit.sync_notes`, actor ``config``)."""
        ...

    # -- claiming ------------------------------------------------------------------------
    def due_schedules(self, limit: int, *, shard: Shard | None = None) -> DueBatch:
        """Up to ``limit`` enabled schedules with ``next_run_at <= now``, oldest due first,
        the store's ``now``, and the earliest ``next_run_at`` of any enabled schedule.

        With ``shard``, only the schedules whose stored ``shard_hash`` modulo
        ``shard.count`` is ``shard.index`` (:func:`goatbeat_celery.core.rules.shards.shard_hash`
        of the name, written with every schedule), for both; shard 0 also has those with no
        hash stored (written by a replica older than the column).

        Reads only; cost grows with ``limit``, never with the number of schedules."""
        ...

    def waiting(self) -> Waiting:
        """The store's clock and what waits for the leader (:class:`Waiting`), all shards
        together, in one round trip. Reads only, through indexes: its cost does not grow with
        the number of schedules or executions."""
        ...

    def claim(self, claims: Sequence[PlannedClaim], *, lease: LeaseGrant) -> ClaimResult:
        """Apply planned claims in one transaction, fenced by ``lease``.

        First checks that ``lease`` is still the current, unexpired grant
        (:func:`goatbeat_celery.core.rules.fence.check_fence`, with the lease row locked so a
        takeover waits for this transaction); if not, raises LeaseLost and changes nothing.
        Then writes what :func:`goatbeat_celery.core.rules.claims.plan_claims` decides from the
        versions of the schedules it locked: for each claim whose schedule still has
        ``version`` (compare-and-set), one ``claimed`` execution per occurrence with key
        :func:`~goatbeat_celery.core.types.execution.idempotency_key`, ``token`` = the lease token,
        ``attempts`` = 1, the missed count on the last and ``expires_at`` = due +
        ``expires_after``, skipping keys that already exist (never two executions for one key);
        then advances the schedule's next times, run counter (by the executions inserted) and
        miss counter, and version, and clears its fault and fault_at (``faults`` is kept until
        an edit, so a schedule whose messages keep being refused waits longer each time). A
        claim whose version changed is dropped and reported in ``conflicts``; a row locked by
        another transaction is skipped and left for a later batch.

        A claim under a run policy (:attr:`PlannedClaim.waits_for_runs`) is decided with its
        schedule's runs in flight, read in the same transaction as
        :func:`goatbeat_celery.core.rules.claims.in_flight` says: its occurrences may be inserted
        ``held`` or ``skipped`` (counted in ``total_skipped``, not in ``total_runs``), and a
        fixed-delay claim may be postponed; executions carry the claim's ``settled`` (False
        when its runs wait to be settled). Only ``claimed`` rows are dispatched.
        """
        ...

    def finished_runs(self, limit: int) -> list[FinishedRun]:
        """Up to ``limit`` runs whose end waits to be applied to their schedule: ``settled``
        False, and ended as :func:`goatbeat_celery.core.rules.policies.execution_end` says (a
        worker's end, a lost verdict, or never sent), earliest end first, each with its
        schedule as :meth:`get_schedule` reads it (None if deleted). Reads only; cost grows
        with ``limit`` and the unsettled runs, never with the schedules."""
        ...

    def settle_runs(self, settlements: Sequence[RunSettlement], *,
                    lease: LeaseGrant) -> SettleReport:
        """Apply the ends of runs to their schedules, in one transaction fenced by ``lease``
        (LeaseLost if stale, nothing changed). For each settlement whose run is still
        unsettled: with a ``version``, only while the schedule still has it (else the run is
        left for a later pass), write ``consecutive_failures`` and the next times, and with a
        ``paused_reason`` disable the schedule and record the reason, version + 1; then mark
        the run settled. Last, for every schedule named, turn the claim it holds back
        (``held``) into ``claimed`` when
        :func:`goatbeat_celery.core.rules.settlement.held_to_release` says so. Returns what it
        wrote."""
        ...

    def set_aside(self, entries: Sequence[SetAside], *,
                  lease: LeaseGrant) -> dict[str, datetime]:
        """Record why each schedule cannot run, in one transaction fenced by ``lease``
        (LeaseLost if stale, nothing changed), as
        :func:`goatbeat_celery.core.rules.faults.plan_set_aside` decides: its ``fault`` (the
        reason), ``fault_at`` (kept from an earlier set-aside still in force), ``faults`` + 1
        and ``version`` + 1, and ``next_run_at`` moved to the retry time: the entry's
        ``retry_at``, or else store-now + :func:`~goatbeat_celery.core.types.tick.set_aside_delay`
        of the ``faults`` it had, and never earlier than the ``next_run_at`` it had. An entry
        with a ``version`` applies only while the schedule still has it. ``next_occurrence_at``
        is kept. Returns the retry time of each schedule changed, by name."""
        ...

    def take_pending(self, *, lease: LeaseGrant, limit: int,
                     shard: Shard | None = None) -> list[Dispatch]:
        """Executions left ``claimed`` (a predecessor's, or ones whose submission failed),
        oldest first, for resubmission under the same key. With ``shard``, only those whose
        schedule is in it as :meth:`due_schedules` says, and (for shard 0) those whose schedule
        no longer exists.

        Fenced by ``lease`` (LeaseLost if stale). Each returned execution's ``attempts`` is
        incremented and its ``token`` set to the lease's. Executions whose schedule no longer
        exists are marked ``abandoned`` and not returned.
        """
        ...

    def mark_submitted(self, keys: Sequence[str]) -> int:
        """Record that the broker accepted these executions (state ``submitted``, with the
        store's time). Idempotent; returns how many rows changed state."""
        ...

    def mark_expired(self, keys: Sequence[str]) -> int:
        """Record that these executions passed their starting deadline (``expires_at``) before
        the broker took them: state ``expired``, never sent. Only executions still ``claimed``
        change; returns how many did."""
        ...

    def record_failures(self, failures: Mapping[str, str], *,
                        abandon: Collection[str] = ()) -> None:
        """Note failed submissions (key -> error) in ``last_error``; the executions stay
        ``claimed`` to be retried, except the keys in ``abandon``, which become ``abandoned``
        (given up: never resubmitted)."""
        ...

    def request_run(self, name: str, *, audit: AuditNote | None = None) -> Execution:
        """Queue an extra run of ``name`` now, under its own key (manual), as a ``claimed``
        execution the leader submits with its pending ones. Raises ScheduleNotFound.
        Notifies waiting replicas. Records ``audit``, with the run's key added to its changes
        as ``run``."""
        ...

    def oldest_pending(self) -> Execution | None:
        """The execution still ``claimed`` (not yet accepted by the broker) that is due
        earliest, or ``None``. Reads only; status displays show its lag, store-now - ``due_at``.
        """
        ...

    # -- backfills -----------------------------------------------------------------------
    def create_backfill(self, request: BackfillRequest, *,
                        audit: AuditNote | None = None) -> Backfill:
        """Store ``request`` (checked by the caller) as a new ``active`` backfill with the next
        id, nothing examined, ``created_at`` = store-now; notify waiting replicas. Raises
        ScheduleNotFound when its schedule does not exist. Records ``audit``, with the
        backfill's id added to its changes as ``backfill``."""
        ...

    def get_backfill(self, backfill_id: int) -> Backfill:
        """The backfill of that id (its unreadable columns named in ``damage``). Raises
        BackfillNotFound."""
        ...

    def list_backfills(self, *, schedule_name: str | None = None,
                       active: bool | None = None, limit: int = 100) -> list[Backfill]:
        """Backfills, newest first (by id), optionally of one schedule, or only active ones
        (``active=True``) or only finished ones (False). Reads only."""
        ...

    def active_backfills(self, limit: int, *, shard: Shard | None = None) -> list[Backfill]:
        """Up to ``limit`` ``active`` backfills, oldest first (by id), for the leader; with
        ``shard``, only those whose schedule is in it as :meth:`due_schedules` says (and, for
        shard 0, those whose schedule no longer exists). A row
        that cannot be read as stored is returned with the columns at fault in ``damage``
        (and harmless stand-ins), never raised. Reads only."""
        ...

    def cancel_backfill(self, backfill_id: int, *,
                        audit: AuditNote | None = None) -> Backfill:
        """Mark an active backfill ``cancelled`` (finished_at = store-now); its executions
        claimed already stay. A finished one is returned unchanged (nothing recorded). Raises
        BackfillNotFound. Records ``audit`` under the backfill's schedule."""
        ...

    def executions_by_key(self, keys: Sequence[str]) -> dict[str, Execution]:
        """The executions of these keys that exist, by key. Reads only."""
        ...

    def occurrence_executions(self, schedule_name: str, start: datetime,
                              end: datetime) -> list[Execution]:
        """The executions of ``schedule_name`` whose ``occurrence_at`` lies in ``[start, end]``
        (manual runs included: the caller tells them apart), by occurrence then key. Reads
        only; cost grows with the rows returned (the history index)."""
        ...

    def claim_backfill(self, step: BackfillStep, *, lease: LeaseGrant) -> ClaimResult:
        """Apply one backfill step in one transaction fenced by ``lease`` (LeaseLost if stale,
        nothing changed). Only while the backfill is ``active`` and its ``examined`` still
        equals ``step.examined_before`` (else nothing is written and nothing dispatched):
        insert :func:`goatbeat_celery.core.rules.backfill.step_executions` where their key is new,
        then write :func:`goatbeat_celery.core.rules.backfill.progress_after`. The schedule's row is
        never written. Returns the inserted executions as dispatches (those whose schedule is
        gone are not inserted) and the keys found taken as ``duplicates``."""
        ...

    def fail_backfill(self, backfill_id: int, reason: str, *, lease: LeaseGrant) -> bool:
        """Set an active backfill aside: state ``failed``, ``error`` = ``reason``,
        finished_at = store-now, fenced by ``lease``. Writes only the state columns, so that
        it works on a row whose other columns cannot be read. Returns whether it changed."""
        ...

    # -- history -------------------------------------------------------------------------
    def executions(
        self, *, schedule_name: str | None = None,
        states: Collection[ExecutionState] | None = None, limit: int = 50
    ) -> list[Execution]:
        """Recent executions, newest occurrence first: of ``schedule_name`` when given, in one
        of ``states`` when given (every schedule's claims never sent, say, in one read)."""
        ...

    def prune(self, *, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` executions that are neither ``claimed`` nor ``held`` and were
        claimed before ``before``, up to ``limit`` backfills that finished before ``before``
        (active ones are never deleted), up to ``limit`` alerts resolved before ``before``
        (open ones are never deleted), up to ``limit`` outbox events
        (:class:`Outbox`) delivered before ``before`` or, never delivered, created before it
        (given up after the retention), and up to ``limit`` audit entries recorded before
        ``before``, oldest first. Returns how many rows were deleted."""
        ...

    # -- audit log -----------------------------------------------------------------------
    def audit_log(self, *, schedule_name: str | None = None, limit: int = 50,
                  before_id: int | None = None) -> list[AuditEntry]:
        """Audit entries, newest first (by id, which grows with each entry), of one schedule
        (existing or deleted) or of all; with ``before_id``, only those older than that entry
        (the next page). Never fails on what a row holds: what cannot be read is named in
        ``AuditEntry.damage``. Reads only; cost grows with ``limit`` (an index by schedule
        and id)."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent."""
        ...


class TaskSubmitter(Protocol):
    """Hands claimed occurrences to the task system (Celery)."""

    def submit(self, dispatches: Sequence[Dispatch], *, token: int,
               timeout: float) -> SubmitResult:
        """Send each dispatch with its key as the task id.

        Must return within about ``timeout`` seconds whatever the broker does, and never raise:
        a broker that cannot be reached fails the rest of the batch (``failed``, retried later
        under the same keys); a message that cannot be built or is refused for itself fails
        alone (``rejected``) and the batch goes on.
        """
        ...


class RunLog(Protocol):
    """Where workers' reports land: the run columns of the executions table.

    Reports never change beat's dispatch columns (``state``, ``submitted_at``, ``attempts``,
    ``last_error``), and beat's writes never change the run columns. Instants are the store's
    clock. Driver errors surface as StoreError (StoreUnavailable when unreachable).
    """

    def record_runs(self, events: Sequence[RunEvent]) -> int:
        """Apply ``events`` in order, each as
        :func:`~goatbeat_celery.core.rules.runs.apply_event` decides on the row as it stands,
        with the store's clock at the time of writing as ``now``.

        Idempotent enough to retry: a batch replayed after its reply was lost changes nothing
        more (no attempt counted twice). Decisions are compare-and-set on the run columns they
        read, made again if another writer changed the row meanwhile. Returns how many events
        named no execution (ignored: a pruned row, or a task id that only looks like a key).
        """
        ...

    def read_runs(self, keys: Collection[str]) -> tuple[datetime, dict[str, RunRecord]]:
        """The store's now and the run columns of those of ``keys`` that name an execution, in
        one read (a worker checks a delivery sent again against them; it needs ``SELECT`` on
        ``goatbeat_execution`` only)."""
        ...

    def heartbeat(self, keys: Collection[str]) -> int:
        """In one statement, set ``heartbeat_at`` to the store's now on those of ``keys`` whose
        run is ``running``; returns how many rows that was. Other keys are left alone."""
        ...

    def resend_unstarted(self, *, lease: LeaseGrant, unstarted_for: timedelta,
                         tracked_since: datetime | None, resends: int,
                         limit: int = 1000) -> list[Execution]:
        """In one transaction fenced by ``lease``, put back to ``claimed`` up to ``limit`` runs
        that :func:`~goatbeat_celery.core.rules.runs.resend_due` says must be sent again
        (longest unsent first), with ``last_error`` saying why, and return them as written.
        Each run is judged with its schedule's own ``run_resends``; ``resends`` (the setting)
        stands in where the schedule gives none or is gone, so a setting of 0 still resends
        the runs of a schedule that asks for it.
        The leader's pending resubmission then sends each under its key, counting a send
        attempt; a failover between the two leaves them claimed for the next leader, so a
        resend is neither repeated nor lost. Raises LeaseLost when ``lease`` is not current."""
        ...

    def mark_lost(self, *, silent_for: timedelta, unstarted_for: timedelta,
                  tracked_since: datetime | None = None,
                  limit: int = 1000) -> list[Execution]:
        """Mark ``lost`` (or ``unknown``) up to ``limit`` runs that
        :func:`~goatbeat_celery.core.rules.runs.lost_verdict` ends at the store's now, given
        ``tracked_since`` (oldest news first), and return those executions as written.

        A row changed by a report or a heartbeat while it was judged is left for the next call.
        Rows past ``limit`` are left for later calls."""
        ...


class AlertLog(Protocol):
    """Where the leader keeps alerts (:mod:`goatbeat_celery.core.rules.alerts`): one row per
    alert, ``open`` until resolved, at most one open per schedule and rule. What a change writes
    is decided in the core (:func:`~goatbeat_celery.core.rules.alerts.plan_alerts`); the store
    writes it, fenced by the leader's lease. Instants are the store's clock."""

    def alert_evidence(self, *, after: str | None, limit: int, depth: int,
                       scope: AlertScope | None = None) -> AlertPage:
        """Up to ``limit`` schedules whose name sorts after ``after`` (from the first with
        None) and that are in ``scope`` (None: every schedule), in name order, each with its
        ``depth`` newest executions (newest occurrence first) and the alerts open on the names
        of the page's range (after ``after``, up to ``last``: those of schedules deleted since
        too). ``last`` is the last name returned, or None when no schedule in scope was left
        after it (the range then runs to the end). Reads only; cost grows with ``limit`` ×
        ``depth``, never with the executions outside the page (the history index); finding
        the schedules in a ``scope`` reads the indexes of runs in flight, unsettled or newly
        claimed, and of open alerts."""
        ...

    def record_alerts(self, changes: Sequence[AlertChange], *,
                      lease: LeaseGrant) -> list[AlertEvent]:
        """Apply ``changes`` in one transaction fenced by ``lease`` (LeaseLost if stale,
        nothing changed), each with the store's now, and return the alerts as written:

        * ``open``: insert an open alert (count 1, first and last time now) unless one is open
          for that schedule and rule, which is counted again instead (as ``repeat``);
        * ``repeat``: on the open alert whose ``key`` differs from the change's, count + 1,
          last time now, the change's key and reason; otherwise nothing;
        * ``resolve``: the open alert becomes ``resolved`` (resolved and last time now);
          none open: nothing.

        A change that writes nothing is left out of the result, so a change planned twice (two
        leaders' looks, a look repeated after a failover) is written once."""
        ...

    def list_alerts(self, *, open_only: bool = False, schedule_name: str | None = None,
                    limit: int = 100) -> list[Alert]:
        """Alerts, open ones first then newest first (by id), optionally only open ones or
        only one schedule's. Reads only."""
        ...


class Outbox(Protocol):
    """Events delivered off the scheduling path (:mod:`goatbeat_celery.core.types.outbox`).

    An event is written once per ``event_id``, in the transaction of what it reports: the SQL
    stores' ``_enqueue_events(conn, events)`` and the memory store's
    ``_enqueue_events_locked(events)`` write inside a transaction (under the lock) their caller
    holds already; :meth:`enqueue_events` is the same in a transaction of its own. Delivery is
    at least once: an event is taken under a claim that expires (:meth:`take_events`), so that
    two replicas never deliver it at once and a deliverer that dies leaves it to another.
    Instants are the store's clock. None of these writes notifies anyone.
    """

    def enqueue_events(self, events: Sequence[OutboxEvent]) -> int:
        """Insert ``events`` whose ``event_id`` is new (an id already present, delivered or
        not, inserts nothing until it is pruned), due at once: ``attempts`` 0,
        ``next_attempt_at`` and ``created_at`` = store-now. One transaction; returns how many
        were inserted. Invalid events raise ConfigurationError listing every problem, and
        nothing is written."""
        ...

    def take_events(self, *, holder: str, limit: int, hold_for: timedelta) -> list[OutboxEntry]:
        """Claim up to ``limit`` events due for delivery, in one transaction: not delivered,
        ``next_attempt_at`` <= store-now, and no live claim (``claimed_until`` <= store-now or
        none), earliest ``next_attempt_at`` first (then ``event_id``). Each is written
        ``claimed_by`` = ``holder``, ``claimed_until`` = store-now + ``hold_for`` and returned
        as written. Rows another transaction is claiming are skipped, not waited for."""
        ...

    def mark_events_delivered(self, event_ids: Sequence[str]) -> int:
        """Record that every destination took these events: ``delivered_at`` = store-now,
        ``attempts`` + 1, the claim cleared. Only events not delivered yet change (whoever
        holds their claim: a delivery that succeeded is true news); returns how many."""
        ...

    def retry_events(self, retries: Sequence[OutboxRetry], *, holder: str) -> int:
        """Record failed deliveries: for each event still undelivered and claimed by
        ``holder``, ``attempts`` + 1, ``next_attempt_at`` = store-now + its ``delay``,
        ``last_error``, ``delivered_to`` joined with the retry's, the claim cleared. An event
        whose claim another holder took meanwhile is left to it. Returns how many changed."""
        ...

    def list_events(self, *, delivered: bool | None = None,
                    limit: int = 100) -> list[OutboxEntry]:
        """Up to ``limit`` events, oldest first (``created_at``, then ``event_id``), only
        delivered ones or undelivered ones when ``delivered`` says so. Reads only."""
        ...


class TokenStore(Protocol):
    """The HTTP API's tokens (:mod:`goatbeat_celery.core.types.tokens`): only a secret's
    digest is stored, never the secret. Driver errors surface as StoreError."""

    def create_token(self, token: ApiToken, digest: str) -> ApiToken:
        """Store ``token`` with its secret's ``digest``, created at the store's now; returns it
        as stored. ScheduleConflict when a token of that name exists (revoked ones too: a
        name recorded against past changes is never given to someone else)."""
        ...

    def token_by_digest(self, digest: str) -> ApiToken | None:
        """The token whose secret has ``digest`` (revoked or not), or None."""
        ...

    def list_tokens(self) -> list[ApiToken]:
        """Every token, revoked ones included, by name."""
        ...

    def revoke_token(self, name: str) -> ApiToken:
        """Mark the token ``name`` revoked at the store's now (once: revoking it again keeps
        the first instant) and return it. TokenNotFound when there is none."""
        ...
