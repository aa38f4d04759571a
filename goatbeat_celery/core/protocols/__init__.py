"""The contracts the engine relies on. Adapters implement them; the core imports nothing else.

Every store must pass ``tests/conformance``; these docstrings are the rules that suite checks.

One module per concern, as the stores are split: :class:`ScheduleStore` is their combination
(:mod:`.store`), and a component that needs one or two concerns asks for those alone.

* :mod:`.connection` — :class:`StoreConnection`: the store's clock, waiting, its tables and closing;
* :mod:`.schedule_reads` — :class:`ScheduleReads`; :mod:`.schedule_writes` —
  :class:`ScheduleWrites`;
* :mod:`.calendars` — :class:`CalendarStore`: exclusion calendars;
* :mod:`.due` — :class:`DueReads`; :mod:`.claims` — :class:`Claims`: what is due, and its claim;
* :mod:`.dispatch` — :class:`Dispatches`: pending executions, submissions, manual runs;
* :mod:`.settlement` — :class:`Settlements`: ended runs settled for run policies;
* :mod:`.backfills` — :class:`BackfillStore`;
* :mod:`.history` — :class:`History`: past executions and pruning;
* :mod:`.audit` — :class:`AuditLog`;
* :mod:`.lease` — :class:`LeaseManager`: the lease, its fencing token, the replicas' rows;
* :mod:`.runs` — :class:`RunLog`: workers' run reports;
* :mod:`.alerts` — :class:`AlertLog`; :mod:`.outbox` — :class:`Outbox`;
* :mod:`.tokens` — :class:`TokenStore`: the HTTP API's tokens;
* :mod:`.submitter` — :class:`TaskSubmitter`: the task system (Celery).
"""

from __future__ import annotations

from goatbeat_celery.core.protocols.alerts import AlertLog
from goatbeat_celery.core.protocols.audit import AuditLog
from goatbeat_celery.core.protocols.backfills import BackfillStore
from goatbeat_celery.core.protocols.calendars import CalendarStore
from goatbeat_celery.core.protocols.claims import Claims
from goatbeat_celery.core.protocols.connection import StoreConnection
from goatbeat_celery.core.protocols.dispatch import Dispatches
from goatbeat_celery.core.protocols.due import DueReads
from goatbeat_celery.core.protocols.history import History
from goatbeat_celery.core.protocols.lease import LeaseManager
from goatbeat_celery.core.protocols.outbox import Outbox
from goatbeat_celery.core.protocols.runs import RunLog
from goatbeat_celery.core.protocols.schedule_reads import ScheduleReads
from goatbeat_celery.core.protocols.schedule_writes import ScheduleWrites
from goatbeat_celery.core.protocols.settlement import Settlements
from goatbeat_celery.core.protocols.store import ScheduleStore
from goatbeat_celery.core.protocols.submitter import TaskSubmitter
from goatbeat_celery.core.protocols.tokens import TokenStore

__all__ = ["AlertLog", "AuditLog", "BackfillStore", "CalendarStore", "Claims", "Dispatches",
           "DueReads", "History", "LeaseManager", "Outbox", "RunLog", "ScheduleReads",
           "ScheduleStore", "ScheduleWrites", "Settlements", "StoreConnection", "TaskSubmitter",
           "TokenStore"]
