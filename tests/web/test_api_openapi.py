"""The API's OpenAPI document: served without a token, valid OpenAPI 3.1, and listing exactly
the routes and methods the application serves."""

from __future__ import annotations

import re

from openapi_spec_validator import validate
from starlette.routing import Route

from goatbeat_celery.api import Schedules
from goatbeat_celery.store import open_store
from goatbeat_celery.web import create_app
from goatbeat_celery.web.api import API_PREFIX


def test_the_document_is_served_valid_and_describes_every_route() -> None:
    from starlette.testclient import TestClient

    with Schedules(open_store("memory://")) as schedules:
        app = create_app(schedules)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            served = client.get(f"{API_PREFIX}/openapi.json")
            rebound = client.get(f"{API_PREFIX}/openapi.json", headers={"Host": "evil.example"})
    assert served.status_code == 200 and rebound.status_code == 400
    document = served.json()
    validate(document)

    routes = {}
    for route in app.routes:
        if isinstance(route, Route) and route.path.startswith(API_PREFIX) \
                and not route.path.endswith("/openapi.json"):
            path = re.sub(r"\{(\w+)(:\w+)?\}", r"{\1}", route.path[len(API_PREFIX):])
            routes.setdefault(path, set()).update(
                m.lower() for m in route.methods or () if m != "HEAD")
    described = {path: {m for m in item if m != "parameters"}
                 for path, item in document["paths"].items()}
    assert described == routes
    assert document["servers"] == [{"url": API_PREFIX}]
