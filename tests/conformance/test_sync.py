"""sync_config: config entries upserted by name, fenced by the lease, API rows left alone."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from goatbeat_celery.core.types.errors import LeaseLost
from goatbeat_celery.core.types.spec import ScheduleSource, SyncEntry

from .conftest import Backend, Store, StoreClock
from .support import LONG_TTL, claim_next, grid_point_before, interval_spec, snapshot


def _entry(store: Store, name: str, every: float = 60, *, start: datetime | None = None,
           **fields: object) -> SyncEntry:
    """A config entry starting ``start`` (by default one interval after the store's now)."""
    start = start or store.now() + timedelta(seconds=every)
    return SyncEntry(spec=interval_spec(name, every, source=ScheduleSource.CONFIG, **fields),
                     next_occurrence_at=start, next_run_at=start)


def test_sync_creates_config_rows_with_the_entry_times(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    entry = _entry(store, "report")

    report = store.sync_config([entry], lease=grant)

    assert report.created == ("report",)
    stored = store.get_schedule("report")
    assert (stored.spec, stored.row_version) == (entry.spec, 1)
    assert (stored.next_occurrence_at, stored.next_run_at) == (entry.next_occurrence_at,
                                                               entry.next_run_at)


def test_an_unchanged_entry_keeps_its_row_untouched(store: Store, clock: StoreClock) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    store.sync_config([_entry(store, "report", start=grid_point_before(store.now(), 60))],
                      lease=grant)
    store.claim([claim_next(store.get_schedule("report"))], lease=grant)
    before = store.get_schedule("report")
    assert (before.row_version, before.total_runs) == (2, 1)
    clock.advance(0.01)

    # A restart computes fresh start times; they must not reset the running schedule.
    report = store.sync_config([_entry(store, "report")], lease=grant)

    assert report.unchanged == ("report",)
    assert (report.created, report.updated, report.disabled) == ((), (), ())
    after = store.get_schedule("report")
    assert snapshot(after) == snapshot(before)
    assert after.updated_at == before.updated_at


def test_a_changed_entry_is_rescheduled_from_its_new_times(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    store.sync_config([_entry(store, "report")], lease=grant)
    changed = _entry(store, "report", every=300)

    report = store.sync_config([changed], lease=grant)

    assert report.updated == ("report",)
    stored = store.get_schedule("report")
    assert (stored.spec, stored.row_version) == (changed.spec, 2)
    assert stored.next_run_at == changed.next_run_at


def test_an_entry_gone_from_config_is_disabled_not_deleted(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    store.sync_config([_entry(store, "report"), _entry(store, "cleanup")], lease=grant)

    report = store.sync_config([_entry(store, "report")], lease=grant)

    assert report.disabled == ("cleanup",)
    cleanup = store.get_schedule("cleanup")
    assert (cleanup.spec.enabled, cleanup.row_version) == (False, 2)
    assert store.get_schedule("report").spec.enabled
    again = store.sync_config([_entry(store, "report")], lease=grant)
    assert again.disabled == ()
    assert store.get_schedule("cleanup").row_version == 2


def test_config_sync_never_touches_api_rows(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    start = store.now() + timedelta(minutes=1)
    api_row = store.create_schedule(interval_spec("report"), next_occurrence_at=start,
                                    next_run_at=start)
    store.create_schedule(interval_spec("adhoc"), next_occurrence_at=start, next_run_at=start)

    report = store.sync_config([_entry(store, "report", every=300)], lease=grant)

    # The config entry of the same name is reported, and an API row missing from config is
    # not disabled.
    assert report.conflicts == ("report",)
    assert (report.created, report.updated, report.disabled) == ((), (), ())
    assert snapshot(store.get_schedule("report")) == snapshot(api_row)
    assert store.get_schedule("report").spec.source is ScheduleSource.API
    assert store.get_schedule("adhoc").spec.enabled


def test_config_sync_is_fenced_by_the_lease(backend: Backend) -> None:
    store = backend.store
    old = store.acquire("beat", "a", LONG_TTL)
    assert old is not None
    store.sync_config([_entry(store, "report")], lease=old)
    old = backend.let_expire(old)
    assert store.acquire("beat", "b", LONG_TTL) is not None

    with pytest.raises(LeaseLost):
        store.sync_config([_entry(store, "fresh")], lease=old)

    assert [s.name for s in store.list_schedules()] == ["report"]
    assert store.get_schedule("report").spec.enabled
