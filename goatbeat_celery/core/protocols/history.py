"""Past executions, and pruning."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Protocol

from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.run_query import RunCursor, RunQuery, RunScan


class History(Protocol):
    """Executions as history: by key, by occurrence, the recent ones; and pruning."""

    def executions_by_key(self, keys: Sequence[str]) -> dict[str, Execution]:
        """The executions of these keys that exist, by key. Reads only."""
        ...

    def occurrence_executions(self, schedule_name: str, start: datetime,
                              end: datetime, *,
                              claimed_since: datetime | None = None) -> list[Execution]:
        """The executions of ``schedule_name`` whose ``occurrence_at`` lies in ``[start, end]``
        (manual runs included: the caller tells them apart), by occurrence then key; with
        ``claimed_since``, only those claimed at or after it (a backfill's, say). Reads
        only; cost grows with the rows returned (the history index)."""
        ...

    def executions(
        self, *, schedule_name: str | None = None,
        states: Collection[ExecutionState] | None = None, limit: int = 50
    ) -> list[Execution]:
        """Recent executions, newest occurrence first: of ``schedule_name`` when given, in one
        of ``states`` when given (every schedule's claims never sent, say, in one read)."""
        ...

    def find_runs(self, query: RunQuery, *, before: RunCursor | None = None,
                  limit: int = 50, within: float | None = None) -> list[Execution]:
        """Up to ``limit`` runs of every schedule that match ``query``, newest occurrence first
        then key descending; with ``before``, only those that come after it in that order
        (keyset paging: pass the last run of a page for the next one, which rows written
        since never shift). Their ``run_traceback`` is not read (None): read a run by key
        for it. Reads only; by outcome, worker, schedule or time alone a page costs about
        its rows (the indexes of migration 0017), a tag reads on until ``limit`` runs match;
        so does a text, except where :meth:`text_search_indexed`, where it costs about the
        runs holding it (every trigram of the text common: most runs).

        With ``within`` (seconds), PostgreSQL cancels the read once it has taken that long
        and raises :class:`~goatbeat_celery.core.types.errors.StoreTimeout` (not within an
        application's transaction the read joins, which keeps its own limit); the other
        stores ignore it."""
        ...

    def scan_runs(self, query: RunQuery, *, before: RunCursor | None = None,
                  limit: int = 50, scan: int = 50_000) -> RunScan:
        """The runs :meth:`find_runs` would find, looked for among the ``scan`` runs that come
        first (after ``before``) of those matching ``query`` without its text: a text search
        whose cost does not depend on the text. ``stopped_at`` is the last of those ``scan``
        runs when fewer than ``limit`` matched and more runs follow it. Reads only; costs
        about the runs read, ``scan`` at most."""
        ...

    def text_search_indexed(self) -> bool:
        """Whether an index serves the text of :meth:`find_runs` (PostgreSQL with the trigram
        indexes of migration 0020), so that a search for a rare text need not read every run.
        Reads only."""
        ...

    def latest_runs(self, schedule_names: Sequence[str],
                    per_schedule: int) -> dict[str, list[Execution]]:
        """The newest ``per_schedule`` runs of each schedule named (by occurrence then key,
        newest first), by name; a schedule without runs is left out. Their ``run_traceback``
        is not read (None). Reads only; cost grows with the runs returned."""
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
