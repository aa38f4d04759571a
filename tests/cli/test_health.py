"""health: this host's replica as an exit status, judged from the lease rows by the database
clock. The replicas are played by the store, with the calls a beat replica makes (its member
row, then the lease)."""

from __future__ import annotations

import json
import socket
import time
from datetime import datetime, timedelta

from goatbeat_celery.core.rules.health import member_prefix
from goatbeat_celery.store import Store, open_store

from .conftest import Cli

LEADING, STANDBY, LEASE_LOST, NOT_RUNNING, UNREACHABLE = 0, 3, 4, 5, 69
TTL = timedelta(seconds=30)
#: Short enough to wait for on the database clock.
SHORT = timedelta(seconds=1)


def member(holder: str) -> str:
    return member_prefix("default", 1) + holder


def heartbeat(store: Store, holder: str, ttl: timedelta = TTL) -> None:
    assert store.acquire(member(holder), holder, ttl) is not None


def lead(store: Store, holder: str, ttl: timedelta = TTL) -> None:
    heartbeat(store, holder, ttl)
    assert store.acquire("default", holder, ttl) is not None


def lead_until_it_expires(store: Store, holder: str) -> None:
    """``holder`` takes the lease for a second (SHORT), and the database clock passes its
    expiry."""
    lead(store, holder, ttl=SHORT)
    expires = store.inspect("default")
    assert expires is not None and expires.expires_at is not None
    past(store, expires.expires_at)


def past(store: Store, instant: datetime) -> None:
    """Wait for the database clock to pass ``instant`` (a second's ttl, and 10 s of margin
    for a busy machine)."""
    deadline = time.monotonic() + 10 + SHORT.total_seconds()
    while store.now() <= instant:
        assert time.monotonic() < deadline, f"the database clock never passed {instant}"
        time.sleep(0.05)


def health(cli: Cli, *args: str, exit_code: int) -> dict[str, object]:
    result = cli("health", *args, "--json")
    assert result.exit_code == exit_code, (result.exit_code, result.output)
    document: dict[str, object] = json.loads(result.stdout)
    assert document["exit_code"] == exit_code
    return document


def test_a_replica_holding_the_lease_leads(cli: Cli, store: Store) -> None:
    lead(store, "host-a:10:aaaa")

    answer = health(cli, "--holder", "host-a", exit_code=LEADING)

    assert (answer["health"], answer["replica"], answer["leases"]) == (
        "leading", "host-a:10:aaaa", ["default"])
    result = cli("health", "--holder", "host-a")
    assert result.stdout == "leading: host-a:10:aaaa: holds default\n"


def test_by_default_the_replica_of_this_host_is_judged(cli: Cli, store: Store) -> None:
    lead(store, f"{socket.gethostname()}:10:aaaa")
    heartbeat(store, "elsewhere:11:bbbb")

    assert health(cli, exit_code=LEADING)["asked"] == socket.gethostname()


def test_a_live_replica_leading_nothing_stands_by(cli: Cli, store: Store) -> None:
    lead(store, "host-a:10:aaaa")
    heartbeat(store, "host-b:20:bbbb")

    answer = health(cli, "--holder", "host-b", exit_code=STANDBY)

    assert answer["health"] == "standby"


def test_a_leader_whose_lease_expired_unrenewed_lost_it(cli: Cli, store: Store) -> None:
    lead_until_it_expires(store, "host-a:10:aaaa")

    answer = health(cli, "--holder", "host-a", exit_code=LEASE_LOST)

    assert "expired" in str(answer["reason"]) and answer["leases"] == ["default"]


def test_a_leader_whose_lease_was_taken_while_it_was_silent_lost_it(cli: Cli,
                                                                   store: Store) -> None:
    lead_until_it_expires(store, "host-a:10:aaaa")
    lead(store, "host-b:20:bbbb")  # a standby takes over

    answer = health(cli, "--holder", "host-a:10", exit_code=LEASE_LOST)

    assert "taken by host-b:20:bbbb" in str(answer["reason"])
    # The one that took over leads.
    health(cli, "--holder", "host-b", exit_code=LEADING)


def test_a_replica_that_lost_the_lease_and_heartbeats_again_stands_by(cli: Cli,
                                                                      store: Store) -> None:
    lead_until_it_expires(store, "host-a:10:aaaa")
    lead(store, "host-b:20:bbbb")
    heartbeat(store, "host-a:10:aaaa")  # it woke, tried, and found the lease taken

    health(cli, "--holder", "host-a", exit_code=STANDBY)


def test_a_restarted_replica_on_the_same_host_is_the_one_judged(cli: Cli, store: Store) -> None:
    lead_until_it_expires(store, "host-a:10:aaaa")
    lead(store, "host-b:20:bbbb")
    heartbeat(store, "host-a:11:cccc")  # the container restarted: same host, a new process

    answer = health(cli, "--holder", "host-a", exit_code=STANDBY)

    assert answer["replica"] == "host-a:11:cccc"


def test_no_replica_of_the_host_or_one_stopped_cleanly_is_not_running(cli: Cli,
                                                                       store: Store) -> None:
    health(cli, "--holder", "host-a", exit_code=NOT_RUNNING)

    heartbeat(store, "host-a:10:aaaa")
    grant = store.acquire("default", "host-a:10:aaaa", TTL)
    assert grant is not None
    member_grant = store.acquire(member("host-a:10:aaaa"), "host-a:10:aaaa", TTL)
    assert member_grant is not None
    assert store.release(grant) and store.release(member_grant)  # a clean stop

    answer = health(cli, "--holder", "host-a", exit_code=NOT_RUNNING)
    assert "stopped" in str(answer["reason"])


def test_a_standby_gone_silent_is_not_running(cli: Cli, store: Store) -> None:
    lead(store, "host-b:20:bbbb")
    heartbeat(store, "host-a:10:aaaa", ttl=SHORT)
    row = store.inspect(member("host-a:10:aaaa"))
    assert row is not None and row.expires_at is not None
    past(store, row.expires_at)

    answer = health(cli, "--holder", "host-a", exit_code=NOT_RUNNING)
    assert "not heard from since" in str(answer["reason"])


def test_an_unreachable_database_has_its_own_exit_status(cli: Cli) -> None:
    cli.configure(goatbeat_database_url="postgresql://beat:hunter2@127.0.0.1:1/app")

    result = cli("health")

    assert result.exit_code == UNREACHABLE, result.output
    assert "hunter2" not in result.output


def test_health_follows_the_lease_name_and_shards(cli: Cli, store: Store) -> None:
    cli.configure(goatbeat_lease_name="green", goatbeat_shards=2)
    holder = "host-a:10:aaaa"
    assert store.acquire(member_prefix("green", 2) + holder, holder, TTL) is not None
    assert store.acquire("green.shard-1-of-2", holder, TTL) is not None

    answer = health(cli, "--holder", "host-a", exit_code=LEADING)

    assert answer["leases"] == ["green.shard-1-of-2"]


def test_a_crashed_leader_replaced_before_its_expiry_lost_it_with_who_and_since_when(
        cli: Cli, store: Store, pg_empty_url: str) -> None:
    crashed = open_store(pg_empty_url)  # the leader's own connections
    try:
        heartbeat(crashed, "host-a:10:aaaa")
        assert crashed.acquire("default", "host-a:10:aaaa", TTL) is not None
        assert store.acquire("default", "host-b:20:bbbb", TTL) is None  # host-b stands by
    finally:
        crashed.close()  # its process dies: its session ends, its rows still run for 30 s
    deadline = time.monotonic() + 10
    while store.acquire("default", "host-b:20:bbbb", TTL) is None:
        assert time.monotonic() < deadline, "the crashed leader's lease was never taken"
        store.wait(0.2)
    taken = store.inspect("default")
    assert taken is not None and taken.changed_at is not None

    answer = health(cli, "--holder", "host-a", exit_code=LEASE_LOST)

    # Its member row is still live by the clock: the lease row says it was replaced.
    assert answer["replica"] == "host-a:10:aaaa" and answer["leases"] == ["default"]
    reason = str(answer["reason"])
    assert "taken by host-b:20:bbbb" in reason
    assert taken.changed_at.isoformat(timespec="seconds").replace("+00:00", "Z") in reason


def test_a_replaced_leader_whose_member_row_was_forgotten_still_lost_it(cli: Cli,
                                                                        store: Store) -> None:
    heartbeat(store, "host-a:10:aaaa", ttl=SHORT)
    assert store.acquire("default", "host-a:10:aaaa", SHORT) is not None
    # Past both expiries: the lease was taken after the presence row, so it ends later.
    rows = [store.inspect(member("host-a:10:aaaa")), store.inspect("default")]
    assert all(row is not None and row.expires_at is not None for row in rows)
    past(store, max(row.expires_at for row in rows if row and row.expires_at))
    lead(store, "host-b:20:bbbb")
    assert store.forget(member("host-a:10:aaaa"))  # the presence row is gone

    answer = health(cli, "--holder", "host-a", exit_code=LEASE_LOST)

    assert "taken by host-b:20:bbbb" in str(answer["reason"])


def test_a_leader_stopped_cleanly_and_replaced_is_not_running(cli: Cli, store: Store) -> None:
    heartbeat(store, "host-a:10:aaaa")
    grant = store.acquire("default", "host-a:10:aaaa", TTL)
    member_grant = store.acquire(member("host-a:10:aaaa"), "host-a:10:aaaa", TTL)
    assert grant is not None and member_grant is not None
    assert store.release(member_grant) and store.release(grant)  # a clean stop, as beat's
    lead(store, "host-b:20:bbbb")

    answer = health(cli, "--holder", "host-a", exit_code=NOT_RUNNING)

    assert "stopped" in str(answer["reason"])
