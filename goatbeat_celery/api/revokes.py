"""Revoking a run: its Celery task revoked through the app's remote control, and recorded in
its schedule's audit log."""

from __future__ import annotations

import logging
from typing import Any

from goatbeat_celery.api.arguments import _text_problems
from goatbeat_celery.api.base import SchedulesBase
from goatbeat_celery.core.types.audit import AuditAction
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.problems import Problem

logger = logging.getLogger(__name__)


class RunRevokes(SchedulesBase):
    """Revokes of runs."""

    def revoke(self, key: str, app: Any, *, terminate: bool = False,
               reason: str | None = None) -> Execution:
        """Revoke the run ``key`` (its Celery task id) through ``app.control``: every worker
        discards it if it has not started (workers keep revoked ids in memory, and over a
        restart only with ``--statedb``); with ``terminate``, a worker running it sends it
        SIGTERM, which the prefork, eventlet and gevent pools honour and the solo and threads
        pools cannot. Recorded in its schedule's audit log as ``revoke``. The run's row is
        not changed: the worker's report of the revoke ends it. ConfigurationError when no
        run has ``key``."""
        problems = [*_text_problems(key, "key"), *_text_problems(reason, "reason")]
        if problems:
            raise ConfigurationError(problems)
        found = self.store.executions_by_key([key])
        if key not in found:
            raise ConfigurationError([Problem("key", f"no run has the key {key!r}")])
        execution = found[key]
        app.control.revoke(key, terminate=terminate, signal="SIGTERM")
        self.store.record_audit(execution.schedule_name, self._note(
            AuditAction.REVOKE, reason, {"run": (None, key), "terminate": (None, terminate)}))
        logger.info("revoked run %s of %s (terminate=%s)", key, execution.schedule_name,
                    terminate, extra={"action": "revoke"})
        return execution
