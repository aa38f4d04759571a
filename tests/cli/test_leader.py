"""status, run-now and history: what the leader is doing, read from PostgreSQL.

The leader is played by the store itself (acquire, take_pending, claim, mark_submitted), exactly
the calls a beat replica makes.
"""

from __future__ import annotations

import re
from datetime import timedelta

from goatbeat_celery.core.types.execution import ExecutionState
from goatbeat_celery.store import Store

from .claims import TTL, claim_and_submit
from .conftest import Cli, field_lines, instant, table_rows

#: How long a CLI command may take to start and read on a busy machine.
SLOW = 10.0


# -- status ---------------------------------------------------------------------------------
def test_status_before_any_replica_ran_shows_no_holder(cli: Cli) -> None:
    status = cli.json("status")

    assert status["lease"] == {"name": "default", "holder": None, "token": 0,
                               "acquired_at": None, "expires_at": None, "held": False,
                               "seconds_left": None, "last_renewal_at": None,
                               "silent_seconds": None, "holder_silent": False,
                               "renew_interval": 10.0, "previous_holder": None,
                               "changed_at": None}
    assert status["standbys"] == []
    assert status["pending"] is None and status["next_due_at"] is None
    assert instant(status["now"]) is not None


def test_status_shows_the_holder_token_and_expiry_by_the_database_clock(
    cli: Cli, store: Store
) -> None:
    grant = store.acquire("default", "replica-a", TTL)
    assert grant is not None

    status = cli.json("status")

    lease = status["lease"]
    assert (lease["holder"], lease["token"], lease["held"]) == ("replica-a", 1, True)
    assert instant(lease["expires_at"]) == grant.expires_at
    now = instant(status["now"])
    assert now is not None
    assert 0 < lease["seconds_left"] <= TTL.total_seconds()
    assert abs(lease["seconds_left"] - (grant.expires_at - now).total_seconds()) < 5


def test_status_follows_the_configured_lease_name(cli: Cli, store: Store) -> None:
    cli.configure(goatbeat_lease_name="green")
    assert store.acquire("green", "replica-g", TTL) is not None
    assert store.acquire("default", "replica-d", TTL) is not None

    lease = cli.json("status")["lease"]

    assert (lease["name"], lease["holder"]) == ("green", "replica-g")


def test_status_after_a_release_shows_the_lease_free(cli: Cli, store: Store) -> None:
    grant = store.acquire("default", "replica-a", TTL)
    assert grant is not None and store.release(grant)

    lease = cli.json("status")["lease"]

    assert lease["held"] is False and lease["holder"] is None and lease["token"] == 1


def test_status_for_people_lists_holder_expiry_and_masked_database(
    cli: Cli, store: Store, pg_empty_url: str
) -> None:
    assert store.acquire("default", "replica-a", TTL) is not None

    output = cli.ok("status").stdout

    lines = field_lines(output)
    assert lines["holder"] == "replica-a" and lines["held"] == "yes"
    assert lines["token"] == "1"
    assert "(in " in lines["expires"]
    assert lines["oldest pending"] == "-"
    assert lines["database"].endswith(pg_empty_url.rsplit("@", 1)[1])


def heartbeat(store: Store, holder: str, *, seen_ago: float = 0.0, count: int = 1) -> None:
    """``holder``'s member row as a replica heartbeats it, ``seen_ago`` seconds ago: the row
    expires a ttl after the heartbeat."""
    ttl = TTL - timedelta(seconds=seen_ago)
    assert store.acquire(f"default.replicas-of-{count}.{holder}", holder, ttl) is not None


def test_status_lists_the_live_standbys_and_when_each_was_last_seen(
        cli: Cli, store: Store) -> None:
    assert store.acquire("default", "replica-a", TTL) is not None
    heartbeat(store, "replica-a")
    heartbeat(store, "replica-c", seen_ago=5)
    heartbeat(store, "replica-b", seen_ago=3)
    # Gone: its row ran out a ttl after it was last seen.
    assert store.acquire("default.replicas-of-1.replica-d", "replica-d",
                         timedelta(milliseconds=1)) is not None

    status = cli.json("status")
    text = field_lines(cli.ok("status").output)

    # The CLI starts (imports Celery) after the heartbeats: up to SLOW seconds on a busy
    # 2-core machine, added to how long ago each was seen.
    ago = {s["holder"]: s["seen_seconds_ago"] for s in status["standbys"]}
    assert list(ago) == ["replica-b", "replica-c"]
    assert 3 <= ago["replica-b"] <= 3 + SLOW and 5 <= ago["replica-c"] <= 5 + SLOW
    assert ago["replica-c"] - ago["replica-b"] in (1.0, 2.0, 3.0)
    now, seen = instant(status["now"]), instant(status["standbys"][0]["seen_at"])
    assert now is not None and seen is not None
    assert (now - seen).total_seconds() >= 3
    assert re.fullmatch(r"replica-b \(seen \d+s ago\), replica-c \(seen \d+s ago\)",
                        text["standbys"]), text["standbys"]


def test_status_says_when_no_replica_stands_by(cli: Cli, store: Store) -> None:
    assert store.acquire("default", "replica-a", TTL) is not None
    heartbeat(store, "replica-a")

    assert cli.json("status")["standbys"] == []
    assert field_lines(cli.ok("status").output)["standbys"] == "-"


def test_status_shows_the_previous_holder_until_it_gave_the_lease_up(
        cli: Cli, store: Store) -> None:
    grant = store.acquire("default", "replica-a", TTL)
    assert grant is not None and store.release(grant)
    assert store.acquire("default", "replica-b", TTL) is not None
    changed_at = store.inspect("default").changed_at  # type: ignore[union-attr]
    assert changed_at is not None

    lease = cli.json("status")["lease"]
    line = field_lines(cli.ok("status").output)["previous holder"]

    assert (lease["holder"], lease["previous_holder"]) == ("replica-b", "replica-a")
    assert instant(lease["changed_at"]) == changed_at
    assert re.fullmatch(r"replica-a until \S+Z \(\d+(\.\d+)?s ago\)", line), line


def test_status_shows_no_previous_holder_before_the_lease_changed_hands(
        cli: Cli, store: Store) -> None:
    assert store.acquire("default", "replica-a", TTL) is not None

    assert field_lines(cli.ok("status").output)["previous holder"] == "-"


def test_status_measures_the_lag_of_the_oldest_unsubmitted_run(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    queued = cli.json("run-now", "poll")

    pending = cli.json("status")["pending"]

    assert pending["key"] == queued["key"] and pending["schedule"] == "poll"
    assert instant(pending["due_at"]) == instant(queued["due_at"])
    assert pending["lag_seconds"] >= 0

    grant = store.acquire("default", "replica-a", TTL)
    assert grant is not None
    (dispatch,) = store.take_pending(lease=grant, limit=10)
    store.mark_submitted([dispatch.key])
    assert cli.json("status")["pending"] is None


def test_status_shows_when_the_next_schedule_is_due(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")

    status = cli.json("status")

    assert instant(status["next_due_at"]) == store.get_schedule("poll").next_run_at


# -- run-now --------------------------------------------------------------------------------
def test_run_now_queues_a_manual_run_that_the_leader_takes(cli: Cli, store: Store) -> None:
    cli.ok("add", "report", "proj.report", "--every", "3600", "--args", "[1]")

    queued = cli.json("run-now", "report")

    assert queued["key"].startswith("report:") and queued["key"].endswith(":manual")
    assert (queued["state"], queued["manual"]) == ("claimed", True)
    grant = store.acquire("default", "replica-a", TTL)
    assert grant is not None
    (dispatch,) = store.take_pending(lease=grant, limit=10)
    assert dispatch.key == queued["key"]
    assert dispatch.execution.manual and dispatch.execution.token == grant.token
    assert (dispatch.task, dispatch.args) == ("proj.report", (1,))


def test_run_now_does_not_move_the_schedule(cli: Cli, store: Store) -> None:
    cli.ok("add", "report", "proj.report", "--every", "3600")
    before = store.get_schedule("report")

    cli.ok("run-now", "report")

    assert store.get_schedule("report") == before


def test_run_now_without_a_leader_warns_that_the_run_waits(cli: Cli, store: Store) -> None:
    cli.ok("add", "report", "proj.report", "--every", "3600")

    result = cli.ok("run-now", "report")

    assert "no replica holds lease 'default'" in result.stderr
    assert re.search(r"queued 'report:[^']*:manual'", result.stdout)
    assert store.acquire("default", "replica-a", TTL) is not None
    assert "no replica holds" not in cli.ok("run-now", "report").stderr


def test_run_now_of_a_task_no_longer_allowed_is_refused(cli: Cli, store: Store) -> None:
    cli.ok("add", "report", "proj.report", "--every", "3600")
    cli.configure(goatbeat_allowed_tasks=["billing.*"])

    result = cli.fails("run-now", "report")

    assert "goatbeat_allowed_tasks" in result.stderr
    assert store.oldest_pending() is None


def test_history_lists_executions_newest_first_with_lateness(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    older = claim_and_submit(store, "poll", steps_back=3, missed=2)
    newer = claim_and_submit(store, "poll", steps_back=2)

    executions = cli.json("history", "poll")

    assert [e["key"] for e in executions] == [newer, older]
    first = executions[1]
    assert (first["state"], first["attempts"], first["missed"], first["manual"]) == (
        "submitted", 1, 2, False)
    submitted, due = instant(first["submitted_at"]), instant(first["due_at"])
    assert submitted is not None and due is not None
    assert first["lateness_seconds"] == (submitted - due).total_seconds() > 0
    assert instant(first["occurrence_at"]) == due
    assert instant(first["claimed_at"]) is not None


def test_history_limit_keeps_the_newest(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    for steps in (4, 3, 2):
        claim_and_submit(store, "poll", steps_back=steps)

    keys = [e["key"] for e in cli.json("history", "poll", "--limit", "2")]

    assert keys == [e.key for e in store.executions(schedule_name="poll", limit=2)]
    assert len(keys) == 2


def test_history_shows_pending_and_submitted_runs_for_people(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    submitted = claim_and_submit(store, "poll", steps_back=2, missed=1)
    manual = cli.json("run-now", "poll")["key"]

    rows = {row["KEY"]: row for row in table_rows(cli.ok("history", "poll", "--wide").stdout)}

    assert set(rows) == {submitted, manual}
    assert rows[manual]["STATE"] == "claimed"
    assert (rows[manual]["SUBMITTED"], rows[manual]["LATENESS"]) == ("-", "-")
    assert rows[submitted]["STATE"] == "submitted"
    assert rows[submitted]["LATENESS"].endswith("s")
    assert (rows[submitted]["ATTEMPTS"], rows[submitted]["MISSED"]) == ("1", "1")


def test_history_of_a_schedule_that_never_ran_says_so(cli: Cli) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")

    assert cli.ok("history", "poll").stdout.strip() == "no executions of 'poll' yet"
    assert cli.json("history", "poll") == []


def test_history_states_match_the_store(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    cli.ok("run-now", "poll")

    (shown,) = cli.json("history", "poll")

    (stored,) = store.executions(schedule_name="poll")
    assert stored.state is ExecutionState.CLAIMED and shown["state"] == stored.state.value
    assert instant(shown["claimed_at"]) == stored.claimed_at


# -- status with shards -----------------------------------------------------------------------
def test_status_with_one_shard_says_nothing_of_shards(cli: Cli, store: Store) -> None:
    assert store.acquire("default", "replica-a", TTL) is not None

    status = cli.json("status")

    assert "shards" not in status and "replicas" not in status
    assert "shards" not in field_lines(cli.ok("status").output)


def test_status_shows_who_leads_each_shard_and_the_live_replicas(cli: Cli, store: Store) -> None:
    cli.configure(goatbeat_shards=3)
    for holder, shards in (("replica-a", (0, 2)), ("replica-b", (1,))):
        assert store.acquire(f"default.replicas-of-3.{holder}", holder, TTL) is not None
        for k in shards:
            assert store.acquire(f"default.shard-{k}-of-3", holder, TTL) is not None
    released = store.acquire("default.shard-1-of-3", "replica-b", TTL)
    assert released is not None and store.release(released)

    status = cli.json("status")

    assert status["shard_count"] == 3
    assert status["lease"]["name"] == "default.shard-0-of-3"
    assert status["lease"]["holder"] == "replica-a"
    assert [(s["shard"], s["lease"]["holder"], s["lease"]["held"]) for s in status["shards"]] \
        == [(0, "replica-a", True), (1, None, False), (2, "replica-a", True)]
    assert status["replicas"] == ["replica-a", "replica-b"]
    # replica-b gave its only shard up: it stands by.
    assert [s["holder"] for s in status["standbys"]] == ["replica-b"]
    text = cli.ok("status").output
    assert "0: replica-a, token 1, expires" in text
    assert "1: not held" in text
    assert "2 live replicas: replica-a, replica-b" in text
