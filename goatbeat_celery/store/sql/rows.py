"""Schedule and calendar rows read as model types and written from them.

Reading never raises on what a row holds: a column that cannot be read as stored is named in
the model's ``damage`` and replaced by a harmless stand-in.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from operator import itemgetter
from typing import Any

from goatbeat_celery.core.rules.calendars import Calendar, calendar_from_row
from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.shards import shard_hash
from goatbeat_celery.core.rules.validation import (
    payload_problems,
    reason_text,
    shown_value,
    stored_value,
)
from goatbeat_celery.core.types.claims import Waiting
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.quick import quick_new
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import (
    PLAIN_FIELDS,
    MisfirePolicy,
    ScheduleSource,
    ScheduleSpec,
    TriggerSpec,
)
from goatbeat_celery.store.schema import UNREADABLE_INSTANT, schedule_table

S = schedule_table


def waiting_from_row(row: Sequence[Any]) -> Waiting:
    """A row of the waiting statement (SQLStore._waiting_statement) as a Waiting."""
    now, next_due, unsettled, claimed, open_runs, alerts_waiting, backfills = row
    return Waiting(now=now, next_due_at=next_due, unsettled=bool(unsettled),
                   claimed=bool(claimed), open_runs=bool(open_runs),
                   alerts_waiting=bool(alerts_waiting), backfills=bool(backfills))


def _zone_of(trigger: TriggerSpec) -> str | None:
    for key in ("timezone", "tz", "zone"):
        value = trigger.params.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _spec_values(spec: ScheduleSpec, *, key: str = "name") -> dict[str, Any]:
    """Column values of ``spec``; its name under ``key`` (a bound parameter for updates).

    Raises ConfigurationError, before anything is written, for JSON values that would not
    read back unchanged, by the rule the schedules API applies at the door."""
    where = f"schedule {spec.name!r}"
    payloads: dict[str, Any] = {
        "args": list(spec.args), "kwargs": dict(spec.kwargs), "options": dict(spec.options),
        "trigger": spec.trigger.to_json(),
    }
    problems = [problem for label, value in payloads.items()
                for problem in payload_problems(f"{where}: {label}", value)]
    if problems:
        raise ConfigurationError(problems)
    return {
        key: spec.name,
        "task": spec.task,
        **payloads,
        "timezone": _zone_of(spec.trigger),
        "misfire_policy": spec.misfire_policy.value if spec.misfire_policy else None,
        **{field.column: getattr(spec, field.name) for field in PLAIN_FIELDS},
        "overlap": None if spec.overlap is None else spec.overlap.value,
        "mode": None if spec.mode is ScheduleMode.FIXED_RATE else spec.mode.value,
        "start_at": spec.start_at,
        "end_at": spec.end_at,
        "description": spec.description,
        # NULL rather than [] for none: rows written before the column existed look the same.
        "tags": list(spec.tags) if spec.tags else None,
        "calendars": list(spec.calendars) if spec.calendars else None,
        "rotate": list(spec.rotate) if spec.rotate else None,
        "rotate_handover": True if spec.rotate_handover else None,
        "enabled": spec.enabled,
        "source": ScheduleSource(spec.source).value,
        "spec_hash": spec.spec_hash(),
        "shard_hash": shard_hash(spec.name),
    }


_SOURCES = {source.value: source for source in ScheduleSource}


#: The columns read by name below, in the order they are unpacked; the plain fields'
#: columns (PLAIN_FIELDS) are read apart, so that a new one needs no change here.
_OWN_COLUMNS = (
    "name", "task", "args", "kwargs", "options", "trigger", "misfire_policy", "enabled",
    "source", "next_occurrence_at", "next_run_at", "last_occurrence_at", "total_runs",
    "total_missed", "version", "created_at", "updated_at", "fault", "fault_at", "faults",
    "overlap", "mode", "consecutive_failures", "paused_reason", "total_skipped", "start_at",
    "end_at", "paused_until", "description", "tags", "calendars", "spec_version", "rotate",
    "rotate_handover",
)
#: Columns written from others and never read back.
_DERIVED_COLUMNS = ("timezone", "spec_hash", "shard_hash")
_COLUMNS = tuple(S.c.keys())
_unread = set(_COLUMNS) - {*_OWN_COLUMNS, *_DERIVED_COLUMNS, *(f.column for f in PLAIN_FIELDS)}
if _unread:  # pragma: no cover - a guard for schema edits
    raise ImportError(f"goatbeat_schedule columns {sorted(_unread)} are not read: add them to "
                      "_OWN_COLUMNS and _schedule()")
# Taken from a row by position (itemgetter): attribute access by name costs more.
_own_values = itemgetter(*(_COLUMNS.index(column) for column in _OWN_COLUMNS))
_plain_values = itemgetter(*(_COLUMNS.index(field.column) for field in PLAIN_FIELDS))
#: Each plain field's name, column and the type its stored value has.
_PLAIN_READ = tuple((field.name, field.column,
                     {"duration": timedelta, "count": int, "factor": float}[field.kind])
                    for field in PLAIN_FIELDS)


def _schedule(row: Sequence[Any]) -> Schedule:
    """A schedule from a row of :data:`schedule_table`'s columns, in table order.

    Never raises on what the row holds: a column that cannot be read as stored is named in
    ``damage`` and replaced by a harmless stand-in (the engine then sets the row aside)."""
    (name, task, args, kwargs, options, trigger, misfire_policy, enabled, source,
     next_occurrence_at, next_run_at, last_occurrence_at, total_runs, total_missed, version,
     created_at, updated_at, fault, fault_at, faults, overlap, mode, consecutive_failures,
     paused_reason, total_skipped, start_at, end_at, paused_until, description, tags,
     calendars, spec_version, rotate, rotate_handover) = _own_values(row)
    damage: list[Problem] = []
    # The common case first, by exact type: this runs for every due row.
    if type(args) is list:
        args = tuple(args)
    else:
        damage.append(Problem("args", f"expected a JSON array, found {_found(args)}"))
        args = ()
    if type(kwargs) is not dict:
        damage.append(Problem("kwargs", f"expected a JSON object, found {_found(kwargs)}"))
        kwargs = {}
    if type(options) is not dict:
        damage.append(Problem("options", f"expected a JSON object, found {_found(options)}"))
        options = {}
    if type(trigger) is dict and type(trigger.get("kind")) is str:
        params = dict(trigger)
        kind = params.pop("kind")
    else:
        damage.append(Problem("trigger", "expected a JSON object with a 'kind', found "
                              + _found(trigger)))
        kind, params = "invalid", {}
    policy = (None if misfire_policy is None
              else MisfirePolicy.stored(misfire_policy, "misfire_policy", damage))
    # The spec's fields, gathered in one dict: built from it without binding each keyword.
    fields = _plain_fields(_plain_values(row), damage)
    fields.update(_policies(overlap, mode, damage))
    fields.update(_controls(start_at, end_at, description, tags, damage))
    fields["calendars"] = _calendar_names(calendars, damage)
    fields.update(_rotation(rotate, rotate_handover, damage))
    kept_source = _SOURCES.get(source)
    if kept_source is None:
        # Fail closed: a row of unknown origin is judged as an API row (the allow-list).
        damage.append(Problem("source", f"unknown source {_found(source)}"))
        kept_source = ScheduleSource.API
    task = stored_value(task, str, "", "task", damage, required=True, what="a task name")
    version = stored_value(version, int, -1, "version", damage, required=True)
    fields.update(name=name, task=task, trigger=TriggerSpec(kind=str(kind), params=params),
                  args=args, kwargs=kwargs, options=options, misfire_policy=policy,
                  enabled=bool(enabled), source=kept_source)
    return quick_new(Schedule, {
        "spec": quick_new(ScheduleSpec, fields),
        # An unreadable next occurrence reads as none: the engine starts the schedule again
        # from the store's clock.
        "next_occurrence_at": _instant(next_occurrence_at),
        "next_run_at": _instant(next_run_at),
        "last_occurrence_at": _instant(last_occurrence_at),
        "total_runs": total_runs if type(total_runs) is int else 0,
        "total_missed": total_missed if type(total_missed) is int else 0,
        "row_version": version,
        "version": spec_version if type(spec_version) is int else 1,
        "created_at": _instant(created_at),
        "updated_at": _instant(updated_at),
        "fault": fault if fault is None or type(fault) is str else str(fault),
        "fault_at": _instant(fault_at),
        "faults": faults if type(faults) is int else 0,
        "consecutive_failures": (consecutive_failures if type(consecutive_failures) is int
                                 else 0),
        "paused_reason": (paused_reason if paused_reason is None or type(paused_reason) is str
                          else str(paused_reason)),
        "total_skipped": total_skipped if type(total_skipped) is int else 0,
        "paused_until": _instant(paused_until),
        "damage": tuple(damage),
    })


def _plain_fields(values: Sequence[Any], damage: list[Problem]) -> dict[str, Any]:
    """The plain fields of a row (:data:`PLAIN_FIELDS`, in their order), each unreadable one
    named in ``damage`` and read as unset."""
    found: dict[str, Any] = {}
    # Most are unset: None is the first thing looked at (this runs for every due row).
    for (name, column, kind), value in zip(_PLAIN_READ, values, strict=True):
        if value is not None and type(value) is not kind:
            if kind is timedelta:
                damage.append(Problem(column, f"{_found(value)} is not a duration in seconds"))
                value = None
            else:
                value = stored_value(value, kind, None, column, damage)
        found[name] = value
    return found


def _policies(overlap: Any, mode: Any, damage: list[Problem]) -> dict[str, Any]:
    """The run-policy choices of a row, each unreadable one named in ``damage`` and read as
    the default."""
    found: dict[str, Any] = {"overlap": None, "mode": ScheduleMode.FIXED_RATE}
    if overlap is not None:
        found["overlap"] = OverlapPolicy.stored(overlap, "overlap", damage)
    if mode is not None:
        found["mode"] = ScheduleMode.stored(mode, "mode", damage) or ScheduleMode.FIXED_RATE
    return found


def _controls(start_at: Any, end_at: Any, description: Any, tags: Any,
              damage: list[Problem]) -> dict[str, Any]:
    """The control fields of a row, each unreadable one named in ``damage`` and read as unset
    (the values' own rules, end before start, are the spec's to judge)."""
    found: dict[str, Any] = {"start_at": None, "end_at": None, "tags": ()}
    for label, value in (("start_at", start_at), ("end_at", end_at)):
        if value is UNREADABLE_INSTANT:
            damage.append(Problem(label, "the stored instant cannot be read"))
        else:
            found[label] = value
    found["description"] = stored_value(description, str, None, "description", damage)
    if tags is not None:
        if type(tags) is list and all(type(tag) is str for tag in tags):
            found["tags"] = tuple(tags)
        else:
            damage.append(Problem("tags",
                                  f"expected a JSON array of strings, found {_found(tags)}"))
    return found


def _calendar_names(value: Any, damage: list[Problem]) -> tuple[str, ...]:
    """The calendar names a row observes; an unreadable list is named in ``damage`` (the
    schedule is set aside rather than run on days it should not)."""
    if value is None:
        return ()
    if type(value) is list and all(type(name) is str for name in value):
        return tuple(value)
    damage.append(Problem("calendars",
                          f"expected a JSON array of calendar names, found {_found(value)}"))
    return ()


def _rotation(rotate: Any, handover: Any, damage: list[Problem]) -> dict[str, Any]:
    """The rotation of a row (none while NULL); an unreadable one is named in ``damage`` and
    read as none (the schedule is set aside rather than sent to a queue it does not name)."""
    found: dict[str, Any] = {"rotate": (), "rotate_handover": False}
    if rotate is not None:
        if type(rotate) is list and all(type(queue) is str for queue in rotate):
            found["rotate"] = tuple(rotate)
        else:
            damage.append(Problem("rotate",
                                  f"expected a JSON array of queue names, found {_found(rotate)}"))
    if handover is not None:
        found["rotate_handover"] = stored_value(handover, bool, False, "rotate_handover",
                                                damage)
    return found


def _calendar(row: Any) -> Calendar:
    return calendar_from_row(row._mapping)


def _instant(value: datetime | None) -> datetime | None:
    return None if value is UNREADABLE_INSTANT else value


def _found(value: object) -> str:
    return reason_text(shown_value(value))
