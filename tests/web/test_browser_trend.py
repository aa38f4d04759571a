"""A schedule's runtime chart, the UTC/local switch and live updates of the runs pages, in a
real browser (Debian's chromium, headless, driven by Playwright) against a real server on the
session's PostgreSQL database. The runs are reported as a tracking worker reports them
(``record_runs`` with started and finished reports); timers are driven with Playwright's clock
where a test waits for the page's own updates."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any, cast
from urllib.parse import quote
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa
from playwright.sync_api import Browser, Page, expect

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.web.pages.base import LIVE_EVERY
from tests.web.conftest import Server
from tests.web.layout import layout_problems, photograph
from tests.web.test_browser import sign_in
from tests.web.test_live import Watched, started

EVERY_MS = LIVE_EVERY * 1000
#: A zone with an offset of half an hour and no summer time: no UTC text reads the same.
ZONE = "Asia/Kolkata"


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, timezone_id=ZONE)
    opened = context.new_page()
    opened.set_default_timeout(10_000)
    yield opened
    context.close()


def report(schedules: Schedules, execution: Execution, outcome: RunOutcome | None, *,
           runtime: float, started_ago: float) -> None:
    """What a tracking worker writes for ``execution``: it started ``started_ago`` seconds
    ago and, with ``outcome``, ended after ``runtime`` seconds."""
    store = cast(Any, schedules.store)
    store.mark_submitted([execution.key])
    run = f"run-{execution.key[-12:]}"
    if outcome is None:
        store.record_runs([RunEvent.started(execution.key, run=run, worker="celery@w1",
                                            age=timedelta(seconds=started_ago))])
        return
    store.record_runs([RunEvent.finished(
        execution.key, run=run, worker="celery@w1",
        age=timedelta(seconds=max(started_ago - runtime, 0)), outcome=outcome,
        runtime=timedelta(seconds=runtime), started_age=timedelta(seconds=started_ago),
        error="ValueError: boom" if outcome is RunOutcome.FAILED else None)])


def tracked_runs(schedules: Schedules) -> list[Execution]:
    """Ten ended runs of ``etl``, a minute apart, taking 1 s to 10 s (the 4 s one failed),
    and one still running, which has no runtime yet."""
    schedules.create("etl", "proj.tasks.etl", every=3600)
    runs = [schedules.run_now("etl") for _ in range(11)]
    for i, execution in enumerate(runs[:10]):
        seconds = i + 1
        report(schedules, execution, RunOutcome.FAILED if seconds == 4 else RunOutcome.SUCCEEDED,
               runtime=seconds, started_ago=60 * (10 - i) + seconds)
    report(schedules, runs[10], None, runtime=0, started_ago=5)
    return runs


def test_the_runtime_chart_draws_each_tracked_run_with_its_percentiles(
        page: Page, server: Server) -> None:
    tracked_runs(server.schedules)
    sign_in(page, server)
    page.goto(server.url + "/schedule?name=etl")
    chart = page.locator("#runtime-chart")
    expect(chart.locator(".dots circle")).to_have_count(9)
    expect(chart.locator(".failed a path")).to_have_count(1)
    expect(chart.locator(".failed path title")).to_contain_text("failed in 4s, started 7m")
    # Nearest rank over 1..10 s: the 5th and the 10th.
    expect(page.locator("#runtime-p50")).to_have_text("5s")
    expect(page.locator("#runtime-p95")).to_have_text("10s")
    expect(page.locator("#runtime-failed")).to_have_text("1")
    # The duration axis ends at the round value above the longest run.
    expect(chart.locator("text.y-tick").last).to_have_text("10s")

    # The time axis spans the runs: from the first start near the left edge to the last near
    # the right one, a minute apart each, not piled at one end of a fixed window.
    xs = sorted(float(x) for x in chart.locator(".dots circle").evaluate_all(
        "dots => dots.map(d => d.getAttribute('cx'))"))
    frame = chart.locator("rect.plot")
    left = float(frame.get_attribute("x") or 0)
    width = float(frame.get_attribute("width") or 0)
    assert xs[0] - left < 0.1 * width and left + width - xs[-1] < 0.1 * width
    gaps = [b - a for a, b in zip(xs, xs[1:], strict=False)]
    assert min(gaps) > 0.05 * width, gaps  # 9 dots over the width, none on top of another
    ticks = chart.locator("text.x-tick")
    assert 2 <= ticks.count() <= 8
    assert all(":" in label for label in ticks.all_text_contents())
    photograph(page, "runtime-chart")
    assert layout_problems(page) == []


def test_times_show_in_utc_or_local_by_the_header_switch_remembered_across_reloads(
        page: Page, server: Server) -> None:
    runs = tracked_runs(server.schedules)
    sign_in(page, server)
    run = server.schedules.executions_by_key([runs[0].key])[runs[0].key]
    assert run.started_at is not None
    page.goto(server.url + "/run?key=" + quote(run.key, safe=""))
    started = page.locator("#timeline tbody tr", has_text="started").locator("code time")
    relative = page.locator("#timeline tbody tr", has_text="started").locator("td").nth(1)
    utc_text = run.started_at.astimezone(ZoneInfo("UTC")).strftime("%Y-%m-%dT%H:%M:%S")
    local = run.started_at.astimezone(ZoneInfo(ZONE))
    local_text = local.strftime("%Y-%m-%d %H:%M:%S")
    expect(started).to_contain_text(utc_text)
    expect(started).to_contain_text("Z")
    expect(page.locator("#zone-utc")).to_have_attribute("aria-pressed", "true")
    shown_ago = relative.inner_text()

    page.click("#zone-local")
    expect(started).to_contain_text(local_text)
    expect(started).to_contain_text("+05:30")
    # The zone as the browser names it (chromium says Asia/Calcutta, ICU's older name).
    named = page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone")
    assert ZoneInfo(named).utcoffset(local) == local.utcoffset()
    expect(page.locator("#timeline thead th").nth(3)).to_have_text(named)
    expect(relative).to_have_text(shown_ago)  # "11m ago" reads the same in every zone
    assert named in (relative.locator("time").get_attribute("title") or "")

    page.reload()
    expect(page.locator("#zone-local")).to_have_attribute("aria-pressed", "true")
    expect(started).to_contain_text(local_text)
    # Another page of the same browser: the chart's time axis reads local time too.
    page.goto(server.url + "/schedule?name=etl")
    first_tick = page.locator("#runtime-chart text.x-tick").first
    instant = datetime.fromisoformat(first_tick.get_attribute("data-instant") or "")
    # Minutes apart: hours and minutes, with the date when the chart spans a UTC midnight.
    shown = {"hm": "%H:%M", "dhm": "%m-%d %H:%M"}[first_tick.get_attribute("data-form") or ""]
    expect(first_tick).to_have_text(instant.astimezone(ZoneInfo(ZONE)).strftime(shown))
    expect(page.locator("#runtime-chart tspan[data-zone-name]")).to_have_text(named)
    photograph(page, "runtime-chart-local")

    page.click("#zone-utc")
    expect(first_tick).to_have_text(instant.strftime(shown))
    page.reload()
    expect(page.locator("#zone-utc")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#runtime-chart text.x-tick").first).to_have_text(
        instant.strftime(shown))


def test_without_javascript_times_read_utc(chromium: Browser, server: Server) -> None:
    runs = tracked_runs(server.schedules)
    context = chromium.new_context(java_script_enabled=False, timezone_id=ZONE)
    try:
        page = context.new_page()
        sign_in(page, server)
        page.goto(server.url + "/run?key=" + quote(runs[0].key, safe=""))
        expect(page.locator("#zone-switch")).to_have_count(0)
        expect(page.locator("#timeline tbody tr", has_text="started").locator("code time")
               ).to_contain_text("Z")
        expect(page.locator("#timeline thead th").nth(3)).to_have_text("UTC")
    finally:
        context.close()


def test_the_runs_page_shows_a_new_run_without_reload_and_not_while_paused(
        page: Page, server: Server) -> None:
    watched = Watched(page)
    tracked_runs(server.schedules)
    page.clock.install()
    sign_in(page, server)
    page.goto(server.url + "/runs")
    rows = page.locator("#runs tbody tr")
    expect(rows).to_have_count(11)
    started(page)
    page.fill("#q", "half typed")  # the filter form is not replaced under the person typing

    server.schedules.run_now("etl")
    page.clock.run_for(EVERY_MS)
    expect(rows).to_have_count(12)
    expect(page.locator("#q")).to_have_value("half typed")

    page.click("#live-toggle")
    expect(page.locator("#live-toggle")).to_have_text("Resume updates")
    reads = len(watched.reads)
    server.schedules.run_now("etl")
    page.clock.run_for(4 * EVERY_MS)
    assert len(watched.reads) == reads
    expect(rows).to_have_count(12)

    page.reload()  # paused is remembered by this browser
    expect(page.locator("#live-toggle")).to_have_text("Resume updates")
    expect(rows).to_have_count(13)
    server.schedules.run_now("etl")
    page.clock.run_for(4 * EVERY_MS)
    expect(rows).to_have_count(13)
    page.click("#live-toggle")  # reads at once
    expect(rows).to_have_count(14)
    assert watched.errors == []


def test_a_run_s_page_updates_until_the_run_ends(page: Page, server: Server) -> None:
    watched = Watched(page)
    runs = tracked_runs(server.schedules)
    page.clock.install()
    sign_in(page, server)
    running = runs[10]
    page.goto(server.url + "/run?key=" + quote(running.key, safe=""))
    expect(page.locator("#live-run-title .pill")).to_have_text("running")
    started(page)

    report(server.schedules, running, RunOutcome.SUCCEEDED, runtime=3, started_ago=5)
    page.clock.run_for(EVERY_MS)
    expect(page.locator("#live-run-title .pill")).to_have_text("succeeded")
    expect(page.locator("#live-updated")).to_contain_text("nothing more will change")
    reads = len(watched.reads)
    page.clock.run_for(4 * EVERY_MS)
    assert len(watched.reads) == reads
    assert watched.errors == []

    # An ended run's page is not read again at all.
    page.goto(server.url + "/run?key=" + quote(runs[0].key, safe=""))
    expect(page.locator("#live-bar")).to_have_count(0)


def test_the_lateness_chart_spreads_runs_seconds_apart_over_its_width(
        page: Page, server: Server, tables: sa.Engine) -> None:
    schedules = server.schedules
    schedules.create("tick", "proj.tasks.tick", every=3600)
    store = cast(Any, schedules.store)
    keys = [schedules.run_now("tick").key for _ in range(12)]
    store.mark_submitted(keys)
    # Due a second apart over the last 12 s, each sent 0.2 s late, as an every-second schedule's
    # runs are: a fixed hour would pile them at its right end.
    table = sa.table("goatbeat_execution", sa.column("key"), sa.column("due_at"),
                     sa.column("submitted_at"))
    now = schedules.now()
    with tables.begin() as connection:
        for i, key in enumerate(keys):
            due = now - timedelta(seconds=12 - i)
            connection.execute(table.update().where(table.c.key == key).values(
                due_at=due, submitted_at=due + timedelta(seconds=0.2)))
    sign_in(page, server)
    page.goto(server.url + "/schedule?name=tick")
    chart = page.locator("#lateness-chart")
    expect(chart.locator("circle")).to_have_count(12)
    xs = sorted(float(x) for x in chart.locator("circle").evaluate_all(
        "dots => dots.map(d => d.getAttribute('cx'))"))
    frame = chart.locator("rect.plot")
    left = float(frame.get_attribute("x") or 0)
    width = float(frame.get_attribute("width") or 0)
    # The axis spans the runs drawn: the first near the left edge, the last near the right.
    assert xs[0] - left < 0.05 * width and left + width - xs[-1] < 0.05 * width, xs
    ticks = chart.locator("text.x-tick")
    assert 2 <= ticks.count() <= 8
    assert all(t for t in ticks.evaluate_all("ts => ts.map(t => t.dataset.instant)"))
    expect(chart.locator("figcaption")).to_contain_text("12 submissions, due from")
    gaps = [b - a for a, b in zip(xs, xs[1:], strict=False)]
    assert min(gaps) > 0.05 * width, gaps  # a second apart: none on top of another
    assert layout_problems(page) == []
