"""The dashboard in a real browser: Debian's chromium, headless, driven by Playwright, against
the server on a loopback port. Saves screenshots of the main pages to docs/images/.

A missing chromium fails these tests (scripts/browser.sh installs it): they are never skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from goatbeat_celery.api import Schedules
from tests.cli.conftest import config_schedule, set_aside
from tests.web.conftest import TOKEN, Server

CHROMIUM = os.environ.get("GOATBEAT_TEST_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]
IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"chromium is required at {CHROMIUM} for the browser tests; "
                    "run scripts/browser.sh to install it", pytrace=False)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(10_000)  # a page renders in well under a second
    yield opened
    context.close()


def sign_in(page: Page, server: Server) -> None:
    page.goto(server.url + "/")
    expect(page.locator("h1")).to_have_text("Sign in")
    page.fill("#token", TOKEN)
    page.click("#sign-in")
    expect(page.locator("h1")).to_have_text("Overview")


def arrange(schedules: Schedules) -> None:
    """A small, lifelike set of schedules: a leader, a set-aside one, some history."""
    schedules.create("billing.invoice-run", "proj.tasks.invoices", cron="0 6 * * mon-fri",
                     timezone="Europe/Paris", options={"queue": "billing"})
    schedules.create("reports.daily", "proj.tasks.report", cron="30 2 * * *",
                     timezone="Europe/Paris")
    schedules.create("reports.hourly", "proj.tasks.report", every=3600)
    schedules.create("cache.warm", "proj.tasks.warm", every=300, enabled=False)
    schedules.create("broken.legacy", "proj.tasks.legacy", every=60)
    config_schedule(schedules.store, "heartbeat", every=10)
    # Takes the lease as replica "replica-a", as the leader that set it aside.
    set_aside(schedules.store, "broken.legacy", "trigger raised ValueError: bad interval")
    for _ in range(3):
        execution = schedules.run_now("reports.hourly")
        schedules.store.mark_submitted([execution.key])


def test_dashboard_find_pause_run_now_and_an_invalid_cron(page: Page, server: Server) -> None:
    arrange(server.schedules)
    IMAGES.mkdir(parents=True, exist_ok=True)

    sign_in(page, server)
    expect(page.locator("#lease")).to_contain_text("replica-a")
    expect(page.locator("#set-aside")).to_contain_text("bad interval")
    page.screenshot(path=str(IMAGES / "web-overview.png"), full_page=True)

    page.click("nav >> text=Schedules")
    page.fill("#q", "reports.")
    page.click("form.filters button[type=submit]")
    rows = page.locator("#schedules tbody tr")
    expect(rows).to_have_count(2)
    page.screenshot(path=str(IMAGES / "web-schedules.png"), full_page=True)

    page.click("#schedules >> text=reports.daily")
    expect(page.locator("h1")).to_have_text("reports.daily")
    page.click("#pause")
    expect(page.locator(".notice")).to_have_text("Paused.")
    expect(page.locator("#resume")).to_be_visible()
    assert not server.schedules.get("reports.daily").spec.enabled

    page.click("#run-now")
    expect(page.locator(".notice")).to_contain_text("Run queued")
    [execution] = server.schedules.history("reports.daily")
    expect(page.locator("#history")).to_contain_text(execution.key)

    page.check("input[name=kind][value=cron]")
    page.fill("#cron", "61 * * * *")
    page.click("#save")
    error = page.locator("#cron-error")
    expect(error).to_contain_text("minute field '61' is out of range")
    expect(page.locator("#cron")).to_have_value("61 * * * *")
    expect(page.locator("#cron")).to_have_attribute("aria-describedby", "cron-error")
    assert server.schedules.get("reports.daily").spec.trigger.params["expression"] \
        == "30 2 * * *"
    page.screenshot(path=str(IMAGES / "web-schedule-invalid-cron.png"), full_page=True)

    page.goto(server.url + "/schedule?name=reports.hourly")
    expect(page.locator("figure.chart circle")).to_have_count(3)
    page.screenshot(path=str(IMAGES / "web-schedule.png"), full_page=True)


def test_config_schedules_show_why_they_are_read_only(page: Page, server: Server) -> None:
    config_schedule(server.schedules.store, "heartbeat", every=10)
    sign_in(page, server)
    page.goto(server.url + "/schedule?name=heartbeat")
    expect(page.locator("#read-only-reason")).to_contain_text("beat_schedule")
    expect(page.locator("#edit-form")).to_have_count(0)


def test_a_wrong_token_is_refused(page: Page, server: Server) -> None:
    page.goto(server.url + "/schedules")
    page.fill("#token", "not-the-token-at-all")
    page.click("#sign-in")
    expect(page.locator("#token-error")).to_contain_text("not the token")
    page.goto(server.url + "/schedules")
    expect(page.locator("h1")).to_have_text("Sign in")


def test_a_post_without_the_csrf_token_is_refused(page: Page, server: Server) -> None:
    server.schedules.create("tick", "proj.tasks.tick", every=60)
    sign_in(page, server)
    # Signed in, with the session cookie, but no CSRF field: as another site's form would post.
    response = page.request.post(server.url + "/schedule/pause", form={"name": "tick"},
                                 max_redirects=0)
    assert response.status == 403
    assert server.schedules.get("tick").spec.enabled
