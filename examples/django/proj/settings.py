"""A minimal Django project running goatbeat.

goatbeat stores its schedules in the project's default database unless
CELERY_GOATBEAT_DATABASE_URL says otherwise (PostgreSQL when several hosts run beat).
"""

import os
from pathlib import Path

from celery.schedules import crontab

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["localhost", "127.0.0.1"]
USE_TZ = True
TIME_ZONE = "Europe/Paris"
ROOT_URLCONF = "proj.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "static/"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Schedules and executions in the admin, a schema check, manage.py goatbeat_* commands.
    "goatbeat_celery.contrib.django",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]

# goatbeat uses this database for its schedules, lease and history (its own tables, migrated
# by `celery -A proj goatbeat migrate`). In production, a PostgreSQL database:
#   "ENGINE": "django.db.backends.postgresql", "NAME": "app", "USER": ..., "HOST": ...
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": BASE_DIR / "db.sqlite3",
    },
}

# Celery, read through config_from_object("django.conf:settings", namespace="CELERY").
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "redis://localhost:6379/0")
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULER = "goatbeat_celery.Scheduler"
CELERY_BEAT_SCHEDULE = {
    "heartbeat": {"task": "proj.heartbeat", "schedule": 30},
    "nightly-heartbeat": {
        "task": "proj.heartbeat",
        "schedule": crontab(hour=2, minute=30),
        "options": {"goatbeat": {"misfire_grace": 3600}},
    },
}
# goatbeat's settings take the same namespace. Left out, the database is DATABASES["default"]:
# CELERY_GOATBEAT_DATABASE_URL = "postgresql://beat@db/app"
CELERY_GOATBEAT_ALLOWED_TASKS = ["proj.*"]
