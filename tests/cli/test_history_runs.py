"""history shows what the workers did with each run (run tracking), read from PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from goatbeat_celery.core.runs import RunEvent, RunOutcome
from goatbeat_celery.store import Store

from .conftest import Cli, instant, table_rows
from .test_leader import _claim_and_submit


def test_history_shows_each_runs_outcome_runtime_and_worker(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    failed = _claim_and_submit(store, "poll", steps_back=3)
    running = _claim_and_submit(store, "poll", steps_back=2)
    unstarted = _claim_and_submit(store, "poll", steps_back=1)
    store.record_runs([
        RunEvent.finished(failed, run="r1", worker="celery@a", age=timedelta(seconds=1),
                          outcome=RunOutcome.FAILED, runtime=timedelta(seconds=2.5),
                          error="ValueError: boom", started_age=timedelta(seconds=3.5)),
        RunEvent.started(running, run="r2", worker="celery@b", age=timedelta(0)),
    ])

    rows = {row["KEY"]: row for row in table_rows(cli.ok("history", "poll").stdout)}
    executions = {e["key"]: e for e in cli.json("history", "poll")}

    assert [(rows[k]["RUN"], rows[k]["RUNTIME"]) for k in (failed, running, unstarted)] == [
        ("failed", "2.5s"), ("running", "-"), ("-", "-")]
    ended = executions[failed]
    assert (ended["run_state"], ended["worker"], ended["run_attempts"], ended["runtime_seconds"],
            ended["run_error"]) == ("failed", "celery@a", 1, 2.5, "ValueError: boom")
    started_at, finished_at = instant(ended["started_at"]), instant(ended["finished_at"])
    assert started_at is not None and finished_at is not None
    assert finished_at - started_at == timedelta(seconds=2.5)
    assert executions[running]["heartbeat_at"] is not None
    assert {key: executions[unstarted][key] for key in (
        "run_state", "worker", "run_attempts", "started_at", "finished_at", "heartbeat_at",
        "runtime_seconds", "run_error")} == {
        "run_state": None, "worker": None, "run_attempts": 0, "started_at": None,
        "finished_at": None, "heartbeat_at": None, "runtime_seconds": None, "run_error": None}
