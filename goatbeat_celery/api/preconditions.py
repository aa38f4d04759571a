"""What a write requires of the stored row it changes: readable columns (or each damaged one
given anew), and the version the caller read."""

from __future__ import annotations

from goatbeat_celery.core.types.errors import ConfigurationError, ScheduleConflict
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import PLAIN_FIELDS, quoted_name
from goatbeat_celery.display import describe_trigger

#: Which arguments of :meth:`Schedules.update` rewrite each column a damaged row may name.
_REPAIRED_BY = {
    "trigger": {"every", "cron", "at", "rrule", "solar"},
    **{field.column: {field.name} for field in PLAIN_FIELDS},
    **{field: {field} for field in ("task", "args", "kwargs", "options", "misfire_policy",
                                    "overlap", "mode", "start_at", "end_at", "description",
                                    "tags", "calendars", "rotate", "rotate_handover")},
}


def _require_repair(schedule: Schedule, given: set[str]) -> None:
    """Refuse a write that would store the stand-ins of a damaged row's unreadable columns in
    place of what is there: only an edit giving each of them anew (or a delete) may touch it."""
    missing = [damage for damage in schedule.damage
               if not _REPAIRED_BY.get(damage.field, set()) & given]
    if missing:
        # The arguments to give are named as data: each face calls them its own way.
        fixes = tuple(sorted({arg for d in missing for arg in _REPAIRED_BY.get(d.field, ())}))
        how = ("edit it giving " + ", ".join("{" + fix + "}" for fix in fixes)
               + " anew, or delete it" if fixes else "delete it and create it again")
        raise ConfigurationError(
            [*missing, Problem("", f"schedule {quoted_name(schedule.name)} cannot be read as "
                               "stored", how, mentions=fixes)],
            subject=f"schedule {quoted_name(schedule.name)}")


def _check_spec_version(current: Schedule, expected: int | None) -> None:
    """ScheduleConflict when another edit changed the definition since the caller read it at
    version ``expected`` (None: no expectation), saying what it is now."""
    if expected is None or current.version == expected:
        return
    spec = current.spec
    when = "" if current.updated_at is None else f" at {current.updated_at.isoformat()}"
    raise ScheduleConflict(
        f"schedule {quoted_name(current.name)} was edited since it was read (definition "
        f"version {expected}, now {current.version}{when}); it now runs {spec.task} on "
        f"{describe_trigger(spec.trigger)}: read it again and redo your change")


def _check_version(what: str, version: int, expected: int | None) -> None:
    """ScheduleConflict when ``what`` is no longer at the ``expected`` version its caller
    showed (None: no expectation)."""
    if expected is not None and version != expected:
        raise ScheduleConflict(f"{what} changed since it was read: it is at version {version}, "
                               f"not {expected}; read it again and redo the change")
