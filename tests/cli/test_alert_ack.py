"""``alerts ack NAME`` and ``alerts silence NAME --until``: each open alert of the schedule
acknowledged (note, who, when) or silenced, audited on the schedule, shown by ``alerts``;
a schedule without an open alert, a past ``--until`` or a typo refused with nothing
changed; ``alerts [NAME] [--all]`` lists as before."""

from __future__ import annotations

from goatbeat_celery.core.rules.alerts import AlertChange, AlertRule
from goatbeat_celery.core.types.audit import AuditAction
from goatbeat_celery.store import Store

from .claims import TTL
from .conftest import Cli, table_rows


def raise_two(cli: Cli, store: Store) -> None:
    cli.ok("add", "report", "feeds.poll", "--every", "1h")
    cli.ok("add", "quiet", "feeds.poll", "--every", "1h")
    grant = store.acquire("default", "replica-a", TTL)
    assert grant is not None
    store.record_alerts([
        AlertChange(schedule_name="report", rule=rule, action="open", reason=f"{rule.value}!",
                    key="report:1") for rule in (AlertRule.FAILED, AlertRule.LATE)],
        lease=grant)


def test_ack_acknowledges_each_open_alert_and_alerts_shows_it(cli: Cli, store: Store) -> None:
    raise_two(cli, store)
    result = cli.ok("alerts", "ack", "report", "--note", "vendor ticket 42",
                    "--reason", "on call")
    assert result.stdout.count("acknowledged alert") == 2
    rows = table_rows(cli.ok("alerts").stdout)
    assert len(rows) == 2
    assert all(r["STATE"].startswith("open, acknowledged by os:") for r in rows)
    documents = cli.json("alerts", "report")
    assert {d["ack_note"] for d in documents} == {"vendor ticket 42"}
    assert all(d["acknowledged_by"].startswith("os:") for d in documents)
    entries = store.audit_log(schedule_name="report")
    assert [e.action for e in entries[:2]] == [AuditAction.ACKNOWLEDGE_ALERT] * 2
    assert entries[0].reason == "on call"


def test_silence_one_rule_until_an_instant(cli: Cli, store: Store) -> None:
    raise_two(cli, store)
    (silenced,) = cli.json("alerts", "silence", "report", "--rule", "late", "--until",
                           "2031-01-01T00:00:00Z")
    assert (silenced["rule"], silenced["silenced_until"]) == ("late",
                                                              "2031-01-01T00:00:00+00:00")
    states = {r["RULE"]: r["STATE"] for r in table_rows(cli.ok("alerts").stdout)}
    assert states == {"failed": "open", "late": "open, silenced until 2031-01-01T00:00:00Z"}
    (entry, *_) = store.audit_log(schedule_name="report")
    assert entry.action == AuditAction.SILENCE_ALERT
    assert entry.changes["silenced_until"] == (None, "2031-01-01T00:00:00+00:00")


def test_refusals_name_what_is_wrong_and_change_nothing(cli: Cli, store: Store) -> None:
    raise_two(cli, store)
    assert "has no open alert" in cli.fails("alerts", "ack", "quiet").output
    assert "no schedule named 'reprot'" in cli.fails("alerts", "ack", "reprot").output
    past = cli.fails("alerts", "silence", "report", "--until", "2020-01-01T00:00:00Z").output
    assert "--until" in past and "not after now" in past
    assert "Missing option '--until'" in cli.fails("alerts", "silence", "report",
                                                   exit_code=2).output
    assert all(d["silenced_until"] is None and d["acknowledged_at"] is None
               for d in cli.json("alerts"))
    # The list keeps its old forms.
    assert len(table_rows(cli.ok("alerts", "report", "--all").stdout)) == 2
