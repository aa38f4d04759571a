"""Alerts over the JSON API: listed open first, acknowledged (note, by the token) and
silenced until an instant, each audited with the reason header; a resolved alert is a 409,
an unknown one a 404, a bad ``until`` a 422 naming it; a token's prefix and scope hold."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import cast

import pytest
from starlette.testclient import TestClient

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.alerts import AlertChange, AlertRule
from goatbeat_celery.core.types.audit import AuditAction
from goatbeat_celery.store import Store
from goatbeat_celery.web import create_app

from .api_client import Api


def raise_alert(schedules: Schedules, name: str, action: str = "open") -> int:
    store = cast(Store, schedules.store)
    grant = store.acquire("default", "replica-a", timedelta(seconds=60))
    assert grant is not None
    store.record_alerts([AlertChange(schedule_name=name, rule=AlertRule.FAILED,
                                     action=action, reason="3 failed", key=f"{name}:1")],
                        lease=grant)
    return schedules.alerts(name=name, limit=1)[0].id


@pytest.fixture
def api(schedules: Schedules) -> Iterator[Api]:
    for name in ("etl-a", "report"):
        schedules.create(name, "proj.tasks.tick", every=60)
    with TestClient(create_app(schedules), base_url="http://127.0.0.1") as client:
        yield Api(client, schedules)


def test_ack_and_silence_an_open_alert(api: Api, schedules: Schedules) -> None:
    auth = {**api.token(), "X-Goatbeat-Reason": "paged"}
    alert_id = raise_alert(schedules, "report")
    acked = api.client.post(f"/api/v1/alerts/{alert_id}/ack", json={"note": "on it"},
                            headers=auth)
    assert acked.status_code == 200, acked.text
    assert (acked.json()["acknowledged_by"], acked.json()["ack_note"]) == ("token:ci", "on it")
    until = (schedules.now() + timedelta(hours=1)).isoformat()
    silenced = api.client.post(f"/api/v1/alerts/{alert_id}/silence", json={"until": until},
                               headers=auth)
    assert silenced.status_code == 200, silenced.text
    assert silenced.json()["silenced_until"] == until
    listed = api.client.get("/api/v1/alerts", headers=auth).json()["alerts"]
    assert [(a["id"], a["silenced_by"]) for a in listed] == [(alert_id, "token:ci")]
    actions = [e.action for e in schedules.audit("report", limit=2)]
    assert actions == [AuditAction.SILENCE_ALERT, AuditAction.ACKNOWLEDGE_ALERT]
    assert schedules.audit("report", limit=1)[0].reason == "paged"


def test_refusals(api: Api, schedules: Schedules) -> None:
    auth = api.token()
    alert_id = raise_alert(schedules, "report")
    for until, field in (("soon", "until"), (None, "until"),
                         ((schedules.now() - timedelta(hours=1)).isoformat(), "until")):
        answer = api.client.post(f"/api/v1/alerts/{alert_id}/silence", json={"until": until},
                                 headers=auth)
        assert answer.status_code == 422, answer.text
        assert [p["field"] for p in answer.json()["problems"]] == [field]
    answer = api.client.post(f"/api/v1/alerts/{alert_id}/ack", json={"colour": 1},
                             headers=auth)
    assert answer.status_code == 422
    assert api.client.post("/api/v1/alerts/999999/ack", headers=auth).status_code == 404
    assert api.client.post("/api/v1/alerts/x/ack", headers=auth).status_code == 404
    raise_alert(schedules, "report", "resolve")
    answer = api.client.post(f"/api/v1/alerts/{alert_id}/ack", headers=auth)
    assert answer.status_code == 409 and "was resolved" in answer.text
    shown = schedules.alert(alert_id)
    assert (shown.acknowledged_at, shown.silenced_until) == (None, None)


def test_a_token_s_prefix_and_scope_hold(api: Api, schedules: Schedules) -> None:
    report = raise_alert(schedules, "report")
    raise_alert(schedules, "etl-a")
    limited = api.token("etl", scopes="read,write", prefix="etl-")
    listed = api.client.get("/api/v1/alerts", headers=limited).json()["alerts"]
    assert [a["schedule"] for a in listed] == ["etl-a"]
    assert api.client.post(f"/api/v1/alerts/{report}/ack",
                           headers=limited).status_code == 404
    reader = api.token("reader", scopes="read")
    assert api.client.post(f"/api/v1/alerts/{report}/ack", headers=reader).status_code == 403
    assert schedules.alert(report).acknowledged_at is None
