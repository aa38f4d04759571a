# Load the Celery app whenever Django starts, as Celery's Django guide says, so that
# @shared_task uses it.
from proj.celery import app as celery_app

__all__ = ("celery_app",)
