"""The alert log on every store: evidence read a page of schedules at a time with each one's
newest runs, alert changes written once in a fenced write (at most one open alert per schedule
and rule, a change planned twice written once), and alerts listed open first."""

from __future__ import annotations

from datetime import timedelta

import pytest

from goatbeat_celery.core.rules.alerts import AlertChange, AlertRule, AlertState
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.types.alert_evidence import AlertScope
from goatbeat_celery.core.types.errors import LeaseLost
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.settlement import RunSettlement

from .conftest import Backend, Store, StoreClock
from .support import LONG_TTL, claim_next, create_due, run_together

FAILED = AlertRule.FAILED


def grant_of(store: Store) -> LeaseGrant:
    grant = store.acquire("beat", "replica", LONG_TTL)
    assert grant is not None
    return grant


def change(action: str, key: str | None = "s:1", rule: AlertRule = FAILED,
           name: str = "s") -> AlertChange:
    return AlertChange(schedule_name=name, rule=rule, action=action,  # type: ignore[arg-type]
                       reason=f"{action} {key}", key=key)


def test_the_evidence_is_a_page_of_schedules_by_name_with_their_newest_runs(
        store: Store) -> None:
    grant = grant_of(store)
    for name in ("c", "a", "b"):
        create_due(store, name, steps_back=2)
        for _ in range(2):  # two runs each, a minute apart
            store.claim([claim_next(store.get_schedule(name))], lease=grant)
    store.record_alerts([change("open", name="b")], lease=grant)

    first = store.alert_evidence(after=None, limit=2, depth=1)
    second = store.alert_evidence(after=first.last, limit=2, depth=5)

    assert [s.name for s, _ in first.schedules] == ["a", "b"] and first.last == "b"
    assert [len(runs) for _, runs in first.schedules] == [1, 1]
    assert [a.schedule_name for a in first.open_alerts] == ["b"]
    assert [s.name for s, _ in second.schedules] == ["c"] and second.last is None
    ((_, runs),) = second.schedules
    assert [r.occurrence_at for r in runs] == sorted((r.occurrence_at for r in runs),
                                                     reverse=True)
    assert len(runs) == 2 and second.open_alerts == ()
    assert first.now <= second.now


def test_the_evidence_carries_each_schedules_own_alert_counts(store: Store) -> None:
    create_due(store, "own", alert_missed=0, alert_lost=3)
    create_due(store, "unset")

    page = store.alert_evidence(after=None, limit=5, depth=1)

    assert [(s.name, s.spec.alert_missed, s.spec.alert_lost) for s, _ in page.schedules] == [
        ("own", 0, 3), ("unset", None, None)]


def test_an_alert_opens_once_is_counted_for_new_runs_only_and_resolves(store: Store) -> None:
    grant = grant_of(store)
    (opened,) = store.record_alerts([change("open", "s:1")], lease=grant)
    assert (opened.action, opened.alert.state, opened.alert.count) == ("open", AlertState.OPEN, 1)
    assert opened.alert.first_at == opened.alert.last_at

    # The same run again (a look repeated after a failover) writes nothing; a new run counts.
    assert store.record_alerts([change("open", "s:1"), change("repeat", "s:1")],
                               lease=grant) == []
    (again,) = store.record_alerts([change("open", "s:2")], lease=grant)
    assert (again.action, again.alert.id, again.alert.count, again.alert.key) == (
        "repeat", opened.alert.id, 2, "s:2")

    (resolved,) = store.record_alerts([change("resolve")], lease=grant)
    assert (resolved.action, resolved.alert.state, resolved.alert.count) == (
        "resolve", AlertState.RESOLVED, 2)
    assert resolved.alert.resolved_at is not None
    assert store.record_alerts([change("resolve"), change("repeat", "s:3")], lease=grant) == []

    # Raised again later: a new alert, the old one kept as history.
    (reopened,) = store.record_alerts([change("open", "s:9")], lease=grant)
    assert reopened.alert.id != opened.alert.id
    assert [(a.id, a.state) for a in store.list_alerts()] == [
        (reopened.alert.id, AlertState.OPEN), (opened.alert.id, AlertState.RESOLVED)]
    assert store.list_alerts(open_only=True) == [reopened.alert]
    assert store.list_alerts(schedule_name="other") == []


def test_a_stale_lease_writes_no_alert(store: Store) -> None:
    grant = grant_of(store)
    store.release(grant)
    assert store.acquire("beat", "other", LONG_TTL) is not None
    with pytest.raises(LeaseLost):
        store.record_alerts([change("open")], lease=grant)
    assert store.list_alerts() == []


def test_two_writers_opening_the_same_alert_at_once_open_one(store: Store,
                                                              backend: Backend) -> None:
    grant = grant_of(store)
    peer = backend.open_peer()
    results = run_together(lambda: store.record_alerts([change("open", "s:1")], lease=grant),
                           lambda: peer.record_alerts([change("open", "s:1")], lease=grant))
    assert not [result for result in results if isinstance(result, BaseException)]
    written = [event for result in results if isinstance(result, list) for event in result]
    assert [event.action for event in written] == ["open"]
    assert len(store.list_alerts()) == 1


def test_pruning_deletes_resolved_alerts_before_the_instant_never_open_ones(
        store: Store) -> None:
    grant = grant_of(store)
    store.record_alerts([change("open", name="old"), change("open", name="live")], lease=grant)
    store.record_alerts([change("resolve", name="old")], lease=grant)
    (resolved,) = store.list_alerts(schedule_name="old")
    assert resolved.resolved_at is not None

    # (prune's count includes the outbox's events, pruned by their own rule)
    store.prune(before=resolved.resolved_at, limit=10)
    assert len(store.list_alerts()) == 2
    store.prune(before=resolved.resolved_at + timedelta(seconds=1), limit=10)

    assert [(a.schedule_name, a.state) for a in store.list_alerts()] == [
        ("live", AlertState.OPEN)]


def test_each_change_written_sends_its_outbox_event_once_and_a_refused_write_none(
        store: Store) -> None:
    grant = grant_of(store)
    (opened,) = store.record_alerts([change("open", "s:1")], lease=grant)
    store.record_alerts([change("open", "s:1")], lease=grant)  # planned twice: written once
    store.record_alerts([change("repeat", "s:2")], lease=grant)
    store.record_alerts([change("resolve")], lease=grant)
    store.release(grant)
    with pytest.raises(LeaseLost):
        store.record_alerts([change("open", "s:9")], lease=grant)

    events = store.list_events()
    alert_id = opened.alert.id
    assert [(e.event_id, e.kind) for e in events] == [
        (f"alert:{alert_id}:open", "alert.opened"),
        (f"alert:{alert_id}:repeat:2", "alert.repeated"),
        (f"alert:{alert_id}:resolve", "alert.resolved")]
    payload = events[1].payload
    assert {key: payload[key] for key in ("id", "schedule", "rule", "state", "count", "key",
                                          "action")} == {
        "id": alert_id, "schedule": "s", "rule": "failed", "state": "open", "count": 2,
        "key": "s:2", "action": "repeat"}
    assert payload["summary"] == "s: failed alert again (2 times): repeat s:2"


def test_a_scope_reads_only_the_schedules_whose_verdict_can_have_changed(
        store: Store, clock: StoreClock) -> None:
    grant = grant_of(store)
    for name in ("alerted", "ended", "flying", "fresh", "named", "never", "unsettled"):
        create_due(store, name, steps_back=2)
    create_due(store, "quiet", alert_silent=timedelta(hours=1))

    def run(name: str, *, end: bool, settle: bool = True) -> None:
        (sent,) = store.claim([claim_next(store.get_schedule(name))], lease=grant).dispatches
        store.mark_submitted([sent.key])
        if end:  # it ran, and (with settle) its end was applied to its schedule
            store.record_runs([
                RunEvent.started(sent.key, run="r", worker="celery@w", age=timedelta(0)),
                RunEvent.finished(sent.key, run="r", worker="celery@w", age=timedelta(0),
                                  outcome=RunOutcome.SUCCEEDED)])
            if settle:
                store.settle_runs([RunSettlement(key=sent.key, schedule_name=name,
                                                 version=None)], lease=grant)

    for name in ("ended", "named"):
        run(name, end=True)
    run("flying", end=False)
    run("unsettled", end=True, settle=False)
    clock.advance(0.2)
    since = store.now()
    clock.advance(0.2)
    run("fresh", end=True)  # claimed and ended since
    store.record_alerts([change("open", name="alerted")], lease=grant)

    def read(scope: AlertScope | None) -> list[str]:
        names: list[str] = []
        after = None
        while True:
            page = store.alert_evidence(after=after, limit=2, depth=3, scope=scope)
            names += [schedule.name for schedule, _ in page.schedules]
            if page.last is None:
                return names
            after = page.last

    every = ["alerted", "ended", "flying", "fresh", "named", "never", "quiet", "unsettled"]
    assert read(None) == every
    # A full cycle: what has runs, or an open alert; a schedule that never ran has no verdict.
    assert read(AlertScope()) == ["alerted", "ended", "flying", "fresh", "named", "unsettled"]
    assert read(AlertScope(silent_own=True)) == [
        "alerted", "ended", "flying", "fresh", "named", "quiet", "unsettled"]
    # Since an instant: runs in flight or not settled, claimed since, open alerts, and the
    # names given.
    assert read(AlertScope(changed_since=since)) == ["alerted", "flying", "fresh", "unsettled"]
    assert read(AlertScope(changed_since=since, names=frozenset({"named", "gone"}))) == [
        "alerted", "flying", "fresh", "named", "unsettled"]
    assert read(AlertScope(changed_since=store.now() + timedelta(hours=1))) == [
        "alerted", "flying", "unsettled"]
    # Without run tracking a run the broker took changes no verdict: it is not watched.
    assert read(AlertScope(changed_since=store.now() + timedelta(hours=1),
                           runs_tracked=False)) == ["alerted", "unsettled"]
