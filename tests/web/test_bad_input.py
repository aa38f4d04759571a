"""Whatever a request holds, the dashboard answers with a page: a 4xx naming what it could not
read, never a 500 or a traceback, and nothing changes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.types.spec import PLAIN_FIELDS
from goatbeat_celery.web.app import create_app
from goatbeat_celery.web.pages import schedule_list
from tests.web.conftest import Browser

# Each example is a request against PostgreSQL: a few dozen cover the shapes of text (digits of
# other scripts, control characters, surrogates' neighbours, very long runs) in seconds.
WEB_PROPERTY = settings(max_examples=60, deadline=None, derandomize=True,
                        suppress_health_check=[HealthCheck.function_scoped_fixture,
                                               HealthCheck.too_slow])
FORM_FIELDS = ("name", "task", "kind", "every", "cron", "at", "timezone", "queue", "priority",
               "expires", "args", "kwargs", "options", *(field.name for field in PLAIN_FIELDS))
#: Text as people, browsers and attackers send it: any character, and numbers too long to read.
ODD_TEXT = st.one_of(st.text(max_size=40), st.sampled_from(
    ["²", "٣", "\x00", "9" * 5000, "-1", "1e309", "{}" * 3, "NaN", "9999-03-01T00:00"]))
#: A form field may also be larger than a URL can be.
ODD_FIELD = st.one_of(ODD_TEXT, st.just("[" * 100_000))


@pytest.mark.parametrize(("path", "query"), [
    ("/schedules", {"page": "²", "after": "a"}),
    ("/schedules", {"page": "9" * 5000, "after": "a"}),
    ("/schedules", {"after": "a", "sort": "next_run", "after_run": "9" * 5000}),
    ("/schedules", {"after": "a", "sort": "next_run", "after_run": "2026-01-01T00:00:00"}),
    ("/schedules", {"q": "a\x00b"}),
    ("/schedules", {"after": "a\x00"}),
    ("/schedules", {"tag": "\x00"}),
    ("/schedule", {"name": "a\x00"}),
])
def test_an_unreadable_query_is_a_page_not_a_500(client: Browser, path: str,
                                                  query: dict[str, str]) -> None:
    response = client.get(path, params=query)
    assert response.status_code in (200, 400, 404), response.text
    if "\x00" in "".join(query.values()):
        assert response.status_code == 400 and "NUL" in response.text


@pytest.mark.parametrize("query", [
    {"q": "a\x00b"},
    {"tag": "\x00"},
    {"after": "a\x00"},
    {"after": "a\x00", "sort": "next_run", "after_run": "2026-01-01T00:00:00+00:00"},
])
def test_a_filter_the_listing_refuses_is_a_4xx_page_past_the_nul_guard_too(
        schedules: Schedules, query: dict[str, str]) -> None:
    """The list page hands its query's filters to ``Schedules.list``, which checks them: what
    it refuses is answered by the dashboard's error page (422), not a 500, even on a route
    without the guard that refuses a NUL first."""
    dashboard = create_app(schedules)
    context = dashboard.state.goatbeat

    async def unguarded(request: Request) -> Response:
        return await schedule_list.schedule_list(request, context)

    dashboard.router.routes.insert(0, Route("/unguarded/schedules", unguarded))
    with Browser(dashboard, base_url="http://127.0.0.1") as client:
        response = client.get("/unguarded/schedules", params=query)
    assert response.status_code == 422, response.text[:500]
    assert "NUL character" in response.text


def test_a_nul_in_a_posted_name_is_refused_and_changes_nothing(client: Browser,
                                                                schedules: Schedules) -> None:
    response = client.submit("/new", name="a\x00b", task="proj.tasks.x", kind="every",
                             every="60")
    assert response.status_code == 400 and "name: holds a NUL" in response.text
    assert schedules.list() == []


@pytest.mark.parametrize(("field", "value", "shown"), [
    ("priority", "9" * 5000, "priority"),
    ("args", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("kwargs", '{"a":' * 50_000 + "1" + "}" * 50_000, "nested too deeply"),
])
def test_an_unreadable_field_is_shown_under_it(client: Browser, schedules: Schedules,
                                               field: str, value: str, shown: str) -> None:
    fields = {"name": "x", "task": "proj.tasks.x", "kind": "every", "every": "60", field: value}
    response = client.submit("/new", **fields)
    assert response.status_code == 422
    assert shown in response.text
    assert schedules.list() == []


def test_an_unreadable_version_is_refused_as_an_edit_conflict(client: Browser,
                                                              schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    before = schedules.get("tick")
    for version in ("²", "9" * 5000):
        response = client.submit("/schedule/edit", name="tick", task="proj.tasks.other",
                                 kind="every", every="30", version=version)
        assert response.status_code == 422, version
    assert schedules.get("tick").spec == before.spec


@WEB_PROPERTY
@given(fields=st.dictionaries(st.sampled_from(FORM_FIELDS), ODD_FIELD, max_size=6))
def test_any_create_form_is_created_or_refused_with_a_page(client: Browser,
                                                           schedules: Schedules,
                                                           fields: dict[str, str]) -> None:
    sent = {"name": "odd", "task": "proj.tasks.x", "kind": "every", "every": "60", **fields}
    response = client.submit("/new", **sent)
    assert response.status_code in (303, 400, 422), response.text[:500]
    exists = any(s.name == sent["name"] for s in schedules.list())
    assert exists is (response.status_code == 303)
    if exists:
        schedules.delete(sent["name"])


@WEB_PROPERTY
@given(query=st.dictionaries(st.sampled_from(("q", "source", "state", "tag", "sort", "after",
                                              "after_run", "page")),
                             st.one_of(ODD_TEXT, st.datetimes().map(datetime.isoformat)),
                             max_size=5))
def test_any_list_query_is_answered_with_a_page(client: Browser, query: dict[str, Any]) -> None:
    response = client.get("/schedules", params=query)
    assert response.status_code in (200, 400), response.text[:500]
