"""Every face gives a schedule the same status: the API, the CLI's ``--json`` and its filters,
the dashboard's list and filter, and the admin's list and filter, for a schedule in each state
(:mod:`goatbeat_celery.core.rules.status`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from starlette.testclient import TestClient

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.status import State
from goatbeat_celery.web import create_app
from tests.cli.conftest import cli_for as cli_for  # noqa: F401 - the fixture
from tests.django.admin_pages import CHANGELIST, cells
from tests.django.conftest import set_aside


def _ended(api: Schedules, name: str, url: str) -> None:
    # What the leader leaves once max_runs are used up: no next run, no run left.
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE goatbeat_schedule SET total_runs = 1, "
                                   "next_run_at = NULL WHERE name = :name"), {"name": name})
    engine.dispose()


#: How to bring a fresh every-minute schedule into each state, and whether it counts as paused.
SETUPS: dict[State, tuple[Callable[[Schedules, str, str], object], bool]] = {
    State.ENABLED: (lambda api, name, url: None, False),
    State.PAUSED: (lambda api, name, url: api.pause(name, note="frozen"), True),
    State.PAUSED_UNTIL: (lambda api, name, url: api.pause(
        name, note="sale", until=api.store.now() + timedelta(days=3)), True),
    State.SET_ASIDE: (lambda api, name, url: set_aside(api, name, "task refused"), False),
    State.ENDED: (_ended, False),
}


@pytest.mark.parametrize("state", list(State), ids=[s.name.lower() for s in State])
def test_every_face_gives_the_same_status(state: State, api: Schedules, client: Any,
                                          cli_for: Any, django_db: str) -> None:
    setup, paused = SETUPS[state]
    api.create("job", "proj.tasks.job", every=60, max_runs=1)
    api.create("other", "proj.tasks.other", every=60)  # enabled, for the filters to leave out
    setup(api, "job", django_db)
    now = api.store.now()

    # The API.
    job = api.get("job")
    assert job.status_at(now).state is state
    assert ("job" in [s.name for s in api.list(enabled=False)]) is paused
    assert ("job" in [s.name for s in api.list(enabled=True)]) is not paused
    assert api.counts().paused == int(paused)

    # The CLI: --json, and the --enabled / --disabled filters.
    cli = cli_for(django_db)
    assert cli.json("show", "job")["state"] == state.value
    assert ("job" in [s["name"] for s in cli.json("list", "--disabled")]) is paused
    assert ("job" in [s["name"] for s in cli.json("list", "--enabled")]) is not paused
    shown = cli.ok("show", "job").stdout
    assert re.search(rf"^state +{re.escape(state.value)}", shown, re.M), shown
    next_run = re.search(r"^next run +(.*)$", shown, re.M)
    assert next_run is not None
    assert (next_run.group(1) == "-") is (state in (State.PAUSED, State.ENDED))

    # The dashboard: the list's state cell, and its paused filter.
    with TestClient(create_app(api), base_url="http://127.0.0.1") as browser:
        listed = browser.get("/schedules").text
        row = next(part for part in listed.split("<tr") if '?name=job"' in part)
        assert re.search(rf'class="pill \w+"[^>]*>{re.escape(state.value)}\b[^<]*</span>', row), row
        filtered = browser.get("/schedules", params={"state": "paused"}).text
        assert ('?name=job"' in filtered) is paused
        assert ('?name=other"' in filtered) is False

    # The admin: the changelist's state column and its paused filter.
    row = cells(client.get(CHANGELIST).content.decode(), "job")
    assert row["state"].startswith(state.value), row
    assert (row["next_run"] == "-") is (state in (State.PAUSED, State.ENDED)), row
    paused_rows = client.get(CHANGELIST, {"state": "paused"}).content.decode()
    assert (">job</a></th>" in paused_rows) is paused
