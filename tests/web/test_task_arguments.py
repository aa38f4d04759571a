"""The HTTP API and the dashboard's form refuse arguments the registered task's signature
rejects, as every face does (the check sits in ``Schedules``), naming the field."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from goatbeat_celery.api import Schedules
from goatbeat_celery.tokens import Tokens
from goatbeat_celery.web import create_app

from .conftest import Browser, celery_app

SIGNATURE = "proj.tasks.report(day, *, fmt='pdf')"


@pytest.fixture
def with_task(pg_empty_url: str) -> Iterator[Schedules]:
    """The API of an app that registers ``proj.tasks.report(day, *, fmt)``."""
    app = celery_app(pg_empty_url)

    @app.task(name="proj.tasks.report", shared=False)
    def report(day: str, *, fmt: str = "pdf") -> str:
        return day

    opened = Schedules.from_app(app)
    yield opened
    opened.close()


def test_put_and_patch_refuse_arguments_the_task_rejects(with_task: Schedules) -> None:
    _, secret = Tokens(with_task.store).create("ci", scopes="read,write")
    auth = {"Authorization": f"Bearer {secret}"}
    with TestClient(create_app(with_task), base_url="http://127.0.0.1") as client:
        refused = client.put("/api/v1/schedules/daily", headers=auth, json={
            "task": "proj.tasks.report", "every": 60, "args": [1, 2], "kwargs": {"size": 1}})
        created = client.put("/api/v1/schedules/daily", headers=auth, json={
            "task": "proj.tasks.report", "every": 60, "args": ["mon"]})
        patched = client.patch("/api/v1/schedules/daily", headers=auth,
                               json={"kwargs": {"day": "tue"}})

    assert refused.status_code == 422
    assert [(p["field"], p["message"]) for p in refused.json()["problems"]] == [
        ("args", f"2 given, {SIGNATURE} takes at most 1 positional"),
        ("kwargs", f"{SIGNATURE} takes no keyword 'size'")]
    assert created.status_code == 201, created.text
    assert patched.status_code == 422
    assert patched.json()["problems"][0]["message"] == \
        f"'day' is given in args too, and {SIGNATURE} takes it once"
    assert with_task.get("daily").spec.kwargs == {}


def test_the_dashboard_form_shows_the_refusal_and_stores_nothing(
        with_task: Schedules) -> None:
    with Browser(create_app(with_task), base_url="http://127.0.0.1") as client:
        response = client.submit("/new", name="daily", task="proj.tasks.report", kind="every",
                                 every="60", args="[]", kwargs='{"fmt": "csv"}')

    assert response.status_code == 422
    assert "needs &#39;day&#39;, not given" in response.text
    assert with_task.list() == []
