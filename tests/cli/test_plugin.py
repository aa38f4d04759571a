"""The plug-in point: Celery finds ``goatbeat`` through the ``celery.commands`` entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points

from celery.bin.celery import celery
from click.testing import CliRunner

from goatbeat_celery.cli import goatbeat
from goatbeat_celery.store import Store

from .conftest import Cli, instant


def test_the_entry_point_names_the_goatbeat_group() -> None:
    (point,) = [p for p in entry_points(group="celery.commands") if p.name == "goatbeat"]

    assert point.load() is goatbeat


def test_celery_lists_goatbeat_among_its_commands() -> None:
    result = CliRunner().invoke(celery, ["--help"])

    assert result.exit_code == 0
    assert celery.commands["goatbeat"] is goatbeat
    assert "goatbeat" in result.stdout


def test_goatbeat_help_lists_every_command(cli: Cli) -> None:
    output = cli.ok("--help").stdout

    for command in ("status", "list", "show", "add", "edit", "pause", "resume", "remove",
                    "run-now", "history", "migrate", "check"):
        assert f"  {command} " in output, command


def test_the_group_outside_celery_asks_to_be_run_through_celery() -> None:
    result = CliRunner().invoke(goatbeat, ["list"])

    assert result.exit_code == 2
    assert "celery -A <your app> goatbeat" in result.stderr
    assert "-A proj" not in result.stderr


def test_list_json_in_a_real_celery_process(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60", "--queue", "feeds")

    completed = subprocess.run(
        [sys.executable, "-m", "celery", "-A", cli.module, "goatbeat", "list", "--json"],
        cwd=cli.directory, env=cli.environment(), capture_output=True, text=True, timeout=120,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr
    (listed,) = json.loads(completed.stdout)
    assert (listed["name"], listed["task"], listed["options"]) == (
        "poll", "feeds.poll", {"queue": "feeds"})
    assert instant(listed["next_run_at"]) == store.get_schedule("poll").next_run_at
