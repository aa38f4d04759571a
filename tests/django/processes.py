"""The test project in real processes: ``celery beat`` and a worker on the test module's
database and a real Redis broker, with a queue and a list of the worker's records of their
own (tests/django/testproj/switch_settings.py and switch_tasks.py). Each process is started
and ended by pid (tests/system/harness.py's World), its output kept in a log file."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_for
from tests.system.harness import Process, World

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = "tests.django.testproj.switch_settings"
#: The test project's Celery app; the second tracks runs, as docs/django.md sets an app up.
APP = "tests.django.testproj.celery"
TRACKED_APP = "tests.django.testproj.tracked"
#: A process imports Celery and Django and is ready within seconds; 60 s covers a busy 2-core
#: machine.
START_TIMEOUT = 60.0


class Project(World):
    """The processes of one test."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.queue = f"project-{self.run_id}"
        self.record_key = f"project-records-{self.run_id}"

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        return {**os.environ, "DJANGO_SETTINGS_MODULE": SETTINGS,
                # The project's settings take their database from this URL.
                "GOATBEAT_TEST_PG_URL": self.database_url,
                "SWITCH_BROKER_URL": f"{self.broker_url}/0", "SWITCH_QUEUE": self.queue,
                "SWITCH_RECORD_URL": self.redis_url, "SWITCH_RECORD_KEY": self.record_key,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                            os.environ.get("PYTHONPATH")])),
                **extra}

    def celery(self, name: str, *args: str, app: str = APP,
               env: dict[str, str] | None = None) -> Process:
        """``celery -A app *args`` in the project's environment."""
        return self.spawn(name, [sys.executable, "-m", "celery", "-A", app, *args],
                          self.env(env or {}))

    def worker(self, *, app: str = APP, env: dict[str, str] | None = None) -> Process:
        """One worker process taking one message at a time, in the queue's order."""
        return self.celery("worker", "worker", "--pool", "solo", "-Q", self.queue, "-n",
                           f"project-{self.run_id}@%h", "--without-heartbeat",
                           "--without-gossip", "--without-mingle", "--loglevel", "INFO",
                           app=app, env=env)

    def records(self) -> list[dict[str, Any]]:
        """What the worker ran, in order: switch_tasks.record's entries."""
        return [json.loads(item) for item in self.redis.lrange(self.record_key, 0, -1)]

    def clean_up(self) -> None:
        self.redis.delete(self.record_key, self.queue)


def ready(process: Process, line: str) -> None:
    """Wait for ``line`` in the process's log (it says it has started)."""
    wait_for(lambda: not process.alive() or line in process.log(),
             timeout=START_TIMEOUT, what=f"{process.name} to start")
    assert process.alive(), f"{process.name} exited:\n{process.log()}"
