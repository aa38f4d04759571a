"""Celery submission: each claimed occurrence sent with its idempotency key as the task id."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from goatbeat_celery.core.model import Dispatch

logger = logging.getLogger(__name__)

#: Message headers that tell a worker which occurrence a task run belongs to.
HEADER_SCHEDULE = "goatbeat_schedule"
HEADER_OCCURRENCE = "goatbeat_occurrence"
HEADER_TOKEN = "goatbeat_token"
HEADER_MANUAL = "goatbeat_manual"


class CelerySubmitter:
    """Sends dispatches through the app's producer pool and routing.

    One producer (one broker connection) is used for a whole batch. Every broker call is bounded
    by the caller's ``timeout`` so a hung broker cannot outlive the lease's local deadline.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    def submit(self, dispatches: Sequence[Dispatch], *, token: int,
               timeout: float) -> tuple[list[str], dict[str, str]]:
        deadline = time.monotonic() + timeout
        accepted: list[str] = []
        reason = "timed out before the lease's local deadline"
        try:
            with self.app.producer_or_acquire() as producer:
                producer.connection.ensure_connection(
                    max_retries=1, timeout=max(0.1, min(timeout, 2.0)),
                )
                for dispatch in dispatches:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._send(producer, dispatch, token)
                    accepted.append(dispatch.key)
        except Exception as exc:  # any broker or serialisation failure; never crash beat
            reason = f"{type(exc).__name__}: {exc}"
            logger.debug("submission stopped after %d of %d: %s", len(accepted),
                         len(dispatches), reason)
        failures = {d.key: reason for d in dispatches[len(accepted):]}
        return accepted, failures

    def _send(self, producer: Any, dispatch: Dispatch, token: int) -> None:
        execution = dispatch.execution
        options = dict(dispatch.options)
        headers = dict(options.pop("headers", None) or {})
        headers.update({
            HEADER_SCHEDULE: execution.schedule_name,
            HEADER_OCCURRENCE: execution.occurrence_at.isoformat(),
            HEADER_TOKEN: token,
        })
        if execution.manual:
            headers[HEADER_MANUAL] = True
        self.app.send_task(
            dispatch.task,
            args=list(dispatch.args),
            kwargs=dict(dispatch.kwargs),
            task_id=dispatch.key,
            producer=producer,
            headers=headers,
            # One quick retry rides out a dropped connection; the socket timeouts set on the
            # beat process bound each attempt, so a dead broker fails fast and the claim waits.
            retry=True,
            retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.2,
                          "interval_max": 0.2},
            **options,
        )
