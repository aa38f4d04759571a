"""Recurrence rules and solar events through the JSON API: written by PUT and PATCH, answered
as stored, refused with the problems the Python API names, and described by the OpenAPI
document's Definition."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

import pytest
from jsonschema import Draft202012Validator

from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.web.api import API_PREFIX

from .api_client import Api, put

RULE = "DTSTART;TZID=Asia/Tokyo:20260105T073000\nRRULE:FREQ=DAILY"
SUNSET = {"event": "sunset", "latitude": 37.77, "longitude": -122.42}


def test_put_stores_a_rule_in_its_zone(api: Api, auth: dict[str, str]) -> None:
    created = put(api, auth, "digest", {"task": "mail.digest", "rrule": RULE,
                                        "timezone": "Asia/Tokyo"})

    body = created.json()
    assert created.status_code == 201, body
    assert body["trigger"] == {"kind": "rrule", "rule": RULE, "timezone": "Asia/Tokyo"}
    assert body["timezone"] == "Asia/Tokyo"
    local = api.schedules.get("digest").next_run_at
    assert local is not None
    assert (local.astimezone(ZoneInfo("Asia/Tokyo")).hour,
            local.astimezone(ZoneInfo("Asia/Tokyo")).minute) == (7, 30)


def test_a_put_over_a_rule_reads_a_new_rule_in_the_app_s_zone(api: Api,
                                                              auth: dict[str, str]) -> None:
    put(api, auth, "digest", {"task": "mail.digest", "rrule": RULE, "timezone": "Asia/Tokyo"})

    # A PUT is the whole definition: the zone left out is the app's, not the one replaced.
    replaced = put(api, auth, "digest", {"task": "mail.digest",
                                         "rrule": "FREQ=DAILY;BYHOUR=8;BYMINUTE=0"})

    body = replaced.json()
    assert replaced.status_code == 200, body
    assert body["timezone"] == "Europe/Paris"
    assert body["trigger"]["rule"].startswith("DTSTART;TZID=Europe/Paris:")


@pytest.mark.parametrize("solar", [SUNSET, ["sunset", 37.77, -122.42]],
                         ids=["object", "array"])
def test_put_stores_a_solar_event_given_either_way(api: Api, auth: dict[str, str],
                                                   solar: Any) -> None:
    created = put(api, auth, "lights", {"task": "home.lights_on", "solar": solar})

    body = created.json()
    assert created.status_code == 201, body
    assert body["trigger"] == {"kind": "solar", **SUNSET}
    assert body["timezone"] is None and body["next_run_at"] is not None


def test_patch_turns_a_cron_into_a_solar_event_and_back_into_a_rule(
        api: Api, auth: dict[str, str]) -> None:
    put(api, auth, "lights", {"task": "home.lights_on", "cron": "0 18 * * *"})

    solar = api.client.patch("/api/v1/schedules/lights", json={"solar": SUNSET}, headers=auth)
    rule = api.client.patch("/api/v1/schedules/lights",
                            json={"rrule": "FREQ=DAILY;BYHOUR=18;BYMINUTE=0",
                                  "timezone": "UTC"}, headers=auth)

    assert solar.status_code == 200, solar.json()
    assert solar.json()["trigger"] == {"kind": "solar", **SUNSET}
    assert rule.status_code == 200, rule.json()
    assert rule.json()["trigger"]["kind"] == "rrule" and rule.json()["timezone"] == "UTC"


@pytest.mark.parametrize("bad", [
    {"rrule": "BYDAY=TU"},
    {"solar": {"event": "moonrise", "latitude": 100, "longitude": 2}},
    {"solar": {"event": "sunset", "latitude": 48.85, "longitude": 2.35},
     "timezone": "Europe/Paris"},
], ids=["rule-without-freq", "unknown-event-and-latitude", "solar-with-a-zone"])
def test_bad_triggers_are_refused_with_the_problems_the_python_api_names(
        api: Api, auth: dict[str, str], bad: dict[str, Any]) -> None:
    refused = put(api, auth, "bad", {"task": "proj.task", **bad})

    assert refused.status_code == 422
    with pytest.raises(ConfigurationError) as python:
        api.schedules.create("bad", "proj.task", **bad)
    assert refused.json()["problems"] == [
        {"field": p.field, "message": p.message, "hint": p.hint}
        for p in python.value.details]
    assert api.schedules.list() == []


def test_the_openapi_definition_describes_both_kinds(api: Api) -> None:
    document = api.client.get(f"{API_PREFIX}/openapi.json").json()
    definition = document["components"]["schemas"]["Definition"]
    validator = Draft202012Validator(definition)

    for accepted in ({"task": "t", "rrule": RULE, "timezone": "Asia/Tokyo"},
                     {"task": "t", "solar": SUNSET},
                     {"task": "t", "solar": ["sunset", 37.77, -122.42]}):
        assert list(validator.iter_errors(accepted)) == []
    for refused in ({"task": "t", "solar": {**SUNSET, "elevation": 10}},
                    {"task": "t", "solar": {**SUNSET, "event": "moonrise"}},
                    {"task": "t", "solar": ["sunset", 37.77]}):
        assert list(validator.iter_errors(refused)) != []
