"""What the commands print: plain aligned tables for people, JSON documents for scripts.

Instants are shown in UTC: ``2026-11-29T21:40:02Z`` in tables, full ISO-8601 in JSON.
Durations are seconds in JSON and ``1h30m`` / ``2.5s`` in tables.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from goatbeat_celery.core.model import UTC, Execution, LeaseInfo, Schedule, TriggerSpec
from goatbeat_celery.core.settings import Settings

NONE = "-"


# -- scalars ----------------------------------------------------------------------------------
def iso(instant: datetime | None) -> str | None:
    """An instant for JSON: ISO-8601 in UTC, or ``None``."""
    return None if instant is None else instant.astimezone(UTC).isoformat()


def when(instant: datetime | None) -> str:
    """An instant for a table: UTC to the second (milliseconds when there are any)."""
    if instant is None:
        return NONE
    utc = instant.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond // 1000:03d}"
    return text + "Z"


def seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def human_seconds(value: float) -> str:
    """``90`` → ``1m30s``, ``0.25`` → ``0.25s``, ``86400`` → ``1d``."""
    if value < 0:
        return "-" + human_seconds(-value)
    whole = int(value)
    fraction = value - whole
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size:
            parts.append(f"{whole // size}{unit}")
            whole %= size
    rest = whole + fraction
    if rest or not parts:
        parts.append(f"{rest:.3f}".rstrip("0").rstrip(".") + "s")
    return "".join(parts)


def human_duration(value: timedelta | None) -> str:
    return NONE if value is None else human_seconds(value.total_seconds())


def relative(instant: datetime | None, now: datetime) -> str:
    """``2026-…Z (in 12s)`` or ``2026-…Z (3s ago)``, measured on the database clock."""
    if instant is None:
        return NONE
    delta = (instant - now).total_seconds()
    hint = f"in {human_seconds(delta)}" if delta >= 0 else f"{human_seconds(-delta)} ago"
    return f"{when(instant)} ({hint})"


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "), sort_keys=True, ensure_ascii=False)


def document(value: Any) -> str:
    """A ``--json`` document."""
    return json.dumps(value, indent=2, ensure_ascii=False)


# -- triggers ---------------------------------------------------------------------------------
def describe_trigger(trigger: TriggerSpec) -> str:
    """A short description from the stored parameters (no trigger object needed, so schedules
    whose trigger only a beat replica can build are still shown)."""
    params = trigger.params
    every = params.get("every")
    if trigger.kind == "interval" and isinstance(every, (int, float)):
        return f"every {human_seconds(float(every))}"
    if trigger.kind == "cron":
        text = f"cron {params.get('expression')}"
        if params.get("day_or") is False:
            text += " (day of month and day of week)"
        return text
    if trigger.kind == "once":
        at = params.get("at")
        try:
            return f"once at {when(datetime.fromisoformat(str(at)))}"
        except ValueError:
            return f"once at {at}"
    if trigger.kind == "celery":
        return f"celery {params.get('repr', params.get('entry'))}"
    return f"{trigger.kind} {compact_json(dict(params))}"


def zone_of(trigger: TriggerSpec) -> str | None:
    """The zone a trigger is evaluated in; intervals and instants have none."""
    zone = trigger.params.get("timezone") if trigger.kind == "cron" else None
    return None if zone is None else str(zone)


# -- schedules --------------------------------------------------------------------------------
def schedule_json(schedule: Schedule, defaults: Settings) -> dict[str, Any]:
    """A schedule for ``--json``: stored values, with ``effective_*`` for inherited defaults."""
    spec = schedule.spec
    return {
        "name": spec.name,
        "task": spec.task,
        "trigger": spec.trigger.to_json(),
        "description": describe_trigger(spec.trigger),
        "timezone": zone_of(spec.trigger),
        "args": list(spec.args),
        "kwargs": dict(spec.kwargs),
        "options": dict(spec.options),
        "enabled": spec.enabled,
        "source": spec.source.value,
        "misfire_policy": None if spec.misfire_policy is None else spec.misfire_policy.value,
        "effective_misfire_policy": (spec.misfire_policy or defaults.policy).value,
        "misfire_grace": seconds(spec.misfire_grace),
        "effective_misfire_grace": seconds(_grace(spec.misfire_grace, defaults)),
        "max_catchup": spec.max_catchup,
        "effective_max_catchup": _catchup(spec.max_catchup, defaults),
        "offset": seconds(spec.offset),
        "jitter": seconds(spec.jitter),
        "effective_offset": seconds(spec.effective_offset()),
        "next_run_at": iso(schedule.next_run_at),
        "next_occurrence_at": iso(schedule.next_occurrence_at),
        "last_occurrence_at": iso(schedule.last_occurrence_at),
        "total_runs": schedule.total_runs,
        "total_missed": schedule.total_missed,
        "version": schedule.version,
        "created_at": iso(schedule.created_at),
        "updated_at": iso(schedule.updated_at),
    }


def _grace(value: timedelta | None, defaults: Settings) -> timedelta:
    return defaults.grace if value is None else value


def _catchup(value: int | None, defaults: Settings) -> int:
    return defaults.max_catchup if value is None else value


def misfire_text(schedule: Schedule, defaults: Settings) -> str:
    policy = schedule.spec.misfire_policy
    return policy.value if policy is not None else f"default ({defaults.policy.value})"


SCHEDULE_COLUMNS = ("NAME", "TASK", "TRIGGER", "ZONE", "NEXT RUN", "LAST RUN", "ENABLED",
                    "SOURCE", "MISFIRE")


def schedule_row(schedule: Schedule, defaults: Settings) -> tuple[str, ...]:
    spec = schedule.spec
    return (spec.name, spec.task, describe_trigger(spec.trigger), zone_of(spec.trigger) or NONE,
            when(schedule.next_run_at), when(schedule.last_occurrence_at),
            "yes" if spec.enabled else "paused", spec.source.value,
            misfire_text(schedule, defaults))


def schedule_fields(schedule: Schedule, defaults: Settings,
                    now: datetime | None) -> list[tuple[str, str]]:
    """Every detail of one schedule, as ``(label, value)`` lines for :func:`fields`."""
    spec = schedule.spec
    shift = NONE
    if spec.offset is not None:
        shift = f"offset {human_duration(spec.offset)}"
    elif spec.jitter is not None:
        shift = (f"jitter up to {human_duration(spec.jitter)} "
                 f"(this schedule: {human_duration(spec.effective_offset())})")
    grace = human_duration(_grace(spec.misfire_grace, defaults))
    catchup = _catchup(spec.max_catchup, defaults)

    def at(instant: datetime | None) -> str:
        return when(instant) if now is None else relative(instant, now)

    return [
        ("name", spec.name),
        ("task", spec.task),
        ("trigger", describe_trigger(spec.trigger)),
        ("zone", zone_of(spec.trigger) or NONE),
        ("args", compact_json(list(spec.args))),
        ("kwargs", compact_json(dict(spec.kwargs))),
        ("options", compact_json(dict(spec.options))),
        ("enabled", "yes" if spec.enabled else "no (paused)"),
        ("source", spec.source.value),
        ("misfire policy", misfire_text(schedule, defaults)),
        ("misfire grace", grace if spec.misfire_grace is not None else f"default ({grace})"),
        ("max catch-up", str(catchup) if spec.max_catchup is not None
         else f"default ({catchup})"),
        ("offset", shift),
        ("next run", at(schedule.next_run_at)),
        ("next occurrence", when(schedule.next_occurrence_at)),
        ("last occurrence", when(schedule.last_occurrence_at)),
        ("runs", str(schedule.total_runs)),
        ("missed", str(schedule.total_missed)),
        ("version", str(schedule.version)),
        ("created", when(schedule.created_at)),
        ("updated", when(schedule.updated_at)),
    ]


# -- executions -------------------------------------------------------------------------------
def lateness(execution: Execution) -> float | None:
    """Seconds from due to accepted by the broker (``None`` until submitted)."""
    if execution.submitted_at is None:
        return None
    return (execution.submitted_at - execution.due_at).total_seconds()


def execution_json(execution: Execution) -> dict[str, Any]:
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
    }


EXECUTION_COLUMNS = ("KEY", "STATE", "OCCURRENCE", "DUE", "CLAIMED", "SUBMITTED", "LATENESS",
                     "ATTEMPTS", "MISSED")


def execution_row(execution: Execution) -> tuple[str, ...]:
    late = lateness(execution)
    return (execution.key, execution.state.value, when(execution.occurrence_at),
            when(execution.due_at), when(execution.claimed_at), when(execution.submitted_at),
            NONE if late is None else human_seconds(late), str(execution.attempts),
            str(execution.missed))


# -- lease ------------------------------------------------------------------------------------
def lease_json(name: str, info: LeaseInfo | None) -> dict[str, Any]:
    """The lease as stored; ``seconds_left`` is by the database clock (negative: expired)."""
    if info is None:
        return {"name": name, "holder": None, "token": 0, "acquired_at": None,
                "expires_at": None, "held": False, "seconds_left": None}
    left = None if info.expires_at is None else (info.expires_at - info.store_now)
    return {"name": info.name, "holder": info.holder, "token": info.token,
            "acquired_at": iso(info.acquired_at), "expires_at": iso(info.expires_at),
            "held": info.held, "seconds_left": seconds(left)}


# -- layout -----------------------------------------------------------------------------------
def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart; no trailing spaces."""
    widths = [max([len(header), *(len(row[i]) for row in rows)])
              for i, header in enumerate(headers)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in (headers, *rows)
    )


def fields(pairs: Sequence[tuple[str, str]]) -> str:
    """``label  value`` lines with the values aligned; later lines of a value are indented."""
    width = max(len(label) for label, _ in pairs)
    lines: list[str] = []
    for label, value in pairs:
        first, *rest = value.splitlines() or [""]
        lines.append(f"{label.ljust(width)}  {first}".rstrip())
        lines.extend(f"{'':{width}}  {line}".rstrip() for line in rest)
    return "\n".join(lines)
