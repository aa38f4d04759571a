"""Backfills on the command line: backfill queues a request (or, with --dry-run, lists what
would run and stores nothing), backfills lists them with their progress, backfill-cancel stops
one; bad ranges and options are refused with a clear message."""

from __future__ import annotations

from datetime import datetime, timedelta

from goatbeat_celery.core.rules.backfill import BackfillMode, BackfillState
from goatbeat_celery.core.types.execution import idempotency_key
from goatbeat_celery.store import Store

from .conftest import Cli, field_lines, table_rows

M = timedelta(minutes=1)


def past_range(store: Store, minutes: int = 10) -> tuple[datetime, datetime]:
    """The last ``minutes`` whole minutes before the store's clock."""
    now = store.now()
    end = now.replace(second=0, microsecond=0) - M
    return end - (minutes - 1) * M, end


def test_backfill_queues_a_request_the_leader_drains(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    start, end = past_range(store)
    shown = cli.json("backfill", "poll", "--from", start.isoformat(), "--to", end.isoformat(),
                     "--mode", "all", "--newest-first", "--per-tick", "4")
    assert {key: shown[key] for key in ("schedule", "mode", "newest_first", "per_tick",
                                        "total", "state", "examined")} == {
        "schedule": "poll", "mode": "all", "newest_first": True, "per_tick": 4, "total": 10,
        "state": "active", "examined": 0}
    stored = store.get_backfill(shown["id"])
    assert (stored.start, stored.end, stored.mode) == (start, end, BackfillMode.ALL)
    # The schedule's own next run is untouched.
    assert cli.json("show", "poll")["next_run_at"] is not None


def test_backfill_says_what_it_queued(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    start, end = past_range(store, 3)
    output = cli.ok("backfill", "poll", "--from", start.isoformat(), "--to",
                    end.isoformat()).output
    assert "queued: 3 occurrences to look at (mode missing)" in output
    assert "backfills" in output


def test_a_dry_run_lists_the_runs_and_stores_nothing(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    start, end = past_range(store, 3)
    preview = cli.json("backfill", "poll", "--from", start.isoformat(), "--to",
                       end.isoformat(), "--dry-run")
    assert preview["total"] == 3
    assert [run["key"] for run in preview["runs"]] == [
        idempotency_key("poll", start + k * M) for k in range(3)]
    assert {run["reason"] for run in preview["runs"]} == {"no execution"}
    output = cli.ok("backfill", "poll", "--from", start.isoformat(), "--to", end.isoformat(),
                    "--dry-run").output
    assert "3 of 3 occurrences of 'poll' would run (mode missing)" in output
    assert [row["KEY"] for row in table_rows(output.split("\n", 1)[1])] == [
        idempotency_key("poll", start + k * M) for k in range(3)]
    assert store.list_backfills() == []


def test_backfills_lists_and_cancel_stops_one(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    start, end = past_range(store, 5)
    first = cli.json("backfill", "poll", "--from", start.isoformat(), "--to", end.isoformat())
    second = cli.json("backfill", "poll", "--from", start.isoformat(), "--to", end.isoformat(),
                      "--mode", "failed")
    rows = table_rows(cli.ok("backfills").output)
    assert [(row["ID"], row["MODE"], row["STATE"], row["EXAMINED"]) for row in rows] == [
        (str(second["id"]), "failed", "active", "0/5"),
        (str(first["id"]), "missing", "active", "0/5")]
    cancelled = cli.json("backfill-cancel", str(first["id"]))
    assert cancelled["state"] == "cancelled"
    assert store.get_backfill(first["id"]).state is BackfillState.CANCELLED
    assert [b["id"] for b in cli.json("backfills", "--active")] == [second["id"]]
    assert [b["id"] for b in cli.json("backfills", "--finished")] == [first["id"]]
    assert "is cancelled" in cli.ok("backfill-cancel", str(first["id"])).output


def test_bad_backfills_are_refused(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    start, end = past_range(store)
    future = (store.now() + timedelta(hours=1)).isoformat()
    assert "--to: must not be in the future" in cli.fails(
        "backfill", "poll", "--from", start.isoformat(), "--to", future).output
    assert "--to: must not be before start" in cli.fails(
        "backfill", "poll", "--from", end.isoformat(), "--to", start.isoformat()).output
    assert "has no zone" in cli.fails(
        "backfill", "poll", "--from", "2030-01-01T00:00:00", "--to", end.isoformat(),
        exit_code=2).output
    assert "no schedule named 'nope'" in cli.fails(
        "backfill", "nope", "--from", start.isoformat(), "--to", end.isoformat()).output
    assert "no backfill with id 999999" in cli.fails("backfill-cancel", "999999").output
    assert store.list_backfills() == []


def test_status_counts_the_active_backfills(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    assert "backfills" not in cli.ok("status").output
    assert cli.json("status")["active_backfills"] == []
    start, end = past_range(store, 3)
    first = cli.json("backfill", "poll", "--from", start.isoformat(), "--to", end.isoformat())
    second = cli.json("backfill", "poll", "--from", start.isoformat(), "--to", end.isoformat())
    assert field_lines(cli.ok("status").output)["backfills"].startswith("2 active")
    assert cli.json("status")["active_backfills"] == [first["id"], second["id"]]
