"""SolarTrigger: the occurrences Celery's own solar schedule computes, stored as data."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from celery.schedules import solar

from goatbeat_celery.config import base_registry
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.spec import TriggerSpec
from goatbeat_celery.solar import EVENTS, SolarTrigger

UTC = timezone.utc
PLACES = [("Paris", 48.85, 2.35), ("Sydney", -33.87, 151.21), ("Quito", -0.18, -78.47),
          ("Tromsø", 69.65, 18.96), ("Longyearbyen", 78.22, 15.65), ("North Pole", 90, 0),
          ("South Pole", -90, 0), ("Reykjavík", 64.15, -21.94)]
STARTS = [datetime(2026, 6, 21, tzinfo=UTC), datetime(2026, 12, 21, 12, tzinfo=UTC),
          datetime(2026, 3, 20, 6, 30, tzinfo=UTC)]


def celerys_answer(event: str, lat: float, lon: float, last: datetime) -> datetime:
    now = last + timedelta(hours=1)
    schedule = solar(event, lat, lon, nowfun=lambda: now)
    answer: datetime = now + schedule.remaining_estimate(last)
    return answer


@pytest.mark.parametrize(("city", "lat", "lon"), PLACES, ids=[p[0] for p in PLACES])
@pytest.mark.parametrize("event", sorted(EVENTS))
def test_next_runs_are_celerys_own_including_polar_days_and_nights(
        city: str, lat: float, lon: float, event: str) -> None:
    trigger = SolarTrigger(event, lat, lon)
    for start in STARTS:
        assert trigger.next_after(start) == celerys_answer(event, lat, lon, start)


def test_successive_occurrences_move_forward_day_by_day() -> None:
    trigger = base_registry().build(TriggerSpec(kind="solar", params={
        "event": "sunrise", "latitude": 48.85, "longitude": 2.35}))
    first = trigger.next_after(STARTS[0])
    assert first is not None
    second = trigger.next_after(first)
    assert second is not None and timedelta(hours=23) < second - first < timedelta(hours=25)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SolarTrigger("moonrise", 91, "east")  # type: ignore[arg-type]
    assert [p.split(":")[0] for p in caught.value.problems] == ["event", "latitude",
                                                                "longitude"]
