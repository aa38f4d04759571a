"""Reading what happened: the audit log, a schedule's executions and the alerts."""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Sequence
from typing import cast

from goatbeat_celery.api.arguments import (
    _MAX_ROW_ID,
    _limit_problems,
    _lookup_problems,
    _schedule_name,
    _text_problems,
)
from goatbeat_celery.api.base import SchedulesBase
from goatbeat_celery.core.protocols import AlertLog
from goatbeat_celery.core.rules.alerts import Alert
from goatbeat_celery.core.rules.validation import shown_value
from goatbeat_celery.core.types.audit import AuditEntry
from goatbeat_celery.core.types.errors import ConfigurationError, StoreTimeout
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.run_query import RunCursor, RunQuery, RunScan

logger = logging.getLogger(__name__)

#: How many runs a text search reads first, newest first, whatever the text: 18-35 ms on
#: PostgreSQL at ten million runs (docs/performance.md).
TEXT_SCAN = 50_000
#: How long a text search through the store's index may take (seconds) when those runs did
#: not fill the page: a text whose every trigram is common (a fragment of an instant, say)
#: makes the index hand over most runs, seconds at ten million.
TEXT_INDEX_BUDGET = 0.1


class RecordReads(SchedulesBase):
    """Reads of the audit log, the executions and the alerts."""

    def audit(self, name: str | None = None, *, limit: int = 50,
              before_id: int | None = None) -> list[AuditEntry]:
        """The audit log, newest first: the changes of the schedule ``name`` (one that exists
        or existed: a deleted schedule's entries stay until the retention prunes them), or of
        every schedule; at most ``limit`` (1 to
        :data:`~goatbeat_celery.core.rules.validation.MAX_LIMIT`); with ``before_id``, those
        older than that entry (the next page)."""
        problems = [*_text_problems(name, "name"), *_limit_problems(limit)]
        if before_id is not None and (isinstance(before_id, bool)
                                      or not isinstance(before_id, int) or before_id < 1):
            problems.append(Problem("before_id", "expected an entry's id (a positive integer), "
                                    f"got {shown_value(before_id)}"))
        if problems:
            raise ConfigurationError(problems, subject="audit arguments")
        # An id past what a database holds is past every entry.
        return self.store.audit_log(
            schedule_name=name, limit=limit,
            before_id=None if before_id is None else min(before_id, _MAX_ROW_ID))

    def history(self, name: str, *, limit: int = 20) -> list[Execution]:
        """The schedule's executions, newest first, at most ``limit`` (1 to
        :data:`~goatbeat_celery.core.rules.validation.MAX_LIMIT`)."""
        problems = _limit_problems(limit)
        if problems:
            raise ConfigurationError(problems, subject="history arguments")
        self.store.get_schedule(_schedule_name(name))  # a clear ScheduleNotFound for a typo
        return self.store.executions(schedule_name=name, limit=limit)

    def alerts(self, *, name: str | None = None, open_only: bool = False,
               limit: int = 100) -> list[Alert]:
        """Alerts (``docs/alerts.md``), open ones first then newest first: of one schedule
        with ``name``, only the open ones with ``open_only``. The leader raises and resolves
        them; nothing here changes one."""
        problems = _limit_problems(limit)
        if name is not None:
            problems += _lookup_problems(name)
        if problems:
            raise ConfigurationError(problems, subject="alerts")
        return cast(AlertLog, self.store).list_alerts(open_only=open_only, schedule_name=name,
                                                      limit=limit)

    def executions(self, *, states: Collection[ExecutionState | str] | None = None,
                   limit: int = 50) -> list[Execution]:
        """Recent executions of every schedule (manual runs and backfills included), newest
        occurrence first: only those in one of ``states`` when given (each an
        :class:`~goatbeat_celery.core.types.execution.ExecutionState` or its value, such as
        ``"claimed"``; one given bare is one state); at most ``limit`` (1 to
        :data:`~goatbeat_celery.core.rules.validation.MAX_LIMIT`). :meth:`history` reads one
        schedule's."""
        problems = _limit_problems(limit)
        chosen: list[ExecutionState] = []
        if isinstance(states, str):
            states = (states,)
        for state in () if states is None else states:
            try:
                chosen.append(ExecutionState(state))
            except (ValueError, TypeError):
                problems.append(Problem("states", f"unknown state {shown_value(state)}",
                                        f"use: {', '.join(s.value for s in ExecutionState)}"))
        if problems:
            raise ConfigurationError(problems, subject="executions arguments")
        return self.store.executions(states=None if states is None else chosen, limit=limit)

    def executions_by_key(self, keys: Iterable[str]) -> dict[str, Execution]:
        """The executions of these keys (the task ids their runs were sent with) that exist,
        by key, in one read; a key none has is left out. ConfigurationError for a key that is
        not a string."""
        wanted = list(keys)
        problems = [Problem("keys", f"expected text, got {shown_value(key)}")
                    for key in wanted if not isinstance(key, str)]
        if problems:
            raise ConfigurationError(problems, subject="execution keys")
        # A NUL is in no stored key, and a database refuses to compare with one.
        found = [key for key in wanted if "\x00" not in key]
        return self.store.executions_by_key(found) if found else {}

    def oldest_pending(self) -> Execution | None:
        """The run claimed and not yet accepted by the broker that is due earliest, or None:
        its lag (:meth:`now` minus its ``due_at``) is how far behind sending is."""
        return self.store.oldest_pending()

    def find_runs(self, query: RunQuery, *, before: RunCursor | None = None,
                  limit: int = 50) -> list[Execution]:
        """Runs of every schedule matching ``query``, newest occurrence first then key
        descending, keyset paged by ``before`` (the last run of the previous page); their
        tracebacks are not read (read a run by key for it). ConfigurationError for a limit
        out of range."""
        problems = _limit_problems(limit)
        if problems:
            raise ConfigurationError(problems, subject="run search")
        return self.store.find_runs(query, before=before, limit=limit)

    def search_runs(self, query: RunQuery, *, before: RunCursor | None = None,
                    limit: int = 50) -> RunScan:
        """The runs :meth:`find_runs` finds, at a cost a page can bear whatever the text. A
        text is first looked for in the :data:`TEXT_SCAN` runs that come first of those the
        rest of ``query`` finds (a common text fills the page there); when they hold fewer
        than ``limit``, through the store's index where it has one
        (:meth:`~goatbeat_celery.core.protocols.History.text_search_indexed`), for up to
        :data:`TEXT_INDEX_BUDGET` seconds. When the index cannot answer in time (every
        trigram of the text common) or there is none, the answer is what the bounded read
        found, and ``stopped_at`` says where it stopped (pass it as ``before`` to look
        further); otherwise ``stopped_at`` is None. ConfigurationError for a limit out of
        range."""
        problems = _limit_problems(limit)
        if problems:
            raise ConfigurationError(problems, subject="run search")
        if not query.text:
            return RunScan(self.store.find_runs(query, before=before, limit=limit), None)
        scanned = self.store.scan_runs(query, before=before, limit=limit, scan=TEXT_SCAN)
        if scanned.stopped_at is None or not self.store.text_search_indexed():
            return scanned
        try:
            return RunScan(self.store.find_runs(query, before=before, limit=limit,
                                                within=TEXT_INDEX_BUDGET), None)
        except StoreTimeout:
            logger.info("text %r is in too many runs for the index to narrow within %.2fs; "
                        "answered from the newest %d runs", query.text, TEXT_INDEX_BUDGET,
                        TEXT_SCAN, extra={"action": "search runs"})
            return scanned

    def latest_runs(self, schedule_names: Sequence[str],
                    per_schedule: int) -> dict[str, list[Execution]]:
        """The newest ``per_schedule`` runs of each schedule named, by name (one without runs
        left out); their tracebacks are not read."""
        problems = _limit_problems(per_schedule)
        if problems:
            raise ConfigurationError(problems, subject="latest runs")
        return self.store.latest_runs(schedule_names, per_schedule)
