"""Schedules: stored faithfully, edited with compare-and-set, listed by name."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import timedelta
from typing import Any

import pytest

from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.status import State
from goatbeat_celery.core.types.errors import ScheduleConflict, ScheduleNotFound
from goatbeat_celery.core.types.listing import RunOrderCursor, ScheduleCounts, ScheduleOrder
from goatbeat_celery.core.types.schedule import PauseNote, Schedule
from goatbeat_celery.core.types.set_aside import SetAside
from goatbeat_celery.core.types.spec import MisfirePolicy, ScheduleSource, ScheduleSpec, TriggerSpec
from tests.support.fields import only_fields

from .conftest import Store, StoreClock
from .support import LONG_TTL, claim_next, create_due, interval_spec, snapshot


def test_a_schedule_reads_back_exactly_as_created(store: Store) -> None:
    spec = ScheduleSpec(
        name="reports:daily", task="proj.tasks.report",
        trigger=TriggerSpec(kind="cron", params={"expression": "30 2 * * *",
                                                 "timezone": "Europe/Paris"}),
        args=(1, "two", [3.5, None], {"k": True}), kwargs={"to": ["ops"], "nested": {"a": 1}},
        options={"queue": "reports", "priority": 3, "expires": 120},
        misfire_policy=MisfirePolicy.ALL, misfire_grace=timedelta(seconds=90.5),
        max_catchup=7, jitter=timedelta(minutes=5), enabled=False,
        source=ScheduleSource.CONFIG,
    )
    now = store.now()
    occurrence = now + timedelta(hours=1, microseconds=123)

    created = store.create_schedule(spec, next_occurrence_at=occurrence,
                                    next_run_at=occurrence + timedelta(minutes=2))

    stored = store.get_schedule("reports:daily")
    assert stored == created
    assert stored.spec == spec
    assert stored.spec.spec_hash() == spec.spec_hash()
    assert (stored.next_occurrence_at, stored.next_run_at) == (
        occurrence, occurrence + timedelta(minutes=2))
    assert stored.next_run_at is not None and stored.next_run_at.utcoffset() == timedelta(0)
    assert (stored.row_version, stored.total_runs, stored.total_missed) == (1, 0, 0)
    assert stored.last_occurrence_at is None
    assert stored.created_at is not None and now <= stored.created_at <= store.now()


def test_every_field_reads_back_as_created_from_a_read_and_from_the_due_read(
        store: Store) -> None:
    start = store.now().replace(microsecond=0) - timedelta(days=1)
    offset = ScheduleSpec(
        name="every:field", task="proj.tasks.report",
        trigger=TriggerSpec(kind="interval", params={"every": 600}),
        args=(1, "two"), kwargs={"to": ["ops"]}, options={"priority": 3},
        misfire_policy=MisfirePolicy.ALL, misfire_grace=timedelta(seconds=90.5),
        max_catchup=7, offset=timedelta(seconds=30), starting_deadline=timedelta(seconds=45),
        overlap=OverlapPolicy.SKIP, mode=ScheduleMode.FIXED_DELAY,
        failure_backoff=timedelta(seconds=10), failure_backoff_factor=3.0,
        failure_backoff_max=timedelta(minutes=5), pause_after_failures=4, run_resends=2,
        alert_late=timedelta(seconds=20), alert_failures=2, max_runtime=timedelta(minutes=3),
        alert_silent=timedelta(hours=2), alert_missed=1, alert_lost=1, start_at=start,
        end_at=start + timedelta(days=30), max_runs=50, description="monthly",
        tags=("billing", "nightly"), calendars=("holidays",), rotate=("q1", "q2"),
        rotate_handover=True, source=ScheduleSource.CONFIG)
    jitter = replace(offset, name="every:field:jitter", offset=None,
                     jitter=timedelta(seconds=20), enabled=False)
    # Between them, the two set every field of a spec to other than its default.
    bare = ScheduleSpec(name="", task="", trigger=TriggerSpec(kind=""))
    assert not [f.name for f in fields(ScheduleSpec)
                if getattr(offset, f.name) == getattr(jitter, f.name) == getattr(bare, f.name)]
    now = store.now()
    for spec in (offset, jitter):
        store.create_schedule(spec, next_occurrence_at=now, next_run_at=now)

    (due,) = store.due_schedules(10).schedules
    read = [store.get_schedule(offset.name), store.get_schedule(jitter.name), due]

    assert [schedule.spec for schedule in read] == [offset, jitter, offset]
    for schedule in read:
        only_fields(schedule)
        only_fields(schedule.spec)


def test_a_taken_name_cannot_be_created_again(store: Store) -> None:
    original = store.create_schedule(interval_spec("report"), next_occurrence_at=None,
                                     next_run_at=None)

    with pytest.raises(ScheduleConflict):
        store.create_schedule(interval_spec("report", every=5), next_occurrence_at=None,
                              next_run_at=None)

    assert snapshot(store.get_schedule("report")) == snapshot(original)


def test_replace_increments_the_version_and_keeps_the_source(
    store: Store, clock: StoreClock
) -> None:
    created = store.create_schedule(interval_spec("report", source=ScheduleSource.CONFIG),
                                    next_occurrence_at=None, next_run_at=None)
    clock.advance(0.01)
    later = store.now() + timedelta(minutes=1)

    replaced = store.replace_schedule(interval_spec("report", every=300),
                                      next_occurrence_at=later, next_run_at=later)

    stored = store.get_schedule("report")
    assert stored == replaced
    assert (stored.row_version, stored.spec.source) == (2, ScheduleSource.CONFIG)
    assert stored.spec.trigger.params == {"every": 300}
    assert stored.next_run_at == later
    assert created.updated_at is not None and stored.updated_at is not None
    assert stored.updated_at > created.updated_at
    assert stored.created_at == created.created_at


def test_replace_with_a_stale_version_changes_nothing(store: Store) -> None:
    store.create_schedule(interval_spec("report"), next_occurrence_at=None, next_run_at=None)
    current = store.replace_schedule(interval_spec("report", every=120), next_occurrence_at=None,
                                     next_run_at=None, expected_version=1)

    with pytest.raises(ScheduleConflict):
        store.replace_schedule(interval_spec("report", every=5), next_occurrence_at=None,
                               next_run_at=None, expected_version=1)

    assert snapshot(store.get_schedule("report")) == snapshot(current)


def test_replacing_or_deleting_a_missing_schedule_is_not_found(store: Store) -> None:
    with pytest.raises(ScheduleNotFound):
        store.replace_schedule(interval_spec("missing"), next_occurrence_at=None,
                               next_run_at=None)
    with pytest.raises(ScheduleNotFound):
        store.delete_schedule("missing")
    with pytest.raises(ScheduleNotFound):
        store.get_schedule("missing")

    assert store.list_schedules() == []


def test_list_schedules_is_ordered_by_name_and_filtered(store: Store) -> None:
    for name, enabled, source in (("b-two", True, ScheduleSource.API),
                                  ("a-one", False, ScheduleSource.CONFIG),
                                  ("b-one", True, ScheduleSource.CONFIG),
                                  ("c-one", True, ScheduleSource.API)):
        store.create_schedule(interval_spec(name, enabled=enabled, source=source),
                              next_occurrence_at=None, next_run_at=None)

    def names(**filters: object) -> list[str]:
        return [s.name for s in store.list_schedules(**filters)]

    assert names() == ["a-one", "b-one", "b-two", "c-one"]
    assert names(paused=True) == ["a-one"]
    assert names(source=ScheduleSource.CONFIG) == ["a-one", "b-one"]
    assert names(prefix="b-") == ["b-one", "b-two"]
    assert names(paused=False, source=ScheduleSource.API, limit=1) == ["b-two"]


def test_a_pause_with_an_end_counts_as_paused_until_it_ends(store: Store) -> None:
    # core.rules.status: within a pause with an end a schedule is paused, though still enabled.
    for name in ("frozen", "sale", "done", "running"):
        store.create_schedule(interval_spec(name), next_occurrence_at=None, next_run_at=None)
    now = store.now()
    store.replace_schedule(interval_spec("sale"), next_occurrence_at=None, next_run_at=None,
                           pause=PauseNote(reason="review", until=now + timedelta(hours=1)))
    store.replace_schedule(interval_spec("done"), next_occurrence_at=None, next_run_at=None,
                           pause=PauseNote(reason="over", until=now - timedelta(hours=1)))
    store.replace_schedule(interval_spec("frozen", enabled=False), next_occurrence_at=None,
                           next_run_at=None, pause=PauseNote(reason="vendor"))

    assert [s.name for s in store.list_schedules(paused=True)] == ["frozen", "sale"]
    assert [s.name for s in store.list_schedules(paused=False)] == ["done", "running"]
    assert store.count_schedules().paused == 2


def test_a_prefix_is_matched_literally(store: Store) -> None:
    for name in ("100%_done", "100_x", "1000"):
        store.create_schedule(interval_spec(name), next_occurrence_at=None, next_run_at=None)

    assert [s.name for s in store.list_schedules(prefix="100%_")] == ["100%_done"]


def test_deleting_a_schedule_keeps_its_history(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    store.claim([claim_next(create_due(store, "report"))], lease=grant)

    store.delete_schedule("report")

    assert store.list_schedules() == []
    assert [e.schedule_name for e in store.executions()] == ["report"]


def test_schedules_page_by_name_after_the_last_one_seen(store: Store) -> None:
    for name in ("b", "a", "d", "c", "ab"):
        store.create_schedule(interval_spec(name), next_occurrence_at=None, next_run_at=None)

    first = [s.name for s in store.list_schedules(limit=2)]
    second = [s.name for s in store.list_schedules(limit=2, after=first[-1])]
    rest = [s.name for s in store.list_schedules(after=second[-1])]

    assert (first, second, rest) == (["a", "ab"], ["b", "c"], ["d"])
    assert [s.name for s in store.list_schedules(prefix="a", after="a")] == ["ab"]


def test_schedules_page_by_next_run_with_those_without_one_last(store: Store) -> None:
    now = store.now()
    runs = {"late": now + timedelta(minutes=5), "soon": now + timedelta(seconds=1),
            "tie-b": now + timedelta(minutes=1), "tie-a": now + timedelta(minutes=1),
            "never-b": None, "never-a": None, "paused": now + timedelta(seconds=30)}
    for name, at in runs.items():
        store.create_schedule(interval_spec(name, enabled=name != "paused"),
                              next_occurrence_at=at, next_run_at=at)
    by_run = ScheduleOrder.NEXT_RUN

    def page(after: RunOrderCursor | None, **filters: Any) -> list[Schedule]:
        return store.list_schedules(order=by_run, after=after, limit=2, **filters)

    seen: list[str] = []
    cursor: RunOrderCursor | None = None
    while found := page(cursor):
        seen += [s.name for s in found]
        cursor = RunOrderCursor(next_run_at=found[-1].next_run_at, name=found[-1].name)

    assert seen == ["soon", "paused", "tie-a", "tie-b", "late", "never-a", "never-b"]
    assert [s.name for s in page(None, paused=False)] == ["soon", "tie-a"]
    assert [s.name for s in store.list_schedules(order=by_run, prefix="never")] == [
        "never-a", "never-b"]
    with pytest.raises(TypeError, match="after"):
        store.list_schedules(order=by_run, after="soon")
    with pytest.raises(TypeError, match="after"):
        store.list_schedules(after=RunOrderCursor(next_run_at=None, name="soon"))


def test_counts_say_how_many_schedules_in_all_and_by_state_and_source(store: Store) -> None:
    assert store.count_schedules() == ScheduleCounts(total=0, paused=0, set_aside=0, config=0,
                                                     api=0, by_state=dict.fromkeys(State, 0))
    for name, enabled, source in (("a", True, ScheduleSource.API),
                                  ("b", False, ScheduleSource.API),
                                  ("c", False, ScheduleSource.CONFIG),
                                  ("d", True, ScheduleSource.CONFIG),
                                  ("e", True, ScheduleSource.CONFIG)):
        store.create_schedule(interval_spec(name, enabled=enabled, source=source),
                              next_occurrence_at=None, next_run_at=None)

    assert store.count_schedules() == ScheduleCounts(
        total=5, paused=2, set_aside=0, config=3, api=2,
        by_state={**dict.fromkeys(State, 0), State.ENABLED: 3, State.PAUSED: 2})


def test_counts_by_state_agree_with_each_schedules_status(store: Store) -> None:
    now = store.now()
    # Enabled: one due, one with runs left, one whose end is ahead.
    create_due(store, "running")
    store.create_schedule(interval_spec("counting", max_runs=5), next_occurrence_at=now,
                          next_run_at=now)
    store.create_schedule(interval_spec("ending", end_at=now + timedelta(days=1)),
                          next_occurrence_at=now, next_run_at=now)
    # Paused, and paused with a fault: the pause comes first.
    for name in ("frozen", "frozen-and-broken"):
        store.create_schedule(interval_spec(name, enabled=False), next_occurrence_at=None,
                              next_run_at=None)
    store.create_schedule(interval_spec("sale"), next_occurrence_at=now, next_run_at=now)
    store.replace_schedule(interval_spec("sale"), next_occurrence_at=now, next_run_at=now,
                           pause=PauseNote(reason="review", until=now + timedelta(hours=1)))
    create_due(store, "broken")
    # Ended: its end passed, or its runs used up, with no next run.
    store.create_schedule(interval_spec("over", end_at=now - timedelta(hours=1)),
                          next_occurrence_at=None, next_run_at=None)
    store.create_schedule(interval_spec("used-up", max_runs=0), next_occurrence_at=None,
                          next_run_at=None)
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    store.set_aside([SetAside(schedule_name=name, version=None, reason="bad task")
                     for name in ("broken", "frozen-and-broken")], lease=grant)

    counts = store.count_schedules()

    now = store.now()
    statuses = [s.status_at(now).state for s in store.list_schedules()]
    assert counts.by_state == {state: statuses.count(state) for state in State}
    assert counts.by_state == {State.ENABLED: 3, State.PAUSED: 2, State.PAUSED_UNTIL: 1,
                               State.SET_ASIDE: 1, State.ENDED: 2}


def test_args_kwargs_and_options_keep_the_order_of_their_keys(store: Store) -> None:
    """A task gets its kwargs in the order written, as under Celery's own beat (PostgreSQL's
    jsonb would sort them)."""
    spec = interval_spec("ordered", args=({"second": 2, "first": 1},),
                         kwargs={"zeta": 1, "a": {"y": 0, "b": 1}},
                         options={"queue": "q", "expires": 60})
    store.create_schedule(spec, next_occurrence_at=None, next_run_at=None)

    stored = store.get_schedule("ordered").spec

    assert list(stored.args[0]) == ["second", "first"]
    assert list(stored.kwargs) == ["zeta", "a"] and list(stored.kwargs["a"]) == ["y", "b"]
    assert list(stored.options) == ["queue", "expires"]
