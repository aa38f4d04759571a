"""Starting deadlines end to end: real ``celery beat -S goatbeat_celery.Scheduler`` and worker
processes, PostgreSQL and Redis, running ``tests/system/fidproj.py`` (scenario ``deadline``):
two schedules every second, ``dl`` with a starting deadline of 3 s and ``nodl`` without.

* Worker side: the worker starts long after beat. Each ``dl`` message carries its deadline as an
  absolute ``expires``, so the worker revokes the stale backlog and runs the fresh part; ``nodl``
  has all of its backlog run.
* goatbeat side: the broker is down for longer than the deadline. The ``dl`` claims whose
  deadline passed meanwhile are recorded ``expired`` and never sent once the broker is back;
  ``nodl``'s are sent under their keys.

Verdicts come from the executions table and what the worker recorded (each run, and each message
it revoked, through Celery's ``task_revoked`` signal), never from log text.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import wait_for
from tests.system.fidelity import STARTUP, FidWorld, assert_alive
from tests.system.harness import Process, running
from tests.system.services import PrivateRedis

pytestmark = [pytest.mark.system, pytest.mark.slow]

GOATBEAT = "goatbeat_celery.Scheduler"
#: The ``dl`` schedule's starting deadline.
DEADLINE = 3.0
STEP = 1.0
#: The worker starts this long after ``dl``'s first occurrence, the broker stays down this long:
#: longer than the deadline by enough for five stale points of a 1 s schedule.
LATE = OUTAGE = DEADLINE + 5.0
#: A started worker takes the whole backlog (a few dozen messages) off the queue at once; each
#: is judged for expiry as it is received and again just before it runs, both within
#: milliseconds of the first run. Two seconds of margin for a busy two-core machine: a ``dl``
#: occurrence whose deadline falls this long after the worker's first run must run.
FRESH_MARGIN = 2.0
#: Broker failure back-off of the outage scenario (goatbeat_retry_backoff[_max]).
BACKOFF = 1.0
#: After the broker returns, goatbeat resends within the back-off plus a tick (max_interval,
#: 1 s), plus two seconds of margin: a ``dl`` claim whose deadline is this far past the return
#: must be delivered.
RESEND_BOUND = BACKOFF + 1.0 + 2.0
#: submitted_at is written by the database just after the broker accepted the message (a
#: round trip of milliseconds); a second of margin for a busy machine when checking that
#: nothing was sent past its deadline.
MARK_MARGIN = 1.0


def dl_env(**goatbeat: Any) -> dict[str, str]:
    return {"FID_DEADLINE": str(DEADLINE), "FID_GOATBEAT": json.dumps(goatbeat)}


def ts(value: datetime) -> float:
    return value.timestamp()


class Records:
    """What the worker recorded under ``prefix``: runs (task id -> records) and revocations."""

    def __init__(self, world: FidWorld, prefix: str) -> None:
        self.world, self.prefix = world, prefix

    def runs(self) -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {}
        for record in self.world.listed(f"{self.prefix}records"):
            found.setdefault(record["id"], []).append(record)
        return found

    def revoked(self) -> dict[str, dict[str, Any]]:
        return {r["id"]: r for r in self.world.listed(f"{self.prefix}revoked")}

    def accounted(self, keys: set[str]) -> bool:
        """Each of ``keys`` either ran or was revoked by the worker."""
        return keys <= set(self.runs()) | set(self.revoked())


def submitted_keys(world: FidWorld) -> set[str]:
    return {row["key"] for row in world.executions() if row["state"] == "submitted"}


def stop_and_settle(world: FidWorld, records: Records, beat: Process, worker: Process) -> None:
    """Stop beat, wait until the worker has run or revoked every message beat sent, stop it."""
    assert beat.stop() == 0
    wait_for(lambda: assert_alive(worker) and records.accounted(submitted_keys(world)),
             timeout=20, what="the worker to run or revoke every message sent", interval=0.25)
    worker.stop()


def test_a_late_worker_revokes_the_stale_backlog_and_runs_the_fresh(world: FidWorld,
                                                                   report: Any) -> None:
    prefix = world.prefix("late")
    records = Records(world, prefix)
    beat = world.start_beat("goatbeat", prefix, GOATBEAT, scenario="deadline", env=dl_env())

    def first_dl() -> list[dict[str, Any]]:
        assert_alive(beat)
        return [r for r in world.executions()
                if r["schedule_name"] == "dl" and r["state"] == "submitted"]
    first_due = ts(wait_for(first_dl, timeout=STARTUP, what="dl's first occurrence sent")[0]
                   ["due_at"])
    wait_for(lambda: assert_alive(beat) and time.time() >= first_due + LATE,
             timeout=LATE + STARTUP, what="the worker's delay")
    launched_at = time.time()
    worker = world.start_worker("worker", prefix, scenario="deadline", env=dl_env())

    def fresh_dl_runs() -> bool:
        assert_alive(beat, worker)
        return sum(1 for rs in records.runs().values() for r in rs if r["label"] == "dl"
                   and ts(datetime.fromisoformat(r["occurrence"])) >= launched_at + STEP) >= 3
    wait_for(fresh_dl_runs, timeout=STARTUP + 3 * STEP,
             what="three dl occurrences due after the worker started to run")
    stop_and_settle(world, records, beat, worker)

    rows = world.executions()
    runs, revoked = records.runs(), records.revoked()
    first_run_at = min(r["at"] for rs in runs.values() for r in rs)
    dl = [r for r in rows if r["schedule_name"] == "dl" and r["state"] == "submitted"]
    nodl = [r for r in rows if r["schedule_name"] == "nodl" and r["state"] == "submitted"]
    stale = [r for r in dl if ts(r["due_at"]) + DEADLINE < launched_at]
    fresh = [r for r in dl if ts(r["due_at"]) + DEADLINE >= first_run_at + FRESH_MARGIN]
    report(worker_delay=f"{launched_at - first_due:.1f}s",
           worker_first_run=f"{first_run_at - launched_at:.1f}s", dl=len(dl), nodl=len(nodl),
           stale=len(stale), fresh=len(fresh), dl_run=sum(1 for r in dl if r["key"] in runs),
           revoked=len(revoked))

    # Beat had its broker all along: everything claimed was sent, nothing expired in goatbeat
    # (the tail claimed as beat was stopped may be left claimed for the next leader).
    assert {r["state"] for r in rows} <= {"submitted", "claimed"}
    # Each dl execution records its deadline; nodl's none.
    for row in dl:
        assert row["expires_at"] == row["due_at"] + timedelta(seconds=DEADLINE), row
    assert all(row["expires_at"] is None for row in nodl)

    # The stale dl backlog was revoked by the worker as expired, never run ...
    assert len(stale) >= LATE - DEADLINE - 1, f"only {len(stale)} stale dl occurrences"
    ran_stale = [r["key"] for r in stale if r["key"] in runs]
    assert not ran_stale, f"run past their starting deadline: {ran_stale}"
    assert all(revoked[r["key"]]["expired"] for r in stale)
    # ... the fresh part ran; each dl occurrence ran once or was revoked, never both.
    assert fresh, "no dl occurrence was fresh when the worker started"
    assert not [r["key"] for r in fresh if r["key"] not in runs], "fresh dl occurrences not run"
    assert all(len(runs.get(r["key"], [])) + (r["key"] in revoked) == 1 for r in dl)
    for row in dl:
        for run in runs.get(row["key"], []):  # the message carried the deadline as expires
            assert datetime.fromisoformat(run["expires"]) == row["expires_at"], run

    # The schedule without a deadline had every run executed, once, none revoked.
    assert len(nodl) >= LATE
    assert all(len(runs.get(r["key"], [])) == 1 for r in nodl), \
        [r["key"] for r in nodl if len(runs.get(r["key"], [])) != 1]
    assert not {r["key"] for r in nodl} & set(revoked)
    assert all(run["expires"] is None for r in nodl for run in runs[r["key"]])
    assert not set(runs) - {r["key"] for r in rows}, "runs of keys never claimed"


@pytest.fixture
def broker_world(request: pytest.FixtureRequest, tmp_path: Path, fresh_pg_url: str,
                 redis_url: str, private_redis: PrivateRedis) -> Iterator[FidWorld]:
    """Processes whose broker is a private Redis the test stops; records on the shared one."""
    with running(request, FidWorld(workdir=tmp_path, redis_url=redis_url,
                                   database_url=fresh_pg_url,
                                   broker_url=private_redis.url)) as fid:
        yield fid


def test_claims_past_their_deadline_in_a_broker_outage_are_expired_and_never_sent(
        broker_world: FidWorld, private_redis: PrivateRedis, report: Any) -> None:
    world = broker_world
    prefix = world.prefix("outage")
    records = Records(world, prefix)
    env = dl_env(retry_backoff=BACKOFF, retry_backoff_max=BACKOFF)
    worker = world.start_worker("worker", prefix, scenario="deadline", env=env)
    beat = world.start_beat("goatbeat", prefix, GOATBEAT, scenario="deadline", env=env)
    wait_for(lambda: assert_alive(worker, beat) and len(records.runs()) >= 6, timeout=STARTUP,
             what="runs of both schedules")

    def quiet() -> bool:
        # Mid-second, with everything sent so far already run: stopping Redis now drops no
        # message it had accepted (it keeps nothing on disk).
        return 0.3 < time.time() % 1 < 0.7 and records.accounted(submitted_keys(world))
    wait_for(quiet, timeout=10, what="a quiet moment", interval=0.05)
    down_at = time.time()
    private_redis.stop()
    time.sleep(OUTAGE)  # the outage: its duration, not a synchronisation
    restart_at = time.time()
    private_redis.start()
    up_at = time.time()

    waiting: list[tuple[str, str]] = []

    def recovered() -> bool:
        assert_alive(worker, beat)
        seen = set(records.runs()) | set(records.revoked())
        waiting[:] = [(row["key"], row["state"]) for row in world.executions()
                      if ts(row["due_at"]) <= up_at and row["key"] not in seen
                      and not (row["schedule_name"] == "dl" and row["state"] == "expired")]
        return not waiting
    try:
        wait_for(recovered, timeout=30, what="the backlog to be run, revoked or expired",
                 interval=0.25)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; still waiting: {waiting[:10]}") from None
    recovered_at = time.time()

    def dl_ran_after_recovery() -> bool:
        assert_alive(worker, beat)
        return any(r["label"] == "dl" and ts(datetime.fromisoformat(r["occurrence"]))
                   >= recovered_at + STEP for rs in records.runs().values() for r in rs)
    wait_for(dl_ran_after_recovery, timeout=STARTUP,
             what="a dl occurrence due after the recovery to run")
    stop_and_settle(world, records, beat, worker)

    rows = world.executions()
    runs, revoked = records.runs(), records.revoked()
    dl = [r for r in rows if r["schedule_name"] == "dl"]
    nodl = [r for r in rows if r["schedule_name"] == "nodl"]
    # Claimed during the outage, deadline passed before the broker was even restarted.
    lapsed = [r for r in dl if ts(r["due_at"]) >= down_at and ts(r["expires_at"]) <= restart_at]
    expired = [r for r in rows if r["state"] == "expired"]
    late_marks = [(ts(r["submitted_at"]) - ts(r["expires_at"])) for r in dl
                  if r["state"] == "submitted"]
    # The worker reconnects on its own back-off: its first run or revocation after the return.
    worker_back = min(r["at"] for r in [*(x for rs in runs.values() for x in rs),
                                        *revoked.values()] if r["at"] >= up_at)
    report(outage=f"{up_at - down_at:.1f}s", worker_back=f"{worker_back - up_at:.1f}s",
           recovered_in=f"{recovered_at - up_at:.1f}s", dl=len(dl), nodl=len(nodl),
           lapsed=len(lapsed), expired=len(expired), revoked_by_worker=len(revoked),
           latest_submit_vs_deadline=f"{max(late_marks, default=0):+.2f}s")

    # Every claim whose deadline passed during the outage is expired, and was never sent: not
    # run, and not even revoked by the worker (which would mean it reached the broker).
    assert len(lapsed) >= OUTAGE - DEADLINE - 2, f"only {len(lapsed)} lapsed dl claims"
    assert [r["key"] for r in lapsed if r["state"] != "expired"] == []
    assert [r["key"] for r in expired if r["key"] in runs or r["key"] in revoked] == []
    assert all(r["schedule_name"] == "dl" for r in expired), "a schedule without a deadline " \
                                                             "expired"
    # No dl message was sent past its deadline.
    assert max(late_marks) <= MARK_MARGIN, f"sent {max(late_marks):.2f}s past the deadline"
    # dl claims with time left after the return were sent; those the worker (which reconnects
    # on its own back-off) could still take in time ran, once.
    later = [r for r in dl if ts(r["expires_at"]) >= up_at + RESEND_BOUND
             and r["state"] != "claimed"]
    assert later, "no dl occurrence after the outage"
    assert [r["key"] for r in later if r["state"] != "submitted"] == []
    in_time = [r for r in later if ts(r["expires_at"]) >= worker_back + FRESH_MARGIN]
    assert in_time, "no dl occurrence due after the worker was back"
    assert [r["key"] for r in in_time if len(runs.get(r["key"], [])) != 1] == []
    assert all(r["expired"] and r["id"].startswith("dl:") for r in revoked.values())
    # nodl: every claim of the outage resent under its key and run; everything ran once.
    during = [r for r in nodl if down_at + STEP <= ts(r["due_at"]) <= restart_at]
    assert len(during) >= OUTAGE - 2
    assert all(r["state"] == "submitted" and r["attempts"] > 1 for r in during), during
    sent = [r for r in nodl if r["state"] == "submitted"]
    assert [r["key"] for r in sent if len(runs.get(r["key"], [])) != 1] == []
    assert Counter(r["state"] for r in nodl).keys() <= {"submitted", "claimed"}
