"""goatbeat's Django app on MySQL / MariaDB: a ``DATABASES`` entry of Django's MySQL backend
becomes goatbeat's ``mysql+pymysql://`` URL, Django's migrations (its own and goatbeat's) apply
there beside goatbeat's schema, and the app's models read what goatbeat wrote.

Django runs in a process of its own, with settings of its own (the other tests here configure
Django on PostgreSQL in this process). Its MySQL backend is given PyMySQL as its driver
(``pymysql.install_as_MySQLdb()``), which goatbeat installs; mysqlclient would do the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL

from goatbeat_celery.store.django_databases import url_for
from tests.conftest import _admin_engine

pytestmark = pytest.mark.mysql

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import io, json, os, sys
from datetime import timedelta

import pymysql
pymysql.install_as_MySQLdb()

import django
from django.conf import settings

settings.configure(
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth",
                    "goatbeat_celery.contrib.django"],
    DATABASES={"default": json.loads(os.environ["ENTRY"])},
    USE_TZ=True, TIME_ZONE="UTC", SECRET_KEY="test",
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
)
django.setup()

from django.apps import apps
from django.core.management import call_command

from goatbeat_celery.api import Schedules
from goatbeat_celery.store import open_store, upgrade_schema
from goatbeat_celery.store.django_databases import default_database_url

problems = []
url = default_database_url(problems)
assert not problems, problems
upgrade_schema(url)
out = io.StringIO()
call_command("migrate", verbosity=1, interactive=False, stdout=out)
store = open_store(url)
schedules = Schedules(store)
schedules.create("nightly", "proj.tasks.nightly", every=timedelta(hours=1))
Schedule = apps.get_model("goatbeat", "schedule")
row = Schedule.objects.get(name="nightly")
store.close()
call_command("migrate", "goatbeat", "zero", verbosity=0, interactive=False)
call_command("migrate", verbosity=0, interactive=False)
print(json.dumps({"url": url, "migrate": out.getvalue(), "task": row.task,
                  "trigger": row.trigger, "next_run_at": row.next_run_at.isoformat()}))
'''


@pytest.fixture
def mysql_database(mysql_server_url: URL) -> Iterator[str]:
    """An empty database on the MySQL / MariaDB server, dropped afterwards; its name."""
    name = f"goatbeat_dj_{uuid.uuid4().hex[:10]}"
    admin = _admin_engine(mysql_server_url)
    try:
        with admin.connect() as connection:
            connection.execute(sa.text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
        yield name
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f"DROP DATABASE IF EXISTS `{name}`"))
        admin.dispose()


def test_a_mysql_entry_becomes_a_pymysql_url_with_its_user_quoted() -> None:
    url = url_for({"ENGINE": "django.db.backends.mysql", "NAME": "app", "USER": "beat",
                   "PASSWORD": "p@ss/word", "HOST": "db.internal", "PORT": "3307"})
    assert url == "mysql+pymysql://beat:p%40ss%2Fword@db.internal:3307/app"
    socket = url_for({"ENGINE": "django.db.backends.mysql", "NAME": "app",
                      "HOST": "/run/mysqld/mysqld.sock"})
    assert sa.make_url(socket).query["unix_socket"] == "/run/mysqld/mysqld.sock"


def test_django_migrations_apply_on_mysql_and_the_models_read_what_goatbeat_wrote(
        mysql_server_url: URL, mysql_database: str) -> None:
    entry = {"ENGINE": "django.db.backends.mysql", "NAME": mysql_database,
             "USER": mysql_server_url.username or "", "PASSWORD": mysql_server_url.password or "",
             "HOST": mysql_server_url.host or "", "PORT": str(mysql_server_url.port or "")}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False,
                          env={**os.environ, "ENTRY": json.dumps(entry)})
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["url"].startswith("mysql+pymysql://")
    assert found["url"].endswith(f"/{mysql_database}")
    assert "Applying goatbeat.0001_initial... OK" in found["migrate"]
    assert found["task"] == "proj.tasks.nightly"
    assert found["trigger"] == {"kind": "interval", "every": 3600.0}
    assert found["next_run_at"].endswith("+00:00")
