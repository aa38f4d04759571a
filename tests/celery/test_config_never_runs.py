"""A ``beat_schedule`` entry that can never run (a one-off whose instant has passed, an
``end_at`` already past) is stored like any entry, and reported: by ``goatbeat check`` and in
beat's log at start-up, never a crash and never silence."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from celery import Celery
from celery.schedules import BaseSchedule, schedstate

from goatbeat_celery.cli import checks as checks_module
from goatbeat_celery.config import load, never_run_warnings

UTC = timezone.utc
NOW = datetime.now(UTC)


class OneOff(BaseSchedule):
    """Once, at ``at``: django-celery-beat's ``clocked``, as a Celery user writes it."""

    def __init__(self, at: datetime) -> None:
        self.at = at
        super().__init__()

    def remaining_estimate(self, last_run_at: Any) -> timedelta:
        return self.at - self.now()

    def is_due(self, last_run_at: Any) -> schedstate:
        remaining = max(self.remaining_estimate(None).total_seconds(), 0)
        return schedstate(is_due=remaining == 0, next=remaining or 1e9)

    def __repr__(self) -> str:
        return f"<one-off {self.at.isoformat()}>"


def app_with_entries() -> Celery:
    app = Celery("never", broker="memory://", set_as_current=False)
    app.conf.goatbeat_database_url = "memory://"
    app.conf.beat_schedule = {
        "launched": {"task": "shop.launch", "schedule": OneOff(NOW - timedelta(days=1))},
        "launch": {"task": "shop.launch", "schedule": OneOff(NOW + timedelta(days=1))},
        "ended": {"task": "shop.sync", "schedule": 60,
                  "options": {"goatbeat": {"end_at": NOW - timedelta(hours=1)}}},
        "paused": {"task": "shop.launch", "schedule": OneOff(NOW - timedelta(days=1)),
                   "options": {"goatbeat": {"enabled": False}}},
        "poll": {"task": "shop.poll", "schedule": 60},
    }
    return app


def test_an_entry_that_would_never_run_is_loaded_and_reported_by_name() -> None:
    loaded = load(app_with_entries())  # not refused: beat starts, the others run

    warnings = never_run_warnings(loaded, NOW)

    assert len(warnings) == 2, warnings
    ended, launched = sorted(warnings)
    assert ended.startswith("beat_schedule['ended']: its end_at ")
    assert "has passed: it is stored and never runs" in ended
    assert launched.startswith("beat_schedule['launched']: its schedule has no occurrence "
                               "after now (")
    assert "it is stored and never runs" in launched


def test_check_warns_of_an_entry_that_would_never_run() -> None:
    results = checks_module.run_checks(app_with_entries())

    (entries,) = [c for c in results if c.name == "beat_schedule"]
    assert entries.outcome is checks_module.Outcome.WARN
    assert "beat_schedule['launched']" in entries.detail
    assert "beat_schedule['ended']" in entries.detail
    assert "'launch'" not in entries.detail and "'paused'" not in entries.detail
