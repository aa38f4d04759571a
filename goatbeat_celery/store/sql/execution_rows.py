"""Execution and backfill rows read as model types and written from them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from goatbeat_celery.core.rules.backfill import Backfill, BackfillMode, BackfillState
from goatbeat_celery.core.rules.runs import CAS_COLUMNS, RUN_COLUMNS, RunRecord, RunState
from goatbeat_celery.core.types.claims import Dispatch
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.store.schema import UNREADABLE_INSTANT
from goatbeat_celery.store.sql.rows import _found, _instant

_STATES = {state.value: state for state in ExecutionState}


def _dispatch(execution: Execution, row: Any) -> Dispatch:
    """The dispatch of ``execution`` from a row carrying its schedule's task, args, kwargs and
    options. Values of the wrong shape are passed as they are: the submitter refuses such a
    message alone, and the schedule is set aside."""
    args = row.args
    trigger = row.trigger
    runs = row.total_runs
    rotate = row.rotate
    return Dispatch(execution=execution, task=row.task,
                    args=tuple(args) if type(args) is list else args,
                    kwargs=row.kwargs, options=row.options,
                    trigger=trigger if type(trigger) is dict else None,
                    total_runs=runs if type(runs) is int else 0,
                    # A rotation that cannot be read sends as none: the schedule is set aside
                    # for its damage at its next claim.
                    rotate=tuple(rotate) if type(rotate) is list and all(
                        type(queue) is str for queue in rotate) else (),
                    rotate_handover=bool(row.rotate_handover))


_RUN_STATES = {state.value: state for state in RunState}


def run_values(values: Sequence[Any]) -> tuple[dict[str, Any], RunRecord]:
    """The run columns of a row, converted by their column types and in RUN_COLUMNS order:
    the compare-and-set columns as stored, and the RunRecord they read as (a value that cannot
    be read as stored, edited by hand, reads as none)."""
    (state, run_id, worker, attempts, started_at, finished_at, heartbeat_at, runtime,
     error, traceback) = values
    # Unpacked by position, as _schedule does: reports are read by the hundred.
    read = {"run_state": state, "run_id": run_id, "run_attempts": attempts,
            "heartbeat_at": heartbeat_at}
    return read, RunRecord(
        run_state=None if state is None else _RUN_STATES.get(state),
        run_id=run_id,
        worker=worker,
        run_attempts=attempts if type(attempts) is int else 0,
        started_at=None if started_at is UNREADABLE_INSTANT else started_at,
        finished_at=None if finished_at is UNREADABLE_INSTANT else finished_at,
        heartbeat_at=None if heartbeat_at is UNREADABLE_INSTANT else heartbeat_at,
        runtime=runtime if type(runtime) is timedelta else None,
        run_error=error,
        run_traceback=traceback,
    )


if tuple(name for name in CAS_COLUMNS) != ("run_state", "run_id", "run_attempts",
                                            "heartbeat_at"):  # pragma: no cover - a guard
    raise ImportError("core.rules.runs.CAS_COLUMNS changed: update run_values() to match")


def _run_record(row: Any) -> RunRecord:
    """The run columns of a whole execution row."""
    return run_values([getattr(row, name) for name in RUN_COLUMNS])[1]


def _cas_values(row: Any) -> dict[str, Any]:
    """The compare-and-set columns of a whole execution row, as stored."""
    return run_values([getattr(row, name) for name in RUN_COLUMNS])[0]


def _dispatched_at(execution: Execution) -> datetime | None:
    """When the broker took the run, for the start timeout (None until it did)."""
    return execution.submitted_at if execution.state is ExecutionState.SUBMITTED else None


def _execution(row: Any) -> Execution:
    state = _STATES.get(row.state)
    last_error = row.last_error
    if state is None:
        last_error = f"unknown state {_found(row.state)} in the database"
        state = ExecutionState.ABANDONED
    return Execution(
        **_run_record(row).values(),
        key=row.key,
        schedule_name=row.schedule_name,
        occurrence_at=row.occurrence_at,
        due_at=row.due_at,
        token=row.token,
        state=state,
        claimed_at=row.claimed_at,
        submitted_at=_instant(row.submitted_at),
        attempts=row.attempts,
        last_error=last_error,
        missed=row.missed,
        manual=bool(row.manual),
        expires_at=_instant(row.expires_at),
        settled=None if row.settled is None else bool(row.settled),
        cluster=row.cluster if type(row.cluster) is str else None,
    )


_BACKFILL_STATES = {state.value: state for state in BackfillState}


def _backfill(row: Any) -> Backfill:
    """A backfill row as stored; a column that cannot be read (edited by hand) is named in
    ``damage``, with a harmless stand-in in its place."""
    damage: list[Problem] = []

    def instant(name: str, value: Any, *, required: bool) -> datetime | None:
        if value is None and not required:
            return None
        if not isinstance(value, datetime) or value is UNREADABLE_INSTANT:
            damage.append(Problem(name, _found(value)))
            return UNREADABLE_INSTANT
        return value

    def count(name: str, value: Any, *, required: bool = True) -> int | None:
        if value is None and not required:
            return None
        if type(value) is not int:
            damage.append(Problem(name, _found(value)))
            return 0
        return value

    mode = BackfillMode.stored(row.mode, "mode", damage)
    state = _BACKFILL_STATES.get(row.state)
    if state is None:
        damage.append(Problem("state", _found(row.state)))
    newest_first = row.newest_first
    if newest_first not in (True, False, 0, 1):
        damage.append(Problem("newest_first", _found(newest_first)))
        newest_first = False
    start = instant("start_at", row.start_at, required=True)
    end = instant("end_at", row.end_at, required=True)
    assert start is not None and end is not None
    return Backfill(
        id=row.id, schedule_name=str(row.schedule_name), start=start, end=end,
        mode=mode or BackfillMode.MISSING, newest_first=bool(newest_first),
        per_tick=count("per_tick", row.per_tick, required=False),
        total=count("total", row.total) or 0, examined=count("examined", row.examined) or 0,
        claimed=count("claimed", row.claimed) or 0,
        cursor=instant("cursor_at", row.cursor_at, required=False),
        state=state or BackfillState.FAILED,
        created_at=instant("created_at", row.created_at, required=False),
        finished_at=instant("finished_at", row.finished_at, required=False),
        error=None if row.error is None else str(row.error), damage=tuple(damage))


#: The execution columns a claim or a manual run writes, each holding the
#: :class:`~goatbeat_celery.core.types.execution.Execution` field of its name (the run columns
#: are the workers').
EXECUTION_COLUMNS = ("key", "schedule_name", "occurrence_at", "due_at", "token", "state",
                     "claimed_at", "submitted_at", "attempts", "last_error", "missed", "manual",
                     "expires_at", "settled")


def execution_values(execution: Execution) -> dict[str, Any]:
    """The row :data:`EXECUTION_COLUMNS` of ``execution``, as written."""
    values = {name: getattr(execution, name) for name in EXECUTION_COLUMNS}
    values["state"] = execution.state.value
    return values


def execution_columns(executions: Sequence[Execution]) -> dict[str, list[Any]]:
    """The values of ``executions`` column by column (:data:`EXECUTION_COLUMNS`), as
    :func:`execution_values` writes them row by row."""
    columns = {name: [getattr(e, name) for e in executions] for name in EXECUTION_COLUMNS}
    columns["state"] = [state.value for state in columns["state"]]
    return columns
