"""The pages, rendered through HTTP on a real PostgreSQL store."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any, cast

import sqlalchemy as sa
from markupsafe import escape
from sqlalchemy.engine import make_url
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.web import create_app
from goatbeat_celery.web.app import PAGE_SIZE
from tests.cli.conftest import config_schedule, insert_row, set_aside
from tests.web.conftest import Browser

from .pages import pills_in


def names_on(html: str) -> list[str]:
    # A name may wrap after its dots and dashes (<wbr>), never inside a part.
    return [name.replace("<wbr>", "") for name in
            re.findall(r'<a href="[^"]*schedule\?name=[^"]*">((?:[^<]|<wbr>)*)</a>', html)]


def next_runs_on(html: str) -> list[str]:
    """The next runs a schedule page lists, as the exact UTC instant each shows on hover."""
    return re.findall(r'<li><time class="nw" datetime="[^"]+" title="(\S+Z) UTC', html)


def test_the_overview_shows_the_lease_by_the_database_clock(
        client: Browser, schedules: Schedules) -> None:
    grant = schedules.store.acquire("default", "replica-a:4242", timedelta(seconds=30))
    assert grant is not None

    html = client.get("/").text

    lease = html[html.index('id="lease"'):html.index("</dl>", html.index('id="lease"'))]
    assert "replica-a:4242" in lease.replace("<wbr>", "")
    assert f"<dd>{grant.token}</dd>" in lease
    assert ">yes<" in lease
    # Relative to the database clock, the exact UTC and local instants on hover: a renewal
    # just made is "now" (or a second or so ago on a slow machine), never "in 0s".
    instant = r'<time class="nw" datetime="[^"]+" title="\S+Z UTC · [^"]+ \(Europe/Paris\)">'
    assert re.search(f'<dd id="expires">{instant}in (2\\d|30)s</time></dd>', lease), lease
    assert re.search(f'<dd id="renewal" class="">{instant}(now|\\d+s ago)</time>; the leader '
                     "renews every", lease), lease
    assert "in 0s" not in lease and "(in " not in lease


def test_the_overview_shows_the_standbys_and_the_previous_holder(
        client: Browser, schedules: Schedules) -> None:
    store, ttl = schedules.store, timedelta(seconds=30)
    grant = store.acquire("default", "replica-a:4242", ttl)
    assert grant is not None and store.release(grant)
    assert store.acquire("default", "replica-b:4343", ttl) is not None
    for holder in ("replica-b:4343", "replica-c:4444"):
        assert store.acquire(f"default.replicas-of-1.{holder}", holder, ttl) is not None

    html = client.get("/").text

    lease = html[html.index('id="lease"'):html.index("</dl>", html.index('id="lease"'))]
    lease = lease.replace("<wbr>", "")
    assert re.search(r'<dd id="standbys">replica-c:4444 \(seen \d+s ago\)</dd>', lease)
    assert re.search(r'<dd id="previous-holder">replica-a:4242 until <time class="nw" '
                     r'datetime="[^"]+" title="\S+Z UTC[^"]*">(now|\d+s ago)</time></dd>', lease)


def test_the_overview_says_so_when_no_replica_has_taken_the_lease(client: Browser) -> None:
    assert "no replica has taken this lease yet" in client.get("/").text


def test_the_overview_never_shows_the_database_password(schedules: Schedules) -> None:
    secret = "hunter2-do-not-show"
    url = make_url(schedules.config.database_url).set(password=secret).set(
        query={"sslpassword": secret})
    shown = Schedules(schedules.store, config=replace(
        schedules.config, database_url=url.render_as_string(hide_password=False)))
    with TestClient(create_app(shown), base_url="http://127.0.0.1") as client:
        html = client.get("/").text.replace("<wbr>", "")  # may wrap between its parts
    assert secret not in html
    assert ":***@127.0.0.1" in html


def test_the_overview_lists_set_aside_schedules_with_their_reason_and_counts(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("healthy", "proj.tasks.tick", every=60)
    schedules.create("broken", "proj.tasks.tick", every=60)
    schedules.create("resting", "proj.tasks.tick", every=60, enabled=False)
    config_schedule(schedules.store, "from-config")
    set_aside(schedules.store, "broken", "trigger raised ValueError: boom", times=3)

    html = client.get("/").text

    table = html[html.index('id="set-aside"'):]
    assert "broken" in table and "trigger raised ValueError: boom" in table
    assert "<td>3</td>" in table
    assert_counts(counts_of(html), all=4, paused=1, set_aside=1, from_config=1)


def counts_of(html: str) -> str:
    """The overview's counts (its ``<dl id="counts">``)."""
    start = html.index('id="counts"')
    return html[start:html.index("</dl>", start)]


def assert_counts(counts: str, **expected: int) -> None:
    """Each count shown under its label (``set_aside`` for "set aside") links to its list."""
    for label, count in expected.items():
        assert re.search(rf"{label.replace('_', ' ')}</dt><dd><a [^>]*>{count}<", counts), \
            (label, count, counts)


def test_the_schedules_page_searches_by_name_prefix_and_filters(
        client: Browser, schedules: Schedules) -> None:
    for name in ("report-daily", "report-weekly", "cleanup"):
        schedules.create(name, "proj.tasks.tick", every=60)
    schedules.pause("report-weekly")
    config_schedule(schedules.store, "report-config")

    assert names_on(client.get("/schedules", params={"q": "report-"}).text) == [
        "report-config", "report-daily", "report-weekly"]
    assert names_on(client.get("/schedules", params={"q": "report-", "state": "paused"}).text) \
        == ["report-weekly"]
    assert names_on(client.get("/schedules", params={"state": "enabled", "source": "api"}).text) \
        == ["cleanup", "report-daily"]
    assert names_on(client.get("/schedules", params={"source": "config"}).text) \
        == ["report-config"]
    assert "No schedules match." in client.get("/schedules", params={"q": "zzz"}).text


def test_the_schedules_page_pages_by_name_without_gaps_or_repeats(
        client: Browser, schedules: Schedules, tables: sa.Engine) -> None:
    total = PAGE_SIZE * 2 + 7
    for number in range(total):
        insert_row(tables, f"job-{number:04d}")

    seen: list[str] = []
    url: str | None = "/schedules"
    pages = 0
    while url is not None:
        html = client.get(url).text
        seen.extend(names_on(html))
        found = re.search(r'<a href="([^"]+)" rel="next">', html)
        url = None if found is None else found.group(1).replace("&amp;", "&")
        pages += 1

    assert pages == 3
    assert seen == [f"job-{number:04d}" for number in range(total)]


def test_a_schedule_page_shows_spec_next_runs_and_history_with_lateness(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("nightly", "proj.tasks.report", cron="30 2 * * *",
                     timezone="Europe/Paris", options={"queue": "reports"})
    execution = schedules.run_now("nightly")
    schedules.store.mark_submitted([execution.key])

    html = client.get("/schedule", params={"name": "nightly"}).text

    assert "cron 30 2 * * *" in html and "Europe/Paris" in html
    assert "proj.tasks.report" in html
    assert len(next_runs_on(html)) == 5
    history = html[html.index('id="history"'):]
    assert execution.key in history and "submitted" in history
    assert "1 submission" in html  # the chart of the last hour
    assert 'value="reports"' in html  # the queue, in the edit form


def test_a_schedule_page_previews_runs_without_the_dates_its_calendars_exclude(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("nightly", "proj.tasks.report", cron="30 2 * * *",
                     timezone="Europe/Paris")
    first = schedules.next_runs("nightly", 1)[0]
    schedules.create_calendar("closed", dates=[first.date().isoformat()])
    schedules.update("nightly", calendars=["closed"])

    html = client.get("/schedule", params={"name": "nightly"}).text

    shown = next_runs_on(html)
    assert shown == [f"{run:%Y-%m-%dT%H:%M:%SZ}" for run in schedules.next_runs("nightly", 5)]
    assert f"{first:%Y-%m-%dT%H:%M:%SZ}" not in shown
    assert "closed" in html  # the calendars it observes, with the spec


def test_an_unknown_schedule_is_a_404_naming_it(client: Browser) -> None:
    response = client.get("/schedule", params={"name": "nope"})
    assert response.status_code == 404
    assert "nope" in response.text


def test_a_damaged_row_is_shown_with_what_cannot_be_read(
        client: Browser, tables: sa.Engine) -> None:
    insert_row(tables, "mangled", args="5")

    html = client.get("/schedule", params={"name": "mangled"}).text

    assert "args" in html and "damage" in html


def test_config_schedules_are_read_only_with_the_reason(
        client: Browser, schedules: Schedules) -> None:
    config_schedule(schedules.store, "from-config")

    html = client.get("/schedule", params={"name": "from-config"}).text

    assert 'id="read-only-reason"' in html and "beat_schedule" in html
    assert 'id="edit-form"' not in html and 'id="remove"' not in html
    assert 'id="pause"' in html and 'id="run-now"' in html


def test_the_dashboard_mounts_inside_another_application(schedules: Schedules) -> None:
    outer = Starlette(routes=[Mount("/beat", app=create_app(schedules))])
    schedules.create("mounted", "proj.tasks.tick", every=60)
    with TestClient(outer, base_url="http://127.0.0.1") as client:
        html = client.get("/beat/schedules").text
        # Links are paths under the mount point, never built from the request's Host.
        assert 'href="/beat/schedule?name=mounted"' in html
        assert 'href="/beat/static/style.css"' in html
        assert client.get("/beat/static/style.css").status_code == 200


def test_pages_load_nothing_from_elsewhere_and_run_no_script_but_their_own(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("plain", "proj.tasks.tick", every=60)
    for path in ("/", "/schedules", "/schedule?name=plain", "/new", "/login"):
        response = client.get(path)
        assert response.status_code == 200, path
        # The package's own files, nothing inline.
        assert re.findall(r"<script[^>]*>", response.text) == [
            '<script src="/static/zones.js" defer>',
            '<script src="/static/live.js" defer data-every="5">'], path
        assert not re.search(r'(src|href)="(https?:)?//(?!127\.0\.0\.1)', response.text), path
        policy = response.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self';" in policy
        assert "unsafe" not in policy and "connect-src 'self';" in policy
    script = client.get("/static/live.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith(("text/javascript", "application/javascript"))


def test_the_overview_counts_every_schedule_by_state_and_source(
        client: Browser, schedules: Schedules) -> None:
    for name in ("a", "b", "c", "d"):
        schedules.create(name, "proj.tasks.tick", every=60)
    schedules.pause("a")
    config_schedule(schedules.store, "from-config")
    set_aside(schedules.store, "b", "boom")

    def counts() -> str:
        return counts_of(client.get("/").text)

    shown = counts()
    assert_counts(shown, all=5, paused=1, set_aside=1, from_config=1)
    assert re.search(r"from the API</dt><dd><a [^>]*>4<", shown)


def test_the_schedules_page_pages_by_next_run_without_gaps_or_repeats(
        client: Browser, schedules: Schedules) -> None:
    now = schedules.store.now()
    total = PAGE_SIZE * 2 + 3
    runs = {}
    for number in range(total):
        # Runs a few minutes apart, many at the same instant, so the name breaks ties.
        at = now + timedelta(hours=1, minutes=(number * 7) % 13)
        runs[f"job-{number:04d}"] = at
        schedules.create(f"job-{number:04d}", "proj.tasks.tick", at=at)
    # Ended an hour ago, so no next run (a one-time instant already past is refused).
    schedules.create("done", "proj.tasks.tick", every=60, end_at=now - timedelta(hours=1))

    seen: list[str] = []
    url: str | None = "/schedules?sort=next_run"
    while url is not None:
        html = client.get(url).text
        assert "sorted by next run" in html
        seen.extend(names_on(html))
        found = re.search(r'<a href="([^"]+)" rel="next">', html)
        url = None if found is None else found.group(1).replace("&amp;", "&")

    assert seen == [*sorted(runs, key=lambda name: (runs[name], name)), "done"]


def test_the_history_shows_run_outcomes_runtimes_workers_and_attempts(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("nightly", "proj.tasks.report", every=60)
    ok = schedules.run_now("nightly")
    schedules.store.mark_submitted([ok.key])
    hostile_worker = '<img src=x onerror=alert(1)>@host'
    store = cast(Any, schedules.store)
    store.record_runs([
        RunEvent.started(ok.key, run="r1", worker="celery@w1", age=timedelta(seconds=2)),
        RunEvent.finished(ok.key, run="r1", worker="celery@w1", age=timedelta(0),
                          outcome=RunOutcome.SUCCEEDED, runtime=timedelta(seconds=1.5)),
    ])
    bad = schedules.run_now("nightly")  # a second manual run: its own key
    schedules.store.mark_submitted([bad.key])
    store.record_runs([
        RunEvent.finished(bad.key, run="r2", worker=hostile_worker, age=timedelta(0),
                          outcome=RunOutcome.FAILED, runtime=timedelta(seconds=90),
                          error="ValueError: <b>no</b>", started_age=timedelta(seconds=90)),
    ])
    untracked = schedules.run_now("nightly")

    html = client.get("/schedule", params={"name": "nightly"}).text

    rows = {key: row for row in re.findall(r"<tr>(.*?)</tr>", html, re.S)
            for key in (ok.key, bad.key, untracked.key) if key in row}
    # One state a run, the truthful one: a run sent and then failed is failed, not submitted.
    assert pills_in(rows[ok.key]) == ["succeeded"]
    assert '<td class="nw">1.5s</td>' in rows[ok.key]
    assert '<td class="worker">celery@w1</td>' in rows[ok.key]
    assert pills_in(rows[bad.key]) == ["failed"]
    assert '<td class="nw">1m30s</td>' in rows[bad.key]
    assert str(escape(hostile_worker)) in rows[bad.key]
    assert "ValueError: &lt;b&gt;no&lt;/b&gt;" in rows[bad.key].replace("<wbr>", "")
    assert "<img" not in html and "<b>no" not in html
    assert pills_in(rows[untracked.key]) == ["claimed"]  # not sent yet
    # sent, started, ended, lateness, runtime and worker: nothing reported
    assert rows[untracked.key].count('">-</td>') + rows[untracked.key].count("<td>-</td>") == 6
    assert '<td class="nw">0/0</td>' in rows[untracked.key]  # sent / run attempts


def test_a_schedule_page_shows_its_controls_and_previews_within_them(
        client: Browser, schedules: Schedules) -> None:
    start = datetime(2030, 3, 1, 8, 0, tzinfo=timezone.utc)
    schedules.create("limited", "proj.tasks.report", every="1h", start_at=start, max_runs=3,
                     description="Runs <three> times.", tags=["reports", "eu"])
    schedules.pause("limited", note="waiting for data", until=start + timedelta(minutes=30))

    html = client.get("/schedule", params={"name": "limited"}).text

    assert next_runs_on(html) == [
        "2030-03-01T09:00:00Z", "2030-03-01T10:00:00Z", "2030-03-01T11:00:00Z"]
    assert "Runs &lt;three&gt; times." in html
    assert "reports, eu" in html and "3 (3 left)" in html
    assert "waiting for data" in html and "2030-03-01T08:30:00Z" in html
    # Paused until an instant: it can be resumed now, not paused again.
    assert 'id="resume"' in html and 'id="pause"' not in html
    listed = client.get("/schedules").text
    # Short in the pill, the exact end of the pause on hover.
    assert re.search(r'<span class="pill warn" title="paused until 2030-03-01T08:30:00Z UTC · '
                     r'2030-03-01 09:30:00 CET \(Europe/Paris\)">paused until '
                     r'\d+d(\d+h)? from now</span>', listed), listed


def test_the_schedules_page_filters_on_a_tag_and_links_each_tag(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("invoices", "proj.tasks.tick", every=60, tags=["billing", "nightly"])
    schedules.create("refunds", "proj.tasks.tick", every=60, tags=["billing"])
    schedules.create("cleanup", "proj.tasks.tick", every=60, tags=["nightly"])
    schedules.create("plain", "proj.tasks.tick", every=60)

    billing = client.get("/schedules?tag=billing").text
    assert names_on(billing) == ["invoices", "refunds"]
    assert re.search(r'class="badge nw" href="[^"]*/schedules\?tag=nightly">nightly<', billing)
    assert names_on(client.get("/schedules?tag=nightly&sort=next_run").text) == [
        "cleanup", "invoices"]
    assert "No schedules match." in client.get("/schedules?tag=nothing").text


def test_the_overview_with_shards_shows_shard_zeros_lease_and_every_shard(
        schedules: Schedules) -> None:
    store = schedules.store
    assert store.acquire("default.replicas-of-2.replica-a", "replica-a", timedelta(seconds=30))
    grant = store.acquire("default.shard-0-of-2", "replica-a", timedelta(seconds=30))
    assert grant is not None
    settings = replace(schedules.config.settings, shards=2)
    sharded = Schedules(store, config=replace(schedules.config, settings=settings))
    with TestClient(create_app(sharded), base_url="http://127.0.0.1") as client:
        html = client.get("/").text

    assert "<code>default.shard-0-of-2</code>" in html
    lease = html[html.index('id="lease"'):html.index("</dl>", html.index('id="lease"'))]
    lease = lease.replace("<wbr>", "")
    assert "replica-a" in lease and ">yes<" in lease
    shards = html[html.index('id="shards"'):html.index("</ul>", html.index('id="shards"'))]
    shards = shards.replace("<wbr>", "")
    assert "0: replica-a, token 1, expires" in shards
    assert "1: not held" in shards
    assert "1 live replicas: replica-a" in shards


def test_the_overview_with_one_shard_lists_no_shards(client: Browser) -> None:
    assert 'id="shards"' not in client.get("/").text
