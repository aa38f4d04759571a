"""occurrence_of: what a task reads of the run goatbeat sent it."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

from goatbeat_celery import Occurrence, occurrence_of

AT = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def test_a_run_goatbeat_sent_is_described_from_its_request_attributes() -> None:
    request = SimpleNamespace(id="report:2026-03-01T12:00:00+00:00", headers=None,
                              goatbeat_schedule="report",
                              goatbeat_occurrence="2026-03-01T12:00:00+00:00",
                              goatbeat_token=4)

    assert occurrence_of(SimpleNamespace(request=request)) == Occurrence(
        key="report:2026-03-01T12:00:00+00:00", schedule="report", at=AT, manual=False, token=4)


def test_headers_kept_in_request_headers_are_read_too_and_manual_runs_say_so() -> None:
    request = SimpleNamespace(id="k", headers={"goatbeat_schedule": "report",
                                               "goatbeat_occurrence": AT.isoformat(),
                                               "goatbeat_manual": True})

    run = occurrence_of(request)

    assert run is not None and run.manual and run.token is None and run.at == AT


def test_a_run_goatbeat_did_not_send_is_none() -> None:
    assert occurrence_of(SimpleNamespace(id="x", headers={})) is None
    assert occurrence_of(SimpleNamespace(id="x", headers=None, goatbeat_schedule="s",
                                         goatbeat_occurrence="not a time")) is None
    assert occurrence_of(SimpleNamespace(id="x", headers=None, goatbeat_schedule="s",
                                         goatbeat_occurrence="2026-03-01T12:00:00")) is None
