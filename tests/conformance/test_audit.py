"""The audit log on every store: a change given a note records one entry, in its own
transaction (a refused change records nothing); entries read newest first, by schedule, page on
and outlive their schedule; config sync records what it changes as ``config``, and deletes
what left config past the grace when asked; prune removes old entries in batches."""

from __future__ import annotations

from datetime import timedelta

import pytest

from goatbeat_celery.core.rules.backfill import BackfillRequest
from goatbeat_celery.core.types.audit import CONFIG_ACTOR, AuditAction, AuditNote
from goatbeat_celery.core.types.errors import ScheduleConflict, ScheduleNotFound
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.spec import ScheduleSource, SyncEntry

from .conftest import Store
from .support import LONG_TTL, create_due, grid_point_before, interval_spec

M = timedelta(minutes=1)


def note(action: AuditAction = AuditAction.EDIT, **fields: object) -> AuditNote:
    values: dict[str, object] = {"actor": "token:ci", **fields}
    return AuditNote(action=action, **values)  # type: ignore[arg-type]


def lease(store: Store) -> LeaseGrant:
    grant = store.acquire("beat", "replica", LONG_TTL)
    assert grant is not None
    return grant


def entry(name: str, every: float = 60, **fields: object) -> SyncEntry:
    return SyncEntry(spec=interval_spec(name, every, source=ScheduleSource.CONFIG, **fields),
                     next_occurrence_at=None, next_run_at=None)


def test_each_change_given_a_note_records_it_with_the_store_clock(store: Store) -> None:
    changes = {"kwargs": (None, {"zone": "Europe/Paris", "ünï": [1, 2.5, None]}),
               "enabled": (True, False)}
    before = store.now()
    created = store.create_schedule(
        interval_spec("job"), next_occurrence_at=None, next_run_at=None,
        audit=note(AuditAction.CREATE, reason="ticket 42", changes=changes))
    store.replace_schedule(created.spec, next_occurrence_at=None, next_run_at=None,
                           audit=note(AuditAction.PAUSE, actor="os:alice"))
    after = store.now()

    first, second = reversed(store.audit_log(schedule_name="job"))
    assert (first.action, first.actor, first.reason) == (AuditAction.CREATE, "token:ci",
                                                         "ticket 42")
    assert first.changes == changes  # JSON, nested and non-ASCII, as written
    assert (second.action, second.actor, second.reason, second.changes) == (
        AuditAction.PAUSE, "os:alice", None, {})
    assert first.id < second.id
    assert before <= first.at <= second.at <= after
    assert first.at.tzinfo is not None and first.damage == ()


def test_a_write_without_a_note_records_nothing(store: Store) -> None:
    create_due(store, "job")
    store.delete_schedule("job")
    assert store.audit_log() == []


def test_a_refused_change_records_nothing(store: Store) -> None:
    created = store.create_schedule(interval_spec("job"), next_occurrence_at=None,
                                    next_run_at=None)
    with pytest.raises(ScheduleConflict):
        store.create_schedule(interval_spec("job"), next_occurrence_at=None, next_run_at=None,
                              audit=note(AuditAction.CREATE))
    with pytest.raises(ScheduleConflict):
        store.replace_schedule(created.spec, next_occurrence_at=None, next_run_at=None,
                               expected_version=created.row_version + 1, audit=note())
    with pytest.raises(ScheduleNotFound):
        store.delete_schedule("gone", audit=note(AuditAction.DELETE))
    with pytest.raises(ScheduleNotFound):
        store.request_run("gone", audit=note(AuditAction.RUN_NOW))
    assert store.audit_log() == []


def test_a_run_now_and_a_backfill_record_what_they_made(store: Store) -> None:
    create_due(store, "job")
    execution = store.request_run("job", audit=note(AuditAction.RUN_NOW, reason="retry"))
    end = grid_point_before(store.now(), 60, 1)
    backfill = store.create_backfill(
        BackfillRequest(schedule_name="job", start=end - 2 * M, end=end, total=3),
        audit=note(AuditAction.BACKFILL, changes={"total": (None, 3)}))
    store.cancel_backfill(backfill.id, audit=note(AuditAction.CANCEL_BACKFILL))
    store.cancel_backfill(backfill.id, audit=note(AuditAction.CANCEL_BACKFILL))  # a no-op

    cancelled, filled, ran = store.audit_log(schedule_name="job")
    assert ran.changes == {"run": (None, execution.key)}
    assert filled.changes == {"total": (None, 3), "backfill": (None, backfill.id)}
    assert cancelled.action == AuditAction.CANCEL_BACKFILL


def test_entries_read_newest_first_by_schedule_page_on_and_outlive_it(store: Store) -> None:
    for name in ("a", "b"):
        store.create_schedule(interval_spec(name), next_occurrence_at=None, next_run_at=None,
                              audit=note(AuditAction.CREATE))
    store.delete_schedule("a", audit=note(AuditAction.DELETE, reason="unused"))

    every = store.audit_log()
    assert [(e.schedule_name, e.action) for e in every] == [
        ("a", AuditAction.DELETE), ("b", AuditAction.CREATE), ("a", AuditAction.CREATE)]
    assert [e.action for e in store.audit_log(schedule_name="a")] == [
        AuditAction.DELETE, AuditAction.CREATE]
    assert store.audit_log(limit=1) == every[:1]
    assert store.audit_log(before_id=every[0].id) == every[1:]
    assert store.audit_log(schedule_name="a", before_id=every[0].id) == every[2:]
    assert store.audit_log(schedule_name="nothing") == []


def test_config_sync_records_what_it_changes_as_config(store: Store) -> None:
    grant = lease(store)
    store.sync_config([entry("report"), entry("cleanup")], lease=grant)
    store.sync_config([entry("report", 120)], lease=grant)
    store.sync_config([entry("report", 120)], lease=grant)  # unchanged: nothing recorded

    log = store.audit_log()
    assert {e.actor for e in log} == {CONFIG_ACTOR}
    assert [(e.schedule_name, e.action) for e in reversed(log)] == [
        ("report", AuditAction.CREATE), ("cleanup", AuditAction.CREATE),
        ("report", AuditAction.EDIT), ("cleanup", AuditAction.DISABLE)]
    edited = log[1]
    assert edited.changes == {"trigger": ({"kind": "interval", "every": 60},
                                          {"kind": "interval", "every": 120})}
    assert log[0].changes == {"enabled": (True, False)}


def test_config_prune_deletes_what_left_config_once_the_grace_is_over(store: Store) -> None:
    grant = lease(store)
    store.create_schedule(interval_spec("by-api"), next_occurrence_at=None, next_run_at=None)
    store.sync_config([entry("report"), entry("cleanup")], lease=grant)
    store.sync_config([entry("report")], lease=grant, prune_after=timedelta(0))
    assert not store.get_schedule("cleanup").spec.enabled  # disabled first, never at once

    report = store.sync_config([entry("report")], lease=grant, prune_after=timedelta(hours=1))
    assert report.deleted == ()
    report = store.sync_config([entry("report")], lease=grant)  # pruning off
    assert report.deleted == ()
    store.get_schedule("cleanup")

    report = store.sync_config([entry("report")], lease=grant, prune_after=timedelta(0))
    assert report.deleted == ("cleanup",)
    with pytest.raises(ScheduleNotFound):
        store.get_schedule("cleanup")
    store.get_schedule("by-api")  # rows created through the API are never touched
    deleted = store.audit_log(schedule_name="cleanup")[0]
    assert (deleted.action, deleted.actor) == (AuditAction.DELETE, CONFIG_ACTOR)
    assert deleted.changes["task"] == ("proj.tasks.tick", None)


def test_prune_removes_entries_recorded_before_the_cutoff_at_most_limit(store: Store) -> None:
    for name in ("a", "b", "c"):
        store.create_schedule(interval_spec(name), next_occurrence_at=None, next_run_at=None,
                              audit=note(AuditAction.CREATE))
    newest = store.audit_log()[0]
    older = [e for e in store.audit_log() if e.at < newest.at]  # strictly before: kept at it
    assert store.prune(before=newest.at, limit=10) == len(older)
    assert newest in store.audit_log()
    cutoff = newest.at + timedelta(microseconds=1)
    left = len(store.audit_log())
    assert store.prune(before=cutoff, limit=1) == min(1, left)
    store.prune(before=cutoff, limit=10)
    assert store.audit_log() == []


def test_an_action_that_changes_no_row_is_recorded_on_its_own(store: Store) -> None:
    before = store.now()
    store.record_audit("gone", note(AuditAction.REVOKE, reason="stuck",
                                    changes={"run": (None, "gone:k"), "terminate": (None, True)}))

    [recorded] = store.audit_log(schedule_name="gone")
    assert (recorded.action, recorded.actor, recorded.reason) == (
        AuditAction.REVOKE, "token:ci", "stuck")
    assert dict(recorded.changes) == {"run": (None, "gone:k"), "terminate": (None, True)}
    assert before <= recorded.at <= store.now()
