"""The schedules list's action bar and an alert's acknowledge and silence forms in a real
browser (Debian's chromium, headless, driven by Playwright) against the server on a loopback
port, at 1280 and 800 px, with screenshots into test-artifacts/web/ (tests/web/layout.py).

A missing chromium fails these tests (scripts/browser.sh installs it): they are never skipped.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from goatbeat_celery.core.rules.alerts import AlertRule
from goatbeat_celery.core.types.audit import AuditAction
from tests.web.conftest import Server
from tests.web.layout import WIDTHS, layout_problems, photograph
from tests.web.test_alerts import raise_alert
from tests.web.test_browser import sign_in


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def page(chromium: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": request.param, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(10_000)  # a page renders in well under a second
    yield opened
    context.close()


@pytest.mark.slow  # a browser session, several pages: over 10 s on a busy machine
def test_tick_schedules_and_pause_them_with_one_reason_then_run_a_whole_tag(
        page: Page, server: Server) -> None:
    schedules = server.schedules
    for name, tags in (("etl.orders", ["etl"]), ("etl.stock", ["etl"]),
                       ("etl.prices", ["etl"]), ("reports.daily", ["reports"])):
        schedules.create(name, "proj.tasks.tick", every=60, tags=tags)
    schedules.pause("etl.prices", note="by hand")

    sign_in(page, server)
    page.goto(server.url + "/schedules")
    expect(page.locator("#bulk-count")).to_have_text("0 ticked")
    page.check("input[aria-label='tick etl.orders']")
    page.check("input[aria-label='tick etl.prices']")
    expect(page.locator("#bulk-count")).to_have_text("2 ticked")
    page.fill("#bulk-reason", "warehouse migration")
    page.click("#bulk-pause")
    result = page.locator("#bulk-result")
    expect(result).to_contain_text("Pause: 1 done, 1 refused.")
    expect(page.locator("#bulk-refused")).to_contain_text("etl.prices: already paused")
    assert layout_problems(page) == []
    photograph(page, "bulk-paused")
    assert not schedules.get("etl.orders").spec.enabled
    assert schedules.audit("etl.orders", limit=1)[0].reason == "warehouse migration"

    # The outcome is a page of its own: a reload shows it again and pauses nothing twice.
    assert "bulk=" in page.url
    audited = len(schedules.audit("etl.orders"))
    page.reload()
    expect(page.locator("#bulk-result")).to_contain_text("Pause: 1 done, 1 refused.")
    assert len(schedules.audit("etl.orders")) == audited

    # The header's box ticks the page; "every schedule tagged" takes the tag on every page.
    page.goto(server.url + "/schedules?tag=etl")
    page.check("#tick-page")
    expect(page.locator("#bulk-count")).to_have_text("3 ticked")
    page.check("#all-tagged")
    expect(page.locator("#bulk-count")).to_be_hidden()
    expect(page.locator("input[aria-label='tick etl.stock']")).to_be_disabled()
    page.fill("#bulk-reason", "catch up")
    photograph(page, "bulk-bar")
    page.click("#bulk-run")
    expect(page.locator("#bulk-result")).to_contain_text("Run now: 3 done, 0 refused.")
    assert sorted(e.schedule_name for e in schedules.executions()) == [
        "etl.orders", "etl.prices", "etl.stock"]

    # Nothing ticked: refused in the bar, the reason kept.
    page.goto(server.url + "/schedules")
    page.fill("#bulk-reason", "kept")
    page.click("#bulk-resume")
    expect(page.locator("#bulk-bar .field-error")).to_contain_text("no schedule selected")
    expect(page.locator("#bulk-reason")).to_have_value("kept")


@pytest.mark.slow  # a browser session, several pages: over 10 s on a busy machine
def test_acknowledge_then_silence_an_alert_from_the_overview(page: Page,
                                                             server: Server) -> None:
    schedules = server.schedules
    schedules.create("billing.invoices", "proj.tasks.invoices", every=60)
    raise_alert(schedules, "billing.invoices", AlertRule.FAILED,
                "3 runs failed in a row (the last: ValueError: card declined)")
    (alert,) = schedules.alerts(open_only=True)

    sign_in(page, server)
    row = page.locator(f"#alert-{alert.id}")
    row.locator("summary").click()
    row.locator(f"#ack-note-{alert.id}").fill("card processor incident")
    row.locator(f"#ack-{alert.id}").click()
    expect(page.locator("p.notice")).to_contain_text("Alert acknowledged")
    expect(page.locator(f"#alert-{alert.id}")).to_contain_text("acknowledged by dashboard")
    expect(page.locator(f"#alert-{alert.id}")).to_contain_text("card processor incident")

    row = page.locator(f"#alert-{alert.id}")
    row.locator("summary").click()
    row.locator(f"#silence-for-{alert.id}").select_option("14400")
    row.locator(f"#silence-{alert.id}").click()
    expect(page.locator("p.notice")).to_contain_text("Alert silenced")
    expect(page.locator(f"#alert-{alert.id}")).to_contain_text("silenced until")
    assert layout_problems(page) == []
    photograph(page, "alert-handled")
    shown = schedules.alert(alert.id)
    assert shown.acknowledged_by == "dashboard" and shown.silenced_until is not None
    assert [e.action for e in schedules.audit("billing.invoices", limit=2)] == [
        AuditAction.SILENCE_ALERT, AuditAction.ACKNOWLEDGE_ALERT]
