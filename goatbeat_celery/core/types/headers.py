"""The message headers goatbeat puts on every run it sends (read back by
:func:`goatbeat_celery.occurrence_of` on the worker), public as :mod:`goatbeat_celery.headers`.
A schedule's options may set none of them (:mod:`goatbeat_celery.core.rules.headers`)."""

from __future__ import annotations

#: The schedule's name.
SCHEDULE = "goatbeat_schedule"
#: The occurrence instant, ISO-8601 in UTC (the grid point, before any offset).
OCCURRENCE = "goatbeat_occurrence"
#: The fencing token of the leader that sent it.
TOKEN = "goatbeat_token"
#: Which send of the run this message is (1 the first; a resubmission or a resend of a run
#: never started counts on): a worker tracking runs checks a later send for a duplicate.
SEND = "goatbeat_send"
#: Present (true) on an extra run asked for by hand.
MANUAL = "goatbeat_manual"
#: Every header above: what goatbeat adds to a message Celery's beat would send.
OWN = frozenset({SCHEDULE, OCCURRENCE, TOKEN, SEND, MANUAL})
#: The header Celery's own beat puts on every message it sends.
CELERY_BEAT = "celery_beat_task"
