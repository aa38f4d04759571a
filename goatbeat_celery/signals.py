"""Signals sent by the goatbeat scheduler, in the manner of :mod:`celery.signals`.

Connect a receiver the usual way::

    from goatbeat_celery import signals

    @signals.occurrence_submitted.connect
    def on_submitted(sender, record, **kwargs):
        statsd.timing("beat.lateness", record.lateness.total_seconds())

Every receiver is called with ``signal`` and ``sender`` (the :class:`goatbeat_celery.Scheduler`
instance) plus the arguments listed below, always by keyword; accept ``**kwargs`` so that
arguments added later do not break it. Receivers run inline in the scheduling loop, while the
replica holds the lease: keep them short. An exception raised by a receiver is logged and
ignored; it never stops the loop.

``lease_acquired``
    This replica became the leader. ``lease`` (str, the lease name), ``holder`` (str, this
    replica's identity), ``token`` (int, the new fencing token), ``expires_at`` (aware datetime,
    by the database clock).

``lease_lost``
    This replica stopped leading. ``lease``, ``holder``, ``reason`` (str: ``"released"`` on
    shutdown, or why it was lost: taken by another replica, fencing token refused, store
    unreachable past the local deadline).

``occurrence_claimed``
    One occurrence was claimed and is about to be submitted; sent once per occurrence, never
    for a resubmission. ``key`` (str, the idempotency key and Celery task id), ``schedule_name``
    (str), ``task`` (str), ``occurrence_at`` (the grid point), ``due_at`` (after the offset),
    ``claimed_at`` (database clock), ``token`` (int), ``missed`` (int, points skipped by the
    misfire policy and recorded on this occurrence).

``occurrence_missed``
    Grid points of a schedule will never run (misfire policy). ``schedule_name`` (str),
    ``count`` (int).

``occurrence_submitted``
    The broker accepted one submission attempt. ``key``, ``schedule_name``, ``record``
    (:class:`~goatbeat_celery.core.loop.observer.OccurrenceRecord`: due, claimed and submitted
    instants, ``lateness``, ``missed``, ``token``, ``attempt``).

``occurrence_submit_failed``
    The broker refused one submission attempt; the occurrence stays claimed and is retried under
    the same key. ``key``, ``schedule_name``, ``error`` (str), ``record`` (as above, with
    ``submitted_at`` and ``lateness`` None).

``schedule_set_aside``
    A schedule cannot run as stored (a row edited by hand, a message that cannot be built, a
    claim the database refuses) and was set aside; the others go on. ``schedule_name`` (str),
    ``reason`` (str, as recorded on the row and shown by ``celery goatbeat show``).

``occurrence_skipped``
    An occurrence was recorded as skipped by its schedule's overlap policy (``skip``, or a
    second one behind ``buffer_one``'s): the run before it had not finished; or its due date
    is excluded by one of the schedule's calendars (``excluded by calendar <name>``). It is
    never sent.
    ``key``, ``schedule_name``, ``occurrence_at``, ``reason`` (str, as recorded on the row).

``run_ended``
    A run ended, as a worker tracking runs reported it (:func:`goatbeat_celery.track_runs`), or
    was marked lost (or of unknown outcome, where the workers do not track runs) by the leader;
    sent once per run, by the leader that settles it, within a tick of the report reaching the
    database. ``key``, ``schedule_name``, ``outcome`` (str: ``succeeded``, ``failed``,
    ``revoked``, ``rejected``, ``lost`` or ``unknown``), ``record``
    (:class:`~goatbeat_celery.core.loop.observer.OccurrenceRecord` with ``outcome``, ``runtime``,
    ``worker`` and ``run_error`` set).

``run_duplicate_suppressed``
    Sent in a worker tracking runs (:func:`goatbeat_celery.track_runs`): a delivery of a run
    sent again (or delivered again by the broker) was acknowledged and not run, because the
    run had ended or was running elsewhere with a live heartbeat. ``key``, ``schedule_name``,
    ``reason`` (str), ``worker`` (str: the node name).

``run_resent``
    A run the broker took and no worker started within its start timeout (with run tracking)
    was put back to be sent again under its key, by the leader, up to ``goatbeat_run_resends``
    times. ``key``, ``schedule_name``, ``reason`` (str: how long it waited, which send it was),
    ``attempt`` (int: the send it replaces; the resend is the next).

``alert_opened``, ``alert_repeated``, ``alert_resolved``
    An alert (docs/alerts.md) was raised on a schedule, counted again for a new run that shows
    it (or told again when its silence ended: ``alert_repeated`` too), or resolved; each sent
    once, by the leader that wrote it in its fenced transaction. ``alert_repeated`` is not
    sent for a count while the alert is silenced or once it is acknowledged;
    ``alert_resolved`` is sent whatever its silence.
    ``alert`` (:class:`~goatbeat_celery.core.rules.alerts.Alert`: ``id``, ``rule``, ``state``,
    ``reason``, ``first_at``, ``last_at``, ``count``, ``key``, ``resolved_at``; ``as_json()``
    gives it as plain data), ``schedule_name`` (str), ``rule`` (str: ``missed``, ``late``,
    ``failed``, ``lost``, ``overrun`` or ``silent``), ``reason`` (str).

``schedule_paused``
    A schedule paused itself after ``pause_after_failures`` failed runs in a row;
    ``celery goatbeat resume`` starts it again. ``schedule_name`` (str), ``reason`` (str, as
    recorded on the row and shown by ``celery goatbeat show``).
"""

from __future__ import annotations

from celery.utils.dispatch import Signal

__all__ = [
    "alert_opened",
    "alert_repeated",
    "alert_resolved",
    "lease_acquired",
    "lease_lost",
    "occurrence_claimed",
    "occurrence_missed",
    "occurrence_skipped",
    "occurrence_submit_failed",
    "occurrence_submitted",
    "run_duplicate_suppressed",
    "run_ended",
    "run_resent",
    "schedule_paused",
    "schedule_set_aside",
]

lease_acquired = Signal(
    name="goatbeat_lease_acquired",
    providing_args={"lease", "holder", "token", "expires_at"},
)
lease_lost = Signal(
    name="goatbeat_lease_lost",
    providing_args={"lease", "holder", "reason"},
)
occurrence_claimed = Signal(
    name="goatbeat_occurrence_claimed",
    providing_args={"key", "schedule_name", "task", "occurrence_at", "due_at", "claimed_at",
                    "token", "missed"},
)
occurrence_missed = Signal(
    name="goatbeat_occurrence_missed",
    providing_args={"schedule_name", "count"},
)
occurrence_submitted = Signal(
    name="goatbeat_occurrence_submitted",
    providing_args={"key", "schedule_name", "record"},
)
occurrence_submit_failed = Signal(
    name="goatbeat_occurrence_submit_failed",
    providing_args={"key", "schedule_name", "error", "record"},
)
occurrence_skipped = Signal(
    name="goatbeat_occurrence_skipped",
    providing_args={"key", "schedule_name", "occurrence_at", "reason"},
)
schedule_paused = Signal(
    name="goatbeat_schedule_paused",
    providing_args={"schedule_name", "reason"},
)
run_ended = Signal(
    name="goatbeat_run_ended",
    providing_args={"key", "schedule_name", "outcome", "record"},
)
run_duplicate_suppressed = Signal(
    name="goatbeat_run_duplicate_suppressed",
    providing_args={"key", "schedule_name", "reason", "worker"},
)
run_resent = Signal(
    name="goatbeat_run_resent",
    providing_args={"key", "schedule_name", "reason", "attempt"},
)
schedule_set_aside = Signal(
    name="goatbeat_schedule_set_aside",
    providing_args={"schedule_name", "reason"},
)
alert_opened = Signal(
    name="goatbeat_alert_opened",
    providing_args={"alert", "schedule_name", "rule", "reason"},
)
alert_repeated = Signal(
    name="goatbeat_alert_repeated",
    providing_args={"alert", "schedule_name", "rule", "reason"},
)
alert_resolved = Signal(
    name="goatbeat_alert_resolved",
    providing_args={"alert", "schedule_name", "rule", "reason"},
)
