"""The admin pages in a real browser: Debian's chromium, headless, driven by Playwright, against
the test project served on a loopback port (Django's live server), on a fresh PostgreSQL
database. What the pages did is checked through the Schedules API.

A missing chromium fails these tests (scripts/browser.sh installs it): they are never skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from goatbeat_celery.api import Schedules
from tests.django.conftest import add_config_schedule, set_aside
from tests.django.processes import TRACKED_APP, Project, ready
from tests.django.testproj.switch_settings import RECORD_TASK
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

#: Names written to break out of an attribute or a text node if a page forgot to escape them.
SCRIPT_NAME = "<script>window.pwned='name'</script>"
ATTRIBUTE_NAME = "\"><img src=x onerror=\"window.pwned='attribute'\">"
TASK = "feeds.poll"
REASON = "<b onmouseover=\"window.pwned='reason'\">refused</b> & gone"
#: An edit wakes the leader at once (LISTEN/NOTIFY), a run is sent within a second or two and
#: the worker's report of it written within a few more; 20 s covers a busy 2-core machine.
REACH_TIMEOUT = 20.0


@pytest.fixture
def page(superuser: Any, live_server: str, chromium: Any) -> Iterator[Page]:
    # Django's database work comes first: Playwright's sync API keeps an event loop running in
    # this thread, where Django then refuses to touch its connections.
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(10_000)  # an admin page renders in well under a second
    yield opened
    context.close()


def log_in(page: Page, live_server: str) -> None:
    page.goto(live_server + "/admin/login/?next=/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()
    expect(page.locator("body")).to_contain_text("Site administration")


def row(page: Page, name: str) -> Any:
    """The changelist row whose link is ``name``."""
    return page.locator("#result_list tbody tr").filter(
        has=page.get_by_role("link", name=name, exact=True))


def not_pwned(page: Page) -> None:
    assert page.evaluate("window.pwned") is None, "a crafted name ran as script"


def test_find_pause_an_invalid_cron_config_read_only_and_escaped_names(
        page: Page, live_server: str, api: Schedules) -> None:
    api.create("digest", "mail.digest", cron="0 7 * * mon-fri", timezone="Europe/Paris")
    api.create("poll", TASK, every=30)
    api.create(SCRIPT_NAME, TASK, every=60)
    api.create(ATTRIBUTE_NAME, TASK, every=60)
    set_aside(api, ATTRIBUTE_NAME, REASON)
    add_config_schedule(api, "heartbeat", "proj.heartbeat")
    api.run_now(SCRIPT_NAME)

    log_in(page, live_server)
    page.get_by_role("link", name="Schedules").click()
    expect(page.locator("#result_list")).to_be_visible()
    headers = page.locator("#result_list thead")
    expect(headers).to_contain_text("next run", ignore_case=True)
    expect(headers).to_contain_text("last run", ignore_case=True)

    # Find a schedule through the search box.
    page.fill("#searchbar", "dig")
    page.press("#searchbar", "Enter")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(row(page, "digest")).to_contain_text("cron 0 7 * * mon-fri in Europe/Paris")

    # Pause it with the admin action.
    row(page, "digest").locator("input.action-select").check()
    page.select_option("select[name=action]", "pause_schedules")
    page.locator("button[name=index]").click()
    expect(page.locator(".messagelist")).to_contain_text("1 schedule paused: 'digest'")
    expect(row(page, "digest")).to_contain_text("paused")
    assert api.get("digest").spec.enabled is False

    # An invalid cron on the change form: the error is next to the field, nothing is saved.
    version = api.get("digest").row_version
    row(page, "digest").get_by_role("link", name="digest", exact=True).click()
    expect(page.locator("#id_cron")).to_have_value("0 7 * * mon-fri")
    page.fill("#id_cron", "61 7 * * mon-fri")
    page.click("input[name=_save]")
    expect(page.locator(".errornote")).to_be_visible()
    expect(page.locator(".field-cron .errorlist")).to_contain_text("out of range")
    expect(page.locator("#id_cron")).to_have_value("61 7 * * mon-fri")
    stored = api.get("digest")
    assert stored.spec.trigger.params["expression"] == "0 7 * * mon-fri"
    assert stored.row_version == version

    # A valid one is saved through the API.
    page.fill("#id_cron", "30 7 * * mon-fri")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    assert api.get("digest").spec.trigger.params["expression"] == "30 7 * * mon-fri"

    # A config schedule is shown read-only: no inputs, no save button.
    page.fill("#searchbar", "")
    page.press("#searchbar", "Enter")
    row(page, "heartbeat").get_by_role("link", name="heartbeat", exact=True).click()
    expect(page.locator("h1")).to_contain_text("View schedule")
    expect(page.locator(".field-task .readonly")).to_have_text("proj.heartbeat")
    expect(page.locator("form input[name=task], form input[name=_save]")).to_have_count(0)
    expect(page.locator("body")).to_contain_text("config (beat_schedule)")

    # Crafted names and reasons are shown as text wherever they appear.
    page.goto(live_server + "/admin/goatbeat/schedule/")
    expect(row(page, SCRIPT_NAME)).to_have_count(1)
    expect(row(page, ATTRIBUTE_NAME)).to_contain_text(
        "set aside: <b onmouseover=\"window.pwned='reason'\">refused</b> & gone")
    not_pwned(page)
    row(page, SCRIPT_NAME).locator("input.action-select").check()
    row(page, ATTRIBUTE_NAME).locator("input.action-select").check()
    page.select_option("select[name=action]", "pause_schedules")
    page.locator("button[name=index]").click()
    expect(page.locator(".messagelist")).to_contain_text("2 schedules paused")
    expect(page.locator(".messagelist")).to_contain_text(SCRIPT_NAME)
    not_pwned(page)
    assert not api.get(SCRIPT_NAME).spec.enabled and not api.get(ATTRIBUTE_NAME).spec.enabled

    row(page, ATTRIBUTE_NAME).get_by_role("link", name=ATTRIBUTE_NAME, exact=True).click()
    expect(page.locator("#id_name")).to_have_value(ATTRIBUTE_NAME)
    not_pwned(page)

    # The executions: read-only, filtered by schedule (the crafted name among the choices).
    page.goto(live_server + "/admin/goatbeat/execution/")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(page.locator("#result_list")).to_contain_text(SCRIPT_NAME)
    page.locator("#changelist-filter").get_by_role("link", name=SCRIPT_NAME,
                                                   exact=True).click()
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    assert re.search(r"[?&]schedule=", page.url)
    page.locator("#changelist-filter").get_by_role("link", name="claimed",
                                                   exact=True).click()
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    assert re.search(r"[?&]state__exact=claimed", page.url)
    expect(page.locator(".object-tools a.addlink")).to_have_count(0)
    expect(page.locator("select[name=action]")).to_have_count(0)
    page.locator("#result_list tbody tr a").first.click()
    expect(page.locator("h1")).to_contain_text("View execution")
    expect(page.locator("form input[name=_save]")).to_have_count(0)
    not_pwned(page)


def test_a_run_policy_round_trips_through_the_change_form_with_its_error_on_its_field(
        page: Page, live_server: str, api: Schedules) -> None:
    api.create("poll", TASK, every=30, tags=["feeds"])
    version = api.get("poll").row_version

    log_in(page, live_server)
    page.goto(live_server + "/admin/goatbeat/schedule/")
    row(page, "poll").get_by_role("link", name="poll", exact=True).click()
    expect(page.locator("h1")).to_contain_text("Change schedule")
    # The run policies are folded away until opened.
    expect(page.locator("#id_pause_after_failures")).to_be_hidden()
    page.locator("summary", has_text="Run policies").click()
    expect(page.locator("#id_pause_after_failures")).to_be_visible()

    # Out of range: the API's problem is shown under that field, nothing is saved.
    page.fill("#id_pause_after_failures", "0")
    page.select_option("#id_overlap", "skip")
    page.click("input[name=_save]")
    expect(page.locator(".errornote")).to_be_visible()
    expect(page.locator(".field-pause_after_failures .errorlist")).to_contain_text("from 1 to")
    expect(page.locator("#id_pause_after_failures")).to_be_visible()  # its fieldset opened
    expect(page.locator("#id_overlap")).to_have_value("skip")
    assert api.get("poll").row_version == version
    assert api.get("poll").spec.pause_after_failures is None

    # Corrected, it is saved through the API, and the form shows it when opened again.
    page.fill("#id_pause_after_failures", "3")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    spec = api.get("poll").spec
    assert spec.pause_after_failures == 3
    assert spec.overlap is not None and spec.overlap.value == "skip"
    assert spec.tags == ("feeds",)  # the fields left alone are kept
    row(page, "poll").get_by_role("link", name="poll", exact=True).click()
    page.locator("summary", has_text="Run policies").click()
    expect(page.locator("#id_pause_after_failures")).to_have_value("3")
    expect(page.locator("#id_overlap")).to_have_value("skip")
    expect(page.locator(".field-consecutive_failures")).to_contain_text("0")
    not_pwned(page)


def test_adding_a_cron_and_running_it_now_reads_as_celery_users_expect(
        page: Page, live_server: str, api: Schedules) -> None:
    """The add form starts with Celery's day matching and empty headers; a typo'd task is
    saved with the CLI's warning; the list says the trigger once, in words; run now marks
    that run only, on the executions page."""
    import os

    from tests.django.testproj.celery import app

    def digest() -> None:
        pass

    app.task(name="mail.digest", shared=False)(digest)
    shots = os.environ.get("GOATBEAT_SCREENSHOTS")
    api.create("ten", TASK, every=600)
    try:
        log_in(page, live_server)
        page.goto(live_server + "/admin/goatbeat/schedule/add/")
        expect(page.locator("#id_day_or")).not_to_be_checked()
        expect(page.locator("#id_headers")).to_have_value("{}")
        page.fill("#id_name", "first-friday")
        page.fill("#id_task", "mail.digets")
        page.locator("input[name=kind][value=cron]").check()
        page.fill("#id_cron", "0 9 1-7 * fri")
        page.fill("#id_timezone", "Europe/Paris")
        if shots:
            page.screenshot(path=f"{shots}/add-form.png", full_page=True)
        page.click("input[name=_save]")
        messages = page.locator(".messagelist")
        expect(messages).to_contain_text("was added successfully")
        # The admin's style capitalises a message's first letter.
        expect(messages).to_contain_text("task 'mail.digets' is not registered in the "
                                         "project's Celery app (did you mean 'mail.digest'?)",
                                         ignore_case=True)
        assert api.get("first-friday").spec.trigger.params["day_or"] is False
        expect(row(page, "first-friday")).to_contain_text(
            "cron 0 9 1-7 * fri in Europe/Paris (day of month and day of week): At 09:00 AM, "
            "between day 1 and 7 of the month, only on Friday")
        expect(row(page, "ten")).to_contain_text("every 10m")
        if shots:
            page.screenshot(path=f"{shots}/changelist.png", full_page=True)

        row(page, "ten").locator("input.action-select").check()
        page.select_option("select[name=action]", "run_now")
        page.locator("button[name=index]").click()
        expect(page.locator(".messagelist")).to_contain_text("1 schedule queued to run now")
        page.goto(live_server + "/admin/goatbeat/execution/")
        expect(page.locator("#result_list tbody tr")).to_have_count(1)
        expect(page.locator("#result_list tbody tr .field-origin")).to_have_text("run now")
        expect(page.locator("#result_list img[src*=icon-no]")).to_have_count(0)
        if shots:
            page.screenshot(path=f"{shots}/executions.png", full_page=True)
    finally:
        app.tasks.pop("mail.digest", None)


def test_a_busy_schedule_is_added_edited_paused_and_run_now_with_its_outcome_shown(
        page: Page, live_server: str, api: Schedules, project: Project) -> None:
    """With goatbeat's beat and a worker tracking runs: a schedule added in the admin runs
    every second; an edit saved after beat ran it since the page was read is not refused (runs
    never move the definition's version); paused, it runs no more; run now, its run's outcome,
    as the worker reported it, is shown on its page."""
    from goatbeat_celery.core.rules.runs import RunState

    worker = project.worker(app=TRACKED_APP)
    beat = project.celery("beat", "beat", "-S", "goatbeat_celery.Scheduler", "--loglevel",
                          "INFO", app=TRACKED_APP)
    ready(worker, " ready.")
    ready(beat, "acquired lease")

    log_in(page, live_server)
    page.goto(live_server + "/admin/goatbeat/schedule/add/")
    page.fill("#id_name", "busy")
    page.fill("#id_task", RECORD_TASK)
    page.locator("input[name=kind][value=every]").check()
    page.fill("#id_every", "1")
    page.fill("#id_args", '["busy"]')
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")

    def succeeded(*, manual: bool = False) -> list[Any]:
        return [run for run in api.history("busy", limit=50) if run.manual is manual
                and run.run_state is RunState.SUCCEEDED]

    wait_for(lambda: len(succeeded()) >= 2, timeout=REACH_TIMEOUT,
             what="the worker to run busy twice")

    # The change page is read; beat runs the schedule (writing its row) before the save.
    row(page, "busy").get_by_role("link", name="busy", exact=True).click()
    expect(page.locator("#id_every")).to_have_value("1")
    read = api.get("busy").row_version
    wait_for(lambda: api.get("busy").row_version > read, timeout=REACH_TIMEOUT,
             what="beat to run busy after the page was read")
    page.fill("#id_every", "2")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    assert api.get("busy").spec.trigger.params["every"] == 2.0

    row(page, "busy").locator("input.action-select").check()
    page.select_option("select[name=action]", "pause_schedules")
    page.locator("button[name=index]").click()
    expect(page.locator(".messagelist")).to_contain_text("1 schedule paused: 'busy'")
    assert api.get("busy").spec.enabled is False

    row(page, "busy").locator("input.action-select").check()
    page.select_option("select[name=action]", "run_now")
    page.locator("button[name=index]").click()
    expect(page.locator(".messagelist")).to_contain_text("1 schedule queued to run now")
    wait_for(lambda: succeeded(manual=True), timeout=REACH_TIMEOUT,
             what="the worker to report the run asked for")
    row(page, "busy").get_by_role("link", name="busy", exact=True).click()
    newest = page.locator(".goatbeat-history tbody tr").first
    expect(newest).to_contain_text("run now")
    expect(newest).to_contain_text("succeeded")
    expect(page.locator(".field-state")).to_contain_text("paused")
