"""Names, tasks, arguments and reasons are user data, some written into the table by hand:
every page shows them as text, never as markup."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from markupsafe import escape

from goatbeat_celery.api import Schedules
from tests.cli.conftest import insert_row, set_aside
from tests.web.conftest import Browser

PAYLOADS = ("<script>alert(1)</script>", '"><img src=x onerror=alert(2)>',
            "'><svg onload=alert(3)>", "</textarea><b>bold</b>")


def assert_inert(page: str) -> None:
    for payload in PAYLOADS:
        assert payload not in page
    # The scripts a page may hold: the dashboard's own files (static/zones.js, live.js).
    assert "<script" not in page.replace('<script src="/static/live.js" defer', "", 1).replace(
        '<script src="/static/zones.js" defer', "", 1)
    assert "onerror=" not in page.replace("onerror=alert(2)&gt;", "")
    assert "<img" not in page and "<b>bold" not in page and "<svg onload" not in page


@pytest.fixture
def hostile(schedules: Schedules, tables: sa.Engine) -> list[str]:
    """Rows written with raw SQL whose every text column is markup."""
    for number, payload in enumerate(PAYLOADS):
        insert_row(tables, payload, task=f"proj.{payload}",
                   args=json.dumps([payload]), kwargs=json.dumps({payload: payload}),
                   options=json.dumps({"queue": payload}),
                   trigger=json.dumps({"kind": "cron", "expression": payload,
                                       "timezone": payload}))
        insert_row(tables, f"ok-{number}{payload}")
    set_aside(schedules.store, PAYLOADS[0], f"reason {PAYLOADS[1]}")
    schedules.run_now(f"ok-0{PAYLOADS[0]}")
    return list(PAYLOADS)


def test_the_overview_and_the_list_escape_user_data(client: Browser,
                                                    hostile: list[str]) -> None:
    for path in ("/", "/schedules", "/schedules?state=set-aside"):
        page = client.get(path).text
        assert_inert(page)
        assert escape(PAYLOADS[0]) in page


def test_the_schedule_page_escapes_every_field(client: Browser, hostile: list[str]) -> None:
    for payload in hostile:
        for name in (payload, f"ok-{hostile.index(payload)}{payload}"):
            response = client.get("/schedule", params={"name": name})
            assert response.status_code == 200, name
            assert_inert(response.text)
            assert escape(name) in response.text


def test_a_search_for_markup_is_shown_as_text(client: Browser, hostile: list[str]) -> None:
    page = client.get("/schedules", params={"q": PAYLOADS[1]}).text
    assert_inert(page)
    assert f'value="{escape(PAYLOADS[1])}"' in page


def test_errors_quoting_markup_are_escaped(client: Browser, schedules: Schedules) -> None:
    response = client.submit("/new", name=PAYLOADS[0], task=PAYLOADS[1], kind="cron",
                             cron=PAYLOADS[2], timezone=PAYLOADS[3], queue="", args="[]",
                             kwargs="{}")
    assert response.status_code == 422
    assert_inert(response.text)
    missing = client.get("/schedule", params={"name": PAYLOADS[0]})
    assert missing.status_code == 404
    assert_inert(missing.text)
