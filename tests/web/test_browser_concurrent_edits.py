"""Two people editing one schedule in two browsers: the second is refused, sees the newer
values with their own change kept over them, and saving again applies their change only —
the first person's change stays (no lost update)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.web.conftest import Server
from tests.web.layout import photograph
from tests.web.test_browser import sign_in


@pytest.fixture
def two_pages(chromium: Browser) -> Iterator[tuple[Page, Page]]:
    # Two browser contexts: two people, each with their own sign-in.
    contexts = [chromium.new_context(viewport={"width": 1280, "height": 900})
                for _ in range(2)]
    pages = [context.new_page() for context in contexts]
    for opened in pages:
        opened.set_default_timeout(10_000)
    yield pages[0], pages[1]
    for context in contexts:
        context.close()


def test_a_refused_edit_saved_again_keeps_the_other_persons_change(
        two_pages: tuple[Page, Page], server: Server) -> None:
    schedules = server.schedules
    schedules.create("reports.hourly", "proj.tasks.report", every=3600,
                     description="hourly report")
    first, second = two_pages
    for opened in (first, second):
        sign_in(opened, server)
        opened.goto(server.url + "/schedule?name=reports.hourly")

    first.select_option("#overlap", "skip")
    first.fill("#max_catchup", "7")
    first.click("#save")
    expect(first.locator(".notice")).to_have_text("Saved.")

    second.fill("#description", "the hourly sales report")
    second.click("#save")
    errors = second.locator("#form-errors")
    expect(errors).to_contain_text("changed since you read it")
    expect(errors).to_contain_text("overlap")
    expect(errors).to_contain_text("max_catchup")
    # The form shows the newer values, with this person's change kept and marked.
    expect(second.locator("#overlap")).to_have_value("skip")
    expect(second.locator("#max_catchup")).to_have_value("7")
    expect(second.locator("#description")).to_have_value("the hourly sales report")
    expect(second.locator("#description-kept")).to_be_visible()
    expect(second.locator("#overlap-kept")).to_have_count(0)
    photograph(second, "schedule-refused-edit")
    assert schedules.get("reports.hourly").spec.description == "hourly report"

    second.click("#save")
    expect(second.locator(".notice")).to_have_text("Saved.")
    spec = schedules.get("reports.hourly").spec
    assert spec.overlap is not None and spec.overlap.value == "skip"
    assert spec.max_catchup == 7
    assert spec.description == "the hourly sales report"


def test_only_the_trigger_field_of_the_chosen_kind_shows(two_pages: tuple[Page, Page],
                                                         server: Server) -> None:
    server.schedules.create("reports.daily", "proj.tasks.report", cron="30 2 * * *",
                            timezone="Europe/Paris")
    page, _ = two_pages
    sign_in(page, server)
    page.goto(server.url + "/schedule?name=reports.daily")
    expect(page.locator("#cron")).to_be_visible()
    expect(page.locator("#every")).to_be_hidden()
    expect(page.locator("#at")).to_be_hidden()
    # Choosing another kind shows its field, and saving it changes the trigger.
    page.check("input[name=kind][value=every]")
    expect(page.locator("#every")).to_be_visible()
    expect(page.locator("#cron")).to_be_hidden()
    page.fill("#every", "10m")
    page.click("#save")
    expect(page.locator(".notice")).to_have_text("Saved.")
    assert server.schedules.get("reports.daily").spec.trigger.params["every"] == 600
    assert page.locator("#max_catchup").get_attribute("placeholder") == "e.g. 3"
