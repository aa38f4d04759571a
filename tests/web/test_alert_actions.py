"""Acknowledging and silencing an open alert from the dashboard, through an HTTP client: the
forms on the overview and the schedule's page, audited as the dashboard's actor, shown as
acknowledged or silenced afterwards; a resolved alert or a past end refused with nothing
changed; CSRF and read-only hold."""

from __future__ import annotations

import html as html_module
from datetime import timedelta

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.alerts import AlertRule
from goatbeat_celery.core.types.audit import AuditAction
from goatbeat_celery.web import WebSettings
from goatbeat_celery.web.security import CSRF_FIELD
from tests.web.conftest import Browser
from tests.web.test_alerts import raise_alert


def opened(schedules: Schedules) -> int:
    schedules.create("report", "proj.tasks.report", every=60)
    raise_alert(schedules, "report", AlertRule.FAILED, "3 runs failed in a row")
    return schedules.alerts(name="report")[0].id


def test_acknowledge_from_the_overview_shows_who_and_the_note(client: Browser,
                                                               schedules: Schedules) -> None:
    alert_id = opened(schedules)
    page = client.get("/").text
    assert f'id="ack-{alert_id}"' in page and f'id="silence-{alert_id}"' in page
    answer = client.submit("/alert/ack", alert_id=str(alert_id), note="vendor <b>42</b>",
                           back="overview")
    assert answer.status_code == 303 and answer.headers["location"].startswith("/?")
    page = client.get(answer.headers["location"]).text
    assert "Alert acknowledged" in page
    row = page[page.index(f'id="alert-{alert_id}"'):]
    row = row[:row.index("</tr>")]
    assert "acknowledged</span> by dashboard" in row
    assert "vendor &lt;b&gt;42&lt;/b&gt;" in row
    entry = schedules.audit("report", limit=1)[0]
    assert (entry.action, entry.actor, entry.reason) == (AuditAction.ACKNOWLEDGE_ALERT,
                                                         "dashboard", "vendor <b>42</b>")


def test_silence_for_a_while_or_until_an_instant_from_the_schedule_page(
        client: Browser, schedules: Schedules) -> None:
    alert_id = opened(schedules)
    before = schedules.now()
    answer = client.submit("/alert/silence", alert_id=str(alert_id), back="schedule",
                           name="report", **{"for": "3600"})
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/schedule?name=report")
    until = schedules.alert(alert_id).silenced_until
    assert until is not None and timedelta(minutes=59) < until - before < timedelta(minutes=61)
    page = client.get(answer.headers["location"]).text
    assert "silenced</span> until" in page and "Alert silenced" in page
    answer = client.submit("/alert/silence", alert_id=str(alert_id), back="schedule",
                           name="report", until="2031-01-01T09:00+01:00", **{"for": "3600"})
    assert answer.status_code == 303
    assert schedules.alert(alert_id).silenced_until.isoformat() == "2031-01-01T08:00:00+00:00"


def test_refusals_change_nothing(client: Browser, make_client: object,
                                 schedules: Schedules) -> None:
    alert_id = opened(schedules)
    past = client.submit("/alert/silence", alert_id=str(alert_id), until="2020-01-01T00:00Z")
    assert past.status_code == 422 and "not after now" in html_module.unescape(past.text)
    assert client.submit("/alert/silence", alert_id=str(alert_id),
                         **{"for": "13"}).status_code == 422
    assert client.submit("/alert/ack", alert_id="999999").status_code == 404
    no_csrf = client.post("/alert/ack", data={"alert_id": str(alert_id)},
                          follow_redirects=False)
    assert no_csrf.status_code == 403
    reader: Browser = make_client(WebSettings(read_only=True))  # type: ignore[operator]
    assert f'id="ack-{alert_id}"' not in reader.get("/").text
    assert reader.post("/alert/ack", data={CSRF_FIELD: reader.csrf(),
                                           "alert_id": str(alert_id)}).status_code == 403
    raise_alert_resolved(schedules)
    resolved = client.submit("/alert/ack", alert_id=str(alert_id))
    assert resolved.status_code == 409 and "was resolved" in resolved.text
    shown = schedules.alert(alert_id)
    assert (shown.acknowledged_at, shown.silenced_until) == (None, None)


def raise_alert_resolved(schedules: Schedules) -> None:
    from typing import cast

    from goatbeat_celery.core.rules.alerts import AlertChange
    from goatbeat_celery.store import Store

    store = cast(Store, schedules.store)
    grant = store.acquire("default", "replica-a", timedelta(seconds=60))
    assert grant is not None
    store.record_alerts([AlertChange(schedule_name="report", rule=AlertRule.FAILED,
                                     action="resolve", reason="")], lease=grant)
