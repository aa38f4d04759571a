"""examples/django works as its README says: a copy of it, on its SQLite database, migrated
(Django's tables, then goatbeat's), checked by Django and by goatbeat, its beat syncing
``CELERY_BEAT_SCHEDULE``, its admin listing those schedules and one added through the API.
Every command runs in a subprocess of the copy, as a reader would run it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import goatbeat_celery
from tests.conftest import stop_process

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "django"
BIN = Path(sys.executable).parent
#: The directory goatbeat_celery is imported from here: the copy runs the same code (an
#: editable install may name another checkout).
PACKAGE_ROOT = Path(goatbeat_celery.__file__).resolve().parents[1]
TIMEOUT = 120
#: Beat starts, takes the lease and syncs the config in a few seconds; 60 s covers a busy
#: 2-core machine.
BEAT_TIMEOUT = 60

ADMIN = """
from django.contrib.auth.models import User
from django.test import Client
from django.test.utils import setup_test_environment

from goatbeat_celery import Schedules
from proj.celery import app

with Schedules.from_app(app) as schedules:
    schedules.create("report", "proj.heartbeat", cron="0 7 * * mon-fri")
    schedules.create("weekly", "proj.heartbeat", cron="0 8 * * mon", tags=["mail", "weekly"],
                     description="the weekly run", overlap="skip", max_runs=3)

setup_test_environment()  # responses carry their context
client = Client(HTTP_HOST="localhost")
client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
page = client.get("/admin/goatbeat/schedule/")
assert page.status_code == 200, page.status_code
text = page.content.decode()
for expected in ("heartbeat", "nightly-heartbeat", "report", "config (beat_schedule)",
                 "mail, weekly"):
    assert expected in text, expected
# Tags and the run policies read from SQLite's JSON and columns.
page = client.get("/admin/goatbeat/schedule/?tag=weekly")
assert [row.pk for row in page.context["cl"].result_list] == ["weekly"], page.context["cl"]
form = client.get("/admin/goatbeat/schedule/weekly/change/").context["adminform"].form
assert form.initial["tags"] == "mail, weekly", form.initial
assert (form.initial["overlap"], form.initial["max_runs"]) == ("skip", 3), form.initial
print("admin ok")
"""


def environment() -> dict[str, str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           # The example's settings read the broker from here: Celery's in-process transport.
           "CELERY_BROKER_URL": "memory://"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    # The copy's proj package and goatbeat_celery under test, not this checkout's tests.
    env["PYTHONPATH"] = str(PACKAGE_ROOT)
    return env


def run(directory: Path, *command: str, stdin: str | None = None) -> str:
    result = subprocess.run(list(command), cwd=directory, env=environment(), input=stdin,
                            text=True, capture_output=True, timeout=TIMEOUT, check=False)
    assert result.returncode == 0, f"$ {' '.join(command)}\n{result.stdout}{result.stderr}"
    return result.stdout


def beat_until(directory: Path, printed: str) -> str:
    """Run ``celery -A proj beat`` until it prints ``printed``, then stop it as Ctrl-C would;
    what it printed."""
    log = directory / "beat.log"
    with log.open("wb") as sink:
        process = subprocess.Popen([str(BIN / "celery"), "-A", "proj", "beat", "-l", "INFO"],
                                   cwd=directory, env=environment(), stdout=sink,
                                   stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + BEAT_TIMEOUT
        while printed not in log.read_text() and process.poll() is None:
            assert time.monotonic() < deadline, f"beat did not print {printed!r}:\n" + \
                log.read_text()
            time.sleep(0.2)
    finally:
        stop_process(process, timeout=20)
    text = log.read_text()
    assert printed in text, text
    return text


def test_the_example_project_migrates_checks_and_shows_its_schedules(tmp_path: Path) -> None:
    project = tmp_path / "example"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("db.sqlite3",
                                                                     "__pycache__"))
    python = str(BIN / "python")

    run(project, python, "manage.py", "migrate", "--verbosity", "0")
    assert "upgraded from base" in run(project, str(BIN / "celery"), "-A", "proj",
                                       "goatbeat", "migrate")
    assert "no issues" in run(project, python, "manage.py", "check", "--database", "default")
    checked = run(project, str(BIN / "celery"), "-A", "proj", "goatbeat", "check")
    assert "2 valid entries" in checked and "all checks passed" in checked, checked
    beat_until(project, "config sync: 3 created")
    assert "admin ok" in run(project, python, "manage.py", "shell", stdin=ADMIN)
