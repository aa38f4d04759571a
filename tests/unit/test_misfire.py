"""The misfire planner: a pure function, tested by a table of cases and by properties.

Times in the table are minutes (and seconds) after T0 on a one-minute grid; an occurrence ``p``
is due when ``p + offset <= now`` and late when ``now - (p + offset) > grace``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goatbeat_celery.core.rules.misfire import MAX_COUNTED, MisfirePlan, plan_misfires
from goatbeat_celery.core.rules.triggers import (
    EPOCH,
    IntervalTrigger,
    OnceTrigger,
    SeekableTrigger,
    Trigger,
)
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.spec import MisfirePolicy

UTC = timezone.utc
T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
LATEST, ALL, SKIP = MisfirePolicy.LATEST, MisfirePolicy.ALL, MisfirePolicy.SKIP
#: Minutes down: longer than a walk in full goes without a grace (an hour), short enough for
#: the rest to be counted one by one.
DOWN = 60 * 16


def at(minutes: float = 0, seconds: float = 0, micros: int = 0) -> datetime:
    return T0 + timedelta(minutes=minutes, seconds=seconds, microseconds=micros)


def minutes(first: int, last: int) -> tuple[datetime, ...]:
    return tuple(at(m) for m in range(first, last + 1))


class Walked:
    """Hides IntervalTrigger's points_before, so the planner walks point by point."""

    def __init__(self, inner: Trigger) -> None:
        self.inner = inner

    def next_after(self, instant: datetime) -> datetime | None:
        return self.inner.next_after(instant)

    def describe(self) -> str:
        return f"walked {self.inner.describe()}"


@dataclass(frozen=True)
class Case:
    now: datetime
    policy: MisfirePolicy
    run: tuple[datetime, ...]
    missed: int
    next: datetime | None
    first: datetime = T0
    grace: timedelta | None = timedelta(seconds=60)
    max_catchup: int = 100
    offset: timedelta = timedelta(0)
    once: bool = False


CASES = {
    # Nothing due yet.
    "not-due-yet": Case(now=at(seconds=59), policy=LATEST, first=at(1), run=(), missed=0,
                        next=at(1)),
    "due-exactly-now": Case(now=at(0), policy=LATEST, run=(at(0),), missed=0, next=at(1)),
    "on-time-no-backlog": Case(now=at(seconds=30), policy=LATEST, run=(at(0),), missed=0,
                               next=at(1)),
    # Within the grace, latest coalesces, all runs each, skip runs nothing once behind.
    "exactly-at-grace-latest": Case(now=at(1), policy=LATEST, run=(at(1),), missed=1,
                                    next=at(2)),
    "exactly-at-grace-all": Case(now=at(1), policy=ALL, run=(at(0), at(1)), missed=0,
                                 next=at(2)),
    "exactly-at-grace-skip": Case(now=at(1), policy=SKIP, run=(), missed=2, next=at(2)),
    # A microsecond past the grace, a point is missed under every policy.
    "past-grace-latest": Case(now=at(1, micros=1), policy=LATEST, run=(at(1),), missed=1,
                              next=at(2)),
    "past-grace-all": Case(now=at(1, micros=1), policy=ALL, run=(at(1),), missed=1,
                           next=at(2)),
    "past-grace-skip": Case(now=at(1, micros=1), policy=SKIP, run=(), missed=2, next=at(2)),
    "zero-grace-on-the-dot": Case(now=at(0), policy=SKIP, grace=timedelta(0), run=(at(0),),
                                  missed=0, next=at(1)),
    "zero-grace-a-microsecond-late": Case(now=at(0, micros=1), policy=SKIP, grace=timedelta(0),
                                          run=(), missed=1, next=at(1)),
    # Three hours down, back 30 s after a grid point: 180 points past the grace, one within.
    "backlog-latest": Case(now=at(180, 30), policy=LATEST, run=(at(180),), missed=180,
                           next=at(181)),
    "backlog-all": Case(now=at(180, 30), policy=ALL, run=(at(180),), missed=180,
                        next=at(181)),
    "backlog-skip": Case(now=at(180, 30), policy=SKIP, run=(), missed=181, next=at(181)),
    # A grace of ten minutes covers the last ten points.
    "long-grace-latest": Case(now=at(180, 30), policy=LATEST, grace=timedelta(minutes=10),
                              run=(at(180),), missed=180, next=at(181)),
    "long-grace-all": Case(now=at(180, 30), policy=ALL, grace=timedelta(minutes=10),
                           run=minutes(171, 180), missed=171, next=at(181)),
    "long-grace-all-max-catchup-3": Case(now=at(180, 30), policy=ALL,
                                         grace=timedelta(minutes=10), max_catchup=3,
                                         run=minutes(178, 180), missed=178, next=at(181)),
    "long-grace-skip": Case(now=at(180, 30), policy=SKIP, grace=timedelta(minutes=10),
                            run=(), missed=181, next=at(181)),
    # The same backlog with a 10 s grace: every due point is past it.
    "all-late-latest": Case(now=at(180, 30), policy=LATEST, grace=timedelta(seconds=10),
                            run=(), missed=181, next=at(181)),
    "all-late-all": Case(now=at(180, 30), policy=ALL, grace=timedelta(seconds=10),
                         max_catchup=5, run=(), missed=181, next=at(181)),
    "all-late-skip": Case(now=at(180, 30), policy=SKIP, grace=timedelta(seconds=10), run=(),
                          missed=181, next=at(181)),
    # Offsets shift when a point is due, not the point itself.
    "offset-not-due-yet": Case(now=at(0, 9), policy=LATEST, offset=timedelta(seconds=10),
                               run=(), missed=0, next=at(0)),
    "offset-due": Case(now=at(0, 10), policy=LATEST, offset=timedelta(seconds=10),
                       run=(at(0),), missed=0, next=at(1)),
    "offset-grace-boundary": Case(now=at(1, 10), policy=ALL, offset=timedelta(seconds=10),
                                  run=(at(0), at(1)), missed=0, next=at(2)),
    "offset-past-grace": Case(now=at(1, 11), policy=ALL, offset=timedelta(seconds=10),
                              run=(at(1),), missed=1, next=at(2)),
    "offset-backlog-all": Case(now=at(10, 40), policy=ALL, offset=timedelta(seconds=50),
                               max_catchup=2, grace=timedelta(minutes=2),
                               run=(at(8), at(9)), missed=8, next=at(10)),
    # A once trigger runs within the grace and is missed past it; then it is exhausted.
    "once-on-time": Case(now=at(0, 30), policy=LATEST, once=True, run=(at(0),), missed=0,
                         next=None),
    "once-late-latest": Case(now=at(60), policy=LATEST, once=True, run=(), missed=1,
                             next=None),
    "once-late-with-grace": Case(now=at(60), policy=LATEST, once=True,
                                 grace=timedelta(hours=1), run=(at(0),), missed=0, next=None),
    "once-on-time-skip": Case(now=at(0, 30), policy=SKIP, once=True, run=(at(0),), missed=0,
                              next=None),
    "once-not-due": Case(now=at(-1), policy=SKIP, once=True, run=(), missed=0, next=at(0)),
    # Without a grace (the default) the most recent due point runs however late it is.
    "no-grace-latest": Case(now=at(180, 30), policy=LATEST, grace=None, run=(at(180),),
                            missed=180, next=at(181)),
    "no-grace-all": Case(now=at(180, 30), policy=ALL, grace=None, max_catchup=3,
                         run=minutes(178, 180), missed=178, next=at(181)),
    "no-grace-skip": Case(now=at(180, 30), policy=SKIP, grace=None, run=(), missed=181,
                          next=at(181)),
    "no-grace-skip-one-late-point": Case(now=at(0, 59), policy=SKIP, grace=None,
                                         run=(at(0),), missed=0, next=at(1)),
    "once-late-no-grace": Case(now=at(60 * 24 * 30), policy=LATEST, once=True, grace=None,
                               run=(at(0),), missed=0, next=None),
    # Past what a walk goes in full without a grace: the most recent point still runs.
    "no-grace-sixteen-hours-down": Case(
        now=at(DOWN, 30), policy=LATEST, grace=None, run=(at(DOWN),), missed=DOWN,
        next=at(DOWN + 1)),
}


def expected(case: Case) -> MisfirePlan:
    """The case's plan; when nothing runs, the newest due point is the one given up."""
    given_up = None
    if not case.run and case.missed:
        given_up = T0 if case.once or case.next is None else case.next - MINUTE
    return MisfirePlan(run=case.run, missed=case.missed, next_occurrence=case.next,
                       given_up=given_up)


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_misfire_plan(case: Case) -> None:
    trigger: Trigger = OnceTrigger(T0) if case.once else IntervalTrigger(MINUTE)

    plan = plan_misfires(trigger=trigger, first=case.first, now=case.now, offset=case.offset,
                         policy=case.policy, grace=case.grace, max_catchup=case.max_catchup)

    assert plan == expected(case)


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_a_walked_trigger_plans_like_a_seekable_one(case: Case) -> None:
    inner: Trigger = OnceTrigger(T0) if case.once else IntervalTrigger(MINUTE)

    plan = plan_misfires(trigger=Walked(inner), first=case.first, now=case.now,
                         offset=case.offset, policy=case.policy, grace=case.grace,
                         max_catchup=case.max_catchup)

    assert plan == expected(case)


def test_the_wrapper_really_hides_seeking() -> None:
    assert not isinstance(Walked(IntervalTrigger(MINUTE)), SeekableTrigger)


def test_a_seekable_trigger_plans_a_year_of_downtime_without_walking_it() -> None:
    # 525,601 due points: a walk would be slow; points_before counts them, past the grace and
    # within it.
    plan = plan_misfires(trigger=IntervalTrigger(MINUTE), first=T0, now=at(525_600, 30),
                         policy=ALL, max_catchup=2, grace=timedelta(days=400))

    assert plan.run == (at(525_599), at(525_600))
    assert plan.missed == 525_599


def test_thirty_points_of_a_two_second_schedule_within_the_grace_run_once_under_latest(
        ) -> None:
    every = timedelta(seconds=2)
    first = T0
    plan = plan_misfires(trigger=IntervalTrigger(every), first=first, now=at(1),
                         policy=LATEST, grace=timedelta(seconds=60))

    assert plan.run == (at(1),)
    assert plan.missed == 30


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"grace": timedelta(seconds=-1)}, "misfire_grace"),
    ({"max_catchup": 0}, "max_catchup"),
], ids=["negative-grace", "zero-max-catchup"])
def test_bad_planning_parameters_are_refused_naming_the_setting(kwargs: dict[str, object],
                                                                field: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        plan_misfires(trigger=IntervalTrigger(MINUTE), first=T0, now=at(1),
                      **kwargs)  # type: ignore[arg-type]

    assert raised.value.problems[0].startswith(f"{field}:")


def test_naive_instants_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="naive"):
        plan_misfires(trigger=IntervalTrigger(MINUTE), first=T0, now=datetime(2026, 1, 1))


# -- properties --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Scenario:
    """One generated planning problem on an interval grid, with its due points walked naively."""

    trigger: IntervalTrigger
    first: datetime
    now: datetime
    offset: timedelta
    grace: timedelta | None
    policy: MisfirePolicy
    max_catchup: int

    def plan(self, *, walked: bool = False) -> MisfirePlan:
        trigger: Trigger = Walked(self.trigger) if walked else self.trigger
        return plan_misfires(trigger=trigger, first=self.first, now=self.now,
                             offset=self.offset, policy=self.policy, grace=self.grace,
                             max_catchup=self.max_catchup)

    def due(self) -> list[datetime]:
        points = []
        cursor: datetime | None = self.first
        while cursor is not None and cursor + self.offset <= self.now:
            points.append(cursor)
            cursor = self.trigger.next_after(cursor)
        return points


def scenario(seconds: int, index: int, elapsed: float, offset: float, grace: float | None,
             policy: MisfirePolicy, max_catchup: int) -> Scenario:
    # Durations are generated in steps of the grid, so the naive walk stays short.
    step = timedelta(seconds=seconds)
    first = T0 - (T0 - EPOCH) % step + index * step  # a grid point near T0
    shift = step * offset
    return Scenario(trigger=IntervalTrigger(step), first=first, now=first + shift + step * elapsed,
                    offset=shift, grace=None if grace is None else step * grace,
                    policy=policy, max_catchup=max_catchup)


scenarios = st.builds(
    scenario,
    seconds=st.integers(1, 3600),
    index=st.integers(0, 1000),
    elapsed=st.floats(-3, 300),
    offset=st.floats(0, 0.999),
    grace=st.one_of(st.none(), st.floats(0, 100)),
    policy=st.sampled_from(list(MisfirePolicy)),
    max_catchup=st.integers(1, 50),
)


@given(scenarios)
def test_run_and_missed_account_for_every_due_point(case: Scenario) -> None:
    plan, due = case.plan(), case.due()

    assert set(plan.run) <= set(due)
    assert len(plan.run) + plan.missed == len(due)


@given(scenarios)
def test_the_newest_due_point_is_given_up_when_none_runs(case: Scenario) -> None:
    plan, due = case.plan(), case.due()

    assert plan.given_up == (due[-1] if due and not plan.run else None)


@given(scenarios)
def test_run_is_sorted_without_repeats(case: Scenario) -> None:
    run = case.plan().run

    assert list(run) == sorted(set(run))


@given(scenarios)
def test_the_next_occurrence_is_the_first_point_not_yet_due(case: Scenario) -> None:
    plan, due = case.plan(), case.due()

    assert plan.next_occurrence is not None
    assert plan.next_occurrence > case.now - case.offset
    assert plan.next_occurrence == (case.trigger.next_after(due[-1]) if due else case.first)


@given(scenarios)
def test_the_grace_decides_and_the_policy_chooses_among_the_points_within_it(
        case: Scenario) -> None:
    plan, due = case.plan(), case.due()

    grace = case.grace
    within = [p for p in due if grace is None or case.now - (p + case.offset) <= grace]
    if case.policy is LATEST:
        expected = within[-1:]
    elif case.policy is ALL:
        expected = within[-case.max_catchup:]
    else:
        expected = within if len(due) == 1 else []
    assert list(plan.run) == expected


@given(scenarios)
def test_seekable_and_walked_triggers_agree(case: Scenario) -> None:
    assert case.plan() == case.plan(walked=True)


@given(scenarios)
def test_planning_again_from_the_next_occurrence_finds_nothing_due(case: Scenario) -> None:
    plan = case.plan()
    assert plan.next_occurrence is not None

    again = plan_misfires(trigger=case.trigger, first=plan.next_occurrence, now=case.now,
                          offset=case.offset, policy=case.policy, grace=case.grace)

    assert again == MisfirePlan(run=(), missed=0, next_occurrence=plan.next_occurrence)


def test_a_walked_backlog_of_decades_is_jumped_not_walked() -> None:
    # A next occurrence fifty years behind (a row edited by hand) on a trigger that cannot
    # seek: planning must stay quick, so the count past MAX_COUNTED is a lower bound.
    trigger = Walked(IntervalTrigger(MINUTE))
    first = T0 - timedelta(days=365 * 50)

    plan = plan_misfires(trigger=trigger, first=first, now=at(0, 30), policy=LATEST)

    assert plan.run == (at(0),)
    assert plan.next_occurrence == at(1)
    assert MAX_COUNTED <= plan.missed < 365 * 50 * 24 * 60


class Bursts:
    """Every minute during the first two days of each 60-day period, and never otherwise: a
    trigger whose newest due point can be far older than a walk in full goes
    (:data:`~goatbeat_celery.core.rules.misfire.NO_GRACE_WALK`)."""

    def next_after(self, instant: datetime) -> datetime | None:
        period = timedelta(days=60)
        start = EPOCH + (instant - EPOCH) // period * period
        candidate = EPOCH + ((instant - EPOCH) // MINUTE + 1) * MINUTE
        if candidate < start + timedelta(days=2):
            return candidate
        return start + period

    def describe(self) -> str:
        return "bursts"


def test_without_a_grace_the_newest_point_runs_even_behind_a_long_gap_of_none() -> None:
    # Two days of points (2,880, more than are counted one by one) then 58 days of none:
    # down since the burst began, the newest point of the burst runs, 50 days late.
    trigger = Bursts()
    burst = trigger.next_after(T0 - timedelta(days=60))
    assert burst is not None
    last = burst + timedelta(days=2) - MINUTE
    now = last + timedelta(days=50)

    plan = plan_misfires(trigger=trigger, first=burst, now=now, policy=LATEST)

    assert plan.run == (last,)
    assert plan.next_occurrence == burst + timedelta(days=60)
    assert MAX_COUNTED - 1 <= plan.missed <= 2 * 24 * 60 - 1  # a lower bound, past the count

    older = plan_misfires(trigger=trigger, first=burst, now=now, policy=ALL, max_catchup=3)
    assert older.run == (last - 2 * MINUTE, last - MINUTE, last)


def test_a_grace_opted_into_still_misses_what_is_later_than_it() -> None:
    plan = plan_misfires(trigger=Bursts(), first=T0, now=T0 + timedelta(days=30),
                         policy=LATEST, grace=timedelta(hours=1))

    assert plan.run == ()
