"""A row written before Celery's and goatbeat's headers were refused in ``options.headers``
still runs, sent without them: read from PostgreSQL by a leader and published to the real
Redis, its message names the schedule's own task under its own key."""

from __future__ import annotations

import json
import logging

import pytest
import redis
import sqlalchemy as sa
from celery import Celery

from goatbeat_celery.beat.submitter import CelerySubmitter
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.store import Store
from goatbeat_celery.testing import build_engine
from tests.celery.support import dispatch
from tests.conformance.support import create_due

FORGED = {"task": "probe.secret_admin", "Id": "team-b-report:2026-01-01T00:00:00+00:00",
          "shadow": "proj.tasks.tick", "root_id": "forged", "goatbeat_schedule": "team-b-report",
          "team": "ops"}


def dropped_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records
            if getattr(r, "action", None) == "reserved_headers_dropped"]


def test_a_stored_row_s_reserved_headers_are_dropped_from_its_message(
        pg_store: Store, pg_tables_engine: sa.Engine, broker: tuple[Celery, redis.Redis, str],
        caplog: pytest.LogCaptureFixture) -> None:
    app, client, queue = broker
    create_due(pg_store, "team-a-probe")
    with pg_tables_engine.begin() as conn:  # as written by an older release
        conn.execute(sa.text("UPDATE goatbeat_schedule SET options = CAST(:v AS jsonb) "
                             "WHERE name = 'team-a-probe'"),
                     {"v": json.dumps({"queue": queue, "headers": FORGED})})
    engine = build_engine(pg_store, submitter=CelerySubmitter(app), holder="a",
                          settings=Settings(lease_ttl=60, lease_renew_interval=20))
    caplog.set_level(logging.WARNING, logger="goatbeat_celery.beat.submitter")
    try:
        engine.tick()
    finally:
        engine.close()

    [raw] = client.lrange(queue, 0, -1)
    headers = json.loads(raw)["headers"]
    [execution] = pg_store.executions(schedule_name="team-a-probe")
    assert headers["task"] == "proj.tasks.tick"
    assert headers["id"] == execution.key and "Id" not in headers
    assert headers["shadow"] is None and headers["root_id"] != "forged"
    assert headers["goatbeat_schedule"] == "team-a-probe" and headers["team"] == "ops"
    assert pg_store.get_schedule("team-a-probe").fault is None
    [warning] = dropped_warnings(caplog)
    named = warning.getMessage().split(" set ")[1].split(", which")[0]
    assert sorted(named.split(", ")) == sorted(repr(name) for name in FORGED if name != "team")
    assert warning.levelno == logging.WARNING


def test_the_drop_is_logged_once_per_schedule(broker: tuple[Celery, redis.Redis, str],
                                              caplog: pytest.LogCaptureFixture) -> None:
    app, client, queue = broker
    submitter = CelerySubmitter(app)
    caplog.set_level(logging.WARNING, logger="goatbeat_celery.beat.submitter")

    for _ in range(3):
        result = submitter.submit([dispatch("a", {"headers": {"eta": "x"}}),
                                   dispatch("b", {"headers": {"ETA": "x", "id": "a:1"}})],
                                  token=1, timeout=5.0)
        assert len(result.accepted) == 2, result

    assert [r.getMessage().split(":")[0] for r in dropped_warnings(caplog)] == [
        "schedule 'a'", "schedule 'b'"]
    assert client.llen(queue) == 6
    assert all(json.loads(raw)["headers"]["eta"] is None
               for raw in client.lrange(queue, 0, -1))

