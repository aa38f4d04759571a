"""Run policies with real processes: ``celery beat -S goatbeat_celery.Scheduler``, a ``celery
worker`` with run tracking, PostgreSQL and Redis.

What beat decided is read from the executions and schedule tables; what the tasks saw (when
each started, how long its body took) from the Redis list they append to. Timing bounds are
derived from the settings below.
"""

from __future__ import annotations

import itertools
import json
from datetime import timedelta
from typing import Any

import pytest

from tests.support import tracked_app
from tests.support.tracked_app import FAST_LEASE, HEARTBEAT, LOST_BOUND, MAX_INTERVAL, TRACKING
from tests.support.waiting import wait_for
from tests.system.fidelity import STARTUP, assert_alive
from tests.system.harness import Cluster, Process

pytestmark = [pytest.mark.system, pytest.mark.slow]

SETTINGS = {**FAST_LEASE, **TRACKING}
#: A run's end reaches the table within the writer's flush interval (0.25 s); the leader applies
#: it at its next tick, at most max_interval later, and sends a released run in that tick.
SETTLE_BOUND = 0.25 + MAX_INTERVAL
#: For a busy two-core machine running beat, a worker and PostgreSQL: a tick woken late, a
#: report written late.
MARGIN = 2.0
#: The backoff scenario's grid (seconds): longer than a run plus the writer's flush, so that a
#: failure is known before the next point is claimed.
FLAKY_EVERY = 3


def write_config(cluster: Cluster, schedules: dict[str, Any]) -> None:
    cluster.config_path.write_text(json.dumps({"schedules": schedules, "settings": SETTINGS,
                                               "timezone": "UTC"}))


def start(cluster: Cluster, name: str, args: list[str]) -> Process:
    """A celery process of ``policyproj`` (sysproj with run tracking and a flaky task)."""
    return tracked_app.start(cluster, name, args, app="policyproj")


@pytest.fixture(params=["prefork", "threads"])
def pool(request: pytest.FixtureRequest) -> str:
    """The worker's pool: tracking runs in the pool processes under prefork, on the worker's
    own threads under threads."""
    return str(request.param)


def start_worker(cluster: Cluster, pool: str, name: str = "worker") -> Process:
    """Start a worker and wait until it consumes: a scenario's first bound starts when beat
    sends, and a prefork worker still booting on a busy machine would run late, or run a
    backlog of occurrences at once."""
    node = f"{name}-{cluster.run_id}@"
    worker = start(cluster, name, [
        "worker", "--pool", pool, "--concurrency", "4", "-Q", cluster.queue,
        "-n", f"{node}%h", "--without-heartbeat", "--without-gossip",
        "--without-mingle", "--loglevel", "INFO"])

    def ready() -> bool:
        return assert_alive(worker) and any(
            member.decode().startswith(node)
            for member in cluster.redis.smembers(f"{cluster.record_key}:ready"))
    wait_for(ready, timeout=STARTUP, what=f"worker {name} to consume")
    return worker


def start_beat(cluster: Cluster) -> Process:
    return tracked_app.start_beat(cluster, app="policyproj")


def rows(cluster: Cluster, where: str = "true", **params: Any) -> list[dict[str, Any]]:
    return cluster.sql(
        "SELECT key, state, due_at, claimed_at, submitted_at, attempts, last_error, run_state, "
        f"started_at, finished_at, run_error FROM goatbeat_execution WHERE {where} "
        "ORDER BY due_at, key", **params)


def schedule(cluster: Cluster, name: str) -> dict[str, Any]:
    row = stored(cluster, name)
    assert row is not None, f"no schedule {name!r}"
    return row


def stored(cluster: Cluster, name: str) -> dict[str, Any] | None:
    """The schedule's row, or None before beat's config sync has written it (a beat that
    starts slowly on a busy machine)."""
    found = cluster.sql("SELECT enabled, total_runs, total_skipped, consecutive_failures, "
                        "paused_reason, next_run_at FROM goatbeat_schedule WHERE name = :name",
                        name=name)
    return found[0] if found else None


def assert_never_overlapped(runs: list[dict[str, Any]]) -> None:
    """Each run started after the one before it finished, by the database's instants."""
    ran = sorted((r for r in runs if r["started_at"] is not None), key=lambda r: r["started_at"])
    for before, after in itertools.pairwise(ran):
        assert before["finished_at"] is not None, before
        assert after["started_at"] >= before["finished_at"], (before, after)


def assert_bodies_never_overlapped(cluster: Cluster, label: str) -> int:
    """What the tasks saw: no body started before the previous one ended (wall clock of the one
    host); returns how many ran."""
    seen = sorted((r for r in cluster.records() if r["label"] == label),
                  key=lambda r: r["received_at"])
    for before, after in itertools.pairwise(seen):
        # 10 ms for the gap between the body's end and its record being written.
        assert after["received_at"] >= before["received_at"] + before["body_seconds"] - 0.01, \
            (before, after)
    return len(seen)


# -- overlap ---------------------------------------------------------------------------------
def test_skip_never_overlaps_a_slow_task_and_records_what_it_skipped(cluster: Cluster,
                                                                    pool: str) -> None:
    write_config(cluster, {"slow": {"every": 1, "task": "trackproj.work",
                                    "args": ["slow", 2.5], "goatbeat": {"overlap": "skip"}}})
    start_worker(cluster, pool)
    start_beat(cluster)

    # Three runs of 2.5 s, each followed by up to SETTLE_BOUND before the next is claimed.
    wait_for(lambda: len(rows(cluster, "run_state = 'succeeded'")) >= 3,
             timeout=3 * (2.5 + SETTLE_BOUND + 1) + 2 * MARGIN, what="three finished runs")

    found = rows(cluster)
    assert_never_overlapped(found)
    assert assert_bodies_never_overlapped(cluster, "slow") >= 3
    skipped = [r for r in found if r["state"] == "skipped"]
    assert len(skipped) >= 3, found
    ran = {r["key"] for r in found if r["state"] != "skipped"}
    for row in skipped:
        assert row["run_state"] is None and row["attempts"] == 0, row
        blocking = row["last_error"].removeprefix("run ").removesuffix(" had not finished")
        assert blocking in ran, row
    stored = schedule(cluster, "slow")
    counted = len(rows(cluster, "state = 'skipped'"))
    assert stored["total_skipped"] in (counted, counted - 1)  # one may land between the reads


def test_buffer_one_holds_exactly_one_and_sends_it_when_the_previous_run_ends(
        cluster: Cluster, pool: str) -> None:
    write_config(cluster, {"slow": {"every": 1, "task": "trackproj.work",
                                    "args": ["slow", 2.5], "goatbeat": {"overlap": "buffer_one"}}})
    start_worker(cluster, pool)
    start_beat(cluster)

    most_held = 0

    def three_ran() -> bool:
        nonlocal most_held
        (held,) = cluster.sql("SELECT count(*) AS n FROM goatbeat_execution "
                              "WHERE state = 'held'")
        most_held = max(most_held, held["n"])
        return len(rows(cluster, "run_state = 'succeeded'")) >= 3

    wait_for(three_ran, timeout=3 * (2.5 + SETTLE_BOUND + 1) + 2 * MARGIN,
             what="three finished runs", interval=0.05)

    assert most_held == 1
    found = rows(cluster)
    assert_never_overlapped(found)
    assert_bodies_never_overlapped(cluster, "slow")
    ran = [r for r in found if r["state"] == "submitted" and r["started_at"] is not None]
    for before, after in itertools.pairwise(ran):
        if before["finished_at"] is None:
            continue
        # Held while the run before it ran: sent within the settle bound of that run's end.
        wait = (after["submitted_at"] - before["finished_at"]).total_seconds()
        assert wait <= SETTLE_BOUND + MARGIN, (before, after)


# -- a worker killed mid-run -------------------------------------------------------------------
@pytest.mark.parametrize("goatbeat", [{"overlap": "skip"}, {"mode": "fixed_delay"}],
                         ids=["skip", "fixed_delay"])
def test_a_run_whose_worker_is_killed_is_lost_and_the_schedule_goes_on(
        cluster: Cluster, goatbeat: dict[str, str], pool: str, report: Any) -> None:
    write_config(cluster, {"long": {"every": 2, "task": "trackproj.work",
                                    "args": ["long", 600], "goatbeat": goatbeat}})
    worker = start_worker(cluster, pool)
    start_beat(cluster)
    (first,) = wait_for(lambda: rows(cluster, "run_state = 'running'"),
                        timeout=2 + SETTLE_BOUND + MARGIN + 2 * HEARTBEAT,
                        what="a run running")
    start_worker(cluster, pool, "second")  # the schedule's next run needs a worker
    killed_at = cluster.db_now()
    worker.kill_tree()

    (lost,) = wait_for(lambda: rows(cluster, "key = :key AND run_state = 'lost'",
                                    key=first["key"]),
                       timeout=LOST_BOUND + MARGIN, what="the run marked lost")
    took = (lost["finished_at"] - killed_at).total_seconds()
    assert took <= LOST_BOUND + MARGIN

    def next_run() -> list[dict[str, Any]]:
        return rows(cluster, "due_at > :due AND state IN ('claimed', 'submitted')",
                    due=first["due_at"])

    # The next grid point (2 s) or the delay after the verdict (2 s), claimed at a tick.
    (following, *_) = wait_for(next_run, timeout=2 + SETTLE_BOUND + MARGIN,
                               what="the schedule's next run")
    report(policy=next(iter(goatbeat.values())), pool=pool, lost_after_kill=f"{took:.2f}s")
    if goatbeat.get("mode") == "fixed_delay":
        # Due one delay after the run's end, which the verdict set.
        assert following["due_at"] == lost["finished_at"] + timedelta(seconds=2)
        assert rows(cluster, "state = 'skipped'") == []
    else:
        assert following["due_at"] >= lost["finished_at"] - timedelta(seconds=2)


# -- failures ----------------------------------------------------------------------------------
def test_a_task_failing_n_times_in_a_row_pauses_its_schedule(cluster: Cluster,
                                                            pool: str) -> None:
    write_config(cluster, {"bad": {"every": 1, "task": "trackproj.work",
                                   "args": ["bad", 0, True],
                                   "goatbeat": {"pause_after_failures": 3}}})
    start_worker(cluster, pool)
    beat = start_beat(cluster)

    # Three runs a second apart, then the third's end applied within the settle bound.
    paused = wait_for(lambda: (row := stored(cluster, "bad")) and not row["enabled"] and row,
                      timeout=3 + SETTLE_BOUND + 2 * MARGIN, what="the schedule paused")

    assert paused["paused_reason"] == ("paused after 3 failed runs in a row; last error: "
                                       "ValueError: boom")
    assert paused["consecutive_failures"] == 3
    sent = rows(cluster)
    # A fourth may have been claimed while the third's end was still on its way (a report
    # written late on a busy machine), never more.
    assert 3 <= len(sent) <= 4, sent
    assert all(r["run_state"] in ("failed", None, "running") for r in sent), sent
    assert "schedule 'bad' paused itself: paused after 3 failed runs" in beat.log()


def test_a_failure_backs_off_and_a_success_resets_the_backoff(cluster: Cluster,
                                                             pool: str) -> None:
    # A grid of 3 s: a failure is known once its report is written (up to the writer's flush
    # interval after the run ends), and the next grid point must come after that for the backoff
    # to apply to it. At 1 s, a run ending 0.65 s into its second on a busy machine was not
    # known to have failed when the next point was claimed.
    write_config(cluster, {"flaky": {"every": FLAKY_EVERY, "task": "policyproj.flaky",
                                     "args": ["flaky", 2],
                                     "goatbeat": {"failure_backoff": 2}}})
    start_worker(cluster, pool)
    start_beat(cluster)

    # Fails, 2 s pause; fails, 4 s pause; succeeds; then on the grid again.
    found = wait_for(lambda: (found := rows(cluster, "run_state IS NOT NULL")) and
                     len(found) >= 4 and found,
                     timeout=2 + 4 + 4 * (FLAKY_EVERY + SETTLE_BOUND + 1) + 2 * MARGIN,
                     what="four runs")
    first, second, third, fourth = found[:4]
    assert [r["run_state"] for r in (first, second, third)] == ["failed", "failed", "succeeded"]
    assert second["due_at"] >= first["finished_at"] + timedelta(seconds=2), (first, second)
    assert third["due_at"] >= second["finished_at"] + timedelta(seconds=4), (second, third)
    # The success reset the backoff: the next grid point, one interval after the third.
    assert fourth["due_at"] == third["due_at"] + timedelta(seconds=FLAKY_EVERY), (third, fourth)
    wait_for(lambda: (row := stored(cluster, "flaky")) and row["consecutive_failures"] == 0,
             timeout=SETTLE_BOUND + MARGIN, what="the failures in a row reset")
