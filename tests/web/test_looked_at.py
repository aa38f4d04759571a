"""Every page of the dashboard looked at in Debian's chromium, at 1280 and 800 px, over a busy
scene: a schedule every second with a worker reporting each run (some fail), a slow one still
running, a cron schedule in Europe/Paris observing a calendar, a paused one, a backfill half
done. Each page is photographed into test-artifacts/web/ and checked in the browser: no table
cell's text overflows its cell or wraps inside a word, no table is wider than the page
(tests/web/layout.py). Then the flows that change things, by clicking: remove a schedule and
a calendar (with their confirmations), backfill (preview, start, cancel) and the policies of
the edit form.

GOATBEAT_WEB_DOCS_IMAGES=1 also writes docs/images/web-<page>.png at 1280 px (done once, by
hand, when the pages change).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser, Page, expect

from goatbeat_celery.api import Schedules
from goatbeat_celery.config import GoatbeatConfig
from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.testing import ManualClock, MemoryStore, RecordingSubmitter, build_engine
from goatbeat_celery.web import WebSettings, create_app
from tests.web.conftest import TOKEN, serve
from tests.web.layout import WIDTHS, layout_problems, photograph

BUSY = "heartbeat.every-second"
FLAKY = "billing.invoice-run-europe-paris"
SLOW = "reports.slow-aggregate"
NIGHTLY = "exports.nightly-warehouse-sync"
#: Fixed delay: each run due a delay after the last ended, so its keys carry milliseconds.
DELAYED = "sync.inventory-after-previous"
#: Paused for an hour, then every second.
PAUSED_UNTIL = "metrics.flush-every-second"
#: Observes a calendar excluding today and tomorrow, added after its next run was planned.
EXCLUDED = "mail.office-digest"
WORKER = "celery@worker-eu-west-1a"
ERROR = "ValueError: upstream invoice API answered 503 Service Unavailable"
#: How long beat runs before the pages are looked at (on the manual clock: no waiting).
SECONDS = 150


@dataclass
class Scene:
    url: str
    schedules: Schedules
    clock: ManualClock
    leader: Engine
    broker: RecordingSubmitter
    failed_key: str = ""
    backfill_id: int = 0


def report(scene: Scene, keys: list[str], step: int) -> None:
    """What a worker reports about the runs just sent: each of the busy and flaky schedules
    succeeds or fails within the second; the slow one starts and is still running."""
    store = scene.schedules.store
    events = []
    for number, key in enumerate(keys):
        run = f"run-{step}-{number}"
        if key.startswith(SLOW):
            events.append(RunEvent.started(key, run=run, worker=WORKER, age=timedelta(0)))
            continue
        fails = key.startswith(FLAKY) and step % 4 == 0
        runtime = timedelta(milliseconds=40 + (step * 37) % 300)
        events.append(RunEvent.finished(
            key, run=run, worker=WORKER, age=timedelta(0),
            outcome=RunOutcome.FAILED if fails else RunOutcome.SUCCEEDED, runtime=runtime,
            started_age=runtime, error=ERROR if fails else None))
        if fails:
            scene.failed_key = key
    store.record_runs(events)  # type: ignore[attr-defined]


@pytest.fixture
def scene() -> Iterator[Scene]:
    clock = ManualClock(ManualClock.DEFAULT_START + timedelta(days=340, hours=15))
    store = MemoryStore(clock)
    settings = Settings(track_runs=True, backfill_per_tick=20)
    # The pages name the store they read: this one, in memory, with the leader's settings.
    schedules = Schedules(store, config=GoatbeatConfig(database_url="memory://",
                                                       settings=settings),
                          default_timezone="Europe/Paris")
    broker = RecordingSubmitter()
    # A replica led before this one and stopped: the fleet page shows the takeover.
    before = store.acquire("default", "beat-0.beat.prod.svc:12922:06efc6a7", timedelta(seconds=30))
    assert before is not None and store.release(before)
    leader = build_engine(store, clock=clock, submitter=broker, holder="replica-a:4242",
                          settings=settings)
    schedules.create_calendar("fr-public-holidays", dates=["2026-12-25", "2027-01-01"],
                              ranges=["2026-12-24..2026-12-26"],
                              description="French public holidays and the Christmas closure")
    schedules.create(BUSY, "proj.tasks.heartbeat", every=1, tags=["monitoring"])
    schedules.create(FLAKY, "proj.billing.tasks.invoice_run", every=3,
                     tags=["billing", "team-payments"], overlap="skip")
    schedules.create(SLOW, "proj.reports.tasks.aggregate", every=20)
    schedules.create(NIGHTLY, "proj.exports.tasks.warehouse_sync", cron="30 2 * * mon-fri",
                     timezone="Europe/Paris", calendars=["fr-public-holidays"],
                     tags=["nightly", "team-data"], overlap="skip",
                     failure_backoff=timedelta(minutes=5), pause_after_failures=3,
                     description="Copies the day's orders to the warehouse")
    schedules.create("legacy.paused-import", "proj.tasks.legacy_import", every=3600,
                     enabled=False)
    schedules.create(DELAYED, "proj.inventory.tasks.sync", every=2, mode="fixed_delay")
    schedules.create(PAUSED_UNTIL, "proj.tasks.flush", every=1)
    schedules.create(EXCLUDED, "proj.mail.tasks.digest", every=600)
    for url in serve(create_app(schedules, WebSettings(token=TOKEN))):
        made = Scene(url, schedules, clock, leader, broker)
        seen = 0
        for step in range(SECONDS):
            # The leader wakes a little after each second, as a busy one does: runs are late
            # by 0 to 89 ms, which the chart and the "late" column show.
            lag = (step * 37 % 90) / 1000
            clock.advance(lag)
            leader.tick()
            sent = [d.key for d in broker.dispatches[seen:]]
            seen = len(broker.dispatches)
            clock.advance(0.4)
            report(made, sent, step)
            clock.advance(0.6 - lag)
        now = store.now()
        made.backfill_id = schedules.backfill(
            SLOW, now - timedelta(minutes=2), now - timedelta(seconds=30), mode="all").id
        for step in (0.123, 0.877):  # asked for by hand: keys of the instant asked, to the µs
            schedules.run_now(FLAKY)
            clock.advance(step)
        leader.tick()  # drains the first 20 of its occurrences, sends the runs asked for
        # The worker reports the runs asked for; the others the tick sent are not reported yet.
        report(made, [d.key for d in broker.dispatches[seen:] if d.key.endswith(":manual")],
               SECONDS)
        schedules.pause(PAUSED_UNTIL, until=now + timedelta(hours=1))
        today = now.date()
        schedules.create_calendar("office-closed", dates=[today.isoformat(),
                                                          (today + timedelta(days=1)).isoformat()])
        schedules.update(EXCLUDED, calendars=["office-closed"])
        yield made
    leader.close()


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": WIDTHS[0], "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(10_000)  # a page renders in well under a second
    opened.goto("about:blank")
    yield opened
    context.close()


def sign_in(page: Page, url: str) -> None:
    page.goto(url + "/")
    page.fill("#token", TOKEN)
    page.click("#sign-in")
    expect(page.locator("h1")).to_have_text("Overview")


def look(page: Page, name: str, *, docs: bool = False) -> list[str]:
    """Photograph the page as it is and return what the layout check finds on it."""
    photograph(page, name, docs=docs)
    return [f"{name} at {page.viewport_size}: {problem}" for problem in layout_problems(page)]


def test_every_page_at_two_widths_fits_and_says_what_happened(page: Page,
                                                               scene: Scene) -> None:
    run_query = urlencode({"key": scene.failed_key})
    pages = {
        "overview": "/", "list": "/schedules", "schedule": f"/schedule?name={FLAKY}",
        "schedule-busy": f"/schedule?name={BUSY}",
        "schedule-nightly": f"/schedule?name={NIGHTLY}", "run": f"/run?{run_query}",
        "backfill-progress": f"/backfill?id={scene.backfill_id}", "backfills": "/backfills",
        "calendars": "/calendars", "calendar": "/calendar?name=fr-public-holidays",
        "fleet": "/fleet", "remove": f"/schedule/delete?name={FLAKY}", "new": "/new",
        "schedule-delayed": f"/schedule?name={DELAYED}",
        "schedule-paused-until": f"/schedule?name={PAUSED_UNTIL}",
        "schedule-excluded": f"/schedule?name={EXCLUDED}",
        "run-delayed": "/run?" + urlencode(
            {"key": scene.schedules.history(DELAYED, limit=1)[0].key}),
    }
    documented = {"overview", "list", "schedule", "run", "calendar"}
    sign_in(page, scene.url)
    problems: list[str] = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for name, path in pages.items():
            response = page.goto(scene.url + path)
            assert response is not None and response.status == 200, (path, response)
            problems += look(page, name, docs=name in documented)
        # The backfill form's preview: a dry run, shown before anything is stored.
        page.goto(scene.url + f"/schedule?name={BUSY}")
        page.click("#backfill")
        now = scene.schedules.store.now()
        page.fill("#start", (now - timedelta(seconds=90)).isoformat())
        page.fill("#end", (now - timedelta(seconds=60)).isoformat())
        page.check("input[name=mode][value=all]")
        page.click("#preview")
        expect(page.locator("#preview-runs tbody tr")).to_have_count(31)
        problems += look(page, "backfill", docs=True)
    assert problems == [], "\n".join(problems)

    # What the pages say is what happened: one state a run, the truthful one.
    page.set_viewport_size({"width": WIDTHS[0], "height": 900})
    page.goto(scene.url + f"/schedule?name={FLAKY}")
    failed = page.locator("#history tbody tr", has=page.locator(".pill", has_text="failed"))
    expect(failed.first).to_contain_text(ERROR)
    expect(failed.first.locator(".pill")).to_have_count(1)  # never "submitted" beside it
    expect(failed.first).to_contain_text(WORKER)
    page.click("#outcome-filter [data-outcome=failed]")
    failures = [e for e in scene.schedules.history(FLAKY, limit=100)
                if e.run_state is not None and e.run_state.value == "failed"]
    assert 5 < len(failures) < 30
    expect(page.locator("#history tbody tr .pill")).to_have_count(len(failures))
    expect(page.locator("#history tbody tr .pill.bad")).to_have_count(len(failures))
    title = page.locator("#history tbody tr time[title]").first.get_attribute("title") or ""
    assert title.endswith("(Europe/Paris)") and " UTC · " in title, title
    page.locator("#history tbody tr a").first.click()
    expect(page.locator("#run-key")).to_contain_text(FLAKY)
    expect(page.locator("#run-error")).to_have_text(ERROR)

    page.goto(scene.url + "/schedules")
    busy = page.locator("#schedules tbody tr", has_text=BUSY)
    # Its last run was sent by the scene's last tick, and no worker has reported on it yet.
    expect(busy.locator(".pill")).to_have_text(["enabled", "submitted"])
    slow = page.locator("#schedules tbody tr", has_text=SLOW)
    expect(slow.locator(".pill")).to_have_text(["enabled", "running"])
    paused = page.locator("#schedules tbody tr", has_text="legacy.paused-import")
    expect(paused.locator(".pill")).to_have_text(["paused"])

    page.goto(scene.url + "/fleet")
    expect(page.locator("#leases")).to_contain_text("replica-a:4242")
    expect(page.locator("#leases")).to_contain_text("from beat-0.beat.prod.svc:12922:06efc6a7")


def test_remove_backfill_policies_and_calendars_by_clicking(page: Page, scene: Scene) -> None:
    schedules = scene.schedules
    sign_in(page, scene.url)

    page.goto(scene.url + f"/schedule?name={NIGHTLY}")
    page.select_option("#overlap", "buffer_one")
    page.fill("#pause_after_failures", "5")
    page.fill("#tags", "nightly, team-data, eu")
    page.fill("#max_runs", "")
    page.click("#save")
    expect(page.locator(".notice")).to_have_text("Saved.")
    spec = schedules.get(NIGHTLY).spec
    assert spec.overlap is not None and spec.overlap.value == "buffer_one"
    assert spec.pause_after_failures == 5 and spec.tags == ("nightly", "team-data", "eu")
    assert spec.failure_backoff == timedelta(minutes=5)  # kept as it was
    page.fill("#failure_backoff_factor", "fast")
    page.click("#save")
    expect(page.locator("#failure_backoff_factor-error")).to_contain_text("not a number")

    page.goto(scene.url + f"/schedule?name={SLOW}")
    page.click("#backfill")
    now = schedules.store.now()
    page.fill("#start", (now - timedelta(minutes=10)).isoformat())
    page.fill("#end", (now - timedelta(minutes=9)).isoformat())
    page.check("input[name=mode][value=missing]")
    page.click("#preview")
    expect(page.locator("#preview-result")).to_contain_text("would run")
    assert len(schedules.backfills(name=SLOW)) == 1  # the scene's: a preview stores nothing
    page.click("#start-backfill")
    expect(page.locator(".notice")).to_contain_text("Backfill stored")
    expect(page.locator("#progress")).to_be_visible()
    page.click("#cancel-backfill")
    expect(page.locator(".notice")).to_contain_text("Cancelled")
    newest = schedules.backfills(name=SLOW)[0]
    assert newest.state.value == "cancelled"

    page.goto(scene.url + "/calendar?name=fr-public-holidays")
    page.fill("#entries", "2026-12-25\n2026-12-31..2027-01-01")
    page.click("#save-calendar")
    expect(page.locator(".notice")).to_contain_text("Saved")
    expect(page.locator("#entries")).to_have_value("2026-12-25\n2026-12-31..2027-01-01")
    assert len(schedules.get_calendar("fr-public-holidays").ranges) == 1

    # Observed by the nightly schedule: the removal is refused, saying by whom.
    page.click("#remove-calendar")
    expect(page.locator("#remove-refused")).to_contain_text(f"observed by '{NIGHTLY}'")
    expect(page.locator("#confirm")).to_have_count(0)
    schedules.update(NIGHTLY, calendars=[])
    page.reload()
    expect(page.locator("#confirm-remove")).to_contain_text("No schedule observes it")
    page.click("#cancel")
    expect(page.locator("h1")).to_have_text("fr-public-holidays")
    page.click("#remove-calendar")
    page.click("#confirm")
    expect(page.locator(".notice")).to_have_text("Calendar removed.")
    expect(page.locator("#calendars")).not_to_contain_text("fr-public-holidays")
    assert [c.name for c in schedules.list_calendars()] == ["office-closed"]

    page.goto(scene.url + f"/schedule?name={FLAKY}")
    page.click("#remove")
    expect(page.locator("#confirm-remove")).to_contain_text("history of runs stays")
    page.click("#cancel")
    expect(page.locator("h1")).to_contain_text(FLAKY)
    assert schedules.get(FLAKY)
    page.click("#remove")
    page.click("#confirm")
    expect(page.locator(".notice")).to_contain_text("Removed")
    assert FLAKY not in [s.name for s in schedules.list()]


def test_what_the_pages_say_agrees_and_reads_right(page: Page, scene: Scene) -> None:
    schedules = scene.schedules
    sign_in(page, scene.url)

    # A pause with an end: the next runs after it, each its own instant.
    page.goto(scene.url + f"/schedule?name={PAUSED_UNTIL}")
    runs = page.locator("#next-runs li").all_inner_texts()
    assert len(runs) == 5 and len(set(runs)) == 5, runs

    # Excluded by its calendar: the list and its page say the same next run.
    page.goto(scene.url + f"/schedule?name={EXCLUDED}")
    card = page.locator("#next-runs li time").first.inner_text()
    assert card != "now", card
    page.goto(scene.url + "/schedules")
    row = page.locator("#schedules tbody tr", has_text=EXCLUDED)
    headers = page.locator("#schedules thead th").all_inner_texts()
    expect(row.locator("td").nth(headers.index("next run"))).to_have_text(card)

    # The changes list only what changed.
    page.goto(scene.url + f"/schedule?name={SLOW}")
    expect(page.locator("#audit-log")).not_to_contain_text("none \u2192 none")

    # The oldest pending run is never negatively late.
    page.goto(scene.url + "/")
    expect(page.locator("#counts")).not_to_contain_text("-0.")

    # The icon browsers ask for, served as the stylesheet is.
    icon = page.request.get(scene.url + "/favicon.ico")
    style = page.request.get(scene.url + "/static/style.css")
    assert icon.status == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    for header in ("x-content-type-options", "cache-control", "content-security-policy"):
        assert icon.headers.get(header) == style.headers.get(header), header
    assert schedules.get(PAUSED_UNTIL).paused_until is not None
