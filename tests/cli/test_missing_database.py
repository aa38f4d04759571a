"""Only ``migrate`` creates a database: every other command refuses a SQLite file that does not
exist, saying which app (or that no -A was given) and which URL it used, and what to do.

Opening a SQLite store creates its file, so without this check ``celery goatbeat status`` in an
empty folder would make a stray ``goatbeat.sqlite3`` and report on it as if all were well.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import Cli

CONFIGURATION_ERROR = 1  # the exit status of every invalid setting

#: Every command that reads or writes the schedules, with what it needs to run.
COMMANDS = [
    ("status",), ("list",), ("show", "poll"), ("add", "poll", "feeds.poll", "--every", "60"),
    ("edit", "poll", "--every", "30"), ("pause", "poll"), ("resume", "poll"),
    ("remove", "poll", "--yes"), ("run-now", "poll"), ("history", "poll"),
]


def celery_without_app(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``celery goatbeat …`` with no -A, in ``directory``, in a process of its own (so Celery's
    default app is the one a user gets, not one a test made current)."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("APP", "CELERY_APP", "CELERY_CONFIG_MODULE")}
    return subprocess.run([sys.executable, "-m", "celery", "goatbeat", *args], cwd=directory,
                          env=environment, capture_output=True, text=True, timeout=60)


def test_status_without_an_app_in_an_empty_folder_creates_nothing(tmp_path: Path) -> None:
    result = celery_without_app(tmp_path, "status")

    assert result.returncode == CONFIGURATION_ERROR, result.stdout + result.stderr
    assert list(tmp_path.iterdir()) == []
    assert "no -A given" in result.stderr
    assert "sqlite:///goatbeat.sqlite3" in result.stderr
    assert f"goatbeat.sqlite3 does not exist in {tmp_path}" in result.stderr
    assert "celery -A <your app> goatbeat migrate" in result.stderr
    assert result.stdout == ""


def test_add_without_an_app_in_an_empty_folder_adds_nothing(tmp_path: Path) -> None:
    result = celery_without_app(tmp_path, "add", "foo", "bar.baz", "--every", "60")

    assert result.returncode == CONFIGURATION_ERROR, result.stdout + result.stderr
    assert list(tmp_path.iterdir()) == []
    assert "no -A given" in result.stderr and "added" not in result.stdout


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_but_migrate_refuses_a_missing_sqlite_file(
    cli_for: Any, tmp_path: Path, command: tuple[str, ...]
) -> None:
    path = tmp_path / "data" / "beat.db"
    path.parent.mkdir()
    cli: Cli = cli_for(f"sqlite:///{path}")

    result = cli.fails(*command, exit_code=CONFIGURATION_ERROR)

    assert not path.exists()
    assert f"app {cli.module!r} has goatbeat_database_url sqlite:///{path}" in result.stderr
    assert f"the SQLite file {path} does not exist;" in result.stderr
    assert f"`celery -A {cli.module} goatbeat migrate`" in result.stderr


def test_migrate_creates_the_file_and_then_the_commands_work(cli_for: Any,
                                                             tmp_path: Path) -> None:
    path = tmp_path / "beat.db"
    cli: Cli = cli_for(f"sqlite:///{path}")
    cli.fails("list")

    cli.ok("migrate")
    cli.ok("add", "poll", "feeds.poll", "--every", "60")

    assert path.exists()
    assert [s["name"] for s in cli.json("list")] == ["poll"]


def test_an_app_without_a_database_url_says_the_default_is_used(
    cli_for: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cli: Cli = cli_for("unused")
    cli.conf.pop("goatbeat_database_url")
    cli.configure()

    result = cli.fails("status", exit_code=CONFIGURATION_ERROR)

    assert (f"app {cli.module!r} sets no goatbeat_database_url, so the default "
            "sqlite:///goatbeat.sqlite3 is used") in result.stderr
    assert f"goatbeat.sqlite3 does not exist in {tmp_path}" in result.stderr
    assert not (tmp_path / "goatbeat.sqlite3").exists()


def test_the_url_in_the_message_is_masked(cli_for: Any, tmp_path: Path) -> None:
    cli: Cli = cli_for(f"sqlite:///{tmp_path}/beat.db?password=hunter2")

    result = cli.fails("list", exit_code=CONFIGURATION_ERROR)

    assert "password=***" in result.stderr and "hunter2" not in result.output


def test_check_names_the_app_for_a_missing_file(cli_for: Any, tmp_path: Path) -> None:
    path = tmp_path / "beat.db"
    cli: Cli = cli_for(f"sqlite:///{path}")

    result = cli("check", "--json")
    detail = {c["name"]: c for c in json.loads(result.stdout)["checks"]}["database"]

    assert detail["status"] == "fail"
    assert f"app {cli.module!r} has goatbeat_database_url" in detail["detail"]
    assert f"`celery -A {cli.module} goatbeat migrate`" in detail["detail"]
    assert not path.exists()


def test_migrate_without_an_app_warns_which_database_it_creates(tmp_path: Path) -> None:
    result = celery_without_app(tmp_path, "migrate")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning: no -A given: migrating the database of Celery's default app " \
           "(sqlite:///goatbeat.sqlite3)" in result.stderr
    assert (tmp_path / "goatbeat.sqlite3").exists()
