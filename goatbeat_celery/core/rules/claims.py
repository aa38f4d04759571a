"""What a claim batch writes, shared by every store so that they cannot disagree.

A store locks the schedules the claims name and reads their versions; :func:`plan_claims`
decides the rest: which claims still hold (compare-and-set on the version), the execution rows
each one inserts (one per occurrence, ``claimed``, first attempt, the lease's token, the missed
count on the last, the starting deadline), and how each schedule advances. The store inserts
the planned executions whose key is new, advances the schedules by
:meth:`ClaimPlan.counted` (runs counted from what it inserted), and reports
:meth:`ClaimPlan.result`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from goatbeat_celery.core.rules.policies import OverlapAction, OverlapPolicy, overlap_decision
from goatbeat_celery.core.types.claims import ClaimResult, Dispatch, PlannedClaim
from goatbeat_celery.core.types.errors import ScheduleConflict
from goatbeat_celery.core.types.execution import (
    IN_FLIGHT_STATES,
    LIVE_RUN_STATES,
    Execution,
    ExecutionState,
    idempotency_key,
    in_flight_state,
    manual_key,
)
from goatbeat_celery.core.types.quick import quick_init, quick_new

#: Resubmissions stop counting here rather than overflow the column (a count written by hand).
ATTEMPTS_MAX = 1_000_000_000
_EMPTY: Mapping[str, InFlight] = {}


def next_attempt(attempts: int) -> int:
    """The attempt count after one more submission of an execution that had ``attempts``."""
    return attempts + 1 if attempts < ATTEMPTS_MAX else attempts


@quick_init
@dataclass(frozen=True, kw_only=True)
class Advance:
    """How one claim moves its schedule on: next times as planned, ``last_occurrence_at`` the
    last occurrence claimed (None: the claim ran none, keep the stored one), ``runs`` added to
    ``total_runs`` and ``missed`` to ``total_missed``, ``version`` + 1, and the fault and
    ``fault_at`` cleared (``faults`` is kept until an edit). Applies only while the schedule
    still has ``version``."""

    name: str
    version: int
    next_occurrence_at: datetime | None
    next_run_at: datetime | None
    last_occurrence_at: datetime | None
    runs: int  # executions planned; see ClaimPlan.counted for those actually inserted
    missed: int
    keys: tuple[str, ...] = ()  # the keys of the executions planned for this claim
    #: Occurrences recorded ``skipped`` (added to ``total_skipped``), and their keys.
    skipped: int = 0
    skipped_keys: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ClaimPlan:
    """The rows a claim batch writes.

    ``executions`` are to be inserted where their key is new (each key appears once, in claim
    order); ``advances`` are the schedules to move on, in claim order; ``conflicts`` name the
    claims dropped because their schedule's version changed (or the schedule is gone);
    ``repeated`` counts occurrences planned twice in the batch (duplicates without asking).
    """

    executions: tuple[Execution, ...]
    advances: tuple[Advance, ...]
    conflicts: tuple[str, ...]
    repeated: int = 0

    def counted(self, inserted: Collection[str]) -> tuple[Advance, ...]:
        """The advances with ``runs`` = the executions of each that were ``inserted``: an
        occurrence whose key existed already (claimed before a crash, or by a lost race) did
        not run again, so it does not count."""
        return tuple(replace(a, runs=sum(1 for key in a.keys if key in inserted),
                             skipped=sum(1 for key in a.skipped_keys if key in inserted))
                     for a in self.advances)

    def result(self, inserted: Collection[str],
               dispatch: Callable[[Execution], Dispatch]) -> ClaimResult:
        """What the batch did, once the store inserted the keys ``inserted``; ``dispatch``
        pairs an inserted execution with its schedule's task and arguments."""
        dispatches: list[Dispatch] = []
        skipped: list[Execution] = []
        held: list[Execution] = []
        written = 0
        # One pass: this runs for every occurrence claimed.
        for execution in self.executions:
            if execution.key not in inserted:
                continue
            written += 1
            state = execution.state
            if state is ExecutionState.CLAIMED:
                dispatches.append(dispatch(execution))
            elif state is ExecutionState.SKIPPED:
                skipped.append(execution)
            elif state is ExecutionState.HELD:
                held.append(execution)
        return ClaimResult(
            dispatches=tuple(dispatches), advanced=len(self.advances), conflicts=self.conflicts,
            duplicates=self.repeated + len(self.executions) - written,
            missed=sum(a.missed for a in self.advances),
            skipped=tuple(skipped), held=tuple(held),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class InFlight:
    """What a claim of a schedule with a run policy must know of its runs, read by the store
    in the claim's transaction: the key of a run that has not finished (``claimed``,
    ``submitted`` or ``held`` execution whose ``run_state`` is none, ``running`` or
    ``retrying``; the oldest) and of a claim ``held`` back waiting for it (None: none)."""

    unfinished: str | None = None
    waiting: str | None = None


_NOTHING_IN_FLIGHT = InFlight()



def in_flight(rows: Iterable[tuple[str, str, str | None]]) -> InFlight:
    """A schedule's runs in flight from its executions as ``(key, state, run_state)``, oldest
    claim first (a store may pass only those :data:`IN_FLIGHT_STATES` and
    :data:`LIVE_RUN_STATES` select): the oldest unfinished run that is not held, and the
    oldest held claim."""
    unfinished: str | None = None
    waiting: str | None = None
    for key, state, run_state in rows:
        if not in_flight_state(state, run_state):
            continue
        if state == "held":
            waiting = waiting or key
        else:
            unfinished = unfinished or key
    return InFlight(unfinished=unfinished, waiting=waiting)


def claim_executions(claim: PlannedClaim, *, token: int, now: datetime) -> list[Execution]:
    """The execution rows of ``claim``: one per occurrence, keyed by
    :func:`~goatbeat_celery.core.types.execution.idempotency_key`, ``claimed`` at store-time ``now``
    under the lease ``token``, on their first attempt, the claim's missed count on the last,
    and expiring ``expires_after`` past their due instant."""
    last = len(claim.occurrences) - 1
    after = claim.expires_after
    name = claim.schedule_name
    settled = False if claim.settle else None
    return [
        quick_new(Execution, {
            "key": idempotency_key(name, occurrence), "schedule_name": name,
            "occurrence_at": occurrence, "due_at": due, "token": token,
            "state": ExecutionState.CLAIMED, "claimed_at": now, "attempts": 1,
            "missed": claim.missed if index == last else 0,
            "expires_at": None if after is None else due + after, "settled": settled})
        for index, (occurrence, due) in enumerate(claim.occurrences)
    ]


def apply_overlap(claim: PlannedClaim, planned: Sequence[Execution],
                  in_flight: InFlight) -> list[Execution]:
    """The executions of ``claim`` after its overlap policy, in order: each due occurrence is
    claimed, held (``held``, no attempt yet) or skipped (``skipped``, no attempt, the reason in
    ``last_error``) as :func:`~goatbeat_celery.core.rules.policies.overlap_decision` decides, given
    the runs in flight and those claimed before it in the same claim."""
    if claim.overlap is OverlapPolicy.ALLOW:
        return list(planned)
    unfinished, waiting = in_flight.unfinished, in_flight.waiting
    decided: list[Execution] = []
    for execution in planned:
        if execution.state is ExecutionState.SKIPPED:
            decided.append(execution)  # excluded by a calendar: no run to overlap with
            continue
        decision = overlap_decision(claim.overlap, unfinished=unfinished, waiting=waiting)
        if decision.action is OverlapAction.CLAIM:
            decided.append(execution)
            unfinished = execution.key
        elif decision.action is OverlapAction.HOLD:
            decided.append(replace(execution, state=ExecutionState.HELD, attempts=0))
            waiting = execution.key
        else:
            decided.append(replace(execution, state=ExecutionState.SKIPPED, attempts=0,
                                   last_error=decision.reason, settled=None))
    return decided


def apply_exclusions(claim: PlannedClaim, planned: Sequence[Execution]) -> list[Execution]:
    """``planned`` with the occurrences ``claim`` names ``excluded`` (by an exclusion
    calendar) ``skipped``: no attempt, the reason in ``last_error``, never sent."""
    if not claim.excluded:
        return list(planned)
    reasons = dict(claim.excluded)
    return [replace(e, state=ExecutionState.SKIPPED, attempts=0, last_error=reason,
                    settled=None)
            if (reason := reasons.get(e.occurrence_at)) is not None else e
            for e in planned]


def postponed(claim: PlannedClaim, now: datetime) -> PlannedClaim | None:
    """A fixed-delay claim whose previous run has not finished, postponed: no occurrence,
    the schedule looked at again one delay from store-time ``now`` (the run's end, once
    settled, sets the exact time). None for other claims."""
    if claim.delay is None or claim.next_run_at is None:
        return None
    again = now + claim.delay
    return replace(claim, occurrences=(), missed=0, next_occurrence_at=again,
                   next_run_at=again)


def limit_runs(claim: PlannedClaim, planned: Sequence[Execution],
               runs: int) -> tuple[PlannedClaim, list[Execution]]:
    """``claim`` and its ``planned`` executions within the schedule's ``max_runs``, given the
    ``runs`` it has made (``total_runs`` as locked in the claim's transaction): the earliest
    occurrences that fit are kept (occurrences ``skipped`` by the overlap policy are no runs and
    always kept), and once the limit is reached the schedule has no next run."""
    if claim.max_runs is None:
        return claim, list(planned)
    left = max(0, claim.max_runs - runs)
    kept: list[Execution] = []
    counted = 0
    for execution in planned:
        if execution.state is not ExecutionState.SKIPPED:
            if counted >= left:
                continue
            counted += 1
        kept.append(execution)
    if counted >= left:
        claim = replace(claim, next_occurrence_at=None, next_run_at=None)
    return claim, kept


def plan_claims(claims: Sequence[PlannedClaim], versions: Mapping[str, int], *, token: int,
                now: datetime, skip: Collection[str] = (),
                in_flight: Mapping[str, InFlight] = _EMPTY,
                runs: Mapping[str, int] | None = None) -> ClaimPlan:
    """Decide what ``claims`` write, given the stored ``versions`` of the schedules the store
    locked (a schedule absent from it is gone, or locked elsewhere when named in ``skip``:
    left for a later batch, neither claimed nor a conflict) and, for the claims that
    :attr:`~goatbeat_celery.core.types.claims.PlannedClaim.waits_for_runs`, their runs ``in_flight``
    (by schedule name; absent: none).

    A fixed-delay claim with a run in flight is postponed (:func:`postponed`); any other
    claim's occurrences go through its overlap policy (:func:`apply_overlap`). A claim with a
    run limit is then held to it (:func:`limit_runs`) by the schedules' ``runs`` as the store
    locked them (by name; the store must pass them for every claim with ``max_runs``): the
    lock and the count's increment in the same transaction keep two leaders, one after the
    other, from ever exceeding it."""
    current = dict(versions)
    executions: list[Execution] = []
    advances: list[Advance] = []
    conflicts: list[str] = []
    seen: set[str] = set()
    repeated = 0
    for claim in claims:
        name = claim.schedule_name
        if name in skip:
            continue
        if current.get(name) != claim.version:
            conflicts.append(name)
            continue
        current[name] = claim.version + 1
        flight = in_flight.get(name, _NOTHING_IN_FLIGHT)
        if flight.unfinished is not None or flight.waiting is not None:
            claim = postponed(claim, now) or claim
        planned = apply_exclusions(claim, claim_executions(claim, token=token, now=now))
        if claim.waits_for_runs:
            planned = apply_overlap(claim, planned, flight)
        if claim.max_runs is not None:
            claim, planned = limit_runs(claim, planned, (runs or {}).get(name, 0))
        # One pass over the claim's executions (one, mostly): those whose key an earlier
        # claim of the batch planned already are repeats, the rest ran or were skipped.
        ran: list[str] = []
        skipped: list[str] = []
        for execution in planned:
            key = execution.key
            if key in seen:
                repeated += 1
                continue
            executions.append(execution)
            (skipped if execution.state is ExecutionState.SKIPPED else ran).append(key)
        seen.update(ran)
        seen.update(skipped)
        advances.append(Advance(
            name=name, version=claim.version,
            next_occurrence_at=claim.next_occurrence_at, next_run_at=claim.next_run_at,
            last_occurrence_at=planned[-1].occurrence_at if planned else None,
            runs=len(ran), missed=claim.missed, keys=tuple(ran),
            skipped=len(skipped), skipped_keys=tuple(skipped),
        ))
    return ClaimPlan(executions=tuple(executions), advances=tuple(advances),
                     conflicts=tuple(conflicts), repeated=repeated)


def manual_execution(name: str, now: datetime) -> Execution:
    """The execution an extra run of ``name`` requested at store-time ``now`` inserts: its own
    (manual) key, ``claimed``, no attempt yet, token 0 (no leader claimed it)."""
    return Execution(
        key=manual_key(name, now), schedule_name=name, occurrence_at=now, due_at=now,
        token=0, state=ExecutionState.CLAIMED, claimed_at=now, attempts=0, manual=True,
    )


def manual_run_exists(execution: Execution) -> ScheduleConflict:
    """What a store raises when the key of :func:`manual_execution` is taken already."""
    return ScheduleConflict(f"a manual run of {execution.schedule_name!r} at "
                            f"{execution.occurrence_at} already exists")


__all__ = ["ATTEMPTS_MAX", "IN_FLIGHT_STATES", "LIVE_RUN_STATES", "Advance", "ClaimPlan",
           "InFlight", "apply_exclusions", "apply_overlap", "in_flight", "claim_executions",
           "limit_runs", "manual_execution", "manual_run_exists", "next_attempt",
           "plan_claims", "postponed"]
