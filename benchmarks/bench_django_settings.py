"""Minimal Django settings for django-celery-beat's DatabaseScheduler in the benchmarks.

The database comes from ``BENCH_DJANGO_DB`` (a database ``compare.py`` creates and drops) on the
PostgreSQL server of ``BENCH_PG_HOST``/``BENCH_PG_PORT``/``BENCH_PG_USER``.
"""

import os

SECRET_KEY = "benchmark-only"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = ["django_celery_beat"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("BENCH_DJANGO_DB", "goatbeat_bench_django"),
        "USER": os.environ.get("BENCH_PG_USER", "postgres"),
        "PASSWORD": os.environ.get("BENCH_PG_PASSWORD", ""),
        "HOST": os.environ.get("BENCH_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("BENCH_PG_PORT", "5432"),
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
