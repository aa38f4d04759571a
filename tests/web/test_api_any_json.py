"""Whatever JSON a client sends to a write endpoint of the API, the answer is a 2xx, or a 4xx
as ``application/problem+json`` that changed nothing: no schedule, calendar, backfill or audit
entry differs from before the request. Driven by Hypothesis over a real application on the
session's PostgreSQL database."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from goatbeat_celery.api import Schedules
from goatbeat_celery.spec_input import SPEC_FIELDS
from goatbeat_celery.tokens import Tokens
from goatbeat_celery.web import create_app

# Each example is one request against PostgreSQL (a few milliseconds): 150 of them cover the
# shapes below in a few seconds; derandomized, so a failure found once is found on every run.
API_PROPERTY = settings(max_examples=150, deadline=None, derandomize=True,
                        suppress_health_check=[HealthCheck.function_scoped_fixture,
                                               HealthCheck.too_slow])

#: Numbers as JSON can write them: beyond a float's range, NaN and infinities (which
#: Python's reader accepts), and the edges of the columns.
NUMBERS = st.one_of(
    st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([10**400, -10**400, 2**63, 2**31, -1, 0, 1e308, 5e-324, -0.0]))
#: Text with every kind of character a client can put in JSON: control characters, lone
#: surrogates (a JSON ``\\ud800`` escape), NUL, right-to-left overrides.
TEXT = st.one_of(st.text(max_size=12), st.sampled_from(
    ["\ud800", "a\udfffb", "\x00", "\u202e", "\n", "30 6 * * *", "2030-01-01T00:00:00+00:00",
     "2030-01-01", "1h", "Europe/Paris", "proj.tasks.x", "skip", "all", "fixed_delay"]))
LEAVES = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
JSON = st.recursive(LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)), max_leaves=8)

SCHEDULE_KEYS = ("task", "every", "cron", "at", "timezone", "day_or", "enabled", "name",
                 "reason", "expected_version", *SPEC_FIELDS)
BODY_KEYS = {
    "schedule": SCHEDULE_KEYS,
    "pause": ("note", "until"),
    "backfill": ("start", "end", "mode", "newest_first", "per_tick", "dry_run"),
    "calendar": ("name", "dates", "ranges", "description"),
}
#: A nesting depth: shallow, past a recursion limit, past what Python's JSON reader takes.
DEPTHS = st.sampled_from([0, 0, 0, 30, 80, 490, 1200, 100_000])


def endpoint(kind: str, name: str) -> tuple[str, str]:
    named = quote(name, safe="")
    return {
        "put": ("PUT", f"/api/v1/schedules/{named}"),
        "patch": ("PATCH", "/api/v1/schedules/kept"),
        "pause": ("POST", "/api/v1/schedules/kept/pause"),
        "backfill": ("POST", "/api/v1/schedules/kept/backfills"),
        "calendar": ("PUT", f"/api/v1/calendars/{named}"),
    }[kind]


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, bytes]:
    """A write request: method, path and body as bytes."""
    kind = draw(st.sampled_from(["put", "patch", "pause", "backfill", "calendar"]))
    name = draw(st.one_of(st.sampled_from(["new-one", "kept", "holidays"]),
                          st.text(st.characters(exclude_categories=["Cs"]), min_size=1,
                                  max_size=12)))
    keys = BODY_KEYS[{"put": "schedule", "patch": "schedule"}.get(kind, kind)]
    body = draw(st.dictionaries(st.one_of(st.sampled_from(keys), TEXT), JSON, max_size=5))
    if kind == "put" and draw(st.booleans()):
        body.setdefault("task", "proj.tasks.x")
        body.setdefault("every", 60)
    method, path = endpoint(kind, name)
    text = json.dumps(body, allow_nan=True)
    depth = draw(DEPTHS)
    if depth and body:
        # The first value nested ``depth`` levels deep.
        key = json.dumps(next(iter(body)))
        text = "{" + key + ": " + "[" * depth + "]" * depth + "}"
    return method, path, text.encode("utf-8", "surrogatepass")


def snapshot(schedules: Schedules) -> tuple[Any, ...]:
    """Everything a write endpoint can change."""
    return (schedules.list(), schedules.list_calendars(), schedules.backfills(limit=1000),
            schedules.audit(limit=1000), schedules.history("kept", limit=1000))


@pytest.fixture
def client(schedules: Schedules) -> Iterator[TestClient]:
    schedules.create("kept", "proj.tasks.x", every=3600)
    schedules.create_calendar("holidays", dates=["2030-01-01"])
    _, secret = Tokens(schedules.store).create("fuzz", scopes="read,write,run")
    # A 500 must come back as an answer here, not as an exception in the test.
    with TestClient(create_app(schedules), base_url="http://127.0.0.1",
                    raise_server_exceptions=False,
                    headers={"Authorization": f"Bearer {secret}"}) as client:
        yield client


@API_PROPERTY
@given(request=requests())
def test_any_json_to_a_write_endpoint_is_answered_2xx_or_a_4xx_problem_that_changed_nothing(
        client: TestClient, schedules: Schedules, request: tuple[str, str, bytes]) -> None:
    method, path, body = request
    before = snapshot(schedules)
    response = client.request(method, path, content=body,
                              headers={"Content-Type": "application/json"})
    assert 200 <= response.status_code < 300 or 400 <= response.status_code < 500, (
        response.status_code, response.text[:300])
    if response.status_code >= 400:
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["status"] == response.status_code and problem["detail"]
        for each in problem.get("problems", ()):
            # Each names its field: only a key that is empty text names none.
            assert each["field"] or b'"":' in body, problem
        assert snapshot(schedules) == before, (response.status_code, problem)
