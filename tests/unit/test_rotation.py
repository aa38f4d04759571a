"""Rotation across clusters: the index of an occurrence on its trigger's grid, the queue that
owns it, the handover, and the spec's rules for the fields."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from goatbeat_celery.core.rules.rotation import (
    MAX_DAY_POINTS,
    occurrence_index,
    owner_of,
    place,
)
from goatbeat_celery.core.rules.triggers import EPOCH, IntervalTrigger, OnceTrigger
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.rotation import rotation_problems
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.cron import CronTrigger
from goatbeat_celery.rrule import RRuleTrigger

QUEUES = ("eu", "us")
instants = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2090, 1, 1),
                        timezones=st.just(UTC))


def walk(trigger: object, start: datetime, count: int) -> list[datetime]:
    found, point = [], start
    for _ in range(count):
        point = trigger.next_after(point)  # type: ignore[attr-defined]
        found.append(point)
    return found


@given(every=st.integers(min_value=1, max_value=86_400 * 30), index=st.integers(0, 10**5))
def test_an_interval_occurrence_is_its_grid_point(every: int, index: int) -> None:
    assume(index * every < 3_000_000_000)  # within the instants a trigger gives (to 2065)
    trigger = IntervalTrigger(timedelta(seconds=every))
    occurrence = EPOCH + index * timedelta(seconds=every)
    assert occurrence_index(trigger, occurrence) == index


@given(every=st.integers(min_value=1, max_value=3600), start=instants,
       queues=st.integers(min_value=2, max_value=5))
def test_consecutive_interval_occurrences_take_turns(every: int, start: datetime,
                                                     queues: int) -> None:
    trigger = IntervalTrigger(timedelta(seconds=every))
    names = [f"q{i}" for i in range(queues)]
    points = walk(trigger, start, 2 * queues)
    owners = [owner_of(names, occurrence_index(trigger, p)) for p in points]
    # Every N in a row cover the N queues, in the list's order.
    for first in range(queues):
        assert owners[first:first + queues] == [names[(names.index(owners[first]) + i) % queues]
                                                for i in range(queues)]


@pytest.mark.parametrize("expression", ["0 * * * *", "*/15 * * * *", "0 9,17 * * *",
                                        "30 3 * * *", "*/7 * * * *"])
@given(start=instants)
def test_a_cron_with_as_many_occurrences_each_day_counts_them_one_by_one(
        expression: str, start: datetime) -> None:
    trigger = CronTrigger(expression)
    points = walk(trigger, start, 6)
    indexes = [occurrence_index(trigger, p) for p in points]
    assert indexes == list(range(indexes[0], indexes[0] + len(points)))


def test_a_weekday_cron_keeps_each_owner_stable_across_the_weekend() -> None:
    trigger = CronTrigger("0 9 * * 1-5", "Europe/Paris")
    points = walk(trigger, datetime(2030, 1, 1, tzinfo=UTC), 15)
    indexes = [occurrence_index(trigger, p) for p in points]
    assert indexes == sorted(set(indexes))  # strictly increasing: no two share an index
    # Asked again, in any order (a restart, another leader), the same.
    assert [occurrence_index(trigger, p) for p in reversed(points)] == indexes[::-1]


def test_an_rrule_and_a_once_trigger_have_indexes() -> None:
    rule = RRuleTrigger("DTSTART:20300101T000000Z\nRRULE:FREQ=HOURLY;INTERVAL=2")
    points = walk(rule, datetime(2030, 1, 3, tzinfo=UTC), 4)
    indexes = [occurrence_index(rule, p) for p in points]
    assert indexes == list(range(indexes[0], indexes[0] + 4))
    once = OnceTrigger(datetime(2030, 5, 1, 12, tzinfo=UTC))
    assert occurrence_index(once, once.at) == occurrence_index(once, once.at)


def test_a_trigger_denser_than_a_minute_counts_minutes() -> None:
    rule = RRuleTrigger("DTSTART:20300101T000000Z\nRRULE:FREQ=SECONDLY;INTERVAL=30")
    assert 86_400 // 30 > MAX_DAY_POINTS
    at = datetime(2030, 1, 2, 0, 5, tzinfo=UTC)
    assert occurrence_index(rule, at) == (at - EPOCH) // timedelta(minutes=1)


def test_a_run_now_between_occurrences_goes_where_the_next_would() -> None:
    trigger = CronTrigger("0 * * * *")
    between = datetime(2030, 1, 1, 10, 30, tzinfo=UTC)
    assert occurrence_index(trigger, between) == occurrence_index(
        trigger, datetime(2030, 1, 1, 11, tzinfo=UTC))


def test_without_handover_the_owner_keeps_its_occurrence() -> None:
    placement = place(QUEUES, 1, handover=False, consumed=lambda queue: False)
    assert (placement.queue, placement.owner, placement.handed_over) == ("us", "us", False)


def test_with_handover_an_unconsumed_owner_gives_it_to_the_next_queue() -> None:
    consumed = {"a": True, "b": False, "c": False}
    placement = place(("a", "b", "c"), 1, handover=True, consumed=consumed.get)
    assert (placement.queue, placement.owner, placement.handed_over) == ("a", "b", True)
    # The next one after the owner, in the list's order, not the first.
    consumed = {"a": True, "b": False, "c": True}
    assert place(("a", "b", "c"), 1, handover=True, consumed=consumed.get).queue == "c"


def test_with_handover_nobody_anywhere_or_unknown_leaves_it_with_the_owner() -> None:
    assert place(QUEUES, 0, handover=True, consumed=lambda q: False).queue == "eu"
    assert place(QUEUES, 0, handover=True, consumed=lambda q: None).queue == "eu"
    asked: list[str] = []
    place(QUEUES, 0, handover=True, consumed=lambda q: asked.append(q) or True)
    assert asked == ["eu"]  # a consumed owner: nothing else asked


def spec(**fields: object) -> ScheduleSpec:
    return ScheduleSpec(name="r", task="t", trigger=TriggerSpec(kind="interval",
                                                                 params={"every": 60}),
                        **fields)  # type: ignore[arg-type]


def test_a_rotation_of_two_distinct_queues_is_valid() -> None:
    assert spec(rotate=("eu", "us"), rotate_handover=True).problems() == []
    assert rotation_problems((), False) == []


def test_bad_rotations_are_refused_with_every_problem_at_once() -> None:
    found = spec(rotate=("eu", "eu", "", 3), rotate_handover="yes",
                 options={"queue": "other"}).problems()
    texts = [problem.text for problem in found]
    assert any(t.startswith("rotate_handover: expected true or false") for t in texts)
    assert any(t.startswith("rotate: '' is empty") for t in texts)
    assert any(t.startswith("rotate: 3 is not a string") for t in texts)
    assert any(t.startswith("rotate: 'eu' given more than once") for t in texts)
    conflict = [p for p in found if p.field == "options.queue"]
    assert conflict and "rotate" in conflict[0].message
    assert all(problem.subject == "schedule 'r'" for problem in found)


@pytest.mark.parametrize(("fields", "start"), [
    ({"rotate": ("eu",)}, "rotate: 1 queue given; name at least two"),
    ({"rotate": "eu,us"}, "rotate: expected a list of queue names"),
    ({"rotate_handover": True}, "rotate_handover: handover needs a rotation"),
    ({"rotate": ("eu", " us")}, "rotate: ' us' holds a comma"),
])
def test_each_bad_rotation_names_its_field_and_fix(fields: dict[str, object],
                                                   start: str) -> None:
    texts = [problem.text for problem in spec(**fields).problems()]
    assert any(text.startswith(start) for text in texts), texts


def test_the_rotation_changes_the_spec_hash_only_when_set() -> None:
    plain = spec()
    assert spec(rotate=(), rotate_handover=False).spec_hash() == plain.spec_hash()
    assert spec(rotate=("eu", "us")).spec_hash() != plain.spec_hash()
    assert (spec(rotate=("eu", "us"), rotate_handover=True).spec_hash()
            != spec(rotate=("eu", "us")).spec_hash())
    assert spec(rotate=("us", "eu")).spec_hash() != spec(rotate=("eu", "us")).spec_hash()


def test_the_engine_gives_each_rotated_dispatch_its_index_and_leaves_the_others() -> None:
    from goatbeat_celery.core.loop.rotation import indexed
    from goatbeat_celery.core.loop.trigger_cache import TriggerCache
    from goatbeat_celery.core.rules.triggers import TriggerRegistry
    from goatbeat_celery.core.types.claims import Dispatch
    from goatbeat_celery.core.types.execution import Execution, ExecutionState

    def made(name: str, trigger: dict[str, object] | None, rotate: tuple[str, ...]) -> Dispatch:
        at = EPOCH + timedelta(minutes=7)
        execution = Execution(key=f"{name}:{at.isoformat()}", schedule_name=name,
                              occurrence_at=at, due_at=at, token=1,
                              state=ExecutionState.CLAIMED, claimed_at=at)
        return Dispatch(execution=execution, task="t", args=(), kwargs={}, options={},
                        trigger=trigger, rotate=rotate)  # type: ignore[arg-type]

    cache = TriggerCache(TriggerRegistry.default())
    plain = [made("p", {"kind": "interval", "every": 60}, ())]
    assert indexed(plain, cache) is plain  # nothing rotated: the same list
    rotated, broken, unread = indexed(
        [made("r", {"kind": "interval", "every": 60}, QUEUES),
         made("b", {"kind": "lunar"}, QUEUES), made("u", None, QUEUES)], cache)
    assert rotated.rotation_index == 7
    assert broken.rotation_index is None and unread.rotation_index is None
