"""goatbeat's errors answered by the dashboard from one table by kind: a page for each kind, and
for a missing thing a 404 page naming what is missing."""

from __future__ import annotations

import pytest

from goatbeat_celery.core.types.errors import ErrorKind
from goatbeat_celery.web.pages.errors import ANSWERS

from .conftest import Browser


def test_every_kind_of_error_has_its_page() -> None:
    assert set(ANSWERS) == set(ErrorKind)


@pytest.mark.parametrize(("path", "query", "title"), [
    ("/schedule", {"name": "ghost"}, "No such schedule"),
    ("/schedule/delete", {"name": "ghost"}, "No such schedule"),
    ("/backfill/new", {"name": "ghost"}, "No such schedule"),
    ("/backfill", {"id": "4242"}, "No such backfill"),
    ("/calendar", {"name": "closures"}, "No such calendar"),
    ("/calendar/delete", {"name": "closures"}, "No such calendar"),
    ("/run", {"key": "ghost@2026-01-01T00:00:00Z"}, "No such run"),
])
def test_a_missing_thing_is_a_404_page_naming_it(client: Browser, path: str,
                                                  query: dict[str, str], title: str) -> None:
    response = client.get(path, params=query)
    assert response.status_code == 404
    assert f"<h1>{title}</h1>" in response.text
    assert response.headers["cache-control"] == "no-store"

