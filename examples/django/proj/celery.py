"""The project's Celery app: settings come from Django's, under the CELERY_ namespace.

    celery -A proj worker
    celery -A proj beat -S goatbeat_celery.Scheduler     # on every replica
    celery -A proj goatbeat migrate                       # once per release, before beat
"""

import os

from celery import Celery

import goatbeat_celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")

app = Celery("proj")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Workers record each run's start and outcome; beat, importing this module too, learns that
# they do (CELERY_GOATBEAT_TRACK_RUNS), and only then judges a run lost.
goatbeat_celery.track_runs(app)


@app.task(name="proj.heartbeat")
def heartbeat() -> str:
    return "alive"
