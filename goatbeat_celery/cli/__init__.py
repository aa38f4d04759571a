"""``celery -A proj goatbeat …``: the operator's commands.

Installed through Celery's ``celery.commands`` entry point, so each command runs with the app
given by ``-A`` and reads goatbeat's settings (``goatbeat_database_url``, …) from its
``app.conf``::

    celery -A proj goatbeat status              # who leads, until when (database clock), lag
    celery -A proj goatbeat list --enabled       # schedules with their next and last runs
    celery -A proj goatbeat add report proj.tasks.report --cron "0 7 * * mon-fri" \\
        --timezone Europe/Paris
    celery -A proj goatbeat edit report --queue reports
    celery -A proj goatbeat run-now report       # an extra run, sent by the leader
    celery -A proj goatbeat history report
    celery -A proj goatbeat alerts               # open alerts: missed, failed, lost, silent...
    celery -A proj goatbeat audit report         # who changed it, when, why, what
    celery -A proj goatbeat sync --plan          # what beat_schedule would change (exit 2)
    celery -A proj goatbeat migrate              # bring the schema to this version
    celery -A proj goatbeat check                # settings, beat_schedule, database, schema
    celery -A proj goatbeat health               # this host's replica: 0 leads, 3 standby, …

Tables are for people; ``--json`` gives scripts the same data, instants in ISO-8601 UTC.
Database URLs are always shown with the password masked. Invalid input changes nothing: an
option that cannot be read as its kind is a usage error (exit 2, the first one only, as click
reads them); once every option reads, every problem with the values is listed (exit 1).

Celery imports every command plug-in on each ``celery`` invocation (worker included), so the
database and migration modules are imported only when a command runs.
"""

from __future__ import annotations

# Each command module adds its commands to the group when imported.
from goatbeat_celery.cli import (  # noqa: F401
    alerts,
    audit,
    backfills,
    calendars,
    dashboard,
    health,
    runs,
    schedules,
    schema,
    status,
    tokens,
)
from goatbeat_celery.cli.group import goatbeat
from goatbeat_celery.hidden_settings import hide_secret_settings

# Each celery command imports this plug-in: report and inspect conf print no webhook secret.
hide_secret_settings()

__all__ = ["goatbeat"]
