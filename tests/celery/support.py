"""Helpers of the Celery-facing tests: dispatches, apps and entries."""

from __future__ import annotations

import os
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from celery import Celery

from goatbeat_celery.core.types.claims import Dispatch
from goatbeat_celery.core.types.execution import Execution, ExecutionState, idempotency_key
from goatbeat_celery.store import open_store


def dispatch(name: str, options: dict[str, Any] | None = None, *, args: Any = (),
             kwargs: Any = None) -> Dispatch:
    now = datetime.now(timezone.utc)
    execution = Execution(key=idempotency_key(name, now), schedule_name=name, occurrence_at=now,
                          due_at=now, token=1, state=ExecutionState.CLAIMED, claimed_at=now,
                          attempts=1)
    return Dispatch(execution=execution, task="app.job", args=args,
                    kwargs={} if kwargs is None else kwargs, options=options or {})


def make_app(**conf: object) -> Celery:
    app = Celery("cfg", broker="memory://", set_as_current=False)
    app.conf.update(conf)
    return app


def entry(**own: object) -> dict[str, object]:
    return {"task": "proj.tasks.poll", "schedule": 60, "goatbeat": own}


REDIS_URL = os.environ.get("GOATBEAT_TEST_REDIS_URL", "redis://127.0.0.1:6379")

#: A wait for a beat's work in these tests is for what a 2-core machine does in well under a
#: second (a tick, a message through the memory broker); 20 s is room for a machine under load.
TIMEOUT = 20.0


def app_for(tmp_path: Path, beat_schedule: dict[str, Any], **conf: Any) -> Celery:
    """A beat's app on the memory broker, with a queue of its own so that no later test's
    worker finds its messages, and a SQLite store in ``tmp_path``."""
    app = Celery(f"contract-{uuid.uuid4().hex[:6]}", broker="memory://", set_as_current=False)
    app.conf.update({
        "task_default_queue": f"contract-{uuid.uuid4().hex}",
        "goatbeat_database_url": f"sqlite:///{tmp_path / 'goatbeat.sqlite3'}",
        "goatbeat_lease_ttl": 3, "goatbeat_lease_renew_interval": 1,
        "beat_schedule": beat_schedule, **conf})
    return app


EVERY_SECOND = {"every-second": {"task": "contract.work", "schedule": 1.0}}
HOURLY = {"hourly": {"task": "contract.work", "schedule": 3600.0}}


def executions(app: Celery, name: str) -> list[Any]:
    store = open_store(app.conf.goatbeat_database_url)
    try:
        return list(store.executions(schedule_name=name))
    finally:
        store.close()


def submitted(app: Celery, name: str) -> list[Any]:
    return [e for e in executions(app, name) if e.state is ExecutionState.SUBMITTED]
