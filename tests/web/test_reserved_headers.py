"""Through the HTTP API (a write token limited to one team's names) and the dashboard's forms, a
schedule's headers cannot rewrite Celery's message: not the task to run, not the task id (the
key of another team's run), nor anything else Celery or goatbeat sets. Each attempt is a 4xx
naming the header, and nothing is written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from goatbeat_celery.api import Schedules
from goatbeat_celery.tokens import Tokens
from goatbeat_celery.web import create_app
from tests.web.conftest import Browser, celery_app

from .pages import error_of

OK = {"task": "probe.ok", "every": 60, "kwargs": {"target": "all"}}


@pytest.fixture
def allowing(pg_empty_url: str) -> Iterator[Schedules]:
    """The API of a deployment whose schedules may send ``probe.ok`` only."""
    opened = Schedules.from_app(celery_app(pg_empty_url, goatbeat_allowed_tasks=["probe.ok"]))
    yield opened
    opened.close()


@pytest.fixture
def team_a(allowing: Schedules) -> Iterator[tuple[TestClient, dict[str, str]]]:
    _, secret = Tokens(allowing.store).create("team-a", scopes="read,write", prefix="team-a-")
    with TestClient(create_app(allowing), base_url="http://127.0.0.1") as client:
        yield client, {"Authorization": f"Bearer {secret}"}


def another_team_s_run_key(schedules: Schedules) -> str:
    schedules.create("team-b-report", "probe.ok", every=60)
    return schedules.run_now("team-b-report").key


@pytest.mark.parametrize("headers", [
    {"task": "probe.secret_admin"},
    {"shadow": "probe.ok", "task": "probe.secret_admin"},
    {"Task": "probe.secret_admin"},
    {"eta": "2030-01-01T00:00:00+00:00"},
    {"goatbeat_schedule": "team-b-report"},
], ids=json.dumps)
def test_a_prefix_token_cannot_set_celery_s_or_goatbeat_s_headers(
        allowing: Schedules, team_a: tuple[TestClient, dict[str, str]],
        headers: dict[str, Any]) -> None:
    client, auth = team_a

    refused = client.put("/api/v1/schedules/team-a-probe", headers=auth,
                         json={**OK, "options": {"headers": headers}})
    patched = client.put("/api/v1/schedules/team-a-probe", headers=auth, json=OK)
    edited = client.patch("/api/v1/schedules/team-a-probe", headers=auth,
                          json={"options": {"headers": {**headers, "team": "a"}}})

    assert refused.status_code == 422, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    assert [p["field"] for p in refused.json()["problems"]] == [
        f"options.headers.{name}" for name in headers]
    assert patched.status_code == 201
    assert edited.status_code == 422, edited.text
    assert allowing.get("team-a-probe").spec.options == {}
    assert [e.action.value for e in allowing.audit("team-a-probe")] == ["create"]


def test_a_prefix_token_cannot_send_its_run_under_another_team_s_run_key(
        allowing: Schedules, team_a: tuple[TestClient, dict[str, str]]) -> None:
    client, auth = team_a
    key = another_team_s_run_key(allowing)

    refused = client.put("/api/v1/schedules/team-a-probe", headers=auth,
                         json={**OK, "options": {"headers": {"id": key, "root_id": key}}})

    assert refused.status_code == 422
    problems = refused.json()["problems"]
    assert [p["field"] for p in problems] == ["options.headers.id", "options.headers.root_id"]
    assert "'id' is refused" in problems[0]["message"]
    assert [s.name for s in allowing.list()] == ["team-b-report"]


def test_the_dashboard_form_refuses_them_under_the_options_field(
        client: Browser, schedules: Schedules) -> None:
    key = another_team_s_run_key(schedules)
    fields = {"name": "probe", "task": "probe.ok", "kind": "every", "every": "60",
              "timezone": "UTC", "queue": "", "priority": "", "expires": "", "args": "",
              "kwargs": ""}

    created = client.submit("/new", **fields, options=json.dumps(
        {"headers": {"task": "probe.secret_admin", "id": key}}))
    assert created.status_code == 422
    shown = error_of(created.text, "options")
    assert "options.headers.task: 'task' is refused" in shown

    assert client.submit("/new", **fields, options='{"headers": {"team": "a"}}'
                         ).status_code == 303
    edited = client.submit("/schedule/edit", **fields, options=json.dumps(
        {"headers": {"team": "a", "ETA": "2030-01-01T00:00:00+00:00"}}))
    assert edited.status_code == 422
    assert "options.headers.ETA: 'ETA' is refused" in error_of(edited.text, "options")
    assert schedules.get("probe").spec.options == {"headers": {"team": "a"}}
