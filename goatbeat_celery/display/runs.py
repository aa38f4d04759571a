"""Runs for ``history``, ``run-now`` and their ``--json``: where each stands, how late it was sent,
and why it failed or never ran."""

from __future__ import annotations

from typing import Any

from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.display.scalars import NONE, human_seconds, iso, seconds, when


def lateness(execution: Execution) -> float | None:
    """Seconds from due to accepted by the broker (``None`` until submitted)."""
    if execution.submitted_at is None:
        return None
    return (execution.submitted_at - execution.due_at).total_seconds()


def run_status(execution: Execution) -> str:
    """One word for where a run stands, the truthful one: what a worker reported (or the
    leader's verdict) once there is any, beat's dispatch state before that. A run that was
    ``submitted`` and then failed is ``failed``, never both."""
    if execution.run_state is not None:
        return str(execution.run_state.value)
    return str(execution.state.value)


#: Every word :func:`run_status` can give, in the order a filter lists them.
RUN_STATUSES = ("succeeded", "failed", "running", "retrying", "submitted", "claimed", "held",
                "lost", "unknown", "revoked", "rejected", "skipped", "expired", "abandoned")


def execution_json(execution: Execution) -> dict[str, Any]:
    """A run for scripts: ``history --json``, ``run-now --json`` and the HTTP API's runs (and
    its answer to a run-now) give this document; a contract.

    Every key is always present, null where there is no value yet: ``key``, ``schedule``,
    ``state`` (beat's dispatch state), ``manual``, ``occurrence_at``, ``due_at``,
    ``claimed_at``, ``submitted_at``, ``lateness_seconds`` (:func:`lateness`), ``attempts``,
    ``missed``, ``token``, ``last_error``, ``expires_at``, ``cluster`` (the queue a rotated
    schedule's run was sent to); then what the workers reported
    (run tracking): ``run_state``, ``worker``, ``run_attempts``, ``started_at``,
    ``finished_at``, ``heartbeat_at``, ``runtime_seconds``, ``run_error``. Instants are
    ISO-8601 in UTC, durations seconds."""
    return {
        "key": execution.key,
        "schedule": execution.schedule_name,
        "state": execution.state.value,
        "manual": execution.manual,
        "occurrence_at": iso(execution.occurrence_at),
        "due_at": iso(execution.due_at),
        "claimed_at": iso(execution.claimed_at),
        "submitted_at": iso(execution.submitted_at),
        "lateness_seconds": lateness(execution),
        "attempts": execution.attempts,
        "missed": execution.missed,
        "token": execution.token,
        "last_error": execution.last_error,
        "expires_at": iso(execution.expires_at),
        "cluster": execution.cluster,
        # What the workers reported (run tracking); null where nothing was.
        "run_state": None if execution.run_state is None else execution.run_state.value,
        "worker": execution.worker,
        "run_attempts": execution.run_attempts,
        "started_at": iso(execution.started_at),
        "finished_at": iso(execution.finished_at),
        "heartbeat_at": iso(execution.heartbeat_at),
        "runtime_seconds": seconds(execution.runtime),
        "run_error": execution.run_error,
    }


def execution_reason(execution: Execution) -> str:
    """Why a run failed or never ran, on one line: the worker's error, then the broker's error
    or the reason it was skipped, then the missed occurrences folded into it (``-``: none)."""
    parts = [text for text in (execution.run_error, execution.last_error) if text]
    if execution.missed:
        parts.append(f"{execution.missed} missed before it")
    return "; ".join(parts) or NONE


def _seconds_text(value: float | None) -> str:
    return NONE if value is None else human_seconds(value)


#: ``history --wide``: every column, nothing cut.
EXECUTION_COLUMNS = ("KEY", "STATE", "OCCURRENCE", "DUE", "CLAIMED", "SUBMITTED", "LATENESS",
                     "ATTEMPTS", "MISSED", "RUN", "WORKER", "RUNTIME", "WHY")


def execution_row(execution: Execution) -> tuple[str, ...]:
    return (execution.key, execution.state.value, when(execution.occurrence_at),
            when(execution.due_at), when(execution.claimed_at), when(execution.submitted_at),
            _seconds_text(lateness(execution)), str(execution.attempts), str(execution.missed),
            NONE if execution.run_state is None else execution.run_state.value,
            execution.worker or NONE, _seconds_text(seconds(execution.runtime)),
            execution_reason(execution))


#: ``history``: one run a line, made to fit 100 columns (``LATE`` is the lateness, ``TRIES``
#: the submission attempts); the key and the other instants are in ``--wide`` and ``--json``.
HISTORY_COLUMNS = ("DUE", "STATE", "RUN", "LATE", "RUNTIME", "TRIES", "WORKER", "WHY")
#: A worker keeps its start and its end (``celery@``, the host's unique part); a reason its
#: start (the exception and its message, the run that was in the way).
HISTORY_CLIPPED = {"WORKER": "middle", "WHY": "end"}
HISTORY_DROPPED = ("RUNTIME", "LATE", "TRIES")
#: What the worker and the reason keep before a column of ``history`` is left out.
HISTORY_ROOMY = 12


def history_row(execution: Execution) -> tuple[str, ...]:
    """The :data:`HISTORY_COLUMNS` of one execution, taken from its :func:`execution_row`."""
    row = dict(zip(EXECUTION_COLUMNS, execution_row(execution), strict=True))
    return tuple(row[_HISTORY_SOURCES.get(column, column)] for column in HISTORY_COLUMNS)


_HISTORY_SOURCES = {"LATE": "LATENESS", "TRIES": "ATTEMPTS"}
