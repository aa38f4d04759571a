"""Helpers of the Celery-facing tests: dispatches, apps and entries."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

from celery import Celery

from goatbeat_celery.core.types.execution import Execution, ExecutionState, idempotency_key
from goatbeat_celery.core.types.tick import Dispatch


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
