"""Live updates in a real browser: the dashboard's own script (static/live.js) reads a page
again every few seconds and replaces its ``data-live`` regions, under the page's CSP.

The first test waits in real time (the poll interval and a margin); the others drive the
page's timers with Playwright's clock, so nothing waits for a timer to run out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Request, Route, expect

from goatbeat_celery.store import Store
from goatbeat_celery.web.pages.base import LIVE_EVERY
from tests.cli.conftest import set_aside
from tests.web.conftest import Server
from tests.web.layout import photograph
from tests.web.test_browser import sign_in

EVERY_MS = LIVE_EVERY * 1000
PAUSED = '#counts a[href$="state=paused"]'
SET_ASIDE = '#counts a[href$="state=set-aside"]'


class Watched:
    """The page's console errors, uncaught errors (a CSP violation is reported as a console
    error) and the reads its script made."""

    def __init__(self, page: Page) -> None:
        self.errors: list[str] = []
        self.reads: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("request", self._request)

    def _console(self, message: ConsoleMessage) -> None:
        # The browser's own request for /favicon.ico (none is served) is not the page's.
        if message.type in ("error", "warning") and \
                not message.location.get("url", "").endswith("/favicon.ico"):
            self.errors.append(message.text)

    def _request(self, request: Request) -> None:
        if request.resource_type == "fetch":
            self.reads.append(f"{request.method} {request.url}")


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(10_000)
    yield opened
    context.close()


@pytest.fixture
def watched(page: Page) -> Watched:
    return Watched(page)


def started(page: Page) -> None:
    """Waits for the page's script to have started: the bar it adds comes in the same run as
    its first timer, so a clock moved before then would move past no timer at all (the
    heading shows while the script is still being fetched)."""
    expect(page.locator("#live-bar")).to_be_attached()


def two_schedules(server: Server) -> None:
    server.schedules.create("reports.hourly", "proj.tasks.report", every=3600)
    server.schedules.create("cleanup", "proj.tasks.cleanup", every=60)


def test_the_overview_shows_a_pause_made_elsewhere_within_the_interval(
        page: Page, watched: Watched, server: Server) -> None:
    two_schedules(server)
    sign_in(page, server)
    expect(page.locator(PAUSED)).to_have_text("0")
    expect(page.locator("#live-toggle")).to_have_text("Pause updates")
    expect(page.locator("#live-updated")).to_contain_text("Updated ")

    server.schedules.pause("reports.hourly")
    # One interval until the next read, and a margin for the read itself.
    expect(page.locator(PAUSED)).to_have_text("1", timeout=EVERY_MS + 4000)
    photograph(page, "live-overview")

    assert watched.errors == []
    assert watched.reads and all(read == f"GET {server.url}/" for read in watched.reads)


def test_pausing_updates_stops_the_reads_until_resumed_and_is_remembered(
        page: Page, watched: Watched, server: Server) -> None:
    two_schedules(server)
    page.clock.install()
    sign_in(page, server)
    page.click("#live-toggle")
    expect(page.locator("#live-toggle")).to_have_text("Resume updates")
    expect(page.locator("#live-updated")).to_contain_text("updates paused")

    server.schedules.pause("reports.hourly")
    page.clock.run_for(6 * EVERY_MS)
    assert watched.reads == []
    expect(page.locator(PAUSED)).to_have_text("0")

    # Remembered by this browser: another page starts paused.
    page.goto(server.url + "/schedule?name=cleanup")
    expect(page.locator("#live-toggle")).to_have_text("Resume updates")
    server.schedules.pause("cleanup")
    page.clock.run_for(3 * EVERY_MS)
    assert watched.reads == []
    expect(page.locator("#live-title .pill")).to_have_text("enabled")

    page.click("#live-toggle")  # reads at once
    expect(page.locator("#live-title .pill")).to_have_text("paused")
    expect(page.locator("#resume")).to_be_visible()
    expect(page.locator("#live-toggle")).to_have_text("Pause updates")
    photograph(page, "live-schedule")
    assert watched.errors == []


def test_a_region_being_used_is_left_alone_and_the_others_update(
        page: Page, watched: Watched, server: Server) -> None:
    two_schedules(server)
    page.clock.install()
    sign_in(page, server)
    started(page)
    page.focus(SET_ASIDE)
    set_aside(cast(Store, server.schedules.store), "cleanup",
              "trigger raised ValueError: bad interval")

    page.clock.run_for(EVERY_MS)
    expect(page.locator("#live-set-aside")).to_contain_text("bad interval")
    # The summary holds the focus: the same link, still focused, not yet replaced.
    expect(page.locator(SET_ASIDE)).to_be_focused()
    expect(page.locator(SET_ASIDE)).to_have_text("0")

    page.locator(SET_ASIDE).blur()
    page.clock.run_for(EVERY_MS)
    expect(page.locator(SET_ASIDE)).to_have_text("1")
    assert watched.errors == []


def test_the_edit_form_keeps_what_is_typed_while_the_rest_updates(
        page: Page, watched: Watched, server: Server) -> None:
    two_schedules(server)
    page.clock.install()
    sign_in(page, server)
    page.goto(server.url + "/schedule?name=cleanup")
    started(page)
    page.fill("#reason", "half typed")
    page.locator("#reason").blur()
    server.schedules.pause("cleanup")

    page.clock.run_for(EVERY_MS)
    expect(page.locator("#live-title .pill")).to_have_text("paused")
    expect(page.locator("#reason")).to_have_value("half typed")
    assert watched.errors == []


def test_failed_reads_say_since_when_and_back_off(page: Page, watched: Watched,
                                                 server: Server) -> None:
    two_schedules(server)
    page.clock.install()
    sign_in(page, server)
    started(page)

    def refuse(route: Route) -> None:
        if route.request.resource_type == "fetch":
            route.fulfill(status=503, body="down")
        else:
            route.continue_()

    page.route(server.url + "/", refuse)
    page.clock.run_for(EVERY_MS)
    note = page.locator("#live-failing")
    expect(note).to_be_visible()
    expect(note).to_contain_text("updates failing since ")
    assert len(watched.reads) == 1
    # Twice the interval after the first failure: not one interval.
    page.clock.run_for(EVERY_MS)
    assert len(watched.reads) == 1
    page.clock.run_for(EVERY_MS)
    expect(note).to_be_visible()
    assert len(watched.reads) == 2

    page.unroute(server.url + "/")
    server.schedules.pause("reports.hourly")
    page.clock.run_for(4 * EVERY_MS)
    expect(page.locator(PAUSED)).to_have_text("1")
    expect(note).to_be_hidden()
    # Only the 503s answered: no other error on the page.
    assert all("503" in error for error in watched.errors), watched.errors


def test_without_javascript_the_pages_are_as_rendered(chromium: Browser,
                                                     server: Server) -> None:
    two_schedules(server)
    context = chromium.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        sign_in(page, server)
        expect(page.locator(PAUSED)).to_have_text("0")
        expect(page.locator("#live-bar")).to_have_count(0)
        page.goto(server.url + "/schedule?name=cleanup")
        expect(page.locator("#live-title .pill")).to_have_text("enabled")
    finally:
        context.close()
