"""Settings of the test project: the admin, django-celery-beat and goatbeat's Django app, on
the PostgreSQL server of GOATBEAT_TEST_PG_URL (the tests point NAME at a fresh database)."""

from __future__ import annotations

import os

from sqlalchemy.engine import make_url

_server = make_url(os.environ.get("GOATBEAT_TEST_PG_URL",
                                  "postgresql+psycopg://postgres@127.0.0.1:5432/test"))

SECRET_KEY = "goatbeat-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "tests.django.testproj.urls"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_celery_beat",
    "goatbeat_celery.contrib.django",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
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
# The admin's CSS and JavaScript, served by the live server of the browser tests.
STATIC_URL = "static/"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _server.database or "test",
        "USER": _server.username or "",
        "PASSWORD": _server.password or "",
        "HOST": _server.host or "",
        "PORT": str(_server.port or ""),
    },
}
# Celery reads these through config_from_object("django.conf:settings", namespace="CELERY").
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_URL = "memory://"
# A goatbeat setting other than its default (30s), which tests/django/test_settings.py finds in
# the project's loaded settings and in `celery -A ... goatbeat check`.
CELERY_GOATBEAT_LEASE_TTL = "45s"
