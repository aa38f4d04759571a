"""Schedule specs (problems, spec hash, offsets) and idempotency keys."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.execution import idempotency_key, manual_key
from goatbeat_celery.core.types.instants import to_timedelta
from goatbeat_celery.core.types.lease import LeaseInfo
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import (
    MisfirePolicy,
    ScheduleSource,
    ScheduleSpec,
    TriggerSpec,
    stable_jitter,
)

UTC = timezone.utc


def spec(**changes: Any) -> ScheduleSpec:
    base = ScheduleSpec(
        name="reports.nightly",
        task="reports.build",
        trigger=TriggerSpec(kind="interval", params={"every": 60.0}),
        args=(1, "two"),
        kwargs={"region": "eu"},
        options={"queue": "reports"},
    )
    return replace(base, **changes)


# -- problems ----------------------------------------------------------------------------------

def test_a_sound_spec_has_no_problems() -> None:
    assert spec().problems() == []
    assert spec(name="celery.backend_cleanup:daily").problems() == []


def test_every_problem_of_a_spec_is_listed_naming_the_schedule_and_field() -> None:
    found = [str(p) for p in spec(
        task=" ", misfire_grace=timedelta(seconds=-1), max_catchup=0,
        offset=timedelta(seconds=-1), jitter=timedelta(seconds=-2),
    ).problems()]

    assert all(p.startswith("schedule 'reports.nightly': ") for p in found)
    fields = [p.split(": ")[1] for p in found]
    assert fields == ["task", "misfire_grace", "max_catchup", "offset", "jitter", "offset"]


@pytest.mark.parametrize("name", ["", " leading", "trailing ", "\ttab"],
                         ids=["empty", "leading-space", "trailing-space", "tab"])
def test_a_name_must_be_non_empty_without_surrounding_whitespace(name: str) -> None:
    assert any(p.startswith("schedule ") and ": name: " in p
               for p in map(str, spec(name=name).problems()))


@pytest.mark.parametrize("max_catchup", [0, -1, True, 2.5], ids=str)
def test_max_catchup_must_be_a_positive_integer(max_catchup: object) -> None:
    assert any("max_catchup" in p for p in map(str, spec(max_catchup=max_catchup).problems()))


def test_an_offset_must_be_shorter_than_the_interval() -> None:
    assert any("shorter than the interval" in p
               for p in map(str, spec(offset=timedelta(seconds=60)).problems()))
    assert spec(offset=timedelta(seconds=59)).problems() == []


def test_offset_and_jitter_are_exclusive() -> None:
    both = spec(offset=timedelta(seconds=1), jitter=timedelta(seconds=5))
    found = [str(p) for p in both.problems()]

    assert any("either offset or jitter" in p for p in found)


@pytest.mark.parametrize(("field", "value"), [
    ("args", (object(),)),
    ("kwargs", {"when": datetime(2026, 1, 1, tzinfo=UTC)}),
    ("kwargs", {"pair": (1, 2)}),
    ("options", {"headers": {"pair": (1, 2)}}),
], ids=["object-arg", "datetime-kwarg", "tuple-in-kwargs", "tuple-in-options"])
def test_values_that_would_not_read_back_from_json_are_refused(field: str, value: Any) -> None:
    found = [str(p) for p in spec(**{field: value}).problems()]

    assert len(found) == 1
    assert f"{field}: must be JSON-serialisable" in found[0]


def test_the_effective_offset_is_the_offset_or_the_stable_jitter() -> None:
    assert spec().effective_offset() == timedelta(0)
    assert spec(offset=timedelta(seconds=7)).effective_offset() == timedelta(seconds=7)
    assert spec(jitter=timedelta(seconds=30)).effective_offset() == \
        stable_jitter("reports.nightly", timedelta(seconds=30))


# -- spec hash ---------------------------------------------------------------------------------

def test_the_same_spec_has_the_same_hash() -> None:
    assert spec().spec_hash() == spec().spec_hash()
    # Key order of mappings does not matter.
    assert spec(kwargs={"a": 1, "b": 2}).spec_hash() == spec(kwargs={"b": 2, "a": 1}).spec_hash()


def test_the_hash_is_stable_across_processes() -> None:
    # A pinned digest: it is stored in the database and compared by every replica.
    pinned = ScheduleSpec(name="n", task="t", trigger=TriggerSpec(kind="interval",
                                                                  params={"every": 60.0}))

    assert pinned.spec_hash() == \
        "1f3391b550a1346b1f536fdf776ff037bab7b128c0168950aaac40a838903722"
    # The name is the row's identity, not part of its behaviour.
    assert replace(pinned, name="m").spec_hash() == pinned.spec_hash()


CHANGES = {
    "task": {"task": "reports.other"},
    "trigger-kind": {"trigger": TriggerSpec(kind="cron", params={"expression": "* * * * *"})},
    "trigger-params": {"trigger": TriggerSpec(kind="interval", params={"every": 61.0})},
    "args": {"args": (1, "three")},
    "kwargs": {"kwargs": {"region": "us"}},
    "options": {"options": {"queue": "other"}},
    "misfire-policy": {"misfire_policy": MisfirePolicy.SKIP},
    "misfire-grace": {"misfire_grace": timedelta(seconds=5)},
    "max-catchup": {"max_catchup": 3},
    "offset": {"offset": timedelta(seconds=5)},
    "jitter": {"jitter": timedelta(seconds=5)},
}


@pytest.mark.parametrize("change", list(CHANGES.values()), ids=list(CHANGES))
def test_any_change_of_behaviour_changes_the_hash(change: dict[str, Any]) -> None:
    assert spec(**change).spec_hash() != spec().spec_hash()


def test_enabled_and_source_do_not_change_the_hash() -> None:
    assert spec(enabled=False).spec_hash() == spec().spec_hash()
    assert spec(source=ScheduleSource.CONFIG).spec_hash() == spec().spec_hash()


# -- idempotency keys --------------------------------------------------------------------------

def test_the_idempotency_key_is_the_name_and_the_utc_instant() -> None:
    assert idempotency_key("reports.nightly", datetime(2026, 3, 29, 1, 0, tzinfo=UTC)) == \
        "reports.nightly:2026-03-29T01:00:00+00:00"


def test_a_non_utc_instant_is_converted_to_utc_in_the_key() -> None:
    paris = timezone(timedelta(hours=2))

    key = idempotency_key("job", datetime(2026, 6, 1, 3, 0, 0, 250000, tzinfo=paris))

    assert key == "job:2026-06-01T01:00:00.250000+00:00"


def test_the_same_instant_in_any_zone_gives_the_same_key() -> None:
    instant = datetime(2026, 6, 1, 1, 0, tzinfo=UTC)
    tokyo = instant.astimezone(timezone(timedelta(hours=9)))

    assert idempotency_key("job", tokyo) == idempotency_key("job", instant)


def test_a_naive_instant_has_no_key() -> None:
    with pytest.raises(ConfigurationError, match="naive"):
        idempotency_key("job", datetime(2026, 1, 1))


def test_a_manual_key_never_collides_with_an_occurrence_key() -> None:
    instant = datetime(2026, 1, 1, tzinfo=UTC)

    assert manual_key("job", instant) == "job:2026-01-01T00:00:00+00:00:manual"
    assert manual_key("job", instant) != idempotency_key("job", instant)


# -- small helpers -----------------------------------------------------------------------------

def test_to_timedelta_accepts_seconds_and_reports_bad_types() -> None:
    problems: list[Problem] = []

    assert to_timedelta(1.5, "x") == timedelta(seconds=1.5)
    assert to_timedelta(timedelta(minutes=1), "x") == timedelta(minutes=1)
    assert to_timedelta([5], "wait", problems) == timedelta(0)
    assert problems == [Problem("wait", "expected seconds, a duration such as '1m30s' or a "
                                "timedelta, got [5]")]
    with pytest.raises(ConfigurationError):
        to_timedelta(True, "flag")


def test_a_lease_is_held_only_until_it_expires_by_the_store_clock() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    info = LeaseInfo(name="beat", holder="a", token=3, acquired_at=now,
                     expires_at=now + timedelta(seconds=1), store_now=now)

    assert info.held
    assert not replace(info, store_now=now + timedelta(seconds=1)).held
    assert not replace(info, holder=None).held
