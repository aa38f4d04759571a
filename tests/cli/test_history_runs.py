"""history shows what happened to each run, read from PostgreSQL: when it was due, its state and
what the workers did with it (run tracking), its lateness and runtime, the worker, the attempts,
and why it failed or never ran, in 100 columns; ``--wide`` shows every column whole."""

from __future__ import annotations

from datetime import timedelta

import pytest

from goatbeat_celery import display
from goatbeat_celery.core.rules.policies import OverlapPolicy
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.store import Store

from .claims import TTL, claim_and_submit
from .conftest import Cli, instant, table_rows

LONG_ERROR = ("ConnectionError: could not reach the billing service at "
              "https://billing.internal.example.com/v2/invoices after 5 attempts; " * 3).strip()
LONG_WORKER = "celery@worker-billing-7f9c5d8b6d-x2k4q.production.example.com"


def fail_a_run(store: Store, key: str, *, worker: str = "celery@a",
               error: str = "ValueError: boom") -> None:
    store.record_runs([RunEvent.finished(
        key, run="r1", worker=worker, age=timedelta(seconds=1), outcome=RunOutcome.FAILED,
        runtime=timedelta(seconds=2.5), error=error, started_age=timedelta(seconds=3.5))])


def claim_two_skipping_the_second(store: Store, name: str) -> tuple[str, str]:
    """Two past occurrences of ``name`` claimed together under the ``skip`` overlap policy, as a
    leader catching up would: the first is claimed, the second skipped while the first runs."""
    grant = store.acquire("default", "replica-a", TTL)
    assert grant is not None
    schedule = store.get_schedule(name)
    assert schedule.next_occurrence_at is not None
    first, second = (schedule.next_occurrence_at - timedelta(minutes=n) for n in (6, 5))
    claim = PlannedClaim(schedule_name=name, version=schedule.row_version,
                         occurrences=((first, first), (second, second)), missed=0,
                         next_occurrence_at=schedule.next_occurrence_at,
                         next_run_at=schedule.next_run_at, overlap=OverlapPolicy.SKIP)
    result = store.claim([claim], lease=grant)
    (dispatch,) = result.dispatches
    (skipped,) = result.skipped
    return dispatch.key, skipped.key


def history_lines(cli: Cli, *args: str) -> list[str]:
    return cli.ok("history", *args).stdout.splitlines()


def test_history_shows_each_runs_outcome_runtime_and_worker(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    failed = claim_and_submit(store, "poll", steps_back=3)
    running = claim_and_submit(store, "poll", steps_back=2)
    unstarted = claim_and_submit(store, "poll", steps_back=1)
    fail_a_run(store, failed)
    store.record_runs([RunEvent.started(running, run="r2", worker="celery@b", age=timedelta(0))])

    executions = {e["key"]: e for e in cli.json("history", "poll")}
    rows = dict(zip(executions, table_rows(cli.ok("history", "poll").stdout), strict=True))

    assert [(rows[k]["RUN"], rows[k]["RUNTIME"], rows[k]["WORKER"])
            for k in (failed, running, unstarted)] == [
        ("failed", "2.5s", "celery@a"), ("running", "-", "celery@b"), ("-", "-", "-")]
    assert rows[failed]["WHY"] == "ValueError: boom"
    assert rows[running]["WHY"] == rows[unstarted]["WHY"] == "-"
    for key, row in rows.items():
        due = instant(executions[key]["due_at"])
        assert (row["DUE"], row["STATE"], row["TRIES"]) == (display.when(due), "submitted", "1")
        assert row["LATE"].endswith("s")
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


def test_a_long_error_and_worker_are_cut_to_100_columns_keeping_their_useful_part(
    cli: Cli, store: Store
) -> None:
    cli.ok("add", "invoices", "billing.send_invoices", "--every", "60")
    key = claim_and_submit(store, "invoices", steps_back=1)
    fail_a_run(store, key, worker=LONG_WORKER, error=LONG_ERROR)

    lines = history_lines(cli, "invoices")
    (row,) = table_rows("\n".join(lines))

    assert max(len(line) for line in lines) <= display.DEFAULT_WIDTH == 100
    assert row["RUN"] == "failed"
    # The error keeps its start (the exception and its message), the worker both its ends.
    assert row["WHY"].endswith(display.ELLIPSIS) and len(row["WHY"]) >= display.CLIPPED_MIN
    assert LONG_ERROR.startswith(row["WHY"].removesuffix(display.ELLIPSIS))
    assert row["WHY"].startswith("ConnectionError")
    head, _, tail = row["WORKER"].partition(display.ELLIPSIS)
    assert head.startswith("celery@") and LONG_WORKER.startswith(head)
    assert tail and LONG_WORKER.endswith(tail)
    (execution,) = cli.json("history", "invoices")
    assert (execution["run_error"], execution["worker"]) == (LONG_ERROR, LONG_WORKER)


def test_history_wide_shows_every_column_and_value_whole(cli: Cli, store: Store) -> None:
    cli.ok("add", "invoices", "billing.send_invoices", "--every", "60")
    key = claim_and_submit(store, "invoices", steps_back=1, missed=2)
    fail_a_run(store, key, worker=LONG_WORKER, error=LONG_ERROR)

    output = cli.ok("history", "invoices", "--wide").stdout

    (row,) = table_rows(output)
    assert tuple(row) == display.EXECUTION_COLUMNS
    assert (row["KEY"], row["WORKER"], row["MISSED"]) == (key, LONG_WORKER, "2")
    assert row["WHY"] == f"{LONG_ERROR}; 2 missed before it"
    assert display.ELLIPSIS not in output
    assert max(len(line) for line in output.splitlines()) > display.DEFAULT_WIDTH


def test_history_says_why_an_occurrence_was_skipped_or_missed(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60", "--overlap", "skip")
    ran, skipped = claim_two_skipping_the_second(store, "poll")
    caught_up = claim_and_submit(store, "poll", steps_back=1, missed=3)

    lines = history_lines(cli, "poll")
    executions = {e["key"]: e for e in cli.json("history", "poll")}
    rows = dict(zip(executions, table_rows("\n".join(lines)), strict=True))

    assert max(len(line) for line in lines) <= 100
    reason = executions[skipped]["last_error"]
    assert reason == f"run {ran} had not finished"
    assert (rows[skipped]["STATE"], rows[skipped]["TRIES"]) == ("skipped", "0")
    # Cut to the room 100 columns leave, it keeps its start: the run that was in the way.
    assert rows[skipped]["WHY"].startswith("run poll:")
    assert reason.startswith(rows[skipped]["WHY"].removesuffix(display.ELLIPSIS))
    assert "RUNTIME" not in rows[skipped]  # no run reported: nothing to show there
    wide = {row["KEY"]: row for row in table_rows(cli.ok("history", "poll", "--wide").stdout)}
    assert wide[skipped]["WHY"] == reason
    assert (rows[caught_up]["STATE"], rows[caught_up]["WHY"]) == (
        "submitted", "3 missed before it")
    assert (rows[ran]["STATE"], rows[ran]["WHY"]) == ("claimed", "-")


@pytest.mark.parametrize("width", [80, 100, 200])
def test_history_fits_the_terminal_leaving_out_runtime_and_lateness_first(
    cli: Cli, store: Store, monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    cli.ok("add", "invoices", "billing.send_invoices", "--every", "60")
    key = claim_and_submit(store, "invoices", steps_back=1)
    fail_a_run(store, key, worker=LONG_WORKER, error=LONG_ERROR)

    lines = history_lines(cli, "invoices")
    (row,) = table_rows("\n".join(lines))

    assert max(len(line) for line in lines) <= width
    left_out = {column for column in display.HISTORY_COLUMNS if column not in row}
    assert left_out == set(display.HISTORY_DROPPED[:len(left_out)])
    assert {"DUE", "STATE", "RUN", "WORKER", "WHY"} <= set(row)
    # Cut short, each keeps its start (the worker its start and its end): how short depends
    # on the widths of the instants and durations beside them.
    assert row["WHY"].startswith("Conn") and row["WORKER"].startswith("celery")
    if width >= 100:
        assert left_out == set()
    if width == 200:  # a wider terminal shows more of the error
        monkeypatch.setenv("COLUMNS", "100")
        (narrow,) = table_rows(cli.ok("history", "invoices").stdout)
        assert len(row["WHY"]) > len(narrow["WHY"])
