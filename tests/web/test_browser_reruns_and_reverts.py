"""The re-run and revert buttons in a real browser (Debian's chromium, headless, driven by
Playwright) at both widths of tests/web/layout.py: a backfill's outcomes and its "Re-run the N
failed" button; a schedule's changes with each edit's "Revert…" link, its confirmation page and
its button. Nothing overflows its cell; screenshots go into test-artifacts/web/."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from goatbeat_celery.core.rules.runs import RunOutcome
from tests.support.backfills import drained_backfill
from tests.web.conftest import TOKEN, Server
from tests.web.layout import WIDTHS, layout_problems, photograph

S, F, L = RunOutcome.SUCCEEDED, RunOutcome.FAILED, RunOutcome.REVOKED


@pytest.fixture(params=WIDTHS, ids=[f"{width}px" for width in WIDTHS])
def page(chromium: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": request.param, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(10_000)
    yield opened
    context.close()


def sign_in(page: Page, server: Server, path: str) -> None:
    page.goto(server.url + path)
    page.fill("#token", TOKEN)
    page.click("#sign-in")


def test_the_failed_occurrences_of_a_backfill_are_run_again(page: Page,
                                                            server: Server) -> None:
    schedules = server.schedules
    schedules.create("etl.nightly-import", "proj.tasks.import_rows", every=60)
    backfill, _ = drained_backfill(schedules.store, "etl.nightly-import",
                                   [S, F, S, F, F, L, None, S])
    sign_in(page, server, f"/backfill?id={backfill.id}")
    expect(page.locator("h1")).to_have_text(f"Backfill #{backfill.id}")
    expect(page.locator("#outcome-counts")).to_contain_text("succeeded 3")
    expect(page.locator("#outcome-counts")).to_contain_text("failed 3")
    expect(page.locator("#failed-now")).to_contain_text("3 whose latest run failed")
    assert layout_problems(page) == []
    photograph(page, "backfill-outcomes")
    page.click("#rerun-failed")
    expect(page.locator(".notice")).to_contain_text("queued again under new keys")
    expect(page.locator("#reruns tbody tr")).to_have_count(1)
    expect(page.locator("#reruns")).to_contain_text("claimed 3")
    expect(page.locator("#rerun-failed")).to_have_count(0)
    assert layout_problems(page) == []
    photograph(page, "backfill-rerun")
    assert [len(r.outcomes) for r in schedules.backfill_outcomes(backfill.id).reruns] == [1]


@pytest.mark.slow  # three pages and two changes through chromium: 20 s on a busy machine
def test_an_edit_is_reverted_from_the_changes_table(page: Page, server: Server) -> None:
    schedules = server.schedules
    schedules.create("billing.invoice-run", "proj.tasks.invoices", cron="0 6 * * mon-fri",
                     timezone="Europe/Paris", tags=["billing"])
    schedules.acting_as("token:deploy").update(
        "billing.invoice-run", cron="30 5 * * *", tags=["billing", "eu"],
        description="earlier, every day", reason="customers in Asia")
    schedules.pause("billing.invoice-run", note="month-end freeze")
    sign_in(page, server, "/schedule?name=billing.invoice-run")
    expect(page.locator("#audit-log a.revert")).to_have_count(1)
    assert layout_problems(page) == []
    page.locator("#audit-log").scroll_into_view_if_needed()
    photograph(page, "schedule-changes-revert")
    page.click("#audit-log a.revert")
    expect(page.locator("h1")).to_contain_text("Revert change #")
    expect(page.locator("#revert-fields tbody tr")).to_have_count(3)
    expect(page.locator("#revert-fields")).to_contain_text("30 5 * * *")
    assert layout_problems(page) == []
    photograph(page, "revert-confirm")
    page.fill("#reason", "Asia moved to its own schedule")
    page.click("#confirm")
    expect(page.locator(".notice")).to_contain_text("Reverted")
    expect(page.locator("#audit-log tbody tr").first).to_contain_text("revert")
    expect(page.locator("#audit-log tbody tr").first).to_contain_text(
        "Asia moved to its own schedule")
    spec = schedules.get("billing.invoice-run").spec
    assert (spec.trigger.params["expression"], spec.tags, spec.description) == (
        "0 6 * * mon-fri", ("billing",), None)
    assert not spec.enabled  # the pause came after the edit, in another field: it stays
    photograph(page, "schedule-reverted")
    # The same edit once more: refused on its page, with the reason.
    page.goto(page.url.split("/schedule")[0] + "/audit/revert?id="
              + str(schedules.audit("billing.invoice-run", limit=4)[2].id))
    expect(page.locator("#refusal")).to_contain_text("changed since this change in trigger")
    expect(page.locator("#confirm")).to_have_count(0)
    assert layout_problems(page) == []
    photograph(page, "revert-refused")
