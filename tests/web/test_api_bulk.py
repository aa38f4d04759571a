"""Bulk controls over the JSON API (``POST /api/v1/bulk/pause|resume|run``): by names or tag,
the reason header audited for each schedule, each answered done or refused with why (200 when
one was done; a 409, 403 or 404 problem carrying the same lists when every one was refused), a
call refused whole a 422 naming each field with nothing changed, the token's scope and prefix
applied."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from starlette.testclient import TestClient

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.types.audit import AuditAction
from goatbeat_celery.web import WebSettings, create_app

from .api_client import Api


@pytest.fixture
def api(schedules: Schedules) -> Iterator[Api]:
    for name, tags in (("etl-a", ["etl"]), ("etl-b", ["etl"]), ("report", ["etl"])):
        schedules.create(name, "proj.tasks.tick", every=60, tags=tags)
    with TestClient(create_app(schedules), base_url="http://127.0.0.1") as client:
        yield Api(client, schedules)


def test_pause_by_tag_answers_each_and_audits_the_reason(api: Api,
                                                           schedules: Schedules) -> None:
    schedules.pause("report")
    until = (schedules.now() + timedelta(hours=2)).isoformat()
    answer = api.client.post("/api/v1/bulk/pause", json={"tag": "etl", "until": until},
                             headers={**api.token(), "X-Goatbeat-Reason": "db upgrade"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "action": "pause",
        "done": [{"name": "etl-a", "done": True, "reason": "paused"},
                 {"name": "etl-b", "done": True, "reason": "paused"}],
        "refused": [{"name": "report", "done": False, "reason": "already paused",
                     "refusal": "conflict"}]}
    entry = schedules.audit("etl-b", limit=1)[0]
    assert (entry.action, entry.actor, entry.reason) == (AuditAction.PAUSE, "token:ci",
                                                         "db upgrade")
    assert schedules.get("etl-a").paused_until is not None


def test_resume_and_run_by_names_with_one_missing(api: Api, schedules: Schedules) -> None:
    auth = api.token()
    schedules.pause("etl-a")
    answer = api.client.post("/api/v1/bulk/resume", json={"names": ["etl-a", "ghost"]},
                             headers=auth).json()
    assert [o["name"] for o in answer["done"]] == ["etl-a"]
    assert answer["refused"] == [{"name": "ghost", "done": False, "reason": "not found",
                                  "refusal": "not_found"}]
    ran = api.client.post("/api/v1/bulk/run", json={"names": ["etl-b", "report"]},
                          headers=auth).json()
    assert [o["name"] for o in ran["done"]] == ["etl-b", "report"]
    assert all(o["run_key"] for o in ran["done"])


@pytest.mark.parametrize(("path", "body", "fields"), [
    ("pause", {}, ["names"]),
    ("pause", {"names": []}, ["names"]),
    ("resume", {"tag": "nothing"}, ["tag"]),
    ("pause", {"names": "etl-a", "until": "soon", "colour": 1}, ["colour", "names", "until"]),
    ("run", {"names": ["etl-a"], "until": "2030-01-01T00:00:00Z"}, ["until"]),
])
def test_a_call_refused_whole_is_a_422_naming_each_field(
        api: Api, schedules: Schedules, path: str, body: dict[str, object],
        fields: list[str]) -> None:
    answer = api.client.post(f"/api/v1/bulk/{path}", json=body, headers=api.token())
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert [p["field"] for p in answer.json()["problems"]] == fields
    assert all(schedules.get(n).spec.enabled for n in ("etl-a", "etl-b", "report"))
    assert not schedules.executions()


def test_a_token_s_scope_and_prefix_hold(api: Api, schedules: Schedules) -> None:
    writer = api.token("writer", scopes="read,write")
    assert api.client.post("/api/v1/bulk/run", json={"tag": "etl"},
                           headers=writer).status_code == 403
    limited = api.token("etl-only", scopes="read,write", prefix="etl-")
    answer = api.client.post("/api/v1/bulk/pause", json={"names": ["etl-a", "report"]},
                             headers=limited).json()
    assert [o["name"] for o in answer["done"]] == ["etl-a"]
    assert answer["refused"][0]["name"] == "report"
    assert answer["refused"][0]["refusal"] == "outside"
    # Every one outside the prefix (existing or not): a 403, judged on the names alone.
    outside = api.client.post("/api/v1/bulk/pause", json={"names": ["report", "zz-ghost"]},
                              headers=limited)
    assert outside.status_code == 403, outside.text
    assert [o["refusal"] for o in outside.json()["refused"]] == ["outside", "outside"]
    by_tag = api.client.post("/api/v1/bulk/pause", json={"tag": "etl"}, headers=limited).json()
    # Within the prefix only: report is not even selected; etl-a is paused already.
    assert [o["name"] for o in by_tag["done"]] == ["etl-b"]
    assert [o["name"] for o in by_tag["refused"]] == ["etl-a"]
    assert schedules.get("report").spec.enabled


def test_a_read_only_server_refuses_a_bulk_action(schedules: Schedules) -> None:
    schedules.create("x", "proj.tasks.tick", every=60)
    with TestClient(create_app(schedules, WebSettings(read_only=True)),
                    base_url="http://127.0.0.1") as client:
        auth = Api(client, schedules).token()
        answer = client.post("/api/v1/bulk/pause", json={"names": ["x"]}, headers=auth)
    assert answer.status_code == 403
    assert schedules.get("x").spec.enabled


def test_every_schedule_refused_for_its_state_is_a_409_listing_each(
        api: Api, schedules: Schedules) -> None:
    schedules.pause("etl-a")
    schedules.pause("etl-b")
    audited = len(schedules.audit("etl-a"))
    answer = api.client.post("/api/v1/bulk/pause", json={"names": ["etl-a", "etl-b", "ghost"]},
                             headers=api.token())
    assert answer.status_code == 409, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    found = answer.json()
    assert (found["status"], found["title"], found["action"], found["done"]) == (
        409, "Conflict", "pause", [])
    assert found["detail"] == "every schedule was refused (3); nothing was changed"
    assert [(o["name"], o["reason"], o["refusal"]) for o in found["refused"]] == [
        ("etl-a", "already paused", "conflict"), ("etl-b", "already paused", "conflict"),
        ("ghost", "not found", "not_found")]
    assert len(schedules.audit("etl-a")) == audited


def test_every_schedule_not_found_is_a_404_and_one_done_stays_a_200(
        api: Api, schedules: Schedules) -> None:
    auth = api.token()
    missing = api.client.post("/api/v1/bulk/run", json={"names": ["ghost", "phantom"]},
                              headers=auth)
    assert missing.status_code == 404, missing.text
    assert [o["refusal"] for o in missing.json()["refused"]] == ["not_found", "not_found"]
    assert not schedules.executions()
    # Partly refused: a 200 with each outcome.
    resumed = api.client.post("/api/v1/bulk/resume", json={"names": ["etl-a", "ghost"]},
                              headers=auth)
    assert resumed.status_code == 409  # etl-a is not paused: refused for its state
    schedules.pause("etl-a")
    resumed = api.client.post("/api/v1/bulk/resume", json={"names": ["etl-a", "ghost"]},
                              headers=auth)
    assert resumed.status_code == 200
    assert [o["name"] for o in resumed.json()["refused"]] == ["ghost"]
