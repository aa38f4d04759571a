"""A schedule's ``options.headers`` cannot set the headers Celery's message and goatbeat's own
are made of: one list, judged by one rule, whatever writes the schedule; and a worker matches a
message's task id to the run its goatbeat headers name."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from celery import Celery
from celery.app.task import Context

from goatbeat_celery.config import load
from goatbeat_celery.core.rules.headers import RESERVED_HEADERS, reserved, without_reserved
from goatbeat_celery.core.rules.validation import options_problems
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.execution import (
    backfill_key,
    idempotency_key,
    is_key_of,
    manual_key,
)
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.headers import CELERY_BEAT, OWN


def celery_header_names() -> set[str]:
    """What the installed Celery builds a message from and reads a request by: the headers of
    protocol 2, the body of protocol 1, and every name of ``Task.request``."""
    app = Celery("headers", set_as_current=False)
    version2 = app.amqp.as_task_v2("a-task-id", "a.task")
    version1 = app.amqp.as_task_v1("a-task-id", "a.task")
    request = {name for name in dir(Context) if not name.startswith("__")}
    return {*version2.headers, *version1.body, *request}


def test_every_header_celery_builds_or_reads_and_goatbeat_s_own_are_reserved() -> None:
    # Read from the installed Celery: a header a new release adds fails here until listed.
    assert celery_header_names() - RESERVED_HEADERS == set()
    assert {*OWN, CELERY_BEAT} <= RESERVED_HEADERS
    for name in ("task", "id", "eta", "shadow", "root_id", "parent_id", "reply_to", "stamps"):
        assert reserved(name)


@pytest.mark.parametrize("name", ["task", "Task", "ID", "Eta", "SHADOW", "Goatbeat_Schedule",
                                  "celery_beat_task", "reply_to", "Stamped_Headers"])
def test_a_reserved_header_is_refused_in_any_case_naming_it_and_the_fix(name: str) -> None:
    [problem] = options_problems({"headers": {name: "probe.secret_admin", "team": "ops"}})

    assert problem.field == f"options.headers.{name}"
    assert repr(name) in problem.message and "refused" in problem.message
    assert problem.hint.startswith("remove it")


def test_every_reserved_header_is_reported_at_once() -> None:
    problems = options_problems({"headers": {"task": "x", "id": "y", "eta": "z", "ok": 1},
                                 "retry": True})

    assert {p.field for p in problems} == {"options.headers.task", "options.headers.id",
                                           "options.headers.eta", "options.retry"}


@pytest.mark.parametrize("name", ["team", "periodic_task_name", "sentry-trace", "x-request-id",
                                  "tasks", "identifier", "task_name"])
def test_headers_of_one_s_own_are_kept(name: str) -> None:
    assert options_problems({"headers": {name: "value"}}) == []


def test_a_stored_row_is_judged_without_them_and_the_submitter_drops_them() -> None:
    options = {"headers": {"task": "probe.secret_admin", "Id": "b:1", "team": "ops"}}

    assert options_problems(options, stored=True) == []
    assert without_reserved(options["headers"]) == ({"team": "ops"}, ["task", "Id"])


def test_a_spec_written_is_refused_and_one_read_from_a_row_is_not() -> None:
    spec = ScheduleSpec(name="team-a-x", task="probe.ok",
                        trigger=TriggerSpec(kind="interval", params={"every": 60}),
                        options={"headers": {"task": "probe.secret_admin"}})

    assert [str(p) for p in spec.problems()] == [
        "schedule 'team-a-x': options.headers.task: 'task' is refused: it is a header of "
        "Celery's task protocol, which Celery sets on every message; remove it (set the task, "
        "its id, eta or limits through the schedule's own fields, never through headers)"]
    assert spec.problems(payload=False) == []


def test_a_beat_schedule_entry_setting_one_is_reported_as_other_bad_options_are() -> None:
    app = Celery("headers", set_as_current=False)
    app.conf.update(goatbeat_database_url="memory://", beat_schedule={
        "job": {"task": "app.job", "schedule": 60,
                "options": {"headers": {"task": "app.other", "eta": "2030-01-01"}}}})

    with pytest.raises(ConfigurationError) as raised:
        load(app)

    text = str(raised.value)
    assert "beat_schedule['job'].options.headers.task" in text
    assert "beat_schedule['job'].options.headers.eta" in text


def test_a_run_s_key_is_matched_to_the_schedule_and_occurrence_its_headers_name() -> None:
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    sent = at.isoformat()

    for key in (idempotency_key("a:b", at), manual_key("a:b", at), backfill_key("a:b", at, 7),
                f"a:b:manual:{sent}", "a:b:2026-01-01T01:00:00+01:00"):
        assert is_key_of(key, "a:b", sent), key
    for key, name, occurrence in [
            (idempotency_key("team-b", at), "team-a", sent),
            (idempotency_key("team-a", at + timedelta(hours=1)), "team-a", sent),
            (idempotency_key("team-a", at) + ":other", "team-a", sent),
            ("team-a:2026-01-01T00:00:00", "team-a", "2026-01-01T00:00:00"),
            (idempotency_key("team-a", at), "team-a", "not an instant"),
            (idempotency_key("team-a", at), None, sent), (None, "team-a", sent)]:
        assert not is_key_of(key, name, occurrence), key
