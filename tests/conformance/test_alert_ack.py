"""Acknowledged and silenced alerts on every store: who acknowledged an open alert, when and
why, written with its audit entry; a silence until an instant; what is told (written to the
outbox) once an alert is acknowledged or silenced (its resolution always); the reminder when a
silence ends, written once; a resolved or unknown alert refused with nothing changed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from goatbeat_celery.core.rules.alerts import AlertChange, AlertRule
from goatbeat_celery.core.types.audit import AuditAction, AuditNote
from goatbeat_celery.core.types.errors import AlertNotFound, ScheduleConflict
from goatbeat_celery.core.types.lease import LeaseGrant

from .conftest import Store, StoreClock
from .support import LONG_TTL

FAILED = AlertRule.FAILED
ACK = AuditNote(action=AuditAction.ACKNOWLEDGE_ALERT, actor="ops:ann", reason="on it")
SILENCE = AuditNote(action=AuditAction.SILENCE_ALERT, actor="ops:ann", reason="vendor")


def grant_of(store: Store) -> LeaseGrant:
    grant = store.acquire("beat", "replica", LONG_TTL)
    assert grant is not None
    return grant


def change(action: str, key: str | None = "s:1", **more: object) -> AlertChange:
    return AlertChange(schedule_name="s", rule=FAILED, action=action,  # type: ignore[arg-type]
                       reason=f"{action} {key}", key=key, **more)  # type: ignore[arg-type]


def told_ids(store: Store) -> list[str]:
    return sorted(e.event_id for e in store.list_events(limit=1000))


def test_an_acknowledged_alert_stays_open_and_is_not_told_when_counted_again(
        store: Store) -> None:
    grant = grant_of(store)
    (opened,) = store.record_alerts([change("open", "s:1")], lease=grant)
    alert_id = opened.alert.id

    acked = store.acknowledge_alert(alert_id, by="ops:ann", note="looking", audit=ACK)
    assert (acked.open, acked.acknowledged_by, acked.ack_note) == (True, "ops:ann", "looking")
    assert acked.acknowledged_at is not None
    assert store.get_alert(alert_id) == acked
    (entry,) = store.audit_log(schedule_name="s")
    assert (entry.action, entry.actor, entry.reason) == (AuditAction.ACKNOWLEDGE_ALERT,
                                                         "ops:ann", "on it")

    (again,) = store.record_alerts([change("repeat", "s:2")], lease=grant)
    assert (again.alert.count, again.told) == (2, False)
    assert again.alert.acknowledged_by == "ops:ann"  # counting keeps the acknowledgement
    (resolved,) = store.record_alerts([change("resolve")], lease=grant)
    assert resolved.told  # its end is news
    assert told_ids(store) == [f"alert:{alert_id}:open", f"alert:{alert_id}:resolve"]


def test_a_resolved_or_unknown_alert_is_refused_and_nothing_changes(store: Store) -> None:
    grant = grant_of(store)
    (opened,) = store.record_alerts([change("open")], lease=grant)
    store.record_alerts([change("resolve")], lease=grant)
    until = store.now() + timedelta(hours=1)
    with pytest.raises(ScheduleConflict, match="was resolved"):
        store.acknowledge_alert(opened.alert.id, by="x", note=None, audit=ACK)
    with pytest.raises(ScheduleConflict, match="was resolved"):
        store.silence_alert(opened.alert.id, until=until, by="x", audit=SILENCE)
    with pytest.raises(AlertNotFound):
        store.acknowledge_alert(opened.alert.id + 100, by="x", note=None, audit=ACK)
    assert store.get_alert(opened.alert.id + 100) is None
    shown = store.get_alert(opened.alert.id)
    assert shown is not None and (shown.acknowledged_at, shown.silenced_until) == (None, None)
    assert store.audit_log(schedule_name="s") == []


def test_a_silenced_alert_tells_nothing_then_is_reminded_of_once_when_the_silence_ends(
        store: Store, clock: StoreClock) -> None:
    grant = grant_of(store)
    (opened,) = store.record_alerts([change("open", "s:1")], lease=grant)
    alert_id = opened.alert.id
    with pytest.raises(ScheduleConflict, match="not after now"):
        store.silence_alert(alert_id, until=store.now() - timedelta(seconds=1), by="x",
                            audit=SILENCE)
    until = store.now() + timedelta(seconds=1)
    silenced = store.silence_alert(alert_id, until=until, by="ops:ann", audit=SILENCE)
    assert (silenced.silenced_until, silenced.silenced_by) == (until, "ops:ann")
    assert store.audit_log(schedule_name="s")[0].action == AuditAction.SILENCE_ALERT

    (quiet,) = store.record_alerts([change("repeat", "s:2")], lease=grant)
    assert not quiet.told
    # Too early: the silence holds, nothing is written.
    assert store.record_alerts([change("remind", silenced_until=until)], lease=grant) == []

    clock.move_to(until + timedelta(milliseconds=1))
    (reminded,) = store.record_alerts([change("remind", silenced_until=until)], lease=grant)
    assert (reminded.action, reminded.told, reminded.silence_ended) == ("remind", True, until)
    assert reminded.alert.silenced_until is None and reminded.alert.open
    # Planned again (a failover's second look): written once.
    assert store.record_alerts([change("remind", silenced_until=until)], lease=grant) == []
    assert told_ids(store) == [f"alert:{alert_id}:open",
                               f"alert:{alert_id}:remind:{until.isoformat()}"]
    (counted,) = store.record_alerts([change("repeat", "s:3")], lease=grant)
    assert counted.told  # silence over, not acknowledged: told again


def test_a_reminder_of_a_silence_set_anew_since_writes_nothing(
        store: Store, clock: StoreClock) -> None:
    grant = grant_of(store)
    (opened,) = store.record_alerts([change("open")], lease=grant)
    first = store.now() + timedelta(seconds=1)
    store.silence_alert(opened.alert.id, until=first, by="x", audit=SILENCE)
    clock.move_to(first + timedelta(milliseconds=1))
    later = store.now() + timedelta(hours=1)
    store.silence_alert(opened.alert.id, until=later, by="y", audit=SILENCE)
    assert store.record_alerts([change("remind", silenced_until=first)], lease=grant) == []
    shown = store.get_alert(opened.alert.id)
    assert shown is not None and (shown.silenced_until, shown.silenced_by) == (later, "y")


def test_a_silenced_alert_resolved_before_its_silence_ends_tells_its_resolution(
        store: Store, clock: StoreClock) -> None:
    grant = grant_of(store)
    (opened,) = store.record_alerts([change("open", "s:1")], lease=grant)
    alert_id = opened.alert.id
    # A short silence, moved past below within the lease's TTL (the clock is the store's).
    until = store.now() + timedelta(seconds=2)
    store.silence_alert(alert_id, until=until, by="ops:ann", audit=SILENCE)
    (quiet,) = store.record_alerts([change("repeat", "s:2")], lease=grant)
    assert not quiet.told
    (resolved,) = store.record_alerts([change("resolve")], lease=grant)
    # A silence mutes repeats, not the end: whoever was told it opened learns it is over.
    assert resolved.told and not resolved.alert.open and store.now() < until
    assert resolved.alert.silenced_until == until
    assert told_ids(store) == [f"alert:{alert_id}:open", f"alert:{alert_id}:resolve"]
    # Past its end, a resolved alert is reminded of by no one.
    clock.move_to(until + timedelta(milliseconds=1))
    assert store.record_alerts([change("remind", silenced_until=until)], lease=grant) == []
    assert told_ids(store) == [f"alert:{alert_id}:open", f"alert:{alert_id}:resolve"]
