"""The fleet (core.rules.fleet): who leads and who stands by, read from lease rows alone."""

from __future__ import annotations

from datetime import datetime, timedelta

from goatbeat_celery.core.rules.fleet import (
    leaders,
    members,
    shard_holders,
    shard_leases,
    standing_by,
)
from goatbeat_celery.core.rules.shards import Replica, Shard, member_lease_name, shard_lease_name
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.lease import LeaseInfo

NOW = datetime(2026, 11, 29, 21, 40, tzinfo=UTC)
TTL = timedelta(seconds=30)
LEASE = "goatbeat"


def row(name: str, holder: str | None, *, expires_in: float = 20.0,
        session_gone: bool = False) -> LeaseInfo:
    """A lease row as read at ``NOW``, expiring ``expires_in`` seconds later (negative: gone)."""
    return LeaseInfo(name=name, holder=holder, token=1, acquired_at=NOW - timedelta(minutes=5),
                     expires_at=NOW + timedelta(seconds=expires_in), store_now=NOW,
                     session_gone=session_gone)


def shard(index: int, count: int, holder: str | None, *, expires_in: float = 20.0,
          session_gone: bool = False) -> LeaseInfo:
    return row(shard_lease_name(LEASE, Shard(index, count)), holder, expires_in=expires_in,
               session_gone=session_gone)


def member(count: int, holder: str, expires_in: float = 20.0) -> LeaseInfo:
    return row(member_lease_name(LEASE, count, holder), holder, expires_in=expires_in)


def test_with_one_shard_the_live_members_but_the_leaseholder_stand_by() -> None:
    rows = [shard(0, 1, "a"), member(1, "a"), member(1, "c", 25.0), member(1, "b", 10.0)]

    found = standing_by(rows, lease_name=LEASE, count=1, ttl=TTL)

    # Seen when each last heartbeat: its expiry, ttl back; by holder.
    assert found == [Replica("b", NOW - timedelta(seconds=20)),
                     Replica("c", NOW - timedelta(seconds=5))]


def test_the_lease_read_on_its_own_names_its_leader_too() -> None:
    rows = [member(1, "a"), member(1, "b")]

    assert [r.holder for r in standing_by(rows, lease_name=LEASE, count=1, ttl=TTL)] == [
        "a", "b"]
    assert [r.holder for r in standing_by(rows, lease_name=LEASE, count=1, ttl=TTL,
                                          lease=shard(0, 1, "a"))] == ["b"]


def test_a_holder_whose_lease_expired_or_whose_session_ended_leads_nothing() -> None:
    rows = [shard(0, 2, "a", expires_in=-1.0), shard(1, 2, "b", session_gone=True),
            member(2, "a"), member(2, "b")]

    assert leaders(rows, lease_name=LEASE, count=2) == frozenset()
    assert [r.holder for r in standing_by(rows, lease_name=LEASE, count=2, ttl=TTL)] == [
        "a", "b"]


def test_a_replica_whose_member_row_expired_is_no_standby() -> None:
    rows = [shard(0, 1, "a"), member(1, "b", expires_in=-0.5), member(1, "c")]

    assert [r.holder for r in standing_by(rows, lease_name=LEASE, count=1, ttl=TTL)] == ["c"]


def test_with_several_shards_every_shard_holder_leads() -> None:
    rows = [shard(0, 3, "a"), shard(1, 3, "b"), shard(2, 3, "a"),
            member(3, "a"), member(3, "b"), member(3, "c")]

    assert leaders(rows, lease_name=LEASE, count=3) == {"a", "b"}
    assert [r.holder for r in standing_by(rows, lease_name=LEASE, count=3, ttl=TTL)] == ["c"]
    assert members(rows, lease_name=LEASE, count=3) == ("a", "b", "c")


def test_rows_of_another_shard_count_or_lease_name_count_for_nothing() -> None:
    rows = [shard(0, 2, "x"), row("other-lease", "y"), member(2, "z"),
            member(3, "a"), member(3, "b")]

    assert leaders(rows, lease_name=LEASE, count=3) == frozenset()
    assert [r.holder for r in standing_by(rows, lease_name=LEASE, count=3, ttl=TTL)] == [
        "a", "b"]
    assert members(rows, lease_name=LEASE, count=3) == ("a", "b")


def test_a_member_row_is_never_taken_for_a_shards_lease() -> None:
    rows = [member(1, "a"), member(1, "b")]

    assert leaders(rows, lease_name=LEASE, count=1) == frozenset()


def test_each_shard_shows_its_row_while_held_and_none_otherwise() -> None:
    held = shard(0, 3, "a")
    expired = shard(2, 3, "b", expires_in=-1.0)
    rows = [held, expired, member(3, "a")]

    assert shard_leases(rows, lease_name=LEASE, count=3) == [
        (0, shard_lease_name(LEASE, Shard(0, 3)), held),
        (1, shard_lease_name(LEASE, Shard(1, 3)), None),
        (2, shard_lease_name(LEASE, Shard(2, 3)), expired)]
    assert shard_holders(rows, lease_name=LEASE, count=3) == [(0, held), (1, None), (2, None)]


def test_with_one_shard_the_lease_itself_is_shard_zero() -> None:
    lease = row(LEASE, "a")

    assert shard_holders([lease], lease_name=LEASE, count=1) == [(0, lease)]
    assert leaders([lease], lease_name=LEASE, count=1) == {"a"}
