"""Rotation across clusters through the JSON API: written by PUT, answered as stored, each
run's queue in the history, refused with the problems the Python API names, and described by
the OpenAPI document's Definition."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from starlette.testclient import TestClient

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.web import create_app
from goatbeat_celery.web.api import API_PREFIX

from .api_client import Api, put

BODY = {"task": "billing.reconcile", "every": "5m", "rotate": ["eu", "us"],
        "rotate_handover": True}


@pytest.fixture
def api(schedules: Schedules) -> Iterator[Api]:
    with TestClient(create_app(schedules), base_url="http://127.0.0.1") as client:
        yield Api(client, schedules)


@pytest.fixture
def auth(api: Api) -> dict[str, str]:
    return api.token()


def test_put_stores_a_rotation_and_the_history_says_each_runs_queue(
        api: Api, auth: dict[str, str]) -> None:
    created = put(api, auth, "reconcile", BODY)
    body = created.json()
    assert created.status_code == 201, body
    assert (body["rotate"], body["rotate_handover"]) == (["eu", "us"], True)
    store = api.schedules.store
    grant = store.acquire("default", "replica-a", timedelta(seconds=60))
    assert grant is not None
    api.schedules.run_now("reconcile")
    (dispatch,) = store.take_pending(lease=grant, limit=10)
    store.mark_submitted([dispatch.key], {dispatch.key: "us"})
    history = api.client.get(f"{API_PREFIX}/schedules/reconcile/history", headers=auth).json()
    assert [(run["key"], run["cluster"]) for run in history["runs"]] == [(dispatch.key, "us")]


@pytest.mark.parametrize("bad", [
    {"rotate": ["eu"]},
    {"rotate": ["eu", "eu", ""], "options": {"queue": "other"}},
    {"rotate": "eu,us"},
    {"rotate_handover": True},
], ids=["one-queue", "repeated-empty-and-a-queue", "text", "handover-alone"])
def test_bad_rotations_are_refused_with_the_problems_the_python_api_names(
        api: Api, auth: dict[str, str], bad: dict[str, Any]) -> None:
    refused = put(api, auth, "bad", {"task": "proj.task", "every": 60, **bad})

    assert refused.status_code == 422
    with pytest.raises(ConfigurationError) as python:
        api.schedules.create("bad", "proj.task", every=60, **bad)
    assert refused.json()["problems"] == [
        {"field": p.field, "message": p.message, "hint": p.hint}
        for p in python.value.details]
    assert api.schedules.list() == []


def test_the_openapi_definition_describes_the_rotation(api: Api) -> None:
    document = api.client.get(f"{API_PREFIX}/openapi.json").json()
    validator = Draft202012Validator(document["components"]["schemas"]["Definition"])
    assert list(validator.iter_errors(BODY)) == []
    assert list(validator.iter_errors({**BODY, "rotate": "eu,us"})) != []
