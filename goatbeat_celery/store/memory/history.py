"""Executions as history: read by key, by occurrence or newest first, and pruned."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime

from goatbeat_celery.core.protocols import History
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.instants import check_aware, ensure_aware
from goatbeat_celery.core.types.run_query import RunCursor, RunQuery, RunScan, outcome_of
from goatbeat_celery.store.memory.base import MemoryStoreBase
from goatbeat_celery.store.memory.outbox import MemoryOutbox

#: Never pruned: claims not yet sent, and claims held back for their turn.
_NEVER_PRUNED = frozenset({ExecutionState.CLAIMED, ExecutionState.HELD})


class MemoryHistory(MemoryOutbox, MemoryStoreBase, History):
    """Reads of past executions, and pruning."""

    def executions_by_key(self, keys: Sequence[str]) -> dict[str, Execution]:
        with self._lock:
            return {key: e for key in keys if (e := self._executions.get(key)) is not None}

    def occurrence_executions(self, schedule_name: str, start: datetime,
                              end: datetime, *,
                              claimed_since: datetime | None = None) -> list[Execution]:
        check_aware(start, end, claimed_since)
        with self._lock:
            found = [e for e in self._executions.values() if e.schedule_name == schedule_name
                     and start <= e.occurrence_at <= end
                     and (claimed_since is None or e.claimed_at >= claimed_since)]
        return sorted(found, key=lambda e: (e.occurrence_at, e.key))

    def executions(self, *, schedule_name: str | None = None,
                   states: Collection[ExecutionState] | None = None,
                   limit: int = 50) -> list[Execution]:
        with self._lock:
            rows = [e for e in self._executions.values()
                    if (schedule_name is None or e.schedule_name == schedule_name)
                    and (states is None or e.state in states)]
        rows.sort(key=lambda e: (e.occurrence_at, e.key), reverse=True)
        return rows[:limit]

    def find_runs(self, query: RunQuery, *, before: RunCursor | None = None,
                  limit: int = 50, within: float | None = None) -> list[Execution]:
        return _listed([e for e in self._runs(query, before) if query.matches_text(
            e.key, e.run_error, e.last_error)][:max(limit, 0)])

    def scan_runs(self, query: RunQuery, *, before: RunCursor | None = None,
                  limit: int = 50, scan: int = 50_000) -> RunScan:
        read = self._runs(query, before)
        runs = _listed([e for e in read[:max(scan, 0)]
                        if query.matches_text(e.key, e.run_error, e.last_error)][:max(limit, 0)])
        if len(runs) >= limit or not 0 < scan < len(read):
            return RunScan(runs, None)
        last = read[scan - 1]
        return RunScan(runs, RunCursor(last.occurrence_at, last.key))

    def text_search_indexed(self) -> bool:
        return False

    def _runs(self, query: RunQuery, before: RunCursor | None) -> list[Execution]:
        """The runs ``query`` finds after ``before``, its text aside, in the order of a
        search."""
        with self._lock:
            tagged = (None if query.tag is None else
                      {s.name for s in self._schedules.carrying([query.tag])})
            found = [e for e in self._executions.values()
                     if _matches(e, query, tagged) and (
                         before is None or (e.occurrence_at, e.key) < tuple(before))]
        found.sort(key=lambda e: (e.occurrence_at, e.key), reverse=True)
        return found

    def latest_runs(self, schedule_names: Sequence[str],
                    per_schedule: int) -> dict[str, list[Execution]]:
        wanted = set(schedule_names)
        by_name: dict[str, list[Execution]] = {}
        with self._lock:
            for e in self._executions.values():
                if e.schedule_name in wanted:
                    by_name.setdefault(e.schedule_name, []).append(e)
        for runs in by_name.values():
            runs.sort(key=lambda e: (e.occurrence_at, e.key), reverse=True)
            del runs[max(per_schedule, 0):]
        return {name: [replace(e, run_traceback=None) for e in runs]
                for name, runs in by_name.items() if runs}

    def prune(self, *, before: datetime, limit: int) -> int:
        before = ensure_aware(before, "before")
        with self._lock:
            old = sorted(
                (e for e in self._executions.values()
                 if e.state not in _NEVER_PRUNED and e.claimed_at < before),
                key=lambda e: e.claimed_at,
            )[:limit]
            for execution in old:
                del self._executions[execution.key]
            finished = sorted(
                (b for b in self._backfills.values()
                 if not b.active and b.finished_at is not None and b.finished_at < before),
                key=lambda b: b.finished_at or before,
            )[:limit]
            for backfill in finished:
                del self._backfills[backfill.id]
            resolved = sorted(
                (a for a in self._alerts.values()
                 if a.resolved_at is not None and a.resolved_at < before),
                key=lambda a: a.resolved_at or before,
            )[:limit]
            for alert in resolved:
                del self._alerts[alert.id]
            # Ids grow with time: the oldest entries are the lowest ids.
            logged = sorted(entry_id for entry_id, entry in self._audit.items()
                            if entry.at < before)[:limit]
            for entry_id in logged:
                del self._audit[entry_id]
            return (len(old) + len(finished) + len(resolved) + len(logged)
                    + self._prune_events_locked(before, limit))


def _listed(runs: list[Execution]) -> list[Execution]:
    """``runs`` as a search lists them: without their tracebacks."""
    return [replace(e, run_traceback=None) for e in runs]


def _matches(execution: Execution, query: RunQuery, tagged: set[str] | None) -> bool:
    """Whether ``execution`` is one of the runs ``query`` finds, its text aside (``tagged``: the
    names of the schedules carrying its tag)."""
    e = execution
    return ((query.outcomes is None or outcome_of(
                e.state.value, None if e.run_state is None else e.run_state.value)
             in query.outcomes)
            and (query.schedule_name is None or e.schedule_name == query.schedule_name)
            and (tagged is None or e.schedule_name in tagged)
            and (query.worker is None or e.worker == query.worker)
            and (query.since is None or e.occurrence_at >= query.since)
            and (query.until is None or e.occurrence_at < query.until))
