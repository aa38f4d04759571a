"""Rotation across clusters on the dashboard, in a real browser (Debian's chromium through
Playwright): the schedule's page says its rotation, the edit form's Rotation group changes it
and names a bad one under its field, and a run's page says the queue it was sent to.
Screenshots at 1280 and 800 px go to test-artifacts/web/."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser, Page, expect

from goatbeat_celery.core.types.execution import ExecutionState
from tests.web.conftest import TOKEN, Server
from tests.web.layout import WIDTHS, layout_problems, photograph


@pytest.fixture(params=WIDTHS, ids=[f"{width}px" for width in WIDTHS])
def page(chromium: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": request.param, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(10_000)  # a page renders in well under a second
    yield opened
    context.close()


def sent_runs(server: Server) -> list[str]:
    """Two runs of the rotated schedule, sent one to each queue as the leader sends them."""
    store = server.schedules.store
    grant = store.acquire("default", "replica-a", timedelta(seconds=60))
    assert grant is not None
    for _ in range(2):
        server.schedules.run_now("reconcile")
    keys = [d.key for d in store.take_pending(lease=grant, limit=10)]
    assert store.mark_submitted(keys, dict(zip(keys, ("eu", "us"), strict=True))) == 2
    return keys


def test_the_rotation_is_shown_edited_and_refused_on_the_dashboard(page: Page,
                                                                  server: Server) -> None:
    server.schedules.create("reconcile", "billing.reconcile", every=60, rotate=["eu", "us"])
    keys = sent_runs(server)
    page.goto(server.url + "/")
    page.fill("#token", TOKEN)
    page.click("#sign-in")
    expect(page.locator("h1")).to_have_text("Overview")
    page.click("nav >> text=Schedules")
    page.click("#schedules >> text=reconcile")
    expect(page.locator("#spec")).to_contain_text("rotates over")
    expect(page.locator("#spec")).to_contain_text("eu, us (occurrence k on queue k mod 2")
    expect(page.locator("#rotate")).to_have_value("eu, us")
    assert layout_problems(page) == []
    photograph(page, "rotation-schedule")

    page.fill("#rotate", "eu, us, ap")
    page.select_option("#rotate_handover", "yes")
    page.click("#save")
    expect(page.locator(".notice")).to_have_text("Saved.")
    expect(page.locator("#spec")).to_contain_text("eu, us, ap (occurrence k on queue k mod 3")
    expect(page.locator("#spec")).to_contain_text("handed to the next consumed queue")
    saved = server.schedules.get("reconcile").spec
    assert (saved.rotate, saved.rotate_handover) == (("eu", "us", "ap"), True)

    page.fill("#rotate", "eu")
    page.click("#save")
    expect(page.locator("#rotate-error")).to_contain_text("name at least two queues")
    expect(page.locator("#rotate")).to_have_value("eu")
    assert layout_problems(page) == []
    photograph(page, "rotation-refused")
    assert server.schedules.get("reconcile").spec == saved

    page.goto(f"{server.url}/run?{urlencode({'key': keys[1]})}")
    expect(page.locator("#cluster")).to_contain_text("us")
    photograph(page, "rotation-run")
    (run,) = [e for e in server.schedules.history("reconcile") if e.key == keys[1]]
    assert (run.state, run.cluster) == (ExecutionState.SUBMITTED, "us")
