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

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from goatbeat_celery.core.errors import ScheduleConflict
from goatbeat_celery.core.model import (
    ClaimResult,
    Dispatch,
    Execution,
    ExecutionState,
    PlannedClaim,
    idempotency_key,
    manual_key,
)

#: Resubmissions stop counting here rather than overflow the column (a count written by hand).
ATTEMPTS_MAX = 1_000_000_000


def next_attempt(attempts: int) -> int:
    """The attempt count after one more submission of an execution that had ``attempts``."""
    return attempts + 1 if attempts < ATTEMPTS_MAX else attempts


@dataclass(frozen=True, kw_only=True, slots=True)
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
        return tuple(replace(a, runs=sum(1 for key in a.keys if key in inserted))
                     for a in self.advances)

    def result(self, inserted: Collection[str],
               dispatch: Callable[[Execution], Dispatch]) -> ClaimResult:
        """What the batch did, once the store inserted the keys ``inserted``; ``dispatch``
        pairs an inserted execution with its schedule's task and arguments."""
        dispatches = tuple(dispatch(e) for e in self.executions if e.key in inserted)
        return ClaimResult(
            dispatches=dispatches, advanced=len(self.advances), conflicts=self.conflicts,
            duplicates=self.repeated + len(self.executions) - len(dispatches),
            missed=sum(a.missed for a in self.advances),
        )


def claim_executions(claim: PlannedClaim, *, token: int, now: datetime) -> list[Execution]:
    """The execution rows of ``claim``: one per occurrence, keyed by
    :func:`~goatbeat_celery.core.model.idempotency_key`, ``claimed`` at store-time ``now``
    under the lease ``token``, on their first attempt, the claim's missed count on the last,
    and expiring ``expires_after`` past their due instant."""
    last = len(claim.occurrences) - 1
    after = claim.expires_after
    name = claim.schedule_name
    return [
        Execution(key=idempotency_key(name, occurrence), schedule_name=name,
                  occurrence_at=occurrence, due_at=due, token=token,
                  state=ExecutionState.CLAIMED, claimed_at=now, attempts=1,
                  missed=claim.missed if index == last else 0,
                  expires_at=None if after is None else due + after)
        for index, (occurrence, due) in enumerate(claim.occurrences)
    ]


def plan_claims(claims: Sequence[PlannedClaim], versions: Mapping[str, int], *, token: int,
                now: datetime, skip: Collection[str] = ()) -> ClaimPlan:
    """Decide what ``claims`` write, given the stored ``versions`` of the schedules the store
    locked (a schedule absent from it is gone, or locked elsewhere when named in ``skip``:
    left for a later batch, neither claimed nor a conflict)."""
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
        planned = claim_executions(claim, token=token, now=now)
        fresh = [e for e in planned if e.key not in seen]
        seen.update(e.key for e in fresh)
        repeated += len(planned) - len(fresh)
        executions.extend(fresh)
        advances.append(Advance(
            name=name, version=claim.version,
            next_occurrence_at=claim.next_occurrence_at, next_run_at=claim.next_run_at,
            last_occurrence_at=claim.occurrences[-1][0] if claim.occurrences else None,
            runs=len(fresh), missed=claim.missed, keys=tuple(e.key for e in fresh),
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


__all__ = ["ATTEMPTS_MAX", "Advance", "ClaimPlan", "claim_executions", "manual_execution",
           "manual_run_exists", "next_attempt", "plan_claims"]
