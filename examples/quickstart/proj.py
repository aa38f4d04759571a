"""The quickstart: goatbeat on its embedded default (a SQLite file), no server needed.

    celery -A proj goatbeat migrate            # once: the store, and the broker's queue
    celery -A proj worker --pool solo          # prints each run with its task id
    celery -A proj beat -S goatbeat_celery.Scheduler
"""

from __future__ import annotations

import os
from datetime import timedelta

from celery import Celery
from celery.schedules import crontab

here = os.path.dirname(os.path.abspath(__file__))
state = os.environ.get("QUICKSTART_DIR", os.path.join(here, "var"))
os.makedirs(state, exist_ok=True)

app = Celery("proj", broker=f"sqla+sqlite:///{os.path.join(state, 'broker.sqlite3')}")
app.conf.update(
    timezone="Europe/Paris",
    broker_connection_retry_on_startup=True,
    # The task's lines print as they are, not as log records with Celery's prefix.
    worker_redirect_stdouts=False,
    goatbeat_database_url=f"sqlite:///{os.path.join(state, 'goatbeat.sqlite3')}",
    goatbeat_lease_ttl=6,
    goatbeat_lease_renew_interval=2,
    beat_schedule={
        "heartbeat": {"task": "proj.report", "schedule": 2.0, "args": ["heartbeat"]},
        "every-ten-seconds": {
            "task": "proj.report",
            "schedule": timedelta(seconds=10),
            "args": ["every ten seconds"],
            "options": {"goatbeat": {"misfire_policy": "all", "max_catchup": 5}},
        },
        "each-minute": {"task": "proj.report", "schedule": crontab(), "args": ["cron"]},
    },
)


@app.task(bind=True, name="proj.report")
def report(self, label: str) -> str:
    headers = self.request.get("goatbeat_occurrence") or "?"
    line = f"ran {label!r} occurrence={headers} task_id={self.request.id}"
    print(line, flush=True)
    return line
