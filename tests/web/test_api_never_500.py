"""What the API is sent never makes it answer 500, and a refusal changes nothing: each request
that once stored a schedule and then failed, or failed with a traceback, and every field of
every write endpoint given values of the wrong type, numbers beyond a float's range, NaN and
infinities, control characters, lone surrogates and deep nesting."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pytest
from starlette.testclient import TestClient

from goatbeat_celery.api import Schedules
from goatbeat_celery.spec_input import SPEC_FIELDS
from goatbeat_celery.tokens import Tokens
from goatbeat_celery.web import create_app

PROBLEM = "application/problem+json"
#: Values no field of the wrong kind may take, written as JSON text (Python's reader takes
#: NaN and Infinity, and integers of any size).
BAD_VALUES = ("true", '""', '"\\u0000"', '"\\ud800"', '"\\u202e"', '"a\\nb"', "1" + "0" * 400,
              "-1" + "0" * 400, "1e400", "NaN", "-Infinity", "-1", "[]", "{}",
              "[" * 40 + "]" * 40, '"' + "9" * 300 + '"')
SCHEDULE_FIELDS = ("task", "every", "cron", "at", "timezone", "day_or", "enabled", *SPEC_FIELDS)


@pytest.fixture
def client(schedules: Schedules) -> Iterator[TestClient]:
    _, secret = Tokens(schedules.store).create("ci", scopes="read,write,run")
    # A 500 must come back as an answer here, not as an exception in the test.
    with TestClient(create_app(schedules), base_url="http://127.0.0.1",
                    raise_server_exceptions=False,
                    headers={"Authorization": f"Bearer {secret}"}) as client:
        yield client


def state(schedules: Schedules) -> tuple[Any, ...]:
    """Everything a request to the API can change."""
    return (schedules.list(), schedules.list_calendars(), schedules.backfills(limit=1000),
            schedules.audit(limit=1000))


def send(client: TestClient, method: str, path: str, body: str) -> Any:
    return client.request(method, path, content=body.encode("utf-8", "surrogatepass"),
                          headers={"Content-Type": "application/json"})


def assert_refused(response: Any, status: int | None = None, field: str | None = None) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    assert status is None or response.status_code == status, response.text[:300]
    assert response.headers["content-type"] == PROBLEM
    if field is not None:
        fields = [problem["field"] for problem in response.json().get("problems", ())]
        # A cron expression's problems name it as such.
        named = {re.split(r"[.\[]", each)[0].replace("cron expression", "cron")
                 for each in fields}
        assert field in named, fields


# -- the requests that answered 500 -------------------------------------------------------------
def test_a_created_name_is_percent_encoded_in_location(client: TestClient,
                                                       schedules: Schedules) -> None:
    for encoded in ("acc-%E2%98%83", "acc-%C3%A9", "a%25b", "x%3Fy%23z"):
        response = client.put(f"/api/v1/schedules/{encoded}",
                              json={"task": "proj.tasks.x", "every": 60})
        assert response.status_code == 201, response.text
        assert response.headers["location"] == f"/api/v1/schedules/{encoded}"
        assert client.get(response.headers["location"]).json()["name"] == unquote(encoded)
    assert len(schedules.list()) == 4


def test_a_path_that_is_not_utf_8_is_refused_before_anything_is_written(
        client: TestClient, schedules: Schedules) -> None:
    for path in ("/api/v1/schedules/acc-x%ff", "/api/v1/schedules/acc-%E9",
                 "/api/v1/calendars/x%C0%AF", "/api/v1/schedules/%ED%A0%80"):
        response = client.put(path, json={"task": "proj.tasks.x", "every": 60})
        assert_refused(response, 400, "path")
    assert schedules.list() == [] and schedules.list_calendars() == []


def test_a_line_break_in_a_path_names_nothing(client: TestClient, schedules: Schedules) -> None:
    schedules.create("kept", "proj.tasks.x", every=60)
    before = state(schedules)
    for path in ("/api/v1/schedules/a%0Ab", "/api/v1/schedules/kept%0A",
                 "/api/v1/schedules/kept/pause%0A", "/api/v1/calendars/c%0A",
                 "/api/v1/backfills/1%0A/cancel"):
        for method in ("GET", "PUT", "POST", "DELETE"):
            response = client.request(method, path, json={"task": "proj.tasks.x", "every": 30})
            assert_refused(response)
            # 405: no route takes the method on any name there.
            assert response.status_code in (404, 405), (method, path)
    assert state(schedules) == before


def test_unrouted_paths_and_methods_are_problems_under_the_api_only(client: TestClient
                                                                    ) -> None:
    for method, path, status in (("GET", "/api/v1/nothing", 404), ("GET", "/api/v1", 404),
                                 ("POST", "/api/v1/schedules", 405),
                                 ("DELETE", "/api/v1/backfills", 405),
                                 ("PATCH", "/api/v1/backfills/1", 405)):
        response = client.request(method, path)
        assert_refused(response, status)
        assert response.json()["status"] == status
    response = client.get("/no-such-page")
    assert response.status_code == 404 and response.headers["content-type"].startswith("text/")


def test_a_patch_naming_what_is_given_elsewhere_is_told_where(
        client: TestClient, schedules: Schedules) -> None:
    schedules.create("kept", "proj.tasks.x", every=60)
    before = state(schedules)
    for key, where in (("reason", "X-Goatbeat-Reason"), ("expected_version", "If-Match")):
        for method, path in (("PATCH", "/api/v1/schedules/kept"),
                             ("PUT", "/api/v1/schedules/x")):
            response = client.request(method, path, json={"task": "proj.tasks.y", "every": 60,
                                                          key: 1})
            assert_refused(response, 422, key)
            assert where in response.text
    assert state(schedules) == before


@pytest.mark.parametrize("number", ["1" + "0" * 400, "-1" + "0" * 400, "1e400"])
def test_a_number_beyond_a_float_s_range_is_refused_naming_the_field(
        client: TestClient, schedules: Schedules, number: str) -> None:
    schedules.create("kept", "proj.tasks.x", every=60)
    for field in ("every", "misfire_grace", "starting_deadline", "offset", "failure_backoff",
                  "alert_late", "max_runtime", "failure_backoff_factor", "max_catchup",
                  "max_runs"):
        given = f'"{field}": {number}'
        if field == "failure_backoff_factor":
            given += ', "failure_backoff": 60'
        trigger = "" if field == "every" else '"every": 60, '
        put = send(client, "PUT", "/api/v1/schedules/big",
                   f'{{"task": "proj.tasks.x", {trigger}{given}}}')
        assert_refused(put, 422, field)
        assert_refused(send(client, "PATCH", "/api/v1/schedules/kept", f"{{{given}}}"), 422,
                       field)
    assert [s.name for s in schedules.list()] == ["kept"]


def test_an_option_beyond_a_float_s_range_is_refused_naming_it(client: TestClient) -> None:
    for option in ("expires", "countdown", "time_limit", "priority"):
        body = f'{{"task": "proj.tasks.x", "every": 60, "options": {{"{option}": 1{"0" * 400}}}}}'
        response = send(client, "PUT", "/api/v1/schedules/big", body)
        assert_refused(response, 422, "options")
        assert response.json()["problems"][0]["field"] == f"options.{option}"


def test_json_nested_at_any_depth_is_refused(client: TestClient, schedules: Schedules) -> None:
    for depth in (33, 490, 1200, 100_000):
        for field in ("args", "kwargs", "options", "tags"):
            deep = "[" * depth + "]" * depth
            response = send(client, "PUT", "/api/v1/schedules/deep",
                            f'{{"task": "proj.tasks.x", "every": 60, "{field}": {deep}}}')
            assert_refused(response)
            if depth < 1000:  # Python's reader itself gives up deeper: no field to name
                assert response.json()["problems"][0]["field"] == field
    assert schedules.list() == []


def test_a_calendar_of_dates_of_the_wrong_type_is_refused(client: TestClient,
                                                          schedules: Schedules) -> None:
    for body in ('{"dates": 5}', '{"ranges": 5}', '{"dates": {"a": 1}}', '{"dates": true}',
                 '{"ranges": [5]}', '{"dates": 0}', '{"dates": ""}', '{"ranges": false}'):
        response = send(client, "PUT", "/api/v1/calendars/x", body)
        assert_refused(response, 422, next(iter(json.loads(body))))
    assert schedules.list_calendars() == []


# -- every field of every write endpoint --------------------------------------------------------
@pytest.mark.parametrize("value", BAD_VALUES)
def test_every_schedule_field_given_a_bad_value_at_once_is_refused_naming_each(
        client: TestClient, schedules: Schedules, value: str) -> None:
    # Validation reports every problem at once, so one request judges every field: a check
    # that raised instead would make the whole answer a 500.
    schedules.create("kept", "proj.tasks.x", every=3600)
    everything = "{" + ", ".join(f'"{field}": {value}' for field in SCHEDULE_FIELDS) + "}"
    before = state(schedules)
    for method, path in (("PUT", "/api/v1/schedules/made"), ("PATCH", "/api/v1/schedules/kept")):
        response = send(client, method, path, everything)
        assert_refused(response)
        named = {re.split(r"[.\[]", p["field"])[0] for p in response.json().get("problems", ())}
        assert named <= {*SCHEDULE_FIELDS, "trigger", "cron expression"}, named
    assert state(schedules) == before


@pytest.mark.parametrize("value", ['"\ud800"', "1" + "0" * 400, "NaN", "{}", "[" * 40 + "]" * 40])
def test_any_schedule_field_alone_is_stored_or_refused_naming_it(
        client: TestClient, schedules: Schedules, value: str) -> None:
    schedules.create("kept", "proj.tasks.x", every=3600)
    for field in SCHEDULE_FIELDS:
        before = state(schedules)
        response = send(client, "PATCH", "/api/v1/schedules/kept", f'{{"{field}": {value}}}')
        if response.status_code >= 300:
            assert_refused(response, field=field if response.status_code == 422 else None)
            assert state(schedules) == before, (field, value)


@pytest.mark.parametrize("value", BAD_VALUES)
def test_any_value_of_a_calendar_pause_or_backfill_field_is_taken_or_refused_naming_it(
        client: TestClient, schedules: Schedules, value: str) -> None:
    schedules.create("kept", "proj.tasks.x", every=3600)
    endpoints = (("PUT", "/api/v1/calendars/made", ("dates", "ranges", "description")),
                 ("POST", "/api/v1/schedules/kept/pause", ("note", "until")),
                 ("POST", "/api/v1/schedules/kept/backfills",
                  ("start", "end", "mode", "newest_first", "per_tick", "dry_run")))
    for method, path, fields in endpoints:
        for field in fields:
            before = state(schedules)
            response = send(client, method, path, f'{{"{field}": {value}}}')
            assert response.status_code < 300 or response.headers["content-type"] == PROBLEM
            if response.status_code >= 300:
                assert_refused(response)
                assert state(schedules) == before, (path, field, value)
            elif path.endswith("/pause"):
                schedules.resume("kept")
            elif path.startswith("/api/v1/calendars"):
                schedules.delete_calendar("made")


def test_a_failure_no_check_foresaw_is_still_a_problem_under_the_api(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a fault injected below the API")

    monkeypatch.setattr(Schedules, "list", broken)
    response = client.get("/api/v1/schedules")
    assert response.status_code == 500
    assert response.headers["content-type"] == PROBLEM
    assert "injected" not in response.text  # the server's log has it, not the client
