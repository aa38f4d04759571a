"""The test project's Celery app with run tracking on, as docs/django.md's celery.py sets it
up: workers record each goatbeat run's start and outcome."""

import goatbeat_celery
from tests.django.testproj.celery import app

goatbeat_celery.track_runs(app)

__all__ = ["app"]
