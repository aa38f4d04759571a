"""The project's Celery app, set up as Celery's Django guide says."""

from celery import Celery

app = Celery("testproj", set_as_current=False)
app.config_from_object("django.conf:settings", namespace="CELERY")
