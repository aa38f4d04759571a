"""Two lease names on one database would make two leaders: a replica that takes its lease
beside a live one of another name gives it back and says why, at each attempt, and ``check``
names the other lease. Memory store, manual clock."""

from __future__ import annotations

import logging

import pytest

from goatbeat_celery.core.rules.shards import other_leases, other_leases_problem
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.testing import ManualClock, MemoryStore, build_engine


def errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "action", None) == "other_lease_live"]


def test_a_replica_does_not_lead_beside_another_lease_name_and_says_so_at_each_attempt(
        store: MemoryStore, clock: ManualClock, caplog: pytest.LogCaptureFixture) -> None:
    reports = build_engine(store, clock=clock, holder="a:1:x",
                           settings=Settings(lease_name="reports"))
    billing = build_engine(store, clock=clock, holder="b:2:y",
                           settings=Settings(lease_name="billing"))
    with caplog.at_level(logging.ERROR, logger="goatbeat_celery"):
        reports.tick()
        assert errors(caplog) == []  # alone so far
        assert store.inspect("reports").held

        billing.tick()
        (first,) = errors(caplog)
        assert first.levelname == "ERROR"
        assert "not leading under lease 'billing': lease 'billing' is not the only one live " \
               "on this database: 'reports' (held by a:1:x)" in first.getMessage()
        assert "same goatbeat_lease_name" in first.getMessage()
        assert not store.inspect("billing").held  # given back at once

        clock.advance(10)  # the renew interval: it asks again, and is refused again
        reports.tick()
        billing.tick()
        assert len(errors(caplog)) == 2
        assert store.inspect("reports").held and not store.inspect("billing").held

        reports.close()  # the other deployment is gone: this one leads
        clock.advance(10)
        billing.tick()
    assert len(errors(caplog)) == 2
    assert store.inspect("billing").holder == "b:2:y"


def test_a_deployments_own_shards_and_member_rows_are_not_another_lease(
        store: MemoryStore, clock: ManualClock) -> None:
    settings = Settings(lease_name="default", shards=3)
    engines = [build_engine(store, clock=clock, holder=f"h:{k}:z", settings=settings)
               for k in range(2)]
    for engine in engines:
        engine.tick()
    rows = store.list_leases("")

    assert {row.name for row in rows if row.held} > {"default.shard-0-of-3"}
    assert other_leases(rows, "default") == []
    assert other_leases_problem(rows, "default") is None
    assert [row.name for row in other_leases(rows, "other")] == sorted(
        row.name for row in rows if row.held)


def test_a_lease_released_or_expired_is_not_live(store: MemoryStore,
                                                 clock: ManualClock) -> None:
    engine = build_engine(store, clock=clock, holder="a:1:x",
                          settings=Settings(lease_name="old"))
    engine.tick()
    engine.close()

    assert other_leases(store.list_leases(""), "new") == []
