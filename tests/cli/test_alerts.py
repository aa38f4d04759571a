"""``alerts`` lists what the leader raised, open ones first, as a table or JSON; warns where the
workers do not track runs; and the add/edit options set a schedule's own thresholds."""

from __future__ import annotations

from goatbeat_celery.core.rules.alerts import AlertChange, AlertRule
from goatbeat_celery.store import Store

from .claims import TTL
from .conftest import Cli, table_rows


def raise_alerts(store: Store) -> None:
    grant = store.acquire("default", "replica-a", TTL)
    assert grant is not None
    store.record_alerts([
        AlertChange(schedule_name="report", rule=AlertRule.FAILED, action="open",
                    reason="3 runs failed in a row (the last, report:1: ValueError: boom)",
                    key="report:1"),
        AlertChange(schedule_name="sync", rule=AlertRule.LOST, action="open",
                    reason="run sync:1 lost: worker silent for 60s", key="sync:1")],
        lease=grant)
    store.record_alerts([AlertChange(schedule_name="sync", rule=AlertRule.LOST,
                                     action="resolve", reason="")], lease=grant)


def test_alerts_lists_the_open_ones_and_with_all_the_resolved_after(cli: Cli,
                                                                   store: Store) -> None:
    raise_alerts(store)

    (row,) = table_rows(cli.ok("alerts").stdout)
    assert (row["SCHEDULE"], row["RULE"], row["STATE"], row["COUNT"]) == (
        "report", "failed", "open", "1")
    assert [(r["SCHEDULE"], r["STATE"]) for r in table_rows(cli.ok("alerts", "--all").stdout)] \
        == [("report", "open"), ("sync", "resolved")]
    assert cli.json("alerts", "sync") == []
    (resolved,) = cli.json("alerts", "sync", "--all")
    assert {key: resolved[key] for key in ("schedule", "rule", "state", "count", "key")} == {
        "schedule": "sync", "rule": "lost", "state": "resolved", "count": 1, "key": "sync:1"}
    assert resolved["resolved_at"] is not None


def test_alerts_says_none_and_warns_where_runs_are_not_tracked(cli: Cli) -> None:
    result = cli.ok("alerts")
    assert result.stdout == "no open alerts\n"
    assert "overrun and silent are not judged" in result.stderr
    cli.configure(goatbeat_track_runs=True)
    assert cli.ok("alerts").stderr == ""


def test_add_and_edit_set_the_thresholds_and_show_prints_them(cli: Cli) -> None:
    cli.ok("add", "report", "proj.report", "--every", "60", "--alert-silent", "1h",
           "--max-runtime", "90s", "--alert-failures", "2")
    shown = cli.json("show", "report")
    assert (shown["alert_silent"], shown["max_runtime"], shown["alert_failures"],
            shown["effective_alert_late"]) == (3600.0, 90.0, 2, None)
    cli.ok("edit", "report", "--alert-late", "30s")
    assert cli.json("show", "report")["alert_late"] == 30.0
    refused = cli.fails("edit", "report", "--alert-failures", "21")
    assert "alert-failures" in refused.output
