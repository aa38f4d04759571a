"""An OpenTelemetry span per claimed occurrence, from its claim to its send, when the
``opentelemetry-api`` package is installed (the ``opentelemetry`` extra); without it, nothing.

The span is current while ``apply_entry`` runs, so the publish span of
opentelemetry-instrumentation-celery (and the worker's span after it) belong to its trace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

from goatbeat_celery.core.types.execution import Execution

try:
    from opentelemetry import trace as _trace
except ImportError:  # the extra is not installed
    _trace = None  # type: ignore[assignment]

SPAN_NAME = "goatbeat.occurrence"
#: Span attributes: the idempotency key (also the task id), the schedule, the occurrence
#: instant (UTC ISO-8601), the fencing token and whether a person asked for the run.
ATTR_KEY = "goatbeat.key"
ATTR_SCHEDULE = "goatbeat.schedule"
ATTR_OCCURRENCE = "goatbeat.occurrence_at"
ATTR_TOKEN = "goatbeat.token"
ATTR_MANUAL = "goatbeat.manual"

_NO_SPAN: AbstractContextManager[Any] = contextlib.nullcontext()


def available() -> bool:
    """Whether spans are opened (the OpenTelemetry API is importable)."""
    return _trace is not None


def recorded() -> bool:
    """Whether a span opened now would be recorded: the API is importable and an SDK is
    configured (a submitter asks once a batch)."""
    return _trace is not None and not isinstance(_trace.get_tracer_provider(), _UNSET_PROVIDERS)


def occurrence_span(execution: Execution, task: str,
                    recording: bool | None = None) -> AbstractContextManager[Any]:
    """The span of one occurrence, started at its claim, current until the block ends;
    ``recording`` is :func:`recorded` if the caller asked it already."""
    if not (recorded() if recording is None else recording):
        # No SDK configured: nothing would record the span, so none is opened.
        return _NO_SPAN
    return _span(execution, task)


_UNSET_PROVIDERS: tuple[type, ...] = () if _trace is None else (
    _trace.ProxyTracerProvider, _trace.NoOpTracerProvider)


@contextlib.contextmanager
def _span(execution: Execution, task: str) -> Iterator[Any]:
    assert _trace is not None
    tracer = _trace.get_tracer("goatbeat_celery")  # the provider's cached tracer
    claimed = execution.claimed_at
    with tracer.start_as_current_span(
        SPAN_NAME,
        kind=_trace.SpanKind.INTERNAL,
        # The claim was written by the database's clock; a span that starts there shows how
        # long the occurrence waited for its send.
        start_time=int(claimed.timestamp() * 1_000_000_000),
        attributes={
            ATTR_KEY: execution.key,
            ATTR_SCHEDULE: execution.schedule_name,
            ATTR_OCCURRENCE: execution.occurrence_at.isoformat(),
            ATTR_TOKEN: execution.token,
            ATTR_MANUAL: execution.manual,
            "celery.task_name": task,
        },
        # A message refused by the broker or a hook is reported by the submitter; the span
        # records it too, without logging it twice.
        record_exception=True,
        set_status_on_exception=True,
    ) as span:
        yield span
