"""What goatbeat shows people and scripts: plain aligned tables, JSON documents, and the
escaping, durations and instants they share. The CLI commands print these; the web pages and the
scheduler's messages use the same pieces, so they live outside the ``cli`` package.

Instants are shown in UTC: ``2026-11-29T21:40:02Z`` in tables, full ISO-8601 in JSON.
Durations are seconds in JSON and ``1h30m`` / ``2.5s`` in tables.

Names, tasks, reasons and errors are data a user chose (or a row edited by hand): text output
passes every one of them through :func:`shown`, so a control or bidirectional character can
neither move the cursor nor reorder what the operator reads. JSON output keeps the data exact,
with every character outside ASCII escaped.

The ``*_json`` builders are a contract: ``--json`` output and the HTTP API's answers are made
of them, and each one's docstring names the keys it guarantees.

Each concern has a module of its own: :mod:`.escaping`, :mod:`.scalars` (instants, durations,
JSON text), :mod:`.layout` (tables and detail lines), :mod:`.commands` (suggested commands),
:mod:`.triggers`, :mod:`.schedules`, :mod:`.runs`, :mod:`.backfills`, :mod:`.calendars`,
:mod:`.alerts`, :mod:`.audit`, :mod:`.edits` and :mod:`.status` (lease, standbys, shards,
schedules set aside). Every name is imported from here, ``goatbeat_celery.display``.
"""

from __future__ import annotations

from goatbeat_celery.display.alerts import (
    ALERT_COLUMNS,
    alert_handling,
    alert_row,
    untracked_rules_note,
)
from goatbeat_celery.display.audit import (
    AUDIT_CLIPPED,
    AUDIT_COLUMNS,
    PLAN_MARKS,
    audit_action,
    audit_change_parts,
    audit_changes_text,
    audit_json,
    audit_row,
    audit_value_text,
    change_value_text,
    plan_line,
)
from goatbeat_celery.display.backfills import (
    BACKFILL_COLUMNS,
    PREVIEW_COLUMNS,
    backfill_json,
    backfill_outcome_lines,
    backfill_outcomes_json,
    backfill_preview_json,
    backfill_preview_rows,
    backfill_row,
    outcomes_text,
    rerun_json,
)
from goatbeat_celery.display.calendars import (
    calendar_entries,
    calendar_fields,
    calendar_json,
    calendar_row,
)
from goatbeat_celery.display.commands import ANY_APP, command_line, with_migrate_command
from goatbeat_celery.display.edits import changed_since_read, field_changes
from goatbeat_celery.display.escaping import shown
from goatbeat_celery.display.layout import (
    CLIPPED_MIN,
    DEFAULT_WIDTH,
    ELLIPSIS,
    ROOMY,
    Value,
    fields,
    table,
    terminal_width,
)
from goatbeat_celery.display.runs import (
    EXECUTION_COLUMNS,
    HISTORY_CLIPPED,
    HISTORY_COLUMNS,
    HISTORY_DROPPED,
    HISTORY_ROOMY,
    RUN_STATUSES,
    execution_json,
    execution_reason,
    execution_row,
    history_row,
    lateness,
    run_status,
)
from goatbeat_celery.display.scalars import (
    NONE,
    compact_json,
    document,
    human_duration,
    human_seconds,
    iso,
    relative,
    seconds,
    when,
)
from goatbeat_celery.display.schedules import (
    SCHEDULE_CLIPPED,
    SCHEDULE_COLUMNS,
    SCHEDULE_DROPPED,
    control_fields,
    fault_fields,
    misfire_text,
    next_run_text,
    pause_fields,
    plain_json,
    plain_lines,
    policy_fields,
    rotation_text,
    schedule_fields,
    schedule_json,
    schedule_row,
    state_text,
)
from goatbeat_celery.display.status import (
    SET_ASIDE_SHOWN,
    lease_health,
    lease_health_parts,
    lease_json,
    previous_holder_line,
    set_aside_json,
    set_aside_lines,
    shard_holders,
    shard_lines,
    shard_members_line,
    shards_json,
    standby_replicas,
    standbys_json,
    standbys_line,
)
from goatbeat_celery.display.triggers import (
    cron_phrase,
    describe_trigger,
    trigger_json,
    trigger_text,
    zone_of,
)

__all__ = [
    "ALERT_COLUMNS", "ANY_APP", "AUDIT_CLIPPED", "AUDIT_COLUMNS", "BACKFILL_COLUMNS",
    "CLIPPED_MIN", "DEFAULT_WIDTH", "ELLIPSIS", "EXECUTION_COLUMNS", "HISTORY_CLIPPED",
    "HISTORY_COLUMNS", "HISTORY_DROPPED", "HISTORY_ROOMY", "NONE", "PLAN_MARKS",
    "PREVIEW_COLUMNS", "ROOMY", "RUN_STATUSES", "SCHEDULE_CLIPPED", "SCHEDULE_COLUMNS",
    "SCHEDULE_DROPPED", "SET_ASIDE_SHOWN", "Value",
    "alert_handling", "alert_row", "audit_action", "audit_change_parts", "audit_changes_text",
    "audit_json", "audit_row",
    "audit_value_text", "backfill_json", "backfill_outcome_lines", "backfill_outcomes_json",
    "backfill_preview_json", "backfill_preview_rows",
    "backfill_row", "calendar_entries", "calendar_fields", "calendar_json", "calendar_row",
    "change_value_text", "changed_since_read", "command_line", "compact_json",
    "control_fields", "cron_phrase",
    "describe_trigger", "document", "execution_json", "execution_reason", "execution_row",
    "fault_fields", "field_changes", "fields", "history_row", "human_duration",
    "human_seconds", "iso", "lateness", "lease_health", "lease_health_parts", "lease_json",
    "misfire_text", "next_run_text", "outcomes_text", "pause_fields", "plain_json",
    "plain_lines", "plan_line", "policy_fields", "previous_holder_line", "relative",
    "rerun_json", "rotation_text", "run_status", "schedule_fields",
    "schedule_json", "schedule_row", "seconds", "set_aside_json", "set_aside_lines",
    "shard_holders", "shard_lines", "shard_members_line", "shards_json", "shown",
    "standby_replicas", "standbys_json", "standbys_line", "state_text", "table",
    "terminal_width", "trigger_json", "trigger_text", "untracked_rules_note", "when",
    "with_migrate_command", "zone_of",
]
