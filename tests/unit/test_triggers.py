"""Core triggers: the interval grid, once, stable jitter, where a schedule starts, the registry."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goatbeat_celery.core.rules.misfire import first_occurrence
from goatbeat_celery.core.rules.triggers import (
    EPOCH,
    IntervalTrigger,
    OnceTrigger,
    SeekableTrigger,
    Trigger,
    TriggerRegistry,
)
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.spec import TriggerSpec, stable_jitter

UTC = timezone.utc
MICRO = timedelta(microseconds=1)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


# -- IntervalTrigger ---------------------------------------------------------------------------

def test_the_interval_grid_is_anchored_at_the_epoch() -> None:
    trigger = IntervalTrigger(timedelta(seconds=7))

    following = trigger.next_after(datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC))

    assert following is not None
    assert (following - EPOCH) % timedelta(seconds=7) == timedelta(0)
    assert timedelta(0) < following - datetime(2026, 3, 1, 12, tzinfo=UTC) <= timedelta(seconds=7)


def test_replicas_started_at_different_times_agree_on_the_grid() -> None:
    trigger = IntervalTrigger(timedelta(minutes=10))
    started_here = trigger.next_after(datetime(2026, 1, 1, 9, 1, 13, tzinfo=UTC))
    started_there = trigger.next_after(datetime(2026, 1, 1, 9, 8, 2, tzinfo=UTC))

    assert started_here == started_there == datetime(2026, 1, 1, 9, 10, tzinfo=UTC)


def test_next_after_a_grid_point_is_the_following_point() -> None:
    trigger = IntervalTrigger(timedelta(minutes=1))

    assert trigger.next_after(T0) == T0 + timedelta(minutes=1)
    assert trigger.next_after(T0 - MICRO) == T0


def test_interval_arithmetic_is_exact_far_from_the_epoch() -> None:
    # A float of seconds since 1970 cannot hold microseconds in 2200; integer arithmetic can.
    trigger = IntervalTrigger(timedelta(microseconds=7))
    instant = datetime(2200, 6, 1, 0, 0, 0, 123456, tzinfo=UTC)

    following = trigger.next_after(instant)

    assert following is not None
    assert (following - EPOCH) // MICRO % 7 == 0
    assert MICRO <= following - instant <= 7 * MICRO


def test_fractional_seconds_from_params_stay_exact() -> None:
    trigger = IntervalTrigger.from_params({"every": 0.1})
    points = [T0]
    for _ in range(10):
        following = trigger.next_after(points[-1])
        assert following is not None
        points.append(following)

    assert points[-1] == T0 + timedelta(seconds=1)


def test_next_after_converts_any_aware_instant() -> None:
    trigger = IntervalTrigger(timedelta(hours=1))
    paris_noon = datetime(2026, 1, 1, 12, 30, tzinfo=timezone(timedelta(hours=1)))

    assert trigger.next_after(paris_noon) == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_asking_again_about_an_instant_answers_the_same_and_others_their_own() -> None:
    trigger = IntervalTrigger(timedelta(hours=1))
    first = datetime(2026, 1, 1, 10, 30, tzinfo=UTC)

    assert trigger.next_after(first) == datetime(2026, 1, 1, 11, 0, tzinfo=UTC)
    assert trigger.next_after(first + timedelta(0)) == datetime(2026, 1, 1, 11, 0, tzinfo=UTC)
    assert trigger.next_after(first.astimezone(timezone(timedelta(hours=1)))) == datetime(
        2026, 1, 1, 11, 0, tzinfo=UTC)
    assert trigger.next_after(first + timedelta(hours=1)) == datetime(
        2026, 1, 1, 12, 0, tzinfo=UTC)
    with pytest.raises(ConfigurationError, match="naive"):
        trigger.next_after(first.replace(tzinfo=None))


@given(
    step=st.integers(1, 10**10),
    index=st.integers(-(10**6), 10**6),
    span=st.integers(0, 10**12),
    keep=st.integers(0, 25),
)
def test_points_before_agrees_with_walking_the_grid(step: int, index: int, span: int,
                                                    keep: int) -> None:
    trigger = IntervalTrigger(timedelta(microseconds=step))
    start = T0 - (T0 - EPOCH) % trigger.every + index * trigger.every
    bound = start + timedelta(microseconds=span)

    count, tail = trigger.points_before(start, bound, keep)

    # Walk at most a bounded number of points; beyond that compare the count arithmetically.
    walked = []
    cursor: datetime | None = start
    while cursor is not None and cursor < bound and len(walked) <= 2000:
        walked.append(cursor)
        cursor = trigger.next_after(cursor)
    if len(walked) <= 2000:
        assert count == len(walked)
        assert tail == (walked[-keep:] if keep else [])
    else:
        assert count == -(-span // step)
        assert len(tail) == keep
        assert all(trigger.next_after(a) == b for a, b in zip(tail, tail[1:], strict=False))
        if tail:
            assert tail[-1] < bound <= tail[-1] + trigger.every


def test_an_interval_trigger_is_seekable() -> None:
    assert isinstance(IntervalTrigger(timedelta(seconds=1)), SeekableTrigger)
    assert not isinstance(OnceTrigger(T0), SeekableTrigger)


@pytest.mark.parametrize("every", [timedelta(0), timedelta(seconds=-5), timedelta(microseconds=-1)],
                         ids=["zero", "negative", "minus-one-microsecond"])
def test_a_non_positive_interval_is_refused_naming_every(every: timedelta) -> None:
    with pytest.raises(ConfigurationError) as raised:
        IntervalTrigger(every)

    assert raised.value.problems[0].startswith("every:")


@pytest.mark.parametrize("every", [0, -1, -0.5, True, "60", None],
                         ids=["zero", "negative", "negative-float", "bool", "string", "missing"])
def test_from_params_refuses_a_bad_every_naming_it(every: object) -> None:
    params = {} if every is None else {"every": every}

    with pytest.raises(ConfigurationError) as raised:
        IntervalTrigger.from_params(params)

    assert raised.value.problems[0].startswith("every:")


def test_an_interval_round_trips_through_its_spec() -> None:
    trigger = IntervalTrigger(timedelta(seconds=90))

    spec = trigger.to_spec()

    assert spec == TriggerSpec(kind="interval", params={"every": 90.0})
    assert IntervalTrigger.from_params(spec.params).every == timedelta(seconds=90)
    assert trigger.describe() == "every 0:01:30"


# -- OnceTrigger -------------------------------------------------------------------------------

def test_once_fires_once_then_never() -> None:
    trigger = OnceTrigger(T0)

    assert trigger.next_after(T0 - timedelta(days=300)) == T0
    assert trigger.next_after(T0 - MICRO) == T0
    assert trigger.next_after(T0) is None
    assert trigger.next_after(T0 + timedelta(days=1)) is None


def test_once_stores_its_instant_in_utc() -> None:
    trigger = OnceTrigger(datetime(2026, 1, 1, 9, tzinfo=timezone(timedelta(hours=9))))

    assert trigger.at == T0
    assert OnceTrigger.from_params(trigger.to_spec().params).at == T0


@pytest.mark.parametrize("raw", ["tomorrow", 12, None], ids=["words", "number", "missing"])
def test_once_from_params_refuses_what_is_not_an_instant_naming_at(raw: object) -> None:
    params = {} if raw is None else {"at": raw}

    with pytest.raises(ConfigurationError) as raised:
        OnceTrigger.from_params(params)

    assert raised.value.problems[0].startswith("at:")


def test_once_from_params_refuses_a_naive_instant() -> None:
    with pytest.raises(ConfigurationError, match="naive"):
        OnceTrigger.from_params({"at": "2026-01-01T00:00:00"})


# -- naive datetimes ---------------------------------------------------------------------------

NAIVE = datetime(2026, 1, 1)


@pytest.mark.parametrize("call", [
    lambda: IntervalTrigger(timedelta(minutes=1)).next_after(NAIVE),
    lambda: IntervalTrigger(timedelta(minutes=1)).points_before(T0, NAIVE, 1),
    lambda: IntervalTrigger(timedelta(minutes=1)).points_before(NAIVE, T0, 1),
    lambda: OnceTrigger(NAIVE),
    lambda: OnceTrigger(T0).next_after(NAIVE),
    lambda: first_occurrence(IntervalTrigger(timedelta(minutes=1)), NAIVE),
], ids=["interval-next", "interval-bound", "interval-start", "once-at", "once-next", "first"])
def test_naive_datetimes_are_refused(call: object) -> None:
    assert callable(call)
    with pytest.raises(ConfigurationError, match="naive"):
        call()


# -- stable jitter -----------------------------------------------------------------------------

@given(name=st.text(min_size=1, max_size=40), micros=st.integers(1, 10**12))
def test_stable_jitter_is_within_zero_and_the_jitter(name: str, micros: int) -> None:
    jitter = timedelta(microseconds=micros)

    shift = stable_jitter(name, jitter)

    assert timedelta(0) <= shift < jitter
    assert stable_jitter(name, jitter) == shift


def test_stable_jitter_is_the_same_on_every_host_and_restart() -> None:
    # Derived from sha256 of the name, not hash(), which differs between processes.
    digest = hashlib.sha256(b"nightly-report").digest()
    expected = timedelta(microseconds=int.from_bytes(digest[:8], "big") % 600_000_000)

    assert stable_jitter("nightly-report", timedelta(minutes=10)) == expected


def test_stable_jitter_spreads_schedules_apart() -> None:
    shifts = {stable_jitter(f"job-{i}", timedelta(minutes=1)) for i in range(200)}

    assert len(shifts) > 190
    assert min(shifts) < timedelta(seconds=10) and max(shifts) > timedelta(seconds=50)


def test_no_jitter_means_no_shift() -> None:
    assert stable_jitter("job", timedelta(0)) == timedelta(0)


# -- first_occurrence --------------------------------------------------------------------------

def test_a_new_schedule_starts_at_the_next_grid_point() -> None:
    trigger = IntervalTrigger(timedelta(minutes=1))

    assert first_occurrence(trigger, T0 + timedelta(seconds=5)) == \
        (T0 + timedelta(minutes=1), T0 + timedelta(minutes=1))


def test_with_an_offset_the_first_occurrence_is_the_first_one_due_after_now() -> None:
    trigger = IntervalTrigger(timedelta(minutes=1))
    offset = timedelta(seconds=10)

    # 00:05: the 00:00 point is due at 00:10, still ahead.
    assert first_occurrence(trigger, T0 + timedelta(seconds=5), offset) == \
        (T0, T0 + offset)
    # Exactly at 00:10 that point is no longer strictly ahead: the next one is.
    assert first_occurrence(trigger, T0 + offset, offset) == \
        (T0 + timedelta(minutes=1), T0 + timedelta(minutes=1) + offset)


@given(now_micros=st.integers(0, 10**14), step=st.integers(1, 10**9),
       offset_fraction=st.floats(0, 0.999))
def test_the_first_due_instant_is_strictly_after_now_and_on_the_grid(
    now_micros: int, step: int, offset_fraction: float,
) -> None:
    trigger = IntervalTrigger(timedelta(microseconds=step))
    offset = timedelta(microseconds=int(step * offset_fraction))
    now = EPOCH + timedelta(microseconds=now_micros)

    occurrence, due = first_occurrence(trigger, now, offset)

    assert occurrence is not None and due is not None
    assert due == occurrence + offset
    assert now < due <= now + trigger.every
    assert (occurrence - EPOCH) % trigger.every == timedelta(0)


def test_an_exhausted_trigger_has_no_first_occurrence() -> None:
    assert first_occurrence(OnceTrigger(T0), T0) == (None, None)


# -- registry ----------------------------------------------------------------------------------

def test_the_default_registry_builds_the_core_kinds() -> None:
    registry = TriggerRegistry.default()

    interval = registry.build(TriggerSpec(kind="interval", params={"every": 60}))
    once = registry.build(TriggerSpec(kind="once", params={"at": T0.isoformat()}))

    assert isinstance(interval, IntervalTrigger) and isinstance(once, OnceTrigger)
    assert registry.kinds == ("interval", "once")


def test_an_unknown_kind_is_refused_listing_the_known_ones() -> None:
    with pytest.raises(ConfigurationError) as raised:
        TriggerRegistry.default().build(TriggerSpec(kind="solar", params={}))

    assert raised.value.problems == (
        "trigger.kind: unknown trigger kind 'solar'; use one of: interval, once",)


def test_with_kind_returns_a_new_registry_and_leaves_the_original_alone() -> None:
    base = TriggerRegistry.default()

    def build(params: Mapping[str, object]) -> Trigger:
        return OnceTrigger(T0)

    extended = base.with_kind("fixed", build)

    assert "fixed" in extended.kinds and "fixed" not in base.kinds
    assert isinstance(extended.build(TriggerSpec(kind="fixed")), OnceTrigger)
