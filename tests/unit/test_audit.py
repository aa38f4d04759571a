"""The audit log through the Schedules API, on the memory store and a manual clock: who (the
process's OS user, or the actor a face binds), why, and the fields before and after, for each
kind of change; a change that changes nothing, or is refused, records nothing; the config plan
and its pruning rule."""

from __future__ import annotations

import getpass
from datetime import datetime, timedelta

import pytest

from goatbeat_celery.api import Schedules, os_actor
from goatbeat_celery.config import GoatbeatConfig
from goatbeat_celery.core.rules.audit import audit_value, spec_changes
from goatbeat_celery.core.rules.sync import StoredSummary, plan_config_sync
from goatbeat_celery.core.types.audit import AuditAction
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec, SyncEntry, TriggerSpec
from goatbeat_celery.testing import ManualClock, MemoryStore, build_engine

NOW = datetime(2026, 1, 5, 12, 0, 30, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def schedules(clock: ManualClock) -> Schedules:
    return Schedules(MemoryStore(clock))


def config_spec(name: str, every: float = 60) -> ScheduleSpec:
    return ScheduleSpec(name=name, task="proj.tasks.tick", source=ScheduleSource.CONFIG,
                        trigger=TriggerSpec(kind="interval", params={"every": every}))


def test_the_default_actor_is_the_os_user_and_a_face_binds_its_own(
        schedules: Schedules) -> None:
    assert schedules.actor == os_actor() == f"os:{getpass.getuser()}"
    schedules.create("job", "proj.tasks.tick", every=60)
    schedules.acting_as("token:deploy-bot").pause("job", reason="release 4.2")

    paused, created = schedules.audit("job")
    assert (created.actor, created.action, created.reason) == (
        schedules.actor, AuditAction.CREATE, None)
    assert (paused.actor, paused.action, paused.reason) == (
        "token:deploy-bot", AuditAction.PAUSE, "release 4.2")
    assert created.changes["task"] == (None, "proj.tasks.tick")


@pytest.mark.parametrize("actor", ["", "   ", "x" * 201, "bell\x07", 42])
def test_a_bad_actor_is_refused(schedules: Schedules, actor: object) -> None:
    with pytest.raises(ConfigurationError) as caught:
        schedules.acting_as(actor)  # type: ignore[arg-type]
    assert caught.value.details[0].field == "actor"


def test_a_bad_reason_is_refused_and_changes_nothing(schedules: Schedules) -> None:
    schedules.create("job", "proj.tasks.tick", every=60)
    for change in (lambda: schedules.pause("job", reason="x" * 501),
                   lambda: schedules.update("job", every=120, reason="\x1b[2J"),
                   lambda: schedules.run_now("job", reason=7),  # type: ignore[arg-type]
                   lambda: schedules.delete("job", reason="x" * 501)):
        with pytest.raises(ConfigurationError) as caught:
            change()
        assert caught.value.details[0].field == "reason"
    assert schedules.get("job").row_version == 1
    assert [e.action for e in schedules.audit("job")] == [AuditAction.CREATE]


def test_pause_records_its_note_and_end_and_resume_clears_them(
        schedules: Schedules) -> None:
    schedules.create("job", "proj.tasks.tick", every=60)
    until = NOW + timedelta(hours=2)
    schedules.pause("job", note="maintenance", until=until)
    schedules.resume("job")

    resumed, paused, _ = schedules.audit("job")
    assert paused.reason == "maintenance"  # the note, when no reason is given
    assert paused.changes == {"paused_until": (None, until.isoformat()),
                              "paused_reason": (None, "maintenance")}
    assert resumed.changes == {"paused_until": (until.isoformat(), None),
                               "paused_reason": ("maintenance", None)}


def test_a_change_that_changes_nothing_records_nothing(schedules: Schedules) -> None:
    schedules.create("job", "proj.tasks.tick", every=60)
    schedules.update("job", every=60)
    schedules.resume("job")  # not paused
    schedules.backfill("job", NOW - timedelta(minutes=5), NOW, dry_run=True)
    assert len(schedules.audit("job")) == 1


def test_a_backfill_records_its_range_and_a_delete_what_was_there(
        schedules: Schedules) -> None:
    schedules.create("job", "proj.tasks.tick", every=60)
    backfill = schedules.backfill("job", NOW - timedelta(minutes=5), NOW, reason="outage")
    schedules.cancel_backfill(backfill.id)
    schedules.delete("job", reason="unused")

    deleted, cancelled, filled, _ = schedules.audit("job")
    assert filled.reason == "outage"
    assert {key: filled.changes[key][1] for key in ("start", "end", "mode", "total",
                                                     "backfill")} == {
        "start": (NOW - timedelta(minutes=5)).isoformat(), "end": NOW.isoformat(),
        "mode": "missing", "total": 5, "backfill": backfill.id}
    assert cancelled.changes["state"] == ("active", "cancelled")
    assert deleted.changes["trigger"] == ({"kind": "interval", "every": 60.0}, None)
    assert deleted.reason == "unused"


def test_audit_arguments_are_checked(schedules: Schedules) -> None:
    with pytest.raises(ConfigurationError) as caught:
        schedules.audit(3, limit=0, before_id=-1)  # type: ignore[arg-type]
    assert {p.field for p in caught.value.details} == {"name", "limit", "before_id"}


def test_spec_changes_list_only_what_differs_and_json_values() -> None:
    before = config_spec("a")
    after = ScheduleSpec(name="a", task="proj.tasks.other", source=ScheduleSource.CONFIG,
                         trigger=before.trigger, misfire_grace=timedelta(minutes=2),
                         tags=("x",))
    assert spec_changes(before, after) == {"task": ("proj.tasks.tick", "proj.tasks.other"),
                                           "misfire_grace": (None, 120.0),
                                           "tags": ([], ["x"])}
    assert spec_changes(before, before) == {}
    assert audit_value(NOW) == NOW.isoformat()


def test_the_prune_rule_deletes_only_disabled_config_rows_past_the_grace() -> None:
    cutoff = NOW - timedelta(days=7)
    old, recent = cutoff - timedelta(seconds=1), cutoff + timedelta(seconds=1)

    def row(enabled: bool, updated_at: datetime,
            source: ScheduleSource = ScheduleSource.CONFIG) -> StoredSummary:
        return StoredSummary(spec_hash="h", enabled=enabled, source=source,
                             updated_at=updated_at)

    existing = {"gone-long-ago": row(False, old), "gone-lately": row(False, recent),
                "gone-now": row(True, old), "api": row(False, old, ScheduleSource.API),
                "kept": row(False, old)}
    entries = [SyncEntry(spec=config_spec("kept"), next_occurrence_at=None, next_run_at=None)]
    plan = plan_config_sync(existing, entries, prune_before=cutoff)
    assert plan.delete == ("gone-long-ago",) == plan.report.deleted
    assert plan.disable == ("gone-now",)
    assert plan_config_sync(existing, entries).delete == ()


def test_the_config_plan_applies_the_prune_settings(clock: ManualClock) -> None:
    store = MemoryStore(clock)
    grant = store.acquire("beat", "replica", timedelta(seconds=60))
    assert grant is not None
    store.sync_config([SyncEntry(spec=config_spec(name), next_occurrence_at=None,
                                 next_run_at=None) for name in ("a", "b")], lease=grant)
    store.sync_config([SyncEntry(spec=config_spec("a"), next_occurrence_at=None,
                                 next_run_at=None)], lease=grant)
    clock.advance(timedelta(days=2))
    settings = Settings(config_prune=True, config_prune_grace=timedelta(days=1))
    pruning = Schedules(store, config=GoatbeatConfig(settings=settings))

    plan = pruning.config_plan([config_spec("a"), config_spec("c")])
    assert [(name, note.action) for name, note in plan.changes] == [
        ("c", AuditAction.CREATE), ("b", AuditAction.DELETE)]
    assert plan.unchanged == ("a",)
    assert Schedules(store).config_plan([config_spec("a")]).changes == ()


def test_a_leader_with_config_prune_deletes_what_left_config_after_the_grace(
        clock: ManualClock, caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore(clock)
    pruning = Settings(config_prune=True, config_prune_grace=timedelta(hours=1))
    first = build_engine(store, clock=clock, settings=pruning,
                         config_schedules=[config_spec("a"), config_spec("b")])
    first.tick()
    first.close()

    def lead_with(specs: list[ScheduleSpec], settings: Settings) -> None:
        engine = build_engine(store, clock=clock, settings=settings, config_schedules=specs)
        engine.tick()
        engine.close()

    lead_with([config_spec("a")], pruning)
    assert not store.get_schedule("b").spec.enabled  # out of config: disabled first
    clock.advance(timedelta(minutes=59))
    lead_with([config_spec("a")], pruning)
    store.get_schedule("b")  # within the grace
    clock.advance(timedelta(minutes=2))
    lead_with([config_spec("a")], Settings())
    store.get_schedule("b")  # pruning off: kept
    with caplog.at_level("WARNING"):
        lead_with([config_spec("a")], pruning)
    assert [s.name for s in store.list_schedules()] == ["a"]
    assert "config schedule 'b' deleted" in caplog.text
    deleted = store.audit_log(schedule_name="b")[0]
    assert (deleted.action, deleted.actor) == (AuditAction.DELETE, "config")
