"""Claiming due occurrences, and setting schedules aside."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from goatbeat_celery.core.types.claims import ClaimResult, PlannedClaim
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.set_aside import SetAside


class Claims(Protocol):
    """The leader's fenced writes of a claim batch and of set-asides."""

    def claim(self, claims: Sequence[PlannedClaim], *, lease: LeaseGrant,
              not_before: datetime | None = None) -> ClaimResult:
        """Apply planned claims in one transaction, fenced by ``lease``.

        First checks that ``lease`` is still the current, unexpired grant
        (:func:`goatbeat_celery.core.rules.fence.check_fence`, with the lease row locked so a
        takeover waits for this transaction); if not, raises LeaseLost and changes nothing.
        With ``not_before``, a store clock still before it changes nothing either: the result
        is empty, its ``early`` that clock (claims planned ahead of their due instant are
        claimed at it, by the store's clock, never before).
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

    def set_aside(self, entries: Sequence[SetAside], *,
                  lease: LeaseGrant) -> dict[str, datetime]:
        """Record why each schedule cannot run, in one transaction fenced by ``lease``
        (LeaseLost if stale, nothing changed), as
        :func:`goatbeat_celery.core.rules.faults.plan_set_aside` decides: its ``fault`` (the
        reason), ``fault_at`` (kept from an earlier set-aside still in force), ``faults`` + 1
        and ``version`` + 1, and ``next_run_at`` moved to the retry time: the entry's
        ``retry_at``, or else store-now +
        :func:`~goatbeat_celery.core.types.set_aside.set_aside_delay`
        of the ``faults`` it had, and never earlier than the ``next_run_at`` it had. An entry
        with a ``version`` applies only while the schedule still has it. ``next_occurrence_at``
        is kept. Returns the retry time of each schedule changed, by name."""
        ...
