"""The runs pages in a real browser (Debian's chromium, headless, driven by Playwright) at both
widths of tests/web/layout.py: the runs page and its filter form, the grid, a run's page with
its traceback; nothing overflows its cell, and screenshots go into test-artifacts/web/."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.web.conftest import TOKEN, Server
from tests.web.layout import WIDTHS, layout_problems, photograph
from tests.web.test_run_search import populate


@pytest.fixture(params=WIDTHS, ids=[f"{width}px" for width in WIDTHS])
def page(chromium: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": request.param, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(10_000)
    yield opened
    context.close()


def test_the_runs_pages_filter_link_and_lay_out(page: Page, server: Server) -> None:
    runs = populate(server.schedules)
    page.goto(server.url + "/")
    page.fill("#token", TOKEN)
    page.click("#sign-in")
    page.click("nav >> text=Runs")
    expect(page.locator("h1")).to_have_text("Runs")
    expect(page.locator("#runs tbody tr")).to_have_count(5)
    photograph(page, "runs")
    assert layout_problems(page) == []

    page.select_option("#outcome", "failed")
    page.click("#run-filters button")
    expect(page.locator("#runs tbody tr")).to_have_count(2)
    photograph(page, "runs-failed")

    page.click("#grid-link")
    expect(page.locator("#run-grid a.cell")).to_have_count(5)
    assert layout_problems(page) == []
    photograph(page, "runs-grid")
    page.click(f'#run-grid a.cell[href="/run?key={quote(runs["etl"][1].key, safe="")}"]')
    expect(page.locator("#run-traceback")).to_contain_text("ValueError: <b>boom</b>")
    assert layout_problems(page) == []
    photograph(page, "run-traceback")
