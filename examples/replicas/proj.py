"""Several beat replicas on PostgreSQL with a Redis broker.

Run on every host (or several times on one):

    celery -A proj goatbeat migrate                       # once, creates the schema
    celery -A proj worker --loglevel INFO
    celery -A proj beat -S goatbeat_celery.Scheduler      # as many replicas as you like

Exactly one replica dispatches; kill it and another takes over within lease_ttl seconds
(SIGTERM: at once).
"""

from __future__ import annotations

import os

from celery import Celery
from celery.schedules import crontab

app = Celery(
    "proj",
    broker=os.environ.get("BROKER_URL", "redis://127.0.0.1:6379/0"),
)
app.conf.update(
    timezone="Europe/Paris",
    goatbeat_database_url=os.environ.get(
        "GOATBEAT_DATABASE_URL", "postgresql://postgres:postgres@127.0.0.1:5432/test"
    ),
    goatbeat_lease_ttl=15,
    goatbeat_lease_renew_interval=5,
    beat_schedule={
        "refresh-cache": {"task": "proj.refresh", "schedule": 30.0,
                          "options": {"goatbeat": {"jitter": 30}}},
        "nightly-report": {
            "task": "proj.report",
            "schedule": crontab(hour="2", minute="30"),
            "options": {"queue": "reports", "expires": 3600,
                        "goatbeat": {"misfire_policy": "latest", "misfire_grace": 3600}},
        },
    },
)


@app.task(name="proj.refresh")
def refresh() -> None:
    print("refreshing", flush=True)


@app.task(name="proj.report")
def report() -> None:
    print("nightly report", flush=True)
