"""goatbeat's settings in a Django project: the CELERY_ namespace, and Django's default
database when goatbeat_database_url is left out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from goatbeat_celery.store import django_databases as databases

ROOT = Path(__file__).resolve().parents[2]


def project_app() -> Any:
    from tests.django.testproj.celery import app

    return app


def test_the_default_database_is_used_when_goatbeat_database_url_is_left_out(
        django_db: str) -> None:
    from goatbeat_celery import Schedules

    with Schedules.from_app(project_app()) as schedules:
        schedules.create("poll", "proj.poll", every=30)
        url = schedules.config.database_url
    assert make_url(url).database == make_url(django_db).database
    assert make_url(url).drivername == "postgresql+psycopg"


def test_celery_goatbeat_database_url_wins_over_databases(django_db: str,
                                                          tmp_path: Path) -> None:
    from django.test import override_settings

    from goatbeat_celery import Schedules

    target = f"sqlite:///{tmp_path / 'beat.sqlite3'}"
    with override_settings(CELERY_GOATBEAT_DATABASE_URL=target):
        app = project_app()
        app.conf.clear()  # Celery caches what it read from Django's settings
        app.config_from_object("django.conf:settings", namespace="CELERY")
        try:
            with Schedules.from_app(app) as schedules:
                schedules.create("poll", "proj.poll", every=30)
                assert schedules.config.database_url == target
        finally:
            app.conf.clear()
            app.config_from_object("django.conf:settings", namespace="CELERY")
    assert (tmp_path / "beat.sqlite3").exists()


def test_a_postgres_entry_becomes_a_quoted_psycopg_url() -> None:
    url = databases.url_for({
        "ENGINE": "django.db.backends.postgresql", "NAME": "app", "USER": "beat@corp",
        "PASSWORD": "p@ss:w/rd", "HOST": "db.internal", "PORT": "5433",
        "OPTIONS": {"sslmode": "require", "pool": True},
    })
    parsed = make_url(url)
    assert parsed.drivername == "postgresql+psycopg"
    assert (parsed.username, parsed.password) == ("beat@corp", "p@ss:w/rd")
    assert (parsed.host, parsed.port, parsed.database) == ("db.internal", 5433, "app")
    assert dict(parsed.query) == {"sslmode": "require"}


def test_a_unix_socket_host_is_passed_as_the_host_parameter() -> None:
    url = databases.url_for({"ENGINE": "django.db.backends.postgresql", "NAME": "app",
                             "HOST": "/var/run/postgresql"})
    parsed = make_url(url)
    assert parsed.host is None
    assert parsed.query["host"] == "/var/run/postgresql"


def test_a_sqlite_entry_becomes_an_absolute_path(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    url = databases.url_for({"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"})
    assert url == f"sqlite:///{tmp_path.resolve() / 'db.sqlite3'}"


@pytest.mark.parametrize("entry", [
    {"ENGINE": "django.db.backends.oracle", "NAME": "app"},
    {"ENGINE": "django.db.backends.mysql", "NAME": "app",
     "OPTIONS": {"read_default_file": "/etc/mysql/my.cnf"}},
    {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
], ids=["oracle", "mysql-option-file", "sqlite-memory"])
def test_a_default_database_goatbeat_cannot_use_is_a_problem_not_a_fallback(
        django_db: str, entry: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from django.conf import settings

    from goatbeat_celery import ConfigurationError
    from goatbeat_celery.config import load

    # Only the entry goatbeat reads is swapped: Django's open connection keeps its own.
    monkeypatch.setitem(settings.DATABASES, "default", entry)
    with pytest.raises(ConfigurationError) as caught:
        load(project_app(), with_schedules=False)
    assert any("CELERY_GOATBEAT_DATABASE_URL" in p for p in caught.value.problems)


def test_without_the_app_installed_django_settings_are_not_consulted(django_db: str) -> None:
    from django.test import override_settings

    from goatbeat_celery.config import DEFAULT_DATABASE_URL, load

    installed = ["django.contrib.contenttypes", "django.contrib.auth"]
    with override_settings(INSTALLED_APPS=installed):
        loaded = load(project_app(), with_schedules=False)
    assert loaded.config.database_url == DEFAULT_DATABASE_URL


def test_the_app_is_found_by_its_appconfig_path_too() -> None:
    assert databases.is_installed(["goatbeat_celery.contrib.django.apps.GoatbeatConfig"])
    assert not databases.is_installed(["goatbeat_celery.contrib.djangoish"])


def test_same_database_ignores_driver_and_password() -> None:
    assert databases.same_database("postgres://u@db/app", "postgresql+psycopg://u:pw@db:5432/app")
    assert not databases.same_database("postgresql://u@db/app", "postgresql://u@db/other")


def test_a_goatbeat_setting_in_django_settings_reaches_the_projects_app(django_db: str) -> None:
    """The test project sets CELERY_GOATBEAT_LEASE_TTL = "45s" (the default is 30s)."""
    from goatbeat_celery.config import load
    from goatbeat_celery.contrib.django import integration

    assert load(project_app(), with_schedules=False).config.settings.lease_ttl == timedelta(
        seconds=45)
    # The admin's and the management commands' own app reads it the same way.
    assert integration.goatbeat_config().config.settings.lease_ttl == timedelta(seconds=45)


def test_goatbeat_check_of_the_django_project_reports_the_setting(django_db: str,
                                                                  tmp_path: Path) -> None:
    """``celery -A proj goatbeat check --json`` in a process of its own, where Celery's Django
    fixup loads the project's settings from DJANGO_SETTINGS_MODULE."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.django.testproj.settings",
           # The project's settings take their database from this URL.
           "GOATBEAT_TEST_PG_URL": django_db,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                       os.environ.get("PYTHONPATH")]))}
    # Importing Celery and Django takes a few seconds; 120 s covers a busy 2-core machine.
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "tests.django.testproj.celery", "goatbeat",
         "check", "--json"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    checks = {check["name"]: check for check in json.loads(done.stdout)["checks"]}
    assert "(ttl 45s, renewed every 10s)" in checks["settings"]["detail"], checks
    assert make_url(django_db).database in checks["database"]["detail"], checks
