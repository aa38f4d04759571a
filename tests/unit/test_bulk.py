"""Bulk actions of the Schedules API (pause, resume, run now by names or tag, one reason), on
the memory store and a manual clock: each schedule its own compare-and-set with its own audit
entry, one schedule's refusal told beside it, a call refused whole changing nothing."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.api.bulk import MAX_BULK
from goatbeat_celery.core.types.audit import AuditAction
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.testing import ManualClock, MemoryStore

NOW = datetime(2026, 1, 5, 12, 0, 30, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def store(clock: ManualClock) -> MemoryStore:
    return MemoryStore(clock)


@pytest.fixture
def schedules(store: MemoryStore) -> Schedules:
    found = Schedules(store, actor="ops:ann")
    for name, tags in (("a", ["nightly"]), ("b", ["nightly"]), ("c", ["other"])):
        found.create(name, "feeds.poll", every=60, tags=tags)
    return found


def test_pause_by_tag_pauses_each_with_one_audit_entry_and_the_same_reason(
        schedules: Schedules) -> None:
    result = schedules.pause_many(tag="nightly", reason="deploy freeze")
    assert [(o.name, o.done, o.reason) for o in result.outcomes] == [
        ("a", True, "paused"), ("b", True, "paused")]
    for name in ("a", "b"):
        assert not schedules.get(name).spec.enabled
        entry = schedules.audit(name, limit=1)[0]
        assert (entry.action, entry.actor, entry.reason) == (
            AuditAction.PAUSE, "ops:ann", "deploy freeze")
    assert schedules.get("c").spec.enabled
    assert [e.action for e in schedules.audit("c")] == [AuditAction.CREATE]


def test_pause_until_ends_by_itself_and_refuses_those_already_paused(
        schedules: Schedules) -> None:
    schedules.pause("b", note="by hand")
    until = NOW + timedelta(hours=1)
    result = schedules.pause_many(["a", "b"], until=until, reason="maintenance")
    assert [(o.name, o.done, o.reason) for o in result.outcomes] == [
        ("a", True, "paused"), ("b", False, "already paused")]
    assert schedules.get("a").paused_until == until
    kept = schedules.get("b")
    assert (kept.spec.enabled, kept.paused_reason, kept.paused_until) == (False, "by hand", None)
    assert [e.action for e in schedules.audit("b")] == [AuditAction.PAUSE, AuditAction.CREATE]


def test_one_missing_name_is_refused_beside_the_others_which_are_done(
        schedules: Schedules) -> None:
    result = schedules.pause_many(["a", "ghost", "c"], reason="r")
    assert result.as_json() == {
        "action": "pause",
        "done": [{"name": "a", "done": True, "reason": "paused"},
                 {"name": "c", "done": True, "reason": "paused"}],
        "refused": [{"name": "ghost", "done": False, "reason": "not found",
                     "refusal": "not_found"}]}


def test_resume_refuses_a_schedule_not_paused_and_one_set_aside(
        schedules: Schedules, store: MemoryStore) -> None:
    schedules.pause_many(["a", "b"], reason="freeze")
    with store._lock:  # the leader set b aside meanwhile
        b = store._schedules["b"]
        store._schedules["b"] = replace(b, fault="trigger cannot be built")
    result = schedules.resume_many(["a", "b", "c"], reason="thaw")
    assert [(o.name, o.done, o.reason) for o in result.outcomes] == [
        ("a", True, "resumed"),
        ("b", False, "set aside: trigger cannot be built; repair it first"),
        ("c", False, "not paused")]
    assert schedules.get("a").spec.enabled and not schedules.get("b").spec.enabled
    assert schedules.audit("a", limit=1)[0].reason == "thaw"


def test_run_now_queues_a_run_of_each_with_its_key(schedules: Schedules,
                                                    store: MemoryStore) -> None:
    result = schedules.run_now_many(tag="nightly", reason="catch up")
    assert [o.name for o in result.done] == ["a", "b"]
    keys = [o.run_key for o in result.done]
    assert all(keys) and len(set(keys)) == 2
    assert set(store.executions_by_key([k for k in keys if k])) == set(keys)
    assert [e.reason for e in schedules.audit("a", limit=1)] == ["catch up"]
    assert schedules.audit("a", limit=1)[0].action is AuditAction.RUN_NOW


@pytest.mark.parametrize(("call", "fields"), [
    (lambda s: s.pause_many([]), ["names"]),
    (lambda s: s.pause_many(), ["names"]),
    (lambda s: s.resume_many(tag="nothing-has-it"), ["tag"]),
    (lambda s: s.run_now_many(["a"], tag="nightly"), ["tag"]),
    (lambda s: s.pause_many(["a"], until=NOW - timedelta(seconds=1), reason="x" * 5000),
     ["until", "reason"]),
    (lambda s: s.bulk("explode", ["a"]), ["action"]),
    (lambda s: s.bulk("resume", ["a"], until=NOW + timedelta(hours=1)), ["until"]),
])
def test_a_call_refused_whole_names_every_field_and_changes_nothing(
        schedules: Schedules, call: object, fields: list[str]) -> None:
    with pytest.raises(ConfigurationError) as caught:
        call(schedules)  # type: ignore[operator]
    assert [p.field for p in caught.value.details] == fields
    assert all(schedules.get(n).spec.enabled for n in "abc")
    assert all(len(schedules.audit(n)) == 1 for n in "abc")


def test_a_tag_selecting_too_many_is_refused(schedules: Schedules) -> None:
    for i in range(MAX_BULK + 1):
        schedules.create(f"many-{i:04d}", "feeds.poll", every=60, tags=["many"])
    with pytest.raises(ConfigurationError, match="more than"):
        schedules.pause_many(tag="many")
    assert schedules.get("many-0000").spec.enabled


def test_within_a_prefix_refuses_the_names_outside_and_selects_a_tag_inside(
        schedules: Schedules) -> None:
    result = schedules.pause_many(["a", "c"], within="a", reason="r")
    assert [(o.name, o.done) for o in result.outcomes] == [("a", True), ("c", False)]
    assert "outside" in result.refused[0].reason
    result = schedules.resume_many(tag="nightly", within="b")
    assert [o.name for o in result.outcomes] == ["b"]


def test_every_schedule_refused_says_why_as_a_whole(schedules: Schedules) -> None:
    schedules.pause("a")
    # One done: not refused as a whole, whatever the others.
    assert schedules.pause_many(["a", "b", "ghost"]).refused_whole is None
    # One refused for its state outweighs a missing one; outside the prefix outweighs missing.
    assert schedules.pause_many(["a", "ghost"]).refused_whole == "conflict"
    assert schedules.resume_many(["c", "ghost"], within="c").refused_whole == "conflict"
    assert schedules.run_now_many(["c", "ghost"], within="a").refused_whole == "outside"
    found = schedules.run_now_many(["ghost", "phantom"])
    assert found.refused_whole == "not_found"
    assert [o.refusal for o in found.refused] == ["not_found", "not_found"]
    assert not schedules.executions()
