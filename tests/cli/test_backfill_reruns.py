"""What became of a backfill and its failed occurrences run again, on the command line:
backfill-show counts its runs by outcome and names the command that re-runs the failed ones,
backfill-rerun-failed queues them under new keys (refused when nothing failed); revert undoes a
recorded edit, refused for what is not an edit or once the schedule moved in its fields."""

from __future__ import annotations

from datetime import timedelta

from goatbeat_celery.core.rules.backfill import BackfillRun, BackfillStep
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.types.execution import ExecutionState, idempotency_key
from goatbeat_celery.store import Store

from .conftest import Cli, field_lines, leader, table_rows

M = timedelta(minutes=1)


def ran(store: Store, key: str, outcome: RunOutcome) -> None:
    store.record_runs([RunEvent.started(key, run="r1", worker="celery@a", age=M * 0)])
    store.record_runs([RunEvent.finished(key, run="r1", worker="celery@a", age=M * 0,
                                         outcome=outcome)])


def drained(cli: Cli, store: Store) -> tuple[int, list[str]]:
    """A backfill of poll's last three minutes the leader drained: the first run
    succeeded, the second failed, the third was sent and not started yet."""
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    end = store.now().replace(second=0, microsecond=0) - M
    points = [end - 2 * M, end - M, end]
    shown = cli.json("backfill", "poll", "--from", points[0].isoformat(), "--to",
                     end.isoformat())
    keys = [idempotency_key("poll", p) for p in points]
    store.claim_backfill(BackfillStep(
        backfill_id=shown["id"], schedule_name="poll", examined_before=0, examined=3,
        cursor=end, done=True, runs=tuple(BackfillRun(occurrence_at=p, key=k, reason="")
                                          for p, k in zip(points, keys, strict=True))),
        lease=leader(store))
    store.mark_submitted(keys)
    ran(store, keys[0], RunOutcome.SUCCEEDED)
    ran(store, keys[1], RunOutcome.FAILED)
    return shown["id"], [p.isoformat() for p in points]


def test_backfill_show_counts_its_runs_by_outcome(cli: Cli, store: Store) -> None:
    backfill_id, points = drained(cli, store)
    shown = cli.json("backfill-show", str(backfill_id))
    assert (shown["id"], shown["state"], shown["claimed"]) == (backfill_id, "done", 3)
    assert shown["outcomes"] == {"runs": {"succeeded": 1, "failed": 1, "submitted": 1},
                                 "not_run": 0, "to_examine": 0, "not_recorded": 0,
                                 "reruns": [], "failed": [points[1]]}
    output = cli.ok("backfill-show", str(backfill_id)).output
    lines = field_lines(output)
    assert lines["runs"] == "1 succeeded, 1 failed, 1 submitted"
    assert lines["failed now"].startswith("1 occurrences whose latest run failed")
    assert f"backfill-rerun-failed {backfill_id}` runs the 1 failed ones again" in output


def test_backfill_rerun_failed_queues_them_under_new_keys(cli: Cli, store: Store) -> None:
    backfill_id, points = drained(cli, store)
    rerun = cli.json("backfill-rerun-failed", str(backfill_id), "--reason", "db was down")
    key = f"{idempotency_key('poll', store.get_backfill(backfill_id).end - M)}" \
          f":backfill-{backfill_id}-rerun-1"
    assert rerun == {"backfill": backfill_id, "schedule": "poll", "round": 1,
                     "runs": [{"occurrence_at": points[1], "key": key}]}
    assert store.executions_by_key([key])[key].state is ExecutionState.CLAIMED
    audit = cli.json("audit", "poll", "--limit", "1")[0]
    assert (audit["action"], audit["reason"], audit["changes"]) == (
        "rerun", "db was down", {"backfill": [None, backfill_id], "round": [None, 1],
                                 "occurrences": [None, 1]})
    shown = cli.json("backfill-show", str(backfill_id))["outcomes"]
    assert shown["reruns"] == [{"round": 1, "requested_at": shown["reruns"][0]["requested_at"],
                                "runs": {"claimed": 1},
                                "key_suffix": f":backfill-{backfill_id}-rerun-1"}]
    refused = cli.fails("backfill-rerun-failed", str(backfill_id))
    assert "nothing to re-run" in refused.output
    assert "no backfill with id 999999" in cli.fails("backfill-rerun-failed", "999999").output


def test_revert_undoes_an_edit_and_refuses_what_it_cannot(cli: Cli) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    cli.ok("edit", "poll", "--every", "30m", "--description", "slower")
    rows = table_rows(cli.ok("audit", "poll").output)
    assert [row["ACTION"] for row in rows] == ["edit", "create"]
    edit, create = rows[0]["ID"], rows[1]["ID"]
    output = cli.ok("revert", edit, "--reason", "too slow").output
    assert f"reverted entry {edit} of 'poll': " in output
    assert "description: slower → none" in output
    shown = cli.json("show", "poll")
    assert (shown["trigger"]["every"], shown["schedule_description"]) == (60, None)
    newest = cli.json("audit", "poll", "--limit", "1")[0]
    assert (newest["action"], newest["reason"], newest["changes"]["reverts"]) == (
        "revert", "too slow", [None, int(edit)])
    again = cli.fails("revert", edit).output
    assert "changed since entry" in again and "revert refused" in again
    assert "is a create, not an edit" in cli.fails("revert", create).output
    missing = cli.fails("revert", "999999").output
    assert "no audit entry with id 999999" in missing and "audit" in missing
