"""The leader and a person's handling of an alert, on the memory store and a manual clock:
an acknowledged alert counted again is not told (no outbox event, no signal), its resolution
is; a silenced one tells no count until its silence ends, then the leader's next look tells it
once (``alert.reminded``) if it is still open; resolved while silenced, its end is told."""

from __future__ import annotations

from datetime import timedelta

from goatbeat_celery import Schedules
from goatbeat_celery.core.rules.alerts import AlertRule
from goatbeat_celery.core.rules.runs import RunOutcome
from goatbeat_celery.testing import ManualClock, MemoryStore, RecordingObserver

from .test_alerts_engine import ends, leader, next_run


def kinds(store: MemoryStore) -> list[str]:
    return [e.kind for e in sorted(store.list_events(limit=100), key=lambda e: e.created_at)]


def failing(store: MemoryStore, clock: ManualClock, observer: RecordingObserver) -> object:
    engine = leader(store, clock, observer=observer)
    engine.tick()
    for _ in range(3):
        ends(store, next_run(engine, store, clock), RunOutcome.FAILED)
    return engine


def test_an_acknowledged_alert_counted_again_is_not_told_but_its_resolution_is(
        store: MemoryStore, clock: ManualClock) -> None:
    observer = RecordingObserver()
    engine = failing(store, clock, observer)
    (alert,) = store.list_alerts(open_only=True)
    Schedules(store, actor="ops:ann").acknowledge_alert(alert.id, note="on it")
    ends(store, next_run(engine, store, clock), RunOutcome.FAILED)  # type: ignore[arg-type]
    ends(store, next_run(engine, store, clock), RunOutcome.SUCCEEDED)  # type: ignore[arg-type]
    next_run(engine, store, clock)  # type: ignore[arg-type]
    (resolved,) = store.list_alerts()
    assert resolved.count > alert.count and resolved.acknowledged_by == "ops:ann"
    assert kinds(store) == ["alert.opened", "alert.resolved"]


def test_a_silenced_alert_is_told_again_once_when_its_silence_ends(
        store: MemoryStore, clock: ManualClock) -> None:
    observer = RecordingObserver()
    engine = failing(store, clock, observer)
    (alert,) = store.list_alerts(open_only=True)
    until = clock.current + timedelta(seconds=150)
    Schedules(store, actor="ops:ann").silence_alert(alert.id, until=until)
    ends(store, next_run(engine, store, clock), RunOutcome.FAILED)  # type: ignore[arg-type]
    next_run(engine, store, clock)  # type: ignore[arg-type]
    assert clock.current < until
    assert store.list_alerts()[0].count > alert.count
    assert kinds(store) == ["alert.opened"]  # counted, silently

    clock.move_to(until + timedelta(seconds=1))
    engine.tick()  # type: ignore[attr-defined]
    clock.advance(SECOND := 2)
    engine.tick()  # type: ignore[attr-defined]
    (shown,) = store.list_alerts(open_only=True)
    assert shown.silenced_until is None and shown.rule is AlertRule.FAILED
    assert kinds(store) == ["alert.opened", "alert.reminded"]  # once, however many looks
    reminded = [e for e in store.list_events(limit=100) if e.kind == "alert.reminded"]
    assert reminded[0].event_id == f"alert:{alert.id}:remind:{until.isoformat()}"
    assert "still open after its silence" in str(reminded[0].payload["summary"])
    assert SECOND and ("remind", "minutely", "failed") in [
        change for batch in observer.of("alerts_changed") for change in batch]


def test_a_silenced_alert_that_resolves_during_its_silence_tells_its_resolution(
        store: MemoryStore, clock: ManualClock) -> None:
    observer = RecordingObserver()
    engine = failing(store, clock, observer)
    (alert,) = store.list_alerts(open_only=True)
    until = clock.current + timedelta(hours=4)
    Schedules(store, actor="ops:ann").silence_alert(alert.id, until=until)
    ends(store, next_run(engine, store, clock), RunOutcome.FAILED)  # type: ignore[arg-type]
    ends(store, next_run(engine, store, clock), RunOutcome.SUCCEEDED)  # type: ignore[arg-type]
    next_run(engine, store, clock)  # type: ignore[arg-type]
    assert clock.current < until  # still silenced when it resolved
    (resolved,) = store.list_alerts()
    assert not resolved.open and resolved.silenced_until == until
    # The repeat during the silence stays quiet; the end is told, once.
    assert kinds(store) == ["alert.opened", "alert.resolved"]
    (event,) = [e for e in store.list_events(limit=100) if e.kind == "alert.resolved"]
    assert event.event_id == f"alert:{alert.id}:resolve"

    # Past the silence's end nothing more is told of it: no reminder for a resolved alert.
    clock.move_to(until + timedelta(seconds=1))
    engine.tick()  # type: ignore[attr-defined]
    assert [e.kind for e in store.list_events(limit=100)
            if e.payload["id"] == alert.id and e.kind != "alert.opened"] == ["alert.resolved"]
