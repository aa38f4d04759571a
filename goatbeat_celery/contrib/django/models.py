"""goatbeat's tables as unmanaged models, for the admin's lists, filters and search.

Read only: every change goes through :class:`~goatbeat_celery.api.Schedules`, which validates
it, keeps the schedule's next run and version right and wakes the leader. Django never creates,
alters or writes these tables (``managed = False``); goatbeat's migrations own them
(``celery -A proj goatbeat migrate``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import models

from goatbeat_celery.core.rules.alerts import AlertRule, AlertState
from goatbeat_celery.core.rules.runs import RunState
from goatbeat_celery.core.types.execution import ExecutionState
from goatbeat_celery.core.types.spec import stable_jitter
from goatbeat_celery.store.schema import ALERT_TABLE, EXECUTION_TABLE, SCHEDULE_TABLE


class ReadOnlyModel(models.Model):
    """A row of goatbeat's: saving or deleting it through Django is refused."""

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"{type(self).__name__} rows are written through "
                        "goatbeat_celery.Schedules, never by Django")

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise TypeError(f"{type(self).__name__} rows are deleted through "
                        "goatbeat_celery.Schedules, never by Django")


class StoredJSON(models.JSONField):
    """A JSON column of goatbeat's: on PostgreSQL it is ``json`` (which keeps key order), whose
    values the driver already decodes, where Django's JSONField expects text."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None or isinstance(value, (str, bytes, bytearray)):
            return super().from_db_value(value, expression, connection)
        return value


class Schedule(ReadOnlyModel):
    """A row of ``goatbeat_schedule``."""

    SOURCES = (("config", "config"), ("api", "database"))

    name = models.TextField(primary_key=True)
    task = models.TextField()
    args = StoredJSON()
    kwargs = StoredJSON()
    options = StoredJSON()
    trigger = StoredJSON()
    timezone = models.TextField(null=True)
    misfire_policy = models.CharField(max_length=16, null=True)
    misfire_grace_seconds = models.FloatField(null=True)
    max_catchup = models.IntegerField(null=True)
    offset_seconds = models.FloatField(null=True)
    jitter_seconds = models.FloatField(null=True)
    enabled = models.BooleanField()
    source = models.CharField(max_length=16, choices=SOURCES)
    spec_hash = models.CharField(max_length=64)
    next_occurrence_at = models.DateTimeField(null=True)
    next_run_at = models.DateTimeField("next run", null=True)
    last_occurrence_at = models.DateTimeField("last run", null=True)
    total_runs = models.BigIntegerField()
    total_missed = models.BigIntegerField()
    version = models.BigIntegerField()
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    fault = models.TextField(null=True)
    fault_at = models.DateTimeField(null=True)
    faults = models.IntegerField()
    starting_deadline_seconds = models.FloatField(null=True)
    overlap = models.CharField(max_length=16, null=True)
    mode = models.CharField(max_length=16, null=True)
    failure_backoff_seconds = models.FloatField(null=True)
    failure_backoff_factor = models.FloatField(null=True)
    failure_backoff_max_seconds = models.FloatField(null=True)
    pause_after_failures = models.IntegerField(null=True)
    consecutive_failures = models.IntegerField("failures in a row")
    paused_reason = models.TextField("pause reason", null=True)
    total_skipped = models.BigIntegerField()
    start_at = models.DateTimeField(null=True)
    end_at = models.DateTimeField(null=True)
    max_runs = models.IntegerField(null=True)
    paused_until = models.DateTimeField("paused until", null=True)
    description = models.TextField(null=True)
    tags = StoredJSON(null=True)
    calendars = StoredJSON(null=True)
    #: The definition's version: what the change form is checked against (runs never move it).
    spec_version = models.BigIntegerField("version", default=1)
    run_resends = models.IntegerField(null=True)
    alert_late_seconds = models.FloatField(null=True)
    alert_failures = models.IntegerField(null=True)
    max_runtime_seconds = models.FloatField(null=True)
    alert_silent_seconds = models.FloatField(null=True)
    alert_missed = models.IntegerField(null=True)
    alert_lost = models.IntegerField(null=True)
    rotate = StoredJSON(null=True)
    rotate_handover = models.BooleanField("rotation handover", null=True)

    class Meta:
        managed = False
        db_table = SCHEDULE_TABLE
        ordering = ["name"]

    def __str__(self) -> str:
        return str(self.name)

    @property
    def is_config(self) -> bool:
        return bool(self.source == "config")

    def shift(self) -> timedelta:
        """How long after each occurrence its run is due: the offset, or the stable jitter
        of the name (ScheduleSpec.effective_offset, from the stored columns)."""
        if self.offset_seconds is not None:
            return timedelta(seconds=self.offset_seconds)
        if self.jitter_seconds is not None:
            return stable_jitter(str(self.name), timedelta(seconds=self.jitter_seconds))
        return timedelta(0)


class Execution(ReadOnlyModel):
    """A row of ``goatbeat_execution``: one claimed occurrence."""

    #: Every state a claimed occurrence takes, the overlap policy's held and skipped too.
    STATES = tuple((state.value, state.value) for state in ExecutionState)
    #: What workers did with the run (run tracking); NULL: not started, or not tracked.
    RUN_STATES = tuple((state.value, state.value) for state in RunState)

    key = models.TextField(primary_key=True)
    schedule_name = models.TextField("schedule")
    #: The point of the schedule, which the key (the task id) names; the run is due, and sent,
    #: at ``due_at``, after the schedule's offset or jitter.
    occurrence_at = models.DateTimeField("occurrence")
    due_at = models.DateTimeField("due")
    token = models.BigIntegerField()
    state = models.CharField(max_length=16, choices=STATES)
    claimed_at = models.DateTimeField("claimed")
    submitted_at = models.DateTimeField("submitted", null=True)
    attempts = models.IntegerField()
    last_error = models.TextField(null=True)
    missed = models.IntegerField()
    manual = models.BooleanField("run now")
    expires_at = models.DateTimeField(null=True)
    run_state = models.CharField("run", max_length=16, choices=RUN_STATES, null=True)
    run_id = models.TextField(null=True)
    worker = models.TextField(null=True)
    run_attempts = models.IntegerField("run attempts")
    started_at = models.DateTimeField("started", null=True)
    finished_at = models.DateTimeField("finished", null=True)
    heartbeat_at = models.DateTimeField("last heartbeat", null=True)
    runtime = models.FloatField("runtime (s)", null=True)
    run_error = models.TextField("run error", null=True)
    run_traceback = models.TextField("run traceback", null=True)
    cluster = models.TextField("sent to queue", null=True)

    class Meta:
        managed = False
        db_table = EXECUTION_TABLE
        ordering = ["-occurrence_at", "key"]

    def __str__(self) -> str:
        return str(self.key)


class Alert(ReadOnlyModel):
    """A row of ``goatbeat_alert``: a rule that held for a schedule (core.rules.alerts),
    written by the leader only."""

    RULES = tuple((rule.value, rule.value) for rule in AlertRule)
    STATES = tuple((state.value, state.value) for state in AlertState)

    id = models.BigAutoField(primary_key=True)
    schedule_name = models.TextField("schedule")
    rule = models.CharField(max_length=16, choices=RULES)
    state = models.CharField(max_length=16, choices=STATES)
    reason = models.TextField()
    key = models.TextField("last run", null=True)
    first_at = models.DateTimeField("first")
    last_at = models.DateTimeField("last")
    resolved_at = models.DateTimeField("resolved", null=True)
    count = models.IntegerField()
    acknowledged_at = models.DateTimeField("acknowledged", null=True)
    acknowledged_by = models.TextField("acknowledged by", null=True)
    ack_note = models.TextField("acknowledgement note", null=True)
    silenced_until = models.DateTimeField("silenced until", null=True)
    silenced_by = models.TextField("silenced by", null=True)

    class Meta:
        managed = False
        db_table = ALERT_TABLE
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.rule} on {self.schedule_name}"
