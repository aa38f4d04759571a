"""The JSON API through an HTTP client, on the session's PostgreSQL database: tokens and their
scopes and prefixes, create-or-update by name with ETag and If-Match from the definition's
version, problems as JSON naming each field (the same the Python API raises), keyset paging,
pause, resume, run now, delete, history, backfills and calendars, and the dashboard's Host and
Origin rules."""

from __future__ import annotations

from datetime import timedelta

import pytest
from starlette.testclient import TestClient

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.tokens import Tokens
from goatbeat_celery.web import WebSettings, create_app

from .api_client import DAILY, Api, put
from .conftest import TOKEN


# -- who may call it ----------------------------------------------------------------------------
def test_every_request_needs_a_bearer_token_and_cookies_or_basic_auth_are_not_one(
        api: Api, schedules: Schedules) -> None:
    # A dashboard with its own token: its session cookie and its token open the pages only.
    with TestClient(create_app(schedules, WebSettings(token=TOKEN)),
                    base_url="http://127.0.0.1") as client:
        signed_in = client.get("/login")
        assert signed_in.status_code == 200
        for headers in ({}, {"Authorization": f"Bearer {TOKEN}"},
                        {"Authorization": "Basic dXNlcjpzM2NyZXQ="}):
            refused = client.get("/api/v1/schedules", headers=headers)
            assert refused.status_code == 401, refused.text
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert refused.headers["content-type"] == "application/problem+json"
    _, secret = Tokens(schedules.store).create("gone", scopes="read")
    Tokens(schedules.store).revoke("gone")
    assert api.client.get("/api/v1/schedules",
                          headers={"Authorization": f"Bearer {secret}"}).status_code == 401


def test_no_state_changing_route_takes_a_signed_in_browser_s_session(
        schedules: Schedules) -> None:
    from starlette.routing import Route

    from goatbeat_celery.web.security import CSRF_FIELD

    from .conftest import Browser

    put_body = {"task": "proj.tasks.tick", "every": 60}
    schedules.create("tick", "proj.tasks.tick", every=60)
    before = schedules.get("tick")
    app = create_app(schedules, WebSettings(token=TOKEN))
    with Browser(app, base_url="http://127.0.0.1") as browser:
        signed_in = browser.post("/login", data={CSRF_FIELD: browser.csrf(), "token": TOKEN},
                                 follow_redirects=False)
        assert signed_in.status_code == 303
        assert browser.get("/schedules").status_code == 200  # the session opens the pages
        routes = [(method, route.path.replace("{name:path}", "tick").replace("{id}", "1"))
                  for route in app.routes if isinstance(route, Route)
                  and route.path.startswith("/api/") for method in route.methods or ()
                  if method not in ("GET", "HEAD")]
        assert len(routes) >= 10
        for method, path in routes:
            answered = browser.request(method, path, json=put_body,
                                       headers={"X-CSRF-Token": browser.csrf()})
            assert answered.status_code == 401, (method, path)
    assert schedules.get("tick") == before


def test_each_scope_opens_its_own_operations_only(api: Api) -> None:
    reader, writer = api.token("reader", "read"), api.token("writer", "write")
    assert put(api, reader, "daily", DAILY).status_code == 403
    assert put(api, writer, "daily", DAILY).status_code == 201
    refused = api.client.post("/api/v1/schedules/daily/run", headers=writer)
    assert refused.status_code == 403 and "'run'" in refused.json()["detail"]
    assert api.client.get("/api/v1/schedules/daily", headers=writer).status_code == 403
    assert api.client.get("/api/v1/schedules/daily", headers=reader).status_code == 200


def test_a_prefix_token_sees_and_touches_only_its_own_names(api: Api, auth: dict[str, str]
                                                            ) -> None:
    for name in ("team-a-1", "team-a-2", "team-b-1"):
        assert put(api, auth, name, DAILY).status_code == 201
    team_a = api.token("team-a", prefix="team-a-")

    listed = api.client.get("/api/v1/schedules", headers=team_a).json()
    wider = api.client.get("/api/v1/schedules?prefix=team-", headers=team_a).json()
    other = api.client.get("/api/v1/schedules?prefix=team-b-", headers=team_a).json()

    assert [s["name"] for s in listed["schedules"]] == ["team-a-1", "team-a-2"]
    assert [s["name"] for s in wider["schedules"]] == ["team-a-1", "team-a-2"]
    assert other["schedules"] == []
    # Reads answer as for a name that does not exist: existence is not revealed.
    for path in ("team-b-1", "team-b-1/history", "team-b-1/next", "team-b-nothing"):
        missing = api.client.get(f"/api/v1/schedules/{path}", headers=team_a)
        assert missing.status_code == 404, path
    assert (api.client.get("/api/v1/schedules/team-b-1", headers=team_a).json()["detail"]
            == api.client.get("/api/v1/schedules/team-b-zzz", headers=team_a).json()["detail"]
            .replace("zzz", "1"))
    # Writes are refused on the name alone, before anything is read.
    assert put(api, team_a, "team-b-1", DAILY).status_code == 403
    assert put(api, team_a, "team-b-new", DAILY).status_code == 403
    for action in ("pause", "resume", "run"):
        assert api.client.post(f"/api/v1/schedules/team-b-1/{action}",
                               headers=team_a).status_code == 403
    assert api.client.delete("/api/v1/schedules/team-b-1", headers=team_a).status_code == 403
    assert api.schedules.get("team-b-1").spec.enabled
    assert put(api, team_a, "team-a-3", DAILY).status_code == 201


def test_a_request_to_another_host_name_or_from_another_site_is_refused(
        api: Api, auth: dict[str, str]) -> None:
    rebound = api.client.get("/api/v1/schedules",
                             headers={**auth, "Host": "attacker.example"})
    cross = put(api, auth, "daily", DAILY, Origin="https://attacker.example")
    fetched = put(api, auth, "daily", DAILY, **{"Sec-Fetch-Site": "cross-site"})

    assert rebound.status_code == 400
    assert cross.status_code == 403 and fetched.status_code == 403
    assert api.schedules.list() == []


def test_a_read_only_server_refuses_every_change(schedules: Schedules) -> None:
    _, secret = Tokens(schedules.store).create("ci", scopes="read,write,run")
    with TestClient(create_app(schedules, WebSettings(read_only=True)),
                    base_url="http://127.0.0.1") as client:
        refused = client.put("/api/v1/schedules/daily", json=DAILY,
                             headers={"Authorization": f"Bearer {secret}"})
    assert refused.status_code == 403 and schedules.list() == []


# -- create or update, ETag and If-Match ----------------------------------------------------------
def test_put_creates_then_is_idempotent_and_the_etag_is_the_definition_s_version(
        api: Api, auth: dict[str, str]) -> None:
    created = put(api, auth, "daily", DAILY)
    again = put(api, auth, "daily", DAILY)

    assert created.status_code == 201 and again.status_code == 200
    assert created.headers["location"] == "/api/v1/schedules/daily"
    assert created.headers["etag"] == again.headers["etag"] == f'"{created.json()["version"]}"'
    assert again.json()["kwargs"] == {"limit": 50}
    assert again.json()["timezone"] == "Europe/Paris"  # the app's zone, as for the CLI


def test_put_replaces_the_whole_definition(api: Api, auth: dict[str, str]) -> None:
    put(api, auth, "daily", {**DAILY, "misfire_grace": "10m", "tags": ["reports"]})

    replaced = put(api, auth, "daily", {"task": "proj.tasks.other", "every": 300})

    assert replaced.status_code == 200
    body = replaced.json()
    assert (body["task"], body["trigger"]) == ("proj.tasks.other",
                                               {"kind": "interval", "every": 300.0})
    assert body["misfire_grace"] is None and body["tags"] == [] and body["kwargs"] == {}


def test_if_match_refuses_an_edit_of_a_version_the_client_did_not_read(
        api: Api, auth: dict[str, str]) -> None:
    etag = put(api, auth, "daily", DAILY).headers["etag"]
    first = put(api, auth, "daily", {**DAILY, "kwargs": {"limit": 1}}, **{"If-Match": etag})
    lost = put(api, auth, "daily", {**DAILY, "kwargs": {"limit": 2}}, **{"If-Match": etag})
    patched = api.client.patch("/api/v1/schedules/daily", json={"kwargs": {"limit": 3}},
                               headers={**auth, "If-Match": etag})

    assert first.status_code == 200 and first.headers["etag"] != etag
    assert lost.status_code == 412 and patched.status_code == 412
    assert "was edited since it was read" in lost.json()["detail"]
    assert api.schedules.get("daily").spec.kwargs == {"limit": 1}
    assert put(api, auth, "other", DAILY, **{"If-Match": "*"}).status_code == 412
    assert put(api, auth, "daily", DAILY, **{"If-None-Match": "*"}).status_code == 412
    assert put(api, auth, "daily", DAILY, **{"If-Match": 'W/"1"'}).status_code == 412


def test_runs_and_pauses_never_move_the_etag(api: Api, auth: dict[str, str]) -> None:
    etag = put(api, auth, "daily", DAILY).headers["etag"]

    paused = api.client.post("/api/v1/schedules/daily/pause", json={"note": "maintenance"},
                             headers=auth)
    ran = api.client.post("/api/v1/schedules/daily/run", headers=auth)
    resumed = api.client.post("/api/v1/schedules/daily/resume", headers=auth)
    edited = put(api, auth, "daily", {**DAILY, "kwargs": {}}, **{"If-Match": etag})

    assert paused.status_code == 200 and paused.json()["state"] == "paused"
    assert paused.json()["paused_reason"] == "maintenance"
    assert paused.headers["etag"] == etag
    assert ran.status_code == 202 and ran.json()["manual"] is True
    assert resumed.json()["state"] == "enabled" and resumed.headers["etag"] == etag
    assert edited.status_code == 200


def test_patch_changes_the_fields_given_and_null_unsets_one(api: Api,
                                                            auth: dict[str, str]) -> None:
    put(api, auth, "daily", {**DAILY, "misfire_grace": 600})

    patched = api.client.patch("/api/v1/schedules/daily",
                               json={"misfire_grace": None, "description": "Morning report"},
                               headers=auth)

    body = patched.json()
    assert patched.status_code == 200, body
    assert body["misfire_grace"] is None and body["schedule_description"] == "Morning report"
    assert body["kwargs"] == {"limit": 50} and body["trigger"]["expression"] == "30 6 * * *"


# -- problems -------------------------------------------------------------------------------------
def test_bad_input_is_refused_with_every_problem_the_python_api_names(
        api: Api, auth: dict[str, str]) -> None:
    bad = {"task": "proj.tasks.report", "every": "soon", "misfire_policy": "never",
           "start_at": "tomorrow", "max_runs": -1}

    refused = put(api, auth, "daily", bad)

    assert refused.status_code == 422
    assert refused.headers["content-type"] == "application/problem+json"
    with pytest.raises(ConfigurationError) as python:
        api.schedules.create("daily", **bad)
    expected = [{"field": p.field, "message": p.message, "hint": p.hint}
                for p in python.value.details]
    assert refused.json()["problems"] == expected
    assert {p["field"] for p in expected} >= {"every", "misfire_policy", "start_at", "max_runs"}
    assert api.schedules.list() == []


def test_unknown_fields_a_missing_task_nul_text_and_non_json_are_refused(
        api: Api, auth: dict[str, str]) -> None:
    unknown = put(api, auth, "daily", {"cron": "* * * * *", "colour": "red"})
    nul = put(api, auth, "daily", {**DAILY, "kwargs": {"a": "x\x00"}})
    form = api.client.put("/api/v1/schedules/daily", content="task=x", headers={
        **auth, "Content-Type": "application/x-www-form-urlencoded"})

    assert unknown.status_code == 422
    assert {p["field"] for p in unknown.json()["problems"]} == {"colour", "task"}
    assert nul.status_code == 422 and nul.json()["problems"][0]["field"] == "kwargs.a"
    assert form.status_code == 415
    assert api.schedules.list() == []


def test_a_schedule_from_beat_schedule_is_not_edited_or_removed_here(
        api: Api, auth: dict[str, str], schedules: Schedules) -> None:
    from tests.cli.conftest import config_schedule

    config_schedule(schedules.store, "from-config")  # type: ignore[arg-type]

    assert put(api, auth, "from-config", DAILY).status_code == 409
    assert api.client.delete("/api/v1/schedules/from-config", headers=auth).status_code == 409
    assert api.client.post("/api/v1/schedules/from-config/pause",
                           headers=auth).status_code == 200


# -- reading --------------------------------------------------------------------------------------
def test_the_list_pages_by_keyset_and_filters(api: Api, auth: dict[str, str]) -> None:
    for i in range(5):
        put(api, auth, f"job-{i}", {"task": "proj.tasks.report", "every": 60 * (5 - i),
                                    "tags": ["odd"] if i % 2 else []})
    api.client.post("/api/v1/schedules/job-0/pause", headers=auth)

    def walk(query: str) -> list[str]:
        names: list[str] = []
        link: str | None = f"/api/v1/schedules?{query}"
        while link:
            page = api.client.get(link, headers=auth).json()
            names.extend(s["name"] for s in page["schedules"])
            link = page["next"]
        return names

    assert walk("limit=2") == [f"job-{i}" for i in range(5)]
    assert walk("limit=2&order=next_run&state=enabled") == sorted(
        [f"job-{i}" for i in range(1, 5)],
        key=lambda n: api.schedules.get(n).next_run_at)  # type: ignore[arg-type,return-value]
    assert walk("tag=odd") == ["job-1", "job-3"]
    assert walk("state=paused") == ["job-0"]
    refused = api.client.get("/api/v1/schedules?limit=0&state=gone", headers=auth)
    assert refused.status_code == 422


def test_history_next_runs_and_delete(api: Api, auth: dict[str, str]) -> None:
    put(api, auth, "daily", DAILY)
    api.client.post("/api/v1/schedules/daily/run", headers=auth)

    history = api.client.get("/api/v1/schedules/daily/history", headers=auth).json()
    upcoming = api.client.get("/api/v1/schedules/daily/next?count=3", headers=auth).json()
    conditional = api.client.delete("/api/v1/schedules/daily",
                                    headers={**auth, "If-Match": '"1"'})
    removed = api.client.delete("/api/v1/schedules/daily", headers=auth)

    assert [run["manual"] for run in history["runs"]] == [True]
    assert len(upcoming["next_runs"]) == 3
    assert conditional.status_code == 400
    assert removed.status_code == 204
    assert api.client.get("/api/v1/schedules/daily", headers=auth).status_code == 404


def test_backfills_are_previewed_started_listed_and_cancelled(api: Api,
                                                               auth: dict[str, str]) -> None:
    put(api, auth, "hourly", {"task": "proj.tasks.report", "cron": "0 * * * *"})
    now = api.schedules.store.now()
    span = {"start": (now - timedelta(hours=5)).isoformat(),
            "end": (now - timedelta(hours=1)).isoformat()}
    path = "/api/v1/schedules/hourly/backfills"

    preview = api.client.post(path, json={**span, "dry_run": True}, headers=auth)
    started = api.client.post(path, json=span, headers=auth)
    listed = api.client.get("/api/v1/backfills", headers=auth).json()
    cancelled = api.client.post(f"/api/v1/backfills/{started.json()['id']}/cancel",
                                headers=auth)
    bad = api.client.post(path, json={"start": "yesterday"}, headers=auth)

    assert preview.status_code == 200 and len(preview.json()["runs"]) in (4, 5)
    assert started.status_code == 201 and started.json()["total"] in (4, 5)
    assert [b["id"] for b in listed["backfills"]] == [started.json()["id"]]
    assert cancelled.json()["state"] == "cancelled"
    assert bad.status_code == 422
    assert {p["field"] for p in bad.json()["problems"]} == {"start", "end"}


def test_calendars_are_put_read_guarded_by_version_and_removed(api: Api,
                                                                auth: dict[str, str]) -> None:
    created = api.client.put("/api/v1/calendars/holidays",
                             json={"dates": ["2026-12-25"], "description": "Closed"},
                             headers=auth)
    etag = created.headers["etag"]
    put(api, auth, "daily", {**DAILY, "calendars": ["holidays"]})
    edited = api.client.put("/api/v1/calendars/holidays",
                            json={"dates": ["2026-12-25", "2027-01-01"]},
                            headers={**auth, "If-Match": etag})
    stale = api.client.put("/api/v1/calendars/holidays", json={"dates": []},
                           headers={**auth, "If-Match": etag})
    in_use = api.client.delete("/api/v1/calendars/holidays", headers=auth)
    bad = api.client.put("/api/v1/calendars/holidays", json={"dates": ["someday"]},
                         headers=auth)

    assert created.status_code == 201 and edited.status_code == 200
    assert edited.json()["entries"] == ["2026-12-25", "2027-01-01"]
    assert edited.json()["observed_by"] == ["daily"]
    assert stale.status_code == 412 and in_use.status_code == 409
    assert bad.status_code == 422 and bad.json()["problems"][0]["field"] == "dates"
    listed = api.client.get("/api/v1/calendars", headers=auth).json()
    assert [c["name"] for c in listed["calendars"]] == ["holidays"]


# -- the audit log --------------------------------------------------------------------------------
def test_changes_are_recorded_as_the_token_s_with_the_reason_given(api: Api,
                                                                   auth: dict[str, str]) -> None:
    put(api, auth, "daily", DAILY, **{"X-Goatbeat-Reason": "ticket OPS-12"})
    api.client.patch("/api/v1/schedules/daily", json={"kwargs": {}},
                     headers={**auth, "X-Goatbeat-Reason": "d\u00e9j\u00e0 vu".encode()})
    api.client.post("/api/v1/schedules/daily/pause", headers=auth)
    too_long = api.client.post("/api/v1/schedules/daily/resume",
                               headers={**auth, "X-Goatbeat-Reason": "x" * 5000})

    first = api.client.get("/api/v1/schedules/daily/audit?limit=2", headers=auth).json()
    rest = api.client.get(first["next"], headers=auth).json()

    entries = first["entries"] + rest["entries"]
    assert [(e["action"], e["actor"], e["reason"]) for e in entries] == [
        ("pause", "token:ci", None), ("edit", "token:ci", "d\u00e9j\u00e0 vu"),
        ("create", "token:ci", "ticket OPS-12")]
    assert entries[1]["changes"]["kwargs"] == [{"limit": 50}, {}]
    assert too_long.status_code == 422
    assert too_long.json()["problems"][0]["field"] == "reason"
    team_b = api.token("team-b", prefix="team-b-")
    assert api.client.get("/api/v1/schedules/daily/audit", headers=team_b).status_code == 404
