"""The dashboard in a real browser: Debian's chromium, headless, driven by Playwright, against
the server on a loopback port. Saves screenshots of the pages it visits into test-artifacts/web/
(tests/web/layout.py).

A missing chromium fails these tests (scripts/browser.sh installs it): they are never skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser, Dialog, Page, expect

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.display import human_duration
from goatbeat_celery.testing import ManualClock, MemoryStore, RecordingSubmitter, build_engine
from goatbeat_celery.web import WebSettings, create_app
from tests.cli.conftest import config_schedule, set_aside
from tests.web.conftest import TOKEN, Server, serve
from tests.web.layout import photograph


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    # chromium: tests/conftest.py's, shared with the Django admin's browser tests.
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

    sign_in(page, server)
    expect(page.locator("#lease")).to_contain_text("replica-a")
    expect(page.locator("#set-aside")).to_contain_text("bad interval")
    photograph(page, "overview-small")

    page.click("nav >> text=Schedules")
    page.fill("#q", "reports.")
    page.click("form.filters button[type=submit]")
    rows = page.locator("#schedules tbody tr")
    expect(rows).to_have_count(2)
    photograph(page, "list-filtered")

    page.click("#schedules >> text=reports.daily")
    expect(page.locator("h1")).to_have_text("reports.daily")
    page.click("#pause")
    expect(page.locator(".notice")).to_have_text("Paused.")
    expect(page.locator("#resume")).to_be_visible()
    assert not server.schedules.get("reports.daily").spec.enabled

    page.click("#run-now")
    expect(page.locator(".notice")).to_contain_text("Run queued")
    [execution] = server.schedules.history("reports.daily")
    # Shown short, the whole key on hover and on the run's page.
    expect(page.locator(f'#history a[title="{execution.key}"]')).to_have_count(1)

    page.fill("#priority", "7")
    page.fill("#expires", "10m")
    page.fill("#options", '{"routing_key": "reports"}')
    page.fill("#kwargs", '{"format": "pdf"}')
    page.fill("#reason", "finance wants pdf")
    page.click("#save")
    expect(page.locator(".notice")).to_have_text("Saved.")
    expect(page.locator("#spec")).to_contain_text('"priority": 7')
    # The change log, newest first: this edit, by the dashboard, with its reason.
    newest = page.locator("#audit-log tbody tr").first
    expect(newest).to_contain_text("edit")
    expect(newest).to_contain_text("dashboard")
    expect(newest).to_contain_text("finance wants pdf")
    expect(page.locator("#reason")).to_have_value("")
    saved = server.schedules.get("reports.daily").spec
    assert saved.options == {"priority": 7, "expires": 600, "routing_key": "reports"}
    assert saved.kwargs == {"format": "pdf"}

    page.fill("#priority", "high")
    page.click("#save")
    expect(page.locator("#priority-error")).to_contain_text("integer from 0 to 255")
    expect(page.locator("#priority")).to_have_value("high")
    assert server.schedules.get("reports.daily").spec == saved

    page.fill("#priority", "7")
    page.check("input[name=kind][value=cron]")
    page.fill("#cron", "61 * * * *")
    page.click("#save")
    error = page.locator("#cron-error")
    expect(error).to_contain_text("minute field '61' is out of range")
    expect(page.locator("#cron")).to_have_value("61 * * * *")
    expect(page.locator("#cron")).to_have_attribute("aria-describedby", "cron-error")
    assert server.schedules.get("reports.daily").spec.trigger.params["expression"] \
        == "30 2 * * *"
    photograph(page, "schedule-invalid-cron", docs=True)

    page.goto(server.url + "/schedule?name=reports.hourly")
    expect(page.locator("figure.chart circle")).to_have_count(3)
    photograph(page, "schedule-manual-runs")


def test_a_lateness_field_is_filled_in_its_fieldset_and_saved(page: Page,
                                                              server: Server) -> None:
    server.schedules.create("reports.hourly", "proj.tasks.report", every=3600)
    sign_in(page, server)
    page.goto(server.url + "/schedule?name=reports.hourly")

    lateness = page.locator("#edit-form fieldset#lateness")
    expect(lateness).to_be_visible()
    expect(lateness.locator("legend")).to_have_text("Lateness")
    expect(lateness.locator("#misfire_grace")).to_be_visible()
    setting = server.schedules.config.settings.misfire_grace
    grace = "none" if setting is None else human_duration(setting)
    expect(lateness).to_contain_text(f"empty for the global setting ({grace})")
    page.fill("#misfire_grace", "2m")
    page.click("#save")

    expect(page.locator(".notice")).to_have_text("Saved.")
    expect(page.locator("#misfire_grace")).to_have_value("120")
    assert server.schedules.get("reports.hourly").spec.misfire_grace == timedelta(minutes=2)


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


# -- with beat running ------------------------------------------------------------------------
@dataclass
class Beat:
    """The dashboard and a leader on one in-memory store, on a clock the test moves."""

    url: str
    schedules: Schedules
    clock: ManualClock
    leader: Engine
    broker: RecordingSubmitter

    def run_for(self, seconds: int, step: int = 60) -> None:
        """Let beat run for ``seconds``: the clock moves by ``step`` and the leader ticks."""
        for _ in range(seconds // step):
            self.clock.advance(step)
            self.leader.tick()

    def sent(self, name: str) -> list[str]:
        return [d.key for d in self.broker.dispatches if d.execution.schedule_name == name]


@pytest.fixture
def beat() -> Iterator[Beat]:
    clock = ManualClock()
    store = MemoryStore(clock)
    schedules = Schedules(store, default_timezone="UTC")
    broker = RecordingSubmitter()
    leader = build_engine(store, clock=clock, submitter=broker, holder="replica-a")
    for url in serve(create_app(schedules, WebSettings(token=TOKEN))):
        yield Beat(url, schedules, clock, leader, broker)
    leader.close()


def test_pausing_in_the_dashboard_stops_beat_and_run_now_is_sent(page: Page,
                                                                beat: Beat) -> None:
    beat.schedules.create("reports.hourly", "proj.tasks.report", every=60)
    beat.schedules.create("cleanup", "proj.tasks.cleanup", every=60)
    beat.leader.tick()  # takes the lease
    beat.run_for(120)
    sent_before = beat.sent("reports.hourly")
    assert len(sent_before) == 2

    sign_in(page, Server(beat.url, beat.schedules))
    page.click("nav >> text=Schedules")
    page.fill("#q", "reports")
    page.click("form.filters button[type=submit]")
    page.click("#schedules >> text=reports.hourly")
    history = page.locator("#history tbody tr")
    expect(history).to_have_count(2)
    expect(history.first).to_contain_text("submitted")

    page.click("#pause")
    expect(page.locator(".notice")).to_have_text("Paused.")
    beat.run_for(300)
    assert beat.sent("reports.hourly") == sent_before, "beat sent a paused schedule"
    assert len(beat.sent("cleanup")) == 7, "the other schedule ran on"

    page.click("#run-now")
    expect(page.locator(".notice")).to_contain_text("Run queued")
    beat.leader.tick()
    [manual] = [key for key in beat.sent("reports.hourly") if key not in sent_before]
    page.reload()
    row = page.locator("#history tbody tr", has=page.locator(f'a[title="{manual}"]'))
    expect(row).to_contain_text("run now")
    expect(row.locator("td.state")).to_have_text("submitted")

    page.click("#resume")
    expect(page.locator(".notice")).to_contain_text("Resumed")
    beat.run_for(60)
    assert len(beat.sent("reports.hourly")) == 4, "resumed: sent again from its next run"


# -- hostile names ----------------------------------------------------------------------------
HOSTILE = ('<script>alert("name")</script>', '"><img src=x onerror=alert(2)>',
           "'><svg onload=alert(3)>", "</title><b>bold</b>&amp;?q=1#frag/../x")


def test_names_and_args_crafted_to_break_html_are_shown_as_text(page: Page,
                                                                server: Server) -> None:
    dialogs: list[str] = []

    def dismiss(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    for payload in HOSTILE:
        server.schedules.create(payload, "proj.tasks.tick", every=60, args=(payload,),
                                kwargs={payload: payload}, options={"queue": payload})
        server.schedules.run_now(payload)
    set_aside(server.schedules.store, HOSTILE[0], f"reason {HOSTILE[1]}")

    def assert_nothing_injected() -> None:
        for tag in ("script", "img", "b", "[onerror]", "[onload]"):
            assert page.locator(f"main {tag}").count() == 0, tag
        assert page.locator("main svg").count() == page.locator("main figure.chart svg").count()

    sign_in(page, server)
    expect(page.locator("#set-aside")).to_contain_text(f"reason {HOSTILE[1]}")
    page.click("nav >> text=Schedules")
    for payload in HOSTILE:
        # Found by the link the list shows, whatever the name holds (&, ?, #, /, quotes).
        page.goto(server.url + "/schedules")
        page.locator("#schedules a", has_text=payload).click()
        expect(page.locator("h1.name")).to_have_text(payload)
        expect(page).to_have_title(f"{payload} · goatbeat")
        expect(page.locator("#args")).to_have_value(json.dumps([payload], ensure_ascii=False))
        expect(page.locator("#kwargs")).to_have_value(json.dumps({payload: payload},
                                                                 ensure_ascii=False))
        expect(page.locator("#queue")).to_have_value(payload)
        expect(page.locator("#history tbody tr")).to_have_count(1)
        assert_nothing_injected()

    # Typed into a form, refused, and shown back: still text.
    page.click("nav >> text=New schedule")
    page.fill("#name", HOSTILE[1])
    page.fill("#task", HOSTILE[2])
    page.check("input[name=kind][value=cron]")
    page.fill("#cron", HOSTILE[0])
    page.fill("#args", HOSTILE[3])
    page.click("#create")
    expect(page.locator("#args-error")).to_contain_text("not valid JSON")
    expect(page.locator("#name")).to_have_value(HOSTILE[1])
    expect(page.locator("#cron")).to_have_value(HOSTILE[0])
    expect(page.locator("#args")).to_have_value(HOSTILE[3])
    assert_nothing_injected()
    assert server.schedules.get(HOSTILE[1]).spec.task == "proj.tasks.tick"

    page.goto(server.url + "/schedules?" + urlencode({"q": HOSTILE[0]}))
    expect(page.locator("#q")).to_have_value(HOSTILE[0])
    expect(page.locator("#schedules tbody tr")).to_have_count(1)
    assert dialogs == [], "a script ran"
