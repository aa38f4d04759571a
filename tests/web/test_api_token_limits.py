"""What a token cannot make the HTTP API do beyond its scopes and prefix: filter by more tags
than a listing takes, learn or pin other teams' calendars and schedules through calendars, or
run a task at once without the ``run`` scope. Through an HTTP client, on the session's
PostgreSQL database."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from goatbeat_celery.core.rules.controls import MAX_FILTER_TAGS

from .api_client import DAILY, Api, put


def problem_fields(answer: Any) -> set[str]:
    return {problem["field"] for problem in answer.json().get("problems", ())}


# -- tag= --------------------------------------------------------------------------------------
def test_a_listing_takes_at_most_the_documented_number_of_tags(api: Api,
                                                                auth: dict[str, str]) -> None:
    tags = [f"t{index}" for index in range(MAX_FILTER_TAGS + 1)]
    put(api, auth, "job", {**DAILY, "tags": tags[:MAX_FILTER_TAGS]})
    reader = api.token("reader", "read")

    def listed(wanted: list[str]) -> Any:
        query = "&".join(f"tag={tag}" for tag in wanted)
        return api.client.get(f"/api/v1/schedules?{query}", headers=reader)

    refused = listed(tags)
    repeated = listed([tags[0]] * (MAX_FILTER_TAGS + 1))
    found = listed(tags[:MAX_FILTER_TAGS])

    assert refused.status_code == 422, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    assert problem_fields(refused) == {"tag"}  # the query parameter
    assert f"at most {MAX_FILTER_TAGS}" in refused.text
    assert repeated.status_code == 422  # counted as sent: a repeat is no narrower
    assert [s["name"] for s in found.json()["schedules"]] == ["job"]


# -- calendars through a prefix token ------------------------------------------------------
def put_calendar(api: Api, auth: dict[str, str], name: str, **body: Any) -> Any:
    return api.client.put(f"/api/v1/calendars/{name}", json=body, headers=auth)


def test_a_prefix_token_is_shown_only_its_own_schedules_among_a_calendar_s_observers(
        api: Api, auth: dict[str, str]) -> None:
    put_calendar(api, auth, "team-b-hol", dates=["2030-12-25"])
    put(api, auth, "team-b-1", {**DAILY, "calendars": ["team-b-hol"]})
    # A schedule of team a's observing it, as only an unlimited token can make it.
    put(api, auth, "team-a-secret", {**DAILY, "calendars": ["team-b-hol"]})
    team_b = api.token("team-b", prefix="team-b-")

    read = api.client.get("/api/v1/calendars/team-b-hol", headers=team_b)
    written = put_calendar(api, team_b, "team-b-hol", dates=["2030-12-26"])
    in_use = api.client.delete("/api/v1/calendars/team-b-hol", headers=team_b)
    everyone = api.client.get("/api/v1/calendars/team-b-hol", headers=auth)

    assert read.json()["observed_by"] == written.json()["observed_by"] == ["team-b-1"]
    assert in_use.status_code == 409, in_use.text
    assert "'team-b-1'" in in_use.text and "team-a" not in in_use.text
    assert "outside token 'team-b''s prefix" in in_use.json()["detail"]
    assert everyone.json()["observed_by"] == ["team-a-secret", "team-b-1"]
    # Observed by nothing the token may see: named as others only.
    api.client.put("/api/v1/schedules/team-b-1", json=DAILY, headers=auth)
    hidden = api.client.delete("/api/v1/calendars/team-b-hol", headers=team_b)
    assert hidden.status_code == 409 and "team-a" not in hidden.text
    assert api.client.get("/api/v1/calendars/team-b-hol", headers=team_b).json()[
        "observed_by"] == []


def test_a_prefix_token_cannot_probe_or_pin_another_team_s_calendars(
        api: Api, auth: dict[str, str]) -> None:
    put_calendar(api, auth, "team-b-hol", dates=["2030-12-25"])
    put_calendar(api, auth, "holidays", dates=["2030-12-25"])
    put(api, auth, "team-a-shared", {**DAILY, "calendars": ["holidays"]})
    team_a = api.token("team-a", prefix="team-a-")

    existing = put(api, team_a, "team-a-1", {**DAILY, "calendars": ["team-b-hol"]})
    missing = put(api, team_a, "team-a-1", {**DAILY, "calendars": ["team-b-nope"]})
    patched = api.client.patch("/api/v1/schedules/team-a-shared",
                               json={"calendars": ["holidays", "team-b-hol"]}, headers=team_a)

    # Refused on the names alone: an existing calendar and a missing one are answered alike.
    assert existing.status_code == missing.status_code == patched.status_code == 403
    assert problem_fields(existing) == problem_fields(missing) == {"calendars"}
    assert existing.json()["detail"] == missing.json()["detail"]
    assert [p["message"] for p in existing.json()["problems"]] == [
        "'team-b-hol' is outside the token's prefix"]
    assert api.client.get("/api/v1/schedules/team-a-1", headers=auth).status_code == 404
    # Nothing pins team b's calendar: its holder deletes it.
    team_b = api.token("team-b", prefix="team-b-")
    assert api.client.delete("/api/v1/calendars/team-b-hol", headers=team_b).status_code == 204
    # A calendar the schedule observes already, put there by an unlimited token, is kept.
    kept = api.client.patch("/api/v1/schedules/team-a-shared",
                            json={"description": "x", "calendars": ["holidays"]},
                            headers=team_a)
    assert kept.status_code == 200, kept.text
    put_calendar(api, team_a, "team-a-hol", dates=["2030-12-31"])
    own = put(api, team_a, "team-a-1", {**DAILY, "calendars": ["team-a-hol"]})
    assert own.status_code == 201, own.text


# -- the run scope -------------------------------------------------------------------------
def test_a_token_without_run_cannot_set_a_one_time_run_due_soon(
        api: Api, auth: dict[str, str]) -> None:
    from goatbeat_celery.web.api.token_limits import RUN_SOON

    now = api.schedules.store.now()
    soon, later = (now + timedelta(seconds=30)).isoformat(), (now + RUN_SOON * 2).isoformat()
    writer = api.token("writer", "read,write")
    once = {"task": "proj.tasks.report"}

    created = put(api, writer, "once", {**once, "at": soon})
    paused = put(api, writer, "once", {**once, "at": soon, "enabled": False})
    assert created.status_code == paused.status_code == 403, created.text
    assert problem_fields(created) == {"at"} and "'run'" in created.json()["detail"]
    assert api.client.get("/api/v1/schedules/once", headers=auth).status_code == 404

    assert put(api, writer, "once", {**once, "at": later}).status_code == 201
    moved = api.client.patch("/api/v1/schedules/once", json={"at": soon}, headers=writer)
    assert moved.status_code == 403 and problem_fields(moved) == {"at"}
    assert api.client.get("/api/v1/schedules/once", headers=auth).json()["next_run_at"] == \
        datetime.fromisoformat(later).isoformat()
    # A recurring schedule is write's own; so is restating an instant set with run.
    assert put(api, writer, "every", {**once, "every": 60}).status_code == 201
    assert put(api, auth, "soon", {**once, "at": soon}).status_code == 201
    assert put(api, writer, "soon", {**once, "at": soon, "kwargs": {"x": 1}}).status_code == 200
