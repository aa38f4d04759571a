"""A schedule whose name holds a slash runs under Celery's file system result backend: its task
id (the idempotency key) is a file name the backend can write."""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from goatbeat_celery.beat.scheduler import Scheduler
from goatbeat_celery.core.types.execution import idempotency_key
from tests.support.waiting import wait_for

NAME = "reports/daily"


@pytest.fixture
def celery_config(tmp_path: Path) -> dict[str, Any]:
    results = tmp_path / "results"
    results.mkdir()
    return {
        "broker_url": "memory://",
        "result_backend": f"file://{results}",
        "goatbeat_database_url": f"sqlite:///{tmp_path / 'goatbeat.sqlite3'}",
        "goatbeat_lease_ttl": 3,
        "goatbeat_lease_renew_interval": 1,
        "goatbeat_max_interval": 0.2,
        "beat_schedule": {NAME: {"task": "ids.report", "schedule": 1.0}},
    }


@pytest.fixture
def reported(celery_app: Celery) -> list[tuple[str, str]]:
    """Registers the task (before the worker starts); returns (task id, occurrence) of each run."""
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    @celery_app.task(bind=True, name="ids.report")
    def report(self: Any) -> str:
        with lock:
            seen.append((self.request.id, self.request.goatbeat_occurrence))
        return "done"

    return seen


def test_a_slash_in_the_name_makes_a_task_id_the_file_result_backend_can_store(
        celery_app: Celery, reported: list[tuple[str, str]], celery_worker: Any,
        tmp_path: Path) -> None:
    scheduler = Scheduler(app=celery_app)
    try:
        def one_run() -> bool:
            scheduler.tick()
            return bool(reported)
        wait_for(one_run, timeout=10, what="a run of the schedule")
    finally:
        scheduler.close()
    task_id, occurrence = reported[0]
    assert task_id == idempotency_key(NAME, datetime.fromisoformat(occurrence))
    assert task_id.startswith("reports%2Fdaily:")
    # The worker stored the result under the task id, and it reads back from the backend.
    assert celery_app.AsyncResult(task_id).get(timeout=10) == "done"
    assert (tmp_path / "results" / f"celery-task-meta-{task_id}").is_file()
