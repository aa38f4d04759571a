"""Rows broken by hand under two running replicas: each bad schedule is set aside with its
reason, the healthy ones keep their cadence, and no replica stops.

Real ``celery beat -S goatbeat_celery.Scheduler`` processes (two), a real worker, PostgreSQL and
a Redis broker. While both replicas run, a couple of dozen rows of ``goatbeat_schedule`` are
written or overwritten with raw SQL, the way an operator with ``psql`` (or a bad migration)
would: JSON of the wrong shape, NaN and infinite durations, unknown policies and sources,
options Celery cannot send, names no terminal or index can hold, impossible instants. Verdicts
come from the executions table, what the worker received, and the schedules as the Schedules
API and ``celery goatbeat`` show them, never from log text.
"""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from goatbeat_celery.api import Schedules
from goatbeat_celery.config import GoatbeatConfig
from goatbeat_celery.core.types.execution import idempotency_key
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.set_aside import SET_ASIDE_RETRY
from goatbeat_celery.store import open_store
from tests.support.waiting import wait_for
from tests.system.harness import Cluster, Process, assert_alive, start_replicas
from tests.system.outcome import Outcome, grid

pytestmark = [pytest.mark.system, pytest.mark.slow]

TTL = 3.0
RENEW = 1.0
MAX_INTERVAL = 1.0
SETTINGS = {"lease_ttl": TTL, "lease_renew_interval": RENEW, "max_interval": MAX_INTERVAL,
            # Rows written through the database may send only the project's tasks.
            "allowed_tasks": ["sysproj.*"]}
STEP = timedelta(seconds=1)
#: How long the broken rows sit beside the healthy ones before the verdict: about thirty grid
#: points of each healthy schedule, and the set-aside retry (SET_ASIDE_RETRY, 30 s) comes round
#: once within it (or within the few seconds waited for it after).
OBSERVE = 32.0
#: Raw SQL announces nothing (no NOTIFY): the leader meets a broken row at its next wake-up,
#: at most max_interval away, plus one tick. One more second is the margin for a tick delayed
#: on a busy two-core machine (ticks take milliseconds; the fault suite's p99 lateness is
#: well under a second with twenty 1-second schedules).
SEEN_WITHIN = MAX_INTERVAL + 1.0
#: A healthy 1-second schedule must keep at least this share of the grid points due while the
#: broken rows sit beside it. A correct leader runs every point; the floor leaves room for a
#: tick so late on a busy machine that ``latest`` coalesces two due points into one run.
CADENCE_FLOOR = 0.8
#: A CLI command imports Celery and the project in a fresh interpreter: a few seconds when the
#: two cores are busy with the replicas and the worker; ten times that before calling it hung.
CLI_TIMEOUT = 60.0


# -- the broken rows -------------------------------------------------------------------------
#: What a healthy 1-second row holds, as SQL expressions. The one argument is the row's name,
#: so anything the worker receives says which schedule sent it.
HEALTHY: dict[str, str] = {
    "task": "'sysproj.record'",
    "args": "jsonb_build_array(CAST(%(name)s AS text))",
    "kwargs": "'{}'",
    "options": "'{}'",
    "trigger": """'{"kind": "interval", "every": 1}'""",
    "enabled": "true",
    "source": "'api'",
    "spec_hash": "''",
    # A grid point already reached: the row is due the moment it is committed.
    "next_occurrence_at": "date_trunc('second', now())",
    "next_run_at": "date_trunc('second', now())",
    "total_runs": "0",
    "total_missed": "0",
    "version": "1",
    "created_at": "now()",
    "updated_at": "now()",
}

#: Random ASCII letters do not compress, so the name's index entries take its full length.
#: 2,700 of them do not fit goatbeat_schedule's own primary key (2,712 > 2,704 bytes, btree's
#: limit); 2,670 fit both schedule indexes, while a key (name + ':' + a 25-character instant)
#: does not fit the executions' primary key. The test checks that premise before using it.
LONG_NAME = "".join(random.Random(2670).choices(string.ascii_letters, k=2670))
CONTROL_NAME = "ctl\x1b[31m red\x07 bell\nline"


@dataclass(frozen=True)
class Broken:
    """One row written (``insert``) or overwritten (``update``) with raw SQL.

    ``field``: what the recorded reason must mention, or None for a row that must be restarted
    and keep running (its next occurrence was unreadable or missing)."""

    name: str
    columns: dict[str, str]
    field: str | None
    how: str = "insert"
    #: Refused only when its message is built (by kombu), not when it is planned.
    at_send: bool = False


BROKEN: tuple[Broken, ...] = (
    Broken("trigger-empty-object", {"trigger": "'{}'"}, "trigger"),
    Broken("trigger-array", {"trigger": "'[]'"}, "trigger"),
    Broken("every-microsecond", {"trigger": """'{"kind":"interval","every":1e-6}'"""}, "every"),
    Broken("every-text", {"trigger": """'{"kind":"interval","every":"x"}'"""}, "every"),
    Broken("cron-nonsense",
           {"trigger": """'{"kind":"cron","expression":"nope","timezone":"Mars/Base"}'"""},
           "cron"),
    Broken("policy-unknown", {"misfire_policy": "'sometimes'"}, "misfire_policy"),
    Broken("grace-nan", {"misfire_grace_seconds": "'NaN'"}, "misfire_grace"),
    Broken("grace-infinity", {"misfire_grace_seconds": "'Infinity'"}, "misfire_grace"),
    Broken("grace-1e300", {"misfire_grace_seconds": "1e300"}, "misfire_grace"),
    Broken("catchup-negative", {"max_catchup": "-5"}, "max_catchup"),
    Broken("offset-1e300", {"offset_seconds": "1e300"}, "offset"),
    Broken("args-string", {"args": """'"abc"'"""}, "args"),
    Broken("options-retry", {"options": """'{"retry": false}'"""}, "retry"),
    Broken("options-countdown", {"options": """'{"countdown": "soon"}'"""}, "countdown"),
    Broken("options-serializer", {"options": """'{"serializer": "nope"}'"""}, "serializer",
           at_send=True),
    Broken("options-queue-number", {"options": """'{"queue": 5}'"""}, "queue"),
    Broken("options-string", {"options": """'"x"'"""}, "options"),
    Broken("source-bogus", {"source": "'bogus'"}, "source"),
    Broken("config-not-allowed", {"source": "'config'", "task": "'os.system'"},
           "goatbeat_allowed_tasks"),
    Broken(LONG_NAME, {}, "name"),
    Broken(CONTROL_NAME, {}, "name"),
    Broken("task-empty", {"task": "''"}, "task"),
    Broken("next-occurrence-infinity",
           {"next_occurrence_at": "'infinity'", "next_run_at": "now() - interval '1 second'"},
           None),
    Broken("next-occurrence-null",
           {"next_occurrence_at": "NULL", "next_run_at": "now() - interval '1 second'"}, None),
    # Running schedules created through the API, then overwritten in place (the version is
    # left as it was, as a hand edit leaves it).
    Broken("victim-args-number", {"args": "'5'"}, "args", how="update"),
    Broken("victim-kwargs-array", {"kwargs": "'[1]'"}, "kwargs", how="update"),
    Broken("victim-headers-array", {"options": """'{"headers": [1]}'"""}, "headers",
           how="update"),
    Broken("victim-next-run-minus-infinity", {"next_run_at": "'-infinity'"}, None, how="update"),
    # One of this replica's own beat_schedule rows, pointed at a task the allow-list refuses.
    Broken("cfg-victim", {"task": "'os.system'", "next_run_at": "now()"},
           "goatbeat_allowed_tasks", how="update"),
)
SET_ASIDE = tuple(b for b in BROKEN if b.field is not None)
RESTARTED = tuple(b for b in BROKEN if b.field is None)
#: Healthy 1-second schedules after the breakage: their cadence is judged like the canary's.
CADENCED = ("canary", *(b.name for b in RESTARTED))
VICTIMS = tuple(b.name for b in BROKEN if b.how == "update" and b.name != "cfg-victim")


def break_rows(cluster: Cluster, rows: Sequence[Broken]) -> None:
    """Write every broken row in one transaction, so they all become due together."""
    with cluster.engine.begin() as connection:
        for row in rows:
            if row.how == "insert":
                values = {**HEALTHY, **row.columns}
                statement = (f"INSERT INTO goatbeat_schedule (name, {', '.join(values)}) "
                             f"VALUES (%(name)s, {', '.join(values.values())})")
            else:
                sets = ", ".join(f"{column} = {value}" for column, value in row.columns.items())
                statement = f"UPDATE goatbeat_schedule SET {sets} WHERE name = %(name)s"
            result = connection.exec_driver_sql(statement, {"name": row.name})
            assert result.rowcount == 1, f"{row.name[:40]!r}: {result.rowcount} rows written"


def assert_key_does_not_fit(cluster: Cluster, name: str) -> None:
    """The premise of LONG_NAME: PostgreSQL refuses an execution key made from it."""
    key = idempotency_key(name, cluster.db_now().replace(microsecond=0))
    with cluster.engine.connect() as connection:
        transaction = connection.begin()
        try:
            with pytest.raises(sa.exc.DBAPIError, match="index row size"):
                connection.execute(sa.text(
                    "INSERT INTO goatbeat_execution (key, schedule_name, occurrence_at, due_at, "
                    "token, state, claimed_at, attempts, missed, manual) VALUES (:key, 'x', "
                    "now(), now(), 0, 'claimed', now(), 0, 0, false)"), {"key": key})
        finally:
            transaction.rollback()


# -- watching --------------------------------------------------------------------------------
@dataclass
class Watch:
    """What must hold at every moment of the scenario: both replicas alive, and the lease with
    the replica that first took it (a broken row must never cost the leader its lease)."""

    cluster: Cluster
    replicas: Sequence[Process]
    token: int
    holder: str
    checks: int = field(default=0)

    def check(self) -> None:
        assert_alive(*self.replicas)
        lease = self.cluster.lease()
        assert lease is not None and lease["live"], f"no live lease: {lease}"
        assert (lease["token"], lease["holder"]) == (self.token, self.holder), (
            f"the lease changed hands while rows were broken: {lease}")
        self.checks += 1

    def run_for(self, seconds: float) -> None:
        """Let the scenario run ``seconds`` (its duration, not a synchronisation), checking
        twice a second."""
        pace = threading.Event()
        deadline = time.monotonic() + seconds
        while True:
            self.check()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            pace.wait(min(0.5, left))

    def until(self, condition: Any, *, timeout: float, what: str) -> Any:
        def checked() -> Any:
            self.check()
            return condition()
        return wait_for(checked, timeout=timeout, what=what, interval=0.25)


def schedules_by_name(api: Schedules) -> dict[str, Schedule]:
    return {schedule.name: schedule for schedule in api.list()}


def missing_faults(api: Schedules, rows: Sequence[Broken], *,
                   at_least: int = 1) -> dict[str, str]:
    """Rows not (yet) set aside at least ``at_least`` times with a reason naming their field."""
    stored = schedules_by_name(api)
    problems: dict[str, str] = {}
    for row in rows:
        schedule = stored.get(row.name)
        assert row.field is not None
        if schedule is None:
            problems[row.name[:40]] = "gone"
        elif not schedule.fault or row.field.lower() not in schedule.fault.lower():
            problems[row.name[:40]] = f"fault {schedule.fault!r}"
        elif schedule.faults < at_least:
            problems[row.name[:40]] = f"set aside {schedule.faults} times"
    return problems


def refused_keys(cluster: Cluster) -> set[str]:
    """Executions whose message the submitter refused (recorded in ``last_error``)."""
    return {row["key"] for row in cluster.sql(
        "SELECT key FROM goatbeat_execution WHERE last_error IS NOT NULL "
        "AND state <> 'submitted'")}


def settle_sendable(cluster: Cluster, timeout: float = 30) -> datetime:
    """Wait until every execution due over a second and a half ago either reached the worker
    (submitted) or had its message refused; returns that cut-off."""
    def settled() -> datetime | None:
        cutoff = cluster.db_now() - timedelta(seconds=1.5)
        delivered = {r["id"] for r in cluster.records()}
        refused = refused_keys(cluster)
        late = [row["key"] for row in cluster.executions()
                if row["due_at"] <= cutoff and row["key"] not in refused
                and (row["state"] != "submitted" or row["key"] not in delivered)]
        return None if late else cutoff
    cutoff = wait_for(settled, timeout=timeout, what="every sendable execution to reach the "
                      "worker", interval=0.25)
    assert cutoff is not None
    return cutoff


def all_submitted_delivered(cluster: Cluster) -> bool:
    delivered = {r["id"] for r in cluster.records()}
    return all(row["key"] in delivered for row in cluster.executions()
               if row["state"] == "submitted")


def celery_goatbeat(cluster: Cluster, *args: str) -> Any:
    """``celery -A sysproj goatbeat ARGS --json`` as an operator runs it; its parsed output."""
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "sysproj", "goatbeat", *args, "--json"],
        cwd=cluster.workdir, env=cluster.env(), capture_output=True, text=True,
        timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return json.loads(done.stdout)


@pytest.fixture
def api(cluster: Cluster) -> Iterator[Schedules]:
    schedules = Schedules(open_store(cluster.database_url),
                          config=GoatbeatConfig(database_url=cluster.database_url,
                                                allowed_tasks=("sysproj.*",)))
    yield schedules
    schedules.close()


# -- the scenario ----------------------------------------------------------------------------
def test_rows_broken_by_hand_are_set_aside_with_their_reason_while_the_canary_keeps_time(
        cluster: Cluster, api: Schedules, report: Any) -> None:
    cluster.write_config(schedules={"canary": {"every": 1}, "cfg-victim": {"every": 3600}},
                         settings=SETTINGS)
    for name in VICTIMS:
        api.create(name, "sysproj.record", every=1, args=(name,))
    cluster.start_worker()
    replicas = start_replicas(cluster, count=2)
    lease = cluster.lease()
    assert lease is not None
    watch = Watch(cluster, replicas, token=lease["token"], holder=lease["holder"])
    # Everything healthy runs before anything is broken.
    watch.until(lambda: {"canary", *VICTIMS} <= {r["label"] for r in cluster.records()},
                timeout=30, what="the canary and the victims to run once")

    long_rows = [b for b in BROKEN if b.name == LONG_NAME]
    break_rows(cluster, long_rows)
    assert_key_does_not_fit(cluster, LONG_NAME)
    break_rows(cluster, [b for b in BROKEN if b.name != LONG_NAME])
    broken_at = cluster.db_now()

    # Every broken row is set aside once, within a wake-up of the leader (raw SQL announces
    # nothing), plus the send of the one refused only by kombu.
    watch.until(lambda: not missing_faults(api, SET_ASIDE), timeout=SEEN_WITHIN + 10,
                what="every broken row to be set aside with its reason")
    first_seen = cluster.db_now() - broken_at
    watch.run_for(max(0.0, OBSERVE - (cluster.db_now() - broken_at).total_seconds()))

    # The retry comes round SET_ASIDE_RETRY after the first set-aside: each row planned again
    # is set aside again, now for twice as long.
    planned = [b for b in SET_ASIDE if not b.at_send]
    retry_deadline = (SET_ASIDE_RETRY.total_seconds() + 2 * SEEN_WITHIN
                      - (cluster.db_now() - broken_at).total_seconds())
    watch.until(lambda: not missing_faults(api, planned, at_least=2),
                timeout=max(1.0, retry_deadline) + 5,
                what="every broken row to be looked at again and set aside again")
    stored = schedules_by_name(api)
    for row in planned:
        schedule = stored[row.name]
        assert schedule.next_run_at is not None and schedule.fault_at is not None
        # First retry 30 s after the first look, the next one 60 s after the second look:
        # at least 90 s after the first, less the instant between a due read and its write
        # (milliseconds; a second of margin for a busy machine).
        assert schedule.next_run_at - schedule.fault_at >= 3 * SET_ASIDE_RETRY - STEP, (
            row.name[:40], schedule.fault_at, schedule.next_run_at, schedule.faults)
    watch.check()

    # The restarted rows run again, on the grid, with nothing recorded against them.
    for row in RESTARTED:
        schedule = stored[row.name]
        assert schedule.fault is None and not schedule.damage, (row.name, schedule.fault)
        assert schedule.next_occurrence_at is not None
        assert schedule.next_occurrence_at > broken_at

    # What operators see: `celery goatbeat list --json` and `show NAME --json`.
    listed = {entry["name"]: entry for entry in celery_goatbeat(cluster, "list")}
    for row in planned:
        entry = listed[row.name]
        assert entry["set_aside"] is True and row.field is not None
        assert row.field.lower() in entry["fault"].lower(), (row.name[:40], entry["fault"])
    shown = celery_goatbeat(cluster, "show", CONTROL_NAME)
    assert shown["name"] == CONTROL_NAME and shown["set_aside"] is True
    assert "control or invisible characters" in shown["fault"]
    assert shown["damage"] == []
    shown = celery_goatbeat(cluster, "show", "grace-nan")
    assert any("misfire_grace" in damage for damage in shown["damage"]), shown["damage"]

    unsendable = {b.name for b in SET_ASIDE if b.at_send}
    cutoff = settle_sendable(cluster)
    watch.check()
    # The standby first, so that the lease never changes hands; then let what the leader sent
    # last reach the worker before reading.
    for replica in reversed(replicas):
        assert replica.stop() == 0, f"{replica.name} exited badly:\n{replica.log()[-3000:]}"
    wait_for(lambda: all_submitted_delivered(cluster), timeout=15,
             what="every submitted message to reach the worker")
    executions = cluster.executions()
    records = cluster.records()
    refused = refused_keys(cluster)

    # -- the verdict -------------------------------------------------------------------------
    outcome = Outcome.of([row for row in executions if row["key"] not in refused], records,
                         until=cutoff)
    outcome.assert_sound()
    everything = Outcome.of(executions, records)
    assert everything.claimed_twice() == []
    assert everything.duplicates() == [], "a key reached the worker twice"
    assert everything.foreign() == []

    # Nothing broken ever reached the worker: only healthy labels, never from an inserted row
    # that was broken from the start.
    broken_from_start = {b.name for b in SET_ASIDE if b.how == "insert"}
    for record in records:
        assert record["schedule"] not in broken_from_start, record
        assert record["label"] == record["schedule"], record
    # The message kombu cannot build was tried, never submitted, and given up after five
    # attempts (MAX_SEND_ATTEMPTS). A victim may join it: claimed in the very instant it was
    # overwritten, its broken message is refused the same way.
    assert any(execution["schedule_name"] in unsendable for execution in executions)
    for execution in executions:
        if execution["key"] in refused or execution["schedule_name"] in unsendable:
            assert execution["schedule_name"] in unsendable | set(VICTIMS), execution
            assert execution["state"] in {"claimed", "abandoned"}, execution
            assert execution["attempts"] <= 5, execution

    # The healthy 1-second schedules kept their cadence while the broken rows sat beside them.
    cadence: dict[str, tuple[int, int]] = {}
    start = broken_at + timedelta(seconds=SEEN_WITHIN)
    for name in CADENCED:
        points = grid(start, cutoff, STEP)
        ran = {o.occurrence_at for o in outcome.scheduled if o.schedule == name and o.arrivals}
        cadence[name] = (sum(1 for p in points if p in ran), len(points))
    report(canary_runs=cadence["canary"][0], canary_expected=cadence["canary"][1],
           restarted_runs={n: f"{r}/{e}" for n, (r, e) in cadence.items() if n != "canary"},
           set_aside=len(SET_ASIDE), first_seen=f"{first_seen.total_seconds():.2f}s",
           watch_checks=watch.checks, executions=len(executions))
    for name, (ran_count, expected) in cadence.items():
        assert expected >= OBSERVE - SEEN_WITHIN - 2, (name, expected)
        assert ran_count >= CADENCE_FLOOR * expected, (name, ran_count, expected)
