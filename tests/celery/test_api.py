"""The Schedules API on the SQLite store: cron day semantics and edits that keep the zone."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.config import GoatbeatConfig
from goatbeat_celery.store import open_store


@pytest.fixture
def schedules(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'api.sqlite3'}"
    api = Schedules(open_store(url), config=GoatbeatConfig(database_url=url),
                    default_timezone="UTC")
    yield api
    api.close()


def test_cron_days_match_either_by_default_and_both_with_day_or_false(schedules: Schedules):
    either = schedules.create("either", "t", cron="0 0 13 * fri")
    both = schedules.create("both", "t", cron="0 0 13 * fri", day_or=False)
    after = datetime(2026, 1, 1, tzinfo=timezone.utc)
    build = schedules.triggers.build
    # 2026-01-02 is a Friday; the first Friday the 13th of 2026 is in February.
    assert build(either.spec.trigger).next_after(after) == datetime(2026, 1, 2,
                                                                    tzinfo=timezone.utc)
    assert build(both.spec.trigger).next_after(after) == datetime(2026, 2, 13,
                                                                  tzinfo=timezone.utc)


def test_editing_a_cron_expression_keeps_its_zone_and_day_semantics(schedules: Schedules):
    schedules.create("report", "t", cron="0 7 * * mon", timezone="Europe/Paris", day_or=False)
    updated = schedules.update("report", cron="30 8 * * mon")
    assert updated.spec.trigger.params == {"expression": "30 8 * * mon",
                                           "timezone": "Europe/Paris", "day_or": False}
    rezoned = schedules.update("report", timezone="Asia/Tokyo")
    assert rezoned.spec.trigger.params["expression"] == "30 8 * * mon"
    assert rezoned.spec.trigger.params["timezone"] == "Asia/Tokyo"
    assert rezoned.version == updated.version + 1
