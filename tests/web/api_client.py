"""A client of the HTTP API for the tests, and a schedule body to send."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.testclient import TestClient

from goatbeat_celery.api import Schedules
from goatbeat_celery.tokens import Tokens

DAILY = {"task": "proj.tasks.report", "cron": "30 6 * * *", "kwargs": {"limit": 50}}


@dataclass
class Api:
    client: TestClient
    schedules: Schedules

    def token(self, name: str = "ci", scopes: str = "read,write,run",
              prefix: str | None = None) -> dict[str, str]:
        _, secret = Tokens(self.schedules.store).create(name, scopes=scopes, prefix=prefix)
        return {"Authorization": f"Bearer {secret}"}


def put(api: Api, auth: dict[str, str], name: str, body: dict[str, Any],
        **headers: str) -> Any:
    return api.client.put(f"/api/v1/schedules/{name}", json=body, headers={**auth, **headers})
