"""What a token cannot make the HTTP API do beyond its scopes and prefix: filter by more tags
than a listing takes, learn or pin other teams' calendars and schedules through calendars, or
run a task at once without the ``run`` scope. Through an HTTP client, on the session's
PostgreSQL database."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.controls import MAX_FILTER_TAGS
from goatbeat_celery.web import create_app

from .test_api import DAILY, Api, put


@pytest.fixture
def api(schedules: Schedules) -> Iterator[Api]:
    with TestClient(create_app(schedules), base_url="http://127.0.0.1") as client:
        yield Api(client, schedules)


@pytest.fixture
def auth(api: Api) -> dict[str, str]:
    """An unlimited token's: every scope, no prefix."""
    return api.token("admin")


def problem_fields(answer: Any) -> set[str]:
    return {problem["field"] for problem in answer.json().get("problems", ())}


# -- tag= --------------------------------------------------------------------------------------
def test_a_listing_takes_at_most_the_documented_number_of_tags(api: Api,
                                                                auth: dict[str, str]) -> None:
    tags = [f"t{index}" for index in range(MAX_FILTER_TAGS + 1)]
    put(api, auth, "job", {**DAILY, "tags": tags[:MAX_FILTER_TAGS]})
    reader = api.token("reader", "read")

    def listed(wanted: list[str]) -> Any:
        query = "&".join(f"tag={tag}" for tag in wanted)
        return api.client.get(f"/api/v1/schedules?{query}", headers=reader)

    refused = listed(tags)
    repeated = listed([tags[0]] * (MAX_FILTER_TAGS + 1))
    found = listed(tags[:MAX_FILTER_TAGS])

    assert refused.status_code == 422, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    assert problem_fields(refused) == {"tags"}
    assert f"at most {MAX_FILTER_TAGS}" in refused.text
    assert repeated.status_code == 422  # counted as sent: a repeat is no narrower
    assert [s["name"] for s in found.json()["schedules"]] == ["job"]
