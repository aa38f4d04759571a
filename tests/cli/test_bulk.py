"""Bulk controls on the command line: ``pause``, ``resume`` and ``run-now`` with ``--tag`` or
several names, one ``--reason`` audited for each schedule, one line per schedule, exit 1 when
one was refused (the others are done), an empty selection a usage error."""

from __future__ import annotations

import json

from goatbeat_celery.core.types.audit import AuditAction
from goatbeat_celery.store import Store

from .conftest import Cli, table_rows


def add_three(cli: Cli) -> None:
    cli.ok("add", "etl-a", "feeds.poll", "--every", "1h", "--tag", "etl")
    cli.ok("add", "etl-b", "feeds.poll", "--every", "1h", "--tag", "etl")
    cli.ok("add", "report", "feeds.poll", "--every", "1h")


def test_pause_by_tag_pauses_each_with_the_reason_in_its_audit_entry(
        cli: Cli, store: Store) -> None:
    add_three(cli)
    result = cli.ok("pause", "--tag", "etl", "--reason", "warehouse migration")
    assert result.output.splitlines()[0] == "pause: 2 done, 0 refused"
    assert [(r["SCHEDULE"], r["OUTCOME"]) for r in table_rows(
        "\n".join(result.output.splitlines()[1:]))] == [("etl-a", "done"), ("etl-b", "done")]
    for name in ("etl-a", "etl-b"):
        assert not store.get_schedule(name).spec.enabled
        (entry, _) = store.audit_log(schedule_name=name)
        assert (entry.action, entry.reason) == (AuditAction.PAUSE, "warehouse migration")
    assert store.get_schedule("report").spec.enabled


def test_names_with_one_missing_exit_1_and_do_the_others(cli: Cli, store: Store) -> None:
    add_three(cli)
    result = cli("resume", "etl-a", "ghost", "--reason", "r", "--json")
    assert result.exit_code == 1
    assert '"refused"' in result.stdout
    cli.ok("pause", "etl-a", "report", "--until", "2030-01-01T00:00:00Z", "--reason", "r")
    assert store.get_schedule("report").paused_until is not None
    answer = cli("resume", "etl-a", "ghost", "--json")
    assert answer.exit_code == 1
    document = json.loads(answer.stdout)
    assert document["done"] == [{"name": "etl-a", "done": True, "reason": "resumed"}]
    assert document["refused"] == [{"name": "ghost", "done": False, "reason": "not found",
                                    "refusal": "not_found"}]


def test_run_now_by_tag_queues_one_run_each(cli: Cli, store: Store) -> None:
    add_three(cli)
    document = cli.json("run-now", "--tag", "etl", "--reason", "catch up")
    assert [o["name"] for o in document["done"]] == ["etl-a", "etl-b"]
    keys = [o["run_key"] for o in document["done"]]
    assert set(store.executions_by_key(keys)) == set(keys)


def test_no_selection_and_an_unknown_tag_are_refused_naming_the_option(cli: Cli) -> None:
    add_three(cli)
    assert "give NAME" in cli.fails("pause", exit_code=2).output
    refused = cli.fails("pause", "--tag", "nope").output
    assert "--tag" in refused and "no schedule carries the tag 'nope'" in refused
    refused = cli.fails("resume", "etl-a", "etl-b", "--tag", "etl").output
    assert "--tag" in refused and "not both" in refused
