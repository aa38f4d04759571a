"""A stop signal (SIGTERM, SIGINT) that arrives while a tick claims and sends is handled once
the tick has recorded what it sent, so a clean stop never leaves a sent batch ``claimed`` for
the next leader to send again."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from goatbeat_celery.core.model import ExecutionState
from goatbeat_celery.scheduler import Scheduler
from goatbeat_celery.store import open_store


def test_sigterm_right_after_a_send_is_handled_once_the_batch_is_marked_submitted(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'goatbeat.sqlite3'}"
    app = Celery("stop", broker="memory://", set_as_current=False)
    app.conf.update(
        goatbeat_database_url=url, goatbeat_lease_ttl=3, goatbeat_lease_renew_interval=1,
        goatbeat_max_interval=0.2,
        beat_schedule={"every-second": {"task": "stop.noop", "schedule": 1.0}},
    )
    scheduler = Scheduler(app=app)
    engine = scheduler.engine
    assert engine is not None
    send = engine.submitter.submit

    def send_then_be_told_to_stop(dispatches: Any, *, token: int, timeout: float) -> Any:
        sent = send(dispatches, token=token, timeout=timeout)
        os.kill(os.getpid(), signal.SIGTERM)  # as an operator's `kill` landing just then
        return sent

    engine.submitter.submit = send_then_be_told_to_stop  # type: ignore[method-assign]
    handled: list[int] = []

    def celery_beat_handler(signum: int, frame: Any) -> None:
        # What celery beat installs: close the scheduler, then leave the service loop.
        scheduler.close()
        handled.append(signum)
        raise SystemExit()

    previous = signal.signal(signal.SIGTERM, celery_beat_handler)
    try:
        with pytest.raises(SystemExit):
            for _ in range(100):
                scheduler.tick()
    finally:
        signal.signal(signal.SIGTERM, previous)
        scheduler.close()

    assert handled == [signal.SIGTERM]
    store = open_store(url)
    try:
        executions = store.executions()
    finally:
        store.close()
    assert executions, "nothing was sent"
    assert {e.state for e in executions} == {ExecutionState.SUBMITTED}
