"""The schedules list's action bar through an HTTP client: the schedules ticked, or every one
of the tag the list is filtered by, paused (until an instant), resumed or run with one reason
audited for each; the post answered See Other to the list, whose page shows each outcome (and
shows it again on a reload, acting on nothing); a post refused whole shows its problems in the
bar, keeps what was typed and ticked, and changes nothing; read-only shows no bar and refuses a
post."""

from __future__ import annotations

import html as html_module
from datetime import timedelta

from goatbeat_celery.api import Schedules
from goatbeat_celery.api.bulk import BulkResult
from goatbeat_celery.core.types.audit import AuditAction
from goatbeat_celery.web import WebSettings
from goatbeat_celery.web.bulk_results import BulkResults
from goatbeat_celery.web.security import CSRF_FIELD
from tests.web.conftest import Browser


def three(schedules: Schedules) -> None:
    for name, tags in (("etl-a", ["etl"]), ("etl-b", ["etl"]), ("report", [])):
        schedules.create(name, "proj.tasks.tick", every=60, tags=tags)


def post(client: Browser, query: str = "", **fields: object) -> object:
    return client.post(f"/schedules/bulk{query}", data={CSRF_FIELD: client.csrf(), **fields},
                       follow_redirects=False)


def test_the_list_has_a_box_per_schedule_and_the_bar(client: Browser,
                                                       schedules: Schedules) -> None:
    three(schedules)
    page = client.get("/schedules?tag=etl").text
    assert page.count('name="names"') == 2
    assert 'id="bulk-bar"' in page and 'name="all_tagged" value="etl"' in page
    assert "(2, on every page)" in page
    assert 'action="/schedules/bulk?tag=etl"' in page


def test_pausing_the_ticked_schedules_until_an_instant_audits_the_reason(
        client: Browser, schedules: Schedules) -> None:
    three(schedules)
    schedules.pause("report")
    until = (schedules.now() + timedelta(hours=3)).replace(microsecond=0)
    answer = client.post("/schedules/bulk", data={
        CSRF_FIELD: client.csrf(), "names": ["etl-a", "report"], "action": "pause",
        "reason": "vendor outage", "until": until.isoformat()}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"].startswith("/schedules?bulk=")
    shown = client.get(answer.headers["location"])
    text = html_module.unescape(shown.text)
    assert "Pause: 1 done, 1 refused." in text
    assert "report</a>: already paused" in text
    assert schedules.get("etl-a").paused_until == until
    assert schedules.get("etl-a").paused_reason == "vendor outage"
    entry = schedules.audit("etl-a", limit=1)[0]
    assert (entry.action, entry.reason) == (AuditAction.PAUSE, "vendor outage")


def test_every_schedule_of_the_tag_is_run_whatever_is_ticked(client: Browser,
                                                               schedules: Schedules) -> None:
    three(schedules)
    answer = client.post("/schedules/bulk?tag=etl", data={
        CSRF_FIELD: client.csrf(), "names": ["etl-a"], "all_tagged": "etl",
        "action": "run_now", "reason": "catch up"}, follow_redirects=False)
    assert answer.status_code == 303
    # The list comes back filtered as it was.
    assert answer.headers["location"].startswith("/schedules?tag=etl&bulk=")
    assert "Run now: 2 done, 0 refused." in client.get(answer.headers["location"]).text
    assert sorted(e.schedule_name for e in schedules.executions()) == ["etl-a", "etl-b"]
    assert all(schedules.audit(n, limit=1)[0].reason == "catch up" for n in ("etl-a", "etl-b"))


def test_reading_the_outcome_again_acts_on_nothing(client: Browser,
                                                   schedules: Schedules) -> None:
    three(schedules)
    answer = post(client, names=["etl-a", "etl-b"], action="run_now", reason="once")
    location = answer.headers["location"]  # type: ignore[attr-defined]
    for _ in range(2):
        assert "Run now: 2 done, 0 refused." in client.get(location).text
    assert len(schedules.executions()) == 2
    assert [e.action for e in schedules.audit("etl-a")].count(AuditAction.RUN_NOW) == 1


def test_an_outcome_another_dashboard_process_took_is_said_to_be_gone(
        client: Browser, make_client: object, schedules: Schedules) -> None:
    three(schedules)
    answer = post(client, names=["etl-a"], action="pause")
    location = answer.headers["location"]  # type: ignore[attr-defined]
    other: Browser = make_client(WebSettings())  # type: ignore[operator]
    seen = other.get(location).text
    assert "Pause: 1 done" not in seen and 'id="bulk-gone"' in seen
    assert 'id="bulk-gone"' in client.get("/schedules?bulk=never-given").text


def test_kept_outcomes_are_their_sessions_expire_and_the_oldest_go_first() -> None:
    now = [0.0]
    held = BulkResults(kept=10.0, held=2, clock=lambda: now[0])
    result = BulkResult("pause", ())
    first, second = held.keep(result, "s"), held.keep(result, "s")
    assert held.get(first, "s") is result and held.get(first, None) is None
    third = held.keep(result, None)
    assert held.get(first, "s") is None  # the oldest of three, two held
    assert held.get(second, "s") is result and held.get(third, None) is result
    now[0] = 10.0
    assert held.get(second, "s") is None and held.get(third, None) is None


def test_nothing_ticked_or_a_bad_until_is_refused_in_the_bar(client: Browser,
                                                             schedules: Schedules) -> None:
    three(schedules)
    answer = client.post("/schedules/bulk", data={
        CSRF_FIELD: client.csrf(), "action": "pause", "reason": "kept"},
        follow_redirects=False)
    assert answer.status_code == 422
    assert 'data-field="names">names: no schedule selected' in answer.text
    assert 'value="kept"' in answer.text
    answer = client.post("/schedules/bulk", data={
        CSRF_FIELD: client.csrf(), "action": "pause", "names": ["etl-b"], "until": "soonish"},
        follow_redirects=False)
    assert answer.status_code == 422
    assert "not an ISO-8601 instant" in html_module.unescape(answer.text)
    assert 'value="etl-b" aria-label="tick etl-b" checked' in answer.text
    assert all(schedules.get(n).spec.enabled for n in ("etl-a", "etl-b", "report"))


def test_a_post_without_its_csrf_token_or_read_only_changes_nothing(
        client: Browser, make_client: object, schedules: Schedules) -> None:
    three(schedules)
    refused = client.post("/schedules/bulk", data={"names": ["etl-a"], "action": "pause"},
                          follow_redirects=False)
    assert refused.status_code == 403
    reader: Browser = make_client(WebSettings(read_only=True))  # type: ignore[operator]
    assert 'id="bulk-bar"' not in reader.get("/schedules").text
    refused = reader.post("/schedules/bulk", data={CSRF_FIELD: reader.csrf(),
                                                   "names": ["etl-a"], "action": "pause"})
    assert refused.status_code == 403
    assert schedules.get("etl-a").spec.enabled
