"""The pages of round two, through HTTP on a real PostgreSQL store: a run's page, the filter by
outcome and the runtime percentiles, the outcome column of the list, the policies and controls
of the edit form, backfills (preview, confirmation, cancel), calendars and the fleet."""

from __future__ import annotations

import html as html_module
import re
from datetime import timedelta
from typing import Any, cast
from urllib.parse import quote

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.spec import MisfirePolicy
from tests.web.conftest import Browser
from tests.web.pages import error_of, pills_in


def finish(schedules: Schedules, execution: Execution, outcome: RunOutcome, seconds: float,
           *, worker: str = "celery@w1", error: str | None = None) -> None:
    """``execution`` sent, then run by ``worker`` for ``seconds`` with ``outcome``."""
    schedules.store.mark_submitted([execution.key])
    cast(Any, schedules.store).record_runs([RunEvent.finished(
        execution.key, run=f"r-{execution.key}", worker=worker, age=timedelta(0),
        outcome=outcome, runtime=timedelta(seconds=seconds), error=error,
        started_age=timedelta(seconds=seconds))])


def test_a_run_page_shows_its_whole_key_its_one_state_its_timeline_and_its_error(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("nightly", "proj.tasks.report", every=60)
    run = schedules.run_now("nightly")
    finish(schedules, run, RunOutcome.FAILED, 2.5, error="ValueError: <b>boom</b>")

    page = client.get("/run", params={"key": run.key}).text

    key = re.search(r'<h1 class="name" id="run-key">(.*?)</h1>', page)
    # Shown whole, with places to break between its parts (never inside its instant).
    assert key and html_module.unescape(re.sub(r"<[^>]*>", "", key.group(1))) == run.key
    assert pills_in(page[:page.index("Timeline")]) == ["failed"]  # not "submitted" as well
    assert "submitted (then the worker reported failed)" in page
    assert "ValueError: &lt;b&gt;boom&lt;/b&gt;" in page and "<b>boom" not in page
    for step in ("due", "claimed", "sent", "started", "ended"):
        assert f'<td class="nw">{step}</td>' in page
    assert "celery@w1" in page and "2.5s" in page
    # The schedule's table links to it with a short label and the whole key on hover.
    schedule = client.get("/schedule", params={"name": "nightly"}).text
    assert f'href="/run?key={quote(run.key, safe="")}" title="{run.key}"' in schedule

    missing = client.get("/run", params={"key": "nightly:nope"})
    assert missing.status_code == 404 and "never claimed, or was pruned" in missing.text


def test_a_runtime_under_a_millisecond_reads_as_such_never_as_zero() -> None:
    from goatbeat_celery.web.present import seconds_text

    assert seconds_text(0.0002) == "<0.001s"
    assert seconds_text(0.0006) == "0.001s"
    assert seconds_text(0.0) == "0s" and seconds_text(None) == "-"
    assert seconds_text(timedelta(seconds=1.5)) == "1.5s"


def test_the_runs_filter_by_outcome_and_the_runtime_percentiles(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("nightly", "proj.tasks.report", every=60)
    for seconds in range(1, 11):
        finish(schedules, schedules.run_now("nightly"),
               RunOutcome.FAILED if seconds % 5 == 0 else RunOutcome.SUCCEEDED, seconds)
    schedules.run_now("nightly")  # claimed, not sent yet

    page = client.get("/schedule", params={"name": "nightly"}).text
    counts = page[page.index('id="outcome-filter"'):page.index("</nav>",
                                                               page.index('id="outcome-filter"'))]
    assert re.findall(r">([a-z]+ \d+)</span>", counts) == [
        "all 11", "succeeded 8", "failed 2", "claimed 1"]
    runtimes = page[page.index('id="runtimes"'):]
    assert re.findall(r"<dt>(\w+)</dt><dd class=\"nw\">([^<]+)</dd>", runtimes)[:4] == [
        ("p50", "5s"), ("p90", "9s"), ("p99", "10s"), ("max", "10s")]
    assert "over the 10 runs with a runtime among the last 11 read" in page

    failed = client.get("/schedule", params={"name": "nightly", "outcome": "failed"}).text
    table = failed[failed.index('id="history"'):]
    assert pills_in(table) == ["failed", "failed"]
    # Not a state: the filter is left off, every run shown.
    anything = client.get("/schedule", params={"name": "nightly", "outcome": "<x>"}).text
    assert len(pills_in(anything[anything.index('id="history"'):])) == 11


def test_the_edit_form_changes_policies_and_controls_and_saving_unchanged_changes_nothing(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    schedules.create_calendar("holidays", dates=["2030-12-25"])
    fields = {"kind": "every", "every": "60", "queue": "", "misfire_policy": "all",
              "overlap": "skip",
              "mode": "fixed_delay", "failure_backoff": "30s", "failure_backoff_factor": "3",
              "failure_backoff_max": "1h", "pause_after_failures": "4",
              "start_at": "2030-01-01T09:00", "end_at": "2031-01-01T00:00+00:00",
              "max_runs": "100", "calendars": "holidays", "tags": "billing, nightly",
              "description": "Sends <the> invoices", "timezone": "Europe/Paris"}

    response = client.submit("/schedule/edit", name="tick", **fields)

    assert response.status_code == 303, response.text
    spec = schedules.get("tick").spec
    assert spec.overlap is OverlapPolicy.SKIP and spec.mode is ScheduleMode.FIXED_DELAY
    assert spec.misfire_policy is MisfirePolicy.ALL
    assert spec.failure_backoff == timedelta(seconds=30) and spec.failure_backoff_factor == 3
    assert spec.failure_backoff_max == timedelta(hours=1) and spec.pause_after_failures == 4
    assert spec.start_at is not None and spec.start_at.isoformat() == "2030-01-01T08:00:00+00:00"
    assert spec.max_runs == 100 and spec.calendars == ("holidays",)
    assert spec.tags == ("billing", "nightly") and spec.description == "Sends <the> invoices"
    version = schedules.get("tick").version

    # The form as the page fills it, sent back unchanged: nothing changes.
    page = client.get("/schedule", params={"name": "tick"}).text
    shown = {name: html_module.unescape(value) for name, value in
             re.findall(r'<input id="(\w+)" name="\w+" type="text" value="([^"]*)"', page)}
    assert shown["failure_backoff"] == "30" and shown["tags"] == "billing, nightly"
    assert '<option value="skip" selected>' in page
    assert '<option value="all" selected>' in page
    assert client.submit("/schedule/edit", name="tick", kind="every", overlap="skip",
                         misfire_policy="all",
                         mode="fixed_delay", **{k: v for k, v in shown.items()
                                                if k not in ("name",)}).status_code == 303
    assert schedules.get("tick").version == version

    # Emptied: back to the global setting, no bound, no limit.
    cleared = {**fields, "misfire_policy": "", "overlap": "", "mode": "fixed_rate",
               "failure_backoff": "", "failure_backoff_factor": "", "failure_backoff_max": "",
               "pause_after_failures": "", "start_at": "", "end_at": "", "max_runs": "",
               "calendars": "", "tags": "", "description": ""}
    assert client.submit("/schedule/edit", name="tick", **cleared).status_code == 303
    spec = schedules.get("tick").spec
    assert spec.overlap is None and spec.failure_backoff is None and spec.max_runs is None
    assert spec.misfire_policy is None
    assert spec.tags == () and spec.calendars == () and spec.description is None


def test_a_policy_or_control_the_api_refuses_is_shown_under_its_field(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    before = schedules.get("tick")

    response = client.submit("/schedule/edit", name="tick", kind="every", every="60",
                             queue="", overlap="sometimes", max_runs="many",
                             failure_backoff="soon", calendars="no-such-calendar")

    assert response.status_code == 422
    assert "not a whole number" in error_of(response.text, "max_runs")
    assert schedules.get("tick") == before
    response = client.submit("/schedule/edit", name="tick", kind="every", every="60",
                             queue="", overlap="sometimes", failure_backoff="soon")
    assert response.status_code == 422
    assert "sometimes" in error_of(response.text, "overlap")
    assert "soon" in error_of(response.text, "failure_backoff")
    assert schedules.get("tick") == before


def test_a_backfill_is_previewed_then_started_on_confirmation_then_cancelled(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=3600)
    now = schedules.store.now()
    start = (now - timedelta(hours=5)).replace(minute=0, second=0, microsecond=0)
    end = (now - timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    fields = {"start": start.isoformat(), "end": end.isoformat(), "mode": "missing"}

    preview = client.submit("/backfill/new", name="tick", **fields)

    assert preview.status_code == 200, preview.text
    assert schedules.backfills(name="tick") == []  # a dry run stores nothing
    assert "<b>5</b> of the 5 occurrences" in preview.text
    assert len(re.findall(r"<tr><td class=\"nw\"><code>", preview.text)) == 5
    assert 'name="confirm" value="start"' in preview.text

    started = client.submit("/backfill/new", name="tick", confirm="start", **fields)
    assert started.status_code == 303
    [backfill] = schedules.backfills(name="tick")
    assert backfill.total == 5 and backfill.state.value == "active"
    page = client.get(started.headers["location"]).text
    assert "Backfill stored" in page and 'id="cancel-backfill"' in page
    assert "0 of 5 (0%)" in page
    assert f'href="/backfill?id={backfill.id}"' in client.get("/backfills").text
    assert f'href="/backfill?id={backfill.id}"' in client.get(
        "/schedule", params={"name": "tick"}).text

    cancelled = client.submit("/backfill/cancel", id=str(backfill.id))
    assert cancelled.status_code == 303
    assert schedules.get_backfill(backfill.id).state.value == "cancelled"
    assert 'id="cancel-backfill"' not in client.get(cancelled.headers["location"]).text


def test_a_backfill_range_the_api_refuses_names_its_field(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=3600)

    response = client.submit("/backfill/new", name="tick", start="yesterday",
                             end="2099-01-01T00:00Z", mode="missing")

    assert response.status_code == 422
    assert "not an ISO-8601 instant" in error_of(response.text, "start")
    response = client.submit("/backfill/new", name="tick", start="2026-01-01T00:00Z",
                             end="2099-01-01T00:00Z", mode="missing", confirm="start")
    assert response.status_code == 422
    assert "future" in response.text
    assert schedules.backfills(name="tick") == []


def test_calendar_pages_list_each_calendar_its_dates_and_who_observes_it(
        client: Browser, schedules: Schedules) -> None:
    schedules.create_calendar("fr-holidays", dates=["2030-12-25"],
                              ranges=["2030-12-24..2030-12-26"], description="<closed>")
    schedules.create("billing", "proj.tasks.tick", every=60, calendars=["fr-holidays"])

    listed = client.get("/calendars").text
    assert 'href="/calendar?name=fr-holidays"' in listed and "&lt;closed&gt;" in listed
    page = client.get("/calendar", params={"name": "fr-holidays"}).text
    assert "<code>2030-12-25</code>" in page and "<code>2030-12-24..2030-12-26</code>" in page
    assert 'href="/schedule?name=billing"' in page
    assert client.get("/calendar", params={"name": "nope"}).status_code == 404


def test_the_fleet_shows_the_lease_its_last_takeover_and_the_replicas(
        client: Browser, schedules: Schedules) -> None:
    store, ttl = cast(Any, schedules.store), timedelta(seconds=30)
    grant = store.acquire("default", "replica-a:4242", ttl)
    assert grant is not None and store.release(grant)
    assert store.acquire("default", "replica-b:4343", ttl) is not None
    for holder in ("replica-b:4343", "replica-c:4444"):
        assert store.acquire(f"default.replicas-of-1.{holder}", holder, ttl) is not None

    page = client.get("/fleet").text.replace("<wbr>", "")  # names wrap after ":" and "-"

    leases = page[page.index('id="leases"'):page.index("</table>", page.index('id="leases"'))]
    assert "replica-b:4343" in leases and pills_in(leases) == ["held"]
    assert "from replica-a:4242" in leases
    replicas = page[page.index('id="replicas"'):]
    rows = re.findall(r"<tr><td>([^<]+)</td>\s*<td><span class=\"pill \w+\">(\w+)</span>",
                      replicas)
    assert rows == [("replica-b:4343", "leader"), ("replica-c:4444", "standby")]
    assert "Older takeovers are not recorded" in page


def test_calendars_are_created_and_changed_from_their_pages(
        client: Browser, schedules: Schedules) -> None:
    created = client.submit("/calendars", name="closures", description="office closed",
                            entries="2030-12-25\n2030-12-24..2030-12-26, 2031-01-01")
    assert created.status_code == 303, created.text
    calendar = schedules.get_calendar("closures")
    assert [d.isoformat() for d in calendar.dates] == ["2030-12-25", "2031-01-01"]
    assert len(calendar.ranges) == 1 and calendar.description == "office closed"

    page = client.get(created.headers["location"]).text
    assert "Saved" in page and 'name="version" value="1"' in page
    edited = client.submit("/calendar/edit", name="closures", version="1",
                           entries="2030-12-31", description="")
    assert edited.status_code == 303, edited.text
    calendar = schedules.get_calendar("closures")
    assert [d.isoformat() for d in calendar.dates] == ["2030-12-31"] and not calendar.ranges
    assert calendar.description is None

    stale = client.submit("/calendar/edit", name="closures", version="1", entries="2030-01-01")
    assert stale.status_code == 422 and "changed since it was read" in stale.text
    bad = client.submit("/calendar/edit", name="closures", version="2",
                        entries="2030-02-30\n2030-03-01..2030-02-01")
    assert bad.status_code == 422
    assert "2030-02-30" in error_of(bad.text, "entries")
    assert 'name="entries"' in bad.text and "2030-03-01..2030-02-01" in bad.text
    taken = client.submit("/calendars", name="closures", entries="2030-01-01")
    assert taken.status_code == 422 and "closures" in error_of(taken.text, "name")
    assert [d.isoformat() for d in schedules.get_calendar("closures").dates] == ["2030-12-31"]


def test_a_read_only_dashboard_shows_no_form_on_the_new_pages(
        make_client: Any, schedules: Schedules) -> None:
    from goatbeat_celery.web import WebSettings

    schedules.create("tick", "proj.tasks.tick", every=60)
    schedules.create_calendar("closures", dates=["2030-12-25"])
    client = make_client(WebSettings(read_only=True))
    for path in ("/schedule/delete?name=tick", "/backfill/new?name=tick", "/calendars",
                 "/calendar?name=closures", "/calendar/delete?name=closures", "/fleet",
                 "/backfills"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert 'method="post"' not in page.text, path


def test_a_new_schedule_is_created_with_its_policies_and_controls(
        client: Browser, schedules: Schedules) -> None:
    response = client.submit("/new", name="fresh", task="proj.tasks.tick", kind="every",
                             every="5m", timezone="UTC", queue="", args="[]", kwargs="{}",
                             overlap="buffer_one", mode="fixed_rate", max_runs="3",
                             tags="a, b", description="three runs", failure_backoff="",
                             calendars="", start_at="", end_at="")
    assert response.status_code == 303, response.text
    spec = schedules.get("fresh").spec
    assert spec.overlap is OverlapPolicy.BUFFER_ONE and spec.max_runs == 3
    assert spec.tags == ("a", "b") and spec.description == "three runs"
    assert spec.failure_backoff is None and spec.start_at is None


def test_unknown_or_unreadable_ids_keys_and_names_are_a_404_never_a_500(
        client: Browser, schedules: Schedules) -> None:
    for path in ("/backfill?id=abc", "/backfill?id=0", "/backfill?id=99999999999999999999",
                 "/run?key=", "/run?key=%3Cx%3E", "/calendar?name=",
                 "/schedule/delete?name=nope", "/backfill/new?name=nope"):
        assert client.get(path).status_code == 404, path
    assert client.submit("/backfill/cancel", id="abc").status_code == 404
    assert client.submit("/calendar/edit", name="nope", entries="").status_code == 404


def test_a_calendar_is_removed_only_when_confirmed_and_no_schedule_observes_it(
        client: Browser, schedules: Schedules) -> None:
    schedules.create_calendar("closures", dates=["2030-12-25"])
    # A post without the confirmation page's field removes nothing: it asks to confirm.
    asked = client.submit("/calendar/delete", name="closures")
    assert asked.status_code == 303
    assert asked.headers["location"].endswith("/calendar/delete?name=closures")
    confirm = client.get(asked.headers["location"]).text
    assert 'name="confirm" value="remove"' in confirm and "No schedule observes it" in confirm
    assert schedules.get_calendar("closures")

    # Taken up by a schedule after the confirmation was read: refused, with the API's reason.
    schedules.create("billing", "proj.tasks.tick", every=60, calendars=["closures"])
    refused = client.submit("/calendar/delete", name="closures", confirm="remove")
    assert refused.status_code == 409
    assert "observed by &#39;billing&#39;; remove it from those schedules first" in refused.text
    assert 'id="confirm"' not in refused.text and 'href="/schedule?name=billing"' in refused.text
    assert schedules.get_calendar("closures")
    shown = client.get("/calendar/delete", params={"name": "closures"}).text
    assert "Refused: calendar" in shown and 'id="confirm"' not in shown

    schedules.update("billing", calendars=[])
    removed = client.submit("/calendar/delete", name="closures", confirm="remove")
    assert removed.status_code == 303 and removed.headers["location"] == (
        "/calendars?notice=calendar-removed")
    assert "Calendar removed." in client.get(removed.headers["location"]).text
    assert schedules.list_calendars() == []
    assert client.submit("/calendar/delete", name="closures",
                         confirm="remove").status_code == 404
    assert client.get("/calendar/delete", params={"name": "closures"}).status_code == 404
