"""``audit`` and ``sync --plan`` as an operator runs them: every change made on the command line
is in the audit log with the OS user and the reason given; ``sync --plan`` prints what the
app's beat_schedule would change and exits 0 for no change, 2 for changes."""

from __future__ import annotations

import getpass
import importlib
import json
import sys
from datetime import timedelta
from typing import Any

from goatbeat_celery import config as config_module
from goatbeat_celery.cli.audit import EXIT_CHANGES
from goatbeat_celery.core.types.spec import SyncEntry
from goatbeat_celery.store import Store

from .conftest import Cli, table_rows

ME = f"os:{getpass.getuser()}"
ENTRIES = {"report": {"task": "proj.tasks.report", "schedule": 60},
           "cleanup": {"task": "proj.tasks.cleanup", "schedule": 3600}}


def test_every_change_on_the_command_line_is_in_the_audit_log(cli: Cli) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "1h", "--reason", "vendor feed")
    cli.ok("edit", "poll", "--every", "30m")
    cli.ok("pause", "poll", "--note", "vendor down")
    cli.ok("resume", "poll", "--reason", "vendor back")
    cli.ok("run-now", "poll", "--reason", "catch up")
    cli.ok("remove", "poll", "--yes", "--reason", "replaced")

    log = cli.json("audit", "poll")
    assert [(e["action"], e["actor"], e["reason"]) for e in log] == [
        ("delete", ME, "replaced"), ("run_now", ME, "catch up"), ("resume", ME, "vendor back"),
        ("pause", ME, "vendor down"), ("edit", ME, None), ("create", ME, "vendor feed")]
    assert log[4]["changes"] == {"trigger": [{"kind": "interval", "every": 3600.0},
                                             {"kind": "interval", "every": 1800.0}]}
    assert log[3]["changes"] == {"enabled": [True, False], "paused_reason": [None, "vendor down"]}
    assert log[1]["changes"]["run"][1].startswith("poll:")
    assert log[0]["schedule"] == "poll" and log[0]["at"].endswith("+00:00")

    rows = table_rows(cli.ok("audit", "poll").stdout)
    assert [row["ACTION"] for row in rows] == ["delete", "run_now", "resume", "pause", "edit",
                                               "create"]
    assert rows[4]["CHANGES"].startswith("trigger: ")
    assert rows[0]["REASON"] == "replaced"


def test_audit_pages_on_and_lists_every_schedule_without_a_name(cli: Cli) -> None:
    for name in ("a", "b", "c"):
        cli.ok("add", name, "proj.tasks.tick", "--every", "60")
    first = cli.ok("audit", "--limit", "2")
    rows = table_rows(first.stdout.split("older entries")[0])
    assert [row["SCHEDULE"] for row in rows] == ["c", "b"]
    before = first.stdout.split("--before ")[1].strip()
    older = cli.json("audit", "--limit", "2", "--before", before)
    assert [e["schedule"] for e in older] == ["a"]
    assert "no changes recorded for 'nothing'" in cli.ok("audit", "nothing").stdout


def test_a_bad_reason_names_the_option_and_changes_nothing(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "1h")
    result = cli.fails("pause", "poll", "--reason", "x" * 501)
    assert "--reason: 501 characters" in result.output
    assert store.get_schedule("poll").spec.enabled
    assert [e["action"] for e in cli.json("audit", "poll")] == ["create"]


def _sync_as_beat(cli: Cli, store: Store, **prune: Any) -> None:
    """Apply the app's beat_schedule as a leader's config sync does."""
    sys.modules.pop(cli.module, None)
    app = importlib.import_module(cli.module).app
    specs = config_module.synced_schedules(app, config_module.load(app))
    grant = store.acquire("beat", "replica", timedelta(seconds=60))
    assert grant is not None
    store.sync_config([SyncEntry(spec=spec, next_occurrence_at=None, next_run_at=None)
                       for spec in specs], lease=grant, **prune)


def test_sync_plan_exits_2_for_changes_and_0_for_none(cli: Cli, store: Store) -> None:
    cli.configure(beat_schedule=ENTRIES, result_expires=None)
    planned = cli.fails("sync", "--plan", exit_code=EXIT_CHANGES)
    assert "+ 'cleanup'  create  task: proj.tasks.cleanup" in planned.stdout
    assert "+ 'report'  create" in planned.stdout
    assert "2 changes to postgresql" in planned.stdout and "(2 to create), 0 unchanged" in (
        planned.stdout)
    assert store.list_schedules() == []  # a plan changes nothing

    _sync_as_beat(cli, store)
    quiet = cli.ok("sync", "--plan")
    assert "no changes to postgresql" in quiet.stdout and "2 unchanged" in quiet.stdout

    cli.configure(beat_schedule={"report": {**ENTRIES["report"], "schedule": 120}})
    result = cli.fails("sync", "--plan", "--json", exit_code=EXIT_CHANGES)
    plan = json.loads(result.stdout)
    assert plan["changes"] == [
        {"name": "report", "action": "edit", "reason": None,
         "changes": {"trigger": [{"kind": "interval", "every": 60.0},
                                 {"kind": "interval", "every": 120.0}]}},
        {"name": "cleanup", "action": "disable", "reason": "removed from beat_schedule",
         "changes": {"enabled": [True, False]}}]
    assert plan["unchanged"] == [] and plan["conflicts"] == []


def test_sync_plan_shows_the_deletions_of_config_prune(cli: Cli, store: Store) -> None:
    cli.configure(beat_schedule=ENTRIES, result_expires=None)
    _sync_as_beat(cli, store)
    cli.configure(beat_schedule={"report": ENTRIES["report"]})
    _sync_as_beat(cli, store)  # cleanup disabled: out of config
    assert cli.ok("sync", "--plan").stdout.startswith("no changes")

    cli.configure(goatbeat_config_prune=True, goatbeat_config_prune_grace=0)
    planned = cli.fails("sync", "--plan", exit_code=EXIT_CHANGES)
    assert "x 'cleanup'  delete (removed from beat_schedule; goatbeat_config_prune)" in (
        planned.stdout)
    cli.configure(goatbeat_config_prune_grace=3600)
    assert cli.ok("sync", "--plan").stdout.startswith("no changes")


def test_sync_plan_warns_of_an_entry_the_api_owns(cli: Cli) -> None:
    cli.ok("add", "report", "proj.tasks.report", "--every", "60")
    cli.configure(beat_schedule={"report": ENTRIES["report"]}, result_expires=None)
    result = cli.ok("sync", "--plan")
    assert "config entry 'report' is left alone" in result.output


def test_sync_without_plan_says_what_to_give(cli: Cli) -> None:
    result = cli.fails("sync", exit_code=2)
    assert "give --plan" in result.output
