"""The schedule store and lease manager on SQLAlchemy Core, shared by PostgreSQL and SQLite.

:class:`SQLStore` implements :class:`~goatbeat_celery.core.protocols.ScheduleStore` and
:class:`~goatbeat_celery.core.protocols.LeaseManager` with the semantics of the memory store.
It is composed of one class per concern, each in its own module over the shared plumbing of
:class:`~goatbeat_celery.store.sql.base.SQLStoreBase`:

* :mod:`.lease` — the lease rows;
* :mod:`.schedules` — schedules as the API and configuration write and list them;
* :mod:`.calendars` — exclusion calendars;
* :mod:`.due` — the due read and the look for waiting work;
* :mod:`.claims` — claiming due occurrences, setting schedules aside;
* :mod:`.dispatch` — pending executions, submissions, failures, manual runs;
* :mod:`.backfills` — backfills and their steps;
* :mod:`.history` — past executions and pruning;
* :mod:`.outbox` — events delivered off the scheduling path (alerts to webhooks);
* :mod:`.settlement` — ended runs settled for run policies;
* :mod:`.runs` — run reports, heartbeats, lost runs;
* :mod:`.alerts` — the evidence of alerts and their rows;
* :mod:`.audit` — the audit log;
* :mod:`.tokens` — the HTTP API's tokens;

with rows read and written as model types in :mod:`.rows` and :mod:`.execution_rows`, and the
predicates several parts share in :mod:`.predicates`.

What differs between databases is asked of a few hooks, answered once by each subclass:

* :meth:`SQLStore._now_sql` — the store's clock as an SQL expression (``now()`` on PostgreSQL,
  a bound value from the injected clock on SQLite);
* :meth:`SQLStore._insert` — the dialect's ``INSERT`` (for ``ON CONFLICT DO NOTHING``);
* :meth:`SQLStore._in` / ``_IN_CHUNK`` — membership in a list of strings;
* :meth:`SQLStore._lock_for_claim` / :meth:`SQLStore._record_claims` — the reads and writes
  of a claim batch, one statement each on PostgreSQL;
* :meth:`SQLStore._announce_in` / :meth:`SQLStore._announced` — waking waiting replicas.

``SELECT ... FOR SHARE / FOR UPDATE [SKIP LOCKED]`` is written unconditionally: SQLite's
compiler leaves it out, and SQLite serialises writers with ``BEGIN IMMEDIATE`` instead.
"""

from __future__ import annotations

from goatbeat_celery.store.sql.alerts import SQLAlerts
from goatbeat_celery.store.sql.audit import SQLAudit
from goatbeat_celery.store.sql.backfills import SQLBackfills
from goatbeat_celery.store.sql.base import Insert, SQLStoreBase
from goatbeat_celery.store.sql.calendars import SQLCalendars
from goatbeat_celery.store.sql.claims import SQLClaims
from goatbeat_celery.store.sql.dispatch import SQLDispatch
from goatbeat_celery.store.sql.due import SQLDue
from goatbeat_celery.store.sql.execution_rows import (
    EXECUTION_COLUMNS,
    execution_columns,
    execution_values,
    run_values,
)
from goatbeat_celery.store.sql.history import SQLHistory
from goatbeat_celery.store.sql.lease import SQLLeases
from goatbeat_celery.store.sql.outbox import SQLOutbox
from goatbeat_celery.store.sql.predicates import due_params
from goatbeat_celery.store.sql.rows import _spec_values as _spec_values
from goatbeat_celery.store.sql.rows import waiting_from_row
from goatbeat_celery.store.sql.runs import RunChange, SQLRuns
from goatbeat_celery.store.sql.schedules import SQLSchedules
from goatbeat_celery.store.sql.settlement import SQLSettlement
from goatbeat_celery.store.sql.tokens import SQLTokens


class SQLStore(SQLLeases, SQLSchedules, SQLCalendars, SQLDue, SQLClaims, SQLDispatch,
               SQLBackfills, SQLHistory, SQLAlerts, SQLOutbox, SQLSettlement, SQLRuns,
               SQLAudit, SQLTokens,
               SQLStoreBase):
    """ScheduleStore and LeaseManager in one object, on one SQLAlchemy engine.

    ``engine`` runs write transactions; ``read_engine`` runs reads and ``single_engine`` writes
    made of one statement each (both default to ``engine``; a subclass may hand the same pool
    with other options, say autocommit, to save the round trips of BEGIN and COMMIT).
    """


__all__ = ["EXECUTION_COLUMNS", "Insert", "RunChange", "SQLStore", "due_params",
           "execution_columns", "execution_values", "run_values", "waiting_from_row"]
