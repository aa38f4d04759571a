"""Schedules for ``list``, ``show`` and their ``--json``: the JSON document, the table row and
every detail line, with the values inherited from the settings marked as such."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from goatbeat_celery.core.rules.defaults import own_or_default
from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.status import State, shows_next_run
from goatbeat_celery.core.types.fields import Group
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import PLAIN_FIELDS, ScheduleSpec
from goatbeat_celery.display.layout import Value
from goatbeat_celery.display.scalars import (
    NONE,
    compact_json,
    human_duration,
    iso,
    relative,
    seconds,
    when,
)
from goatbeat_celery.display.triggers import describe_trigger, trigger_json, zone_of


def schedule_json(schedule: Schedule, defaults: Settings, now: datetime) -> dict[str, Any]:
    """A schedule for ``--json``: stored values, with ``effective_*`` for inherited defaults.

    A contract: ``list --json``, ``show --json`` and the HTTP API's schedules answer with this
    document. Every key is always present (null where unset): ``name``, ``task``, ``trigger``
    (:func:`trigger_json`), ``description``, ``timezone``, ``args``, ``kwargs``, ``options``,
    ``enabled``, ``source``, ``misfire_policy`` and ``effective_misfire_policy``, the plain
    fields of :func:`plain_json`, ``effective_offset``, ``overlap`` and ``effective_overlap``,
    ``mode``, ``consecutive_failures``, ``paused_reason``, ``paused_until``, ``total_skipped``,
    ``state``, ``start_at``, ``end_at``, ``runs_left``, ``schedule_description``, ``tags``,
    ``calendars``, ``rotate`` (the queues it rotates over, empty: none), ``rotate_handover``,
    ``next_run_at``, ``next_occurrence_at``, ``last_occurrence_at``,
    ``total_runs``, ``total_missed``, ``version``, ``created_at``, ``updated_at``,
    ``set_aside``, ``fault``, ``fault_at``, ``faults`` and ``damage`` (the columns that could
    not be read). Instants are ISO-8601 in UTC, durations seconds.

    ``description`` describes the trigger (as it always has); the free text given with the
    schedule is ``schedule_description``. ``state`` is judged at ``now`` (a pause with an end
    is over once it passed)."""
    spec = schedule.spec
    return {
        "name": spec.name,
        "task": spec.task,
        "trigger": trigger_json(spec.trigger),
        "description": describe_trigger(spec.trigger),
        "timezone": zone_of(spec.trigger),
        "args": list(spec.args),
        "kwargs": dict(spec.kwargs),
        "options": dict(spec.options),
        "enabled": spec.enabled,
        "source": spec.source.value,
        "misfire_policy": None if spec.misfire_policy is None else spec.misfire_policy.value,
        "effective_misfire_policy": own_or_default(spec.misfire_policy,
                                                   defaults.misfire_policy).value,
        **plain_json(spec, defaults),
        "effective_offset": seconds(spec.effective_offset()),
        "overlap": None if spec.overlap is None else spec.overlap.value,
        "effective_overlap": own_or_default(spec.overlap, defaults.overlap_policy).value,
        "mode": spec.mode.value,
        "consecutive_failures": schedule.consecutive_failures,
        "paused_reason": schedule.paused_reason,
        "total_skipped": schedule.total_skipped,
        "state": schedule.status_at(now).state.value,
        "paused_until": iso(schedule.paused_until),
        "start_at": iso(spec.start_at),
        "end_at": iso(spec.end_at),
        "runs_left": schedule.runs_left,
        "schedule_description": spec.description,
        "tags": list(spec.tags),
        "calendars": list(spec.calendars),
        "rotate": list(spec.rotate),
        "rotate_handover": spec.rotate_handover,
        "next_run_at": iso(schedule.next_run_at),
        "next_occurrence_at": iso(schedule.next_occurrence_at),
        "last_occurrence_at": iso(schedule.last_occurrence_at),
        "total_runs": schedule.total_runs,
        "total_missed": schedule.total_missed,
        "version": schedule.version,
        "created_at": iso(schedule.created_at),
        "updated_at": iso(schedule.updated_at),
        "set_aside": schedule.set_aside,
        "fault": schedule.fault,
        "fault_at": iso(schedule.fault_at),
        "faults": schedule.faults,
        "damage": [str(d) for d in schedule.damage],
    }


def plain_json(spec: ScheduleSpec, defaults: Settings) -> dict[str, Any]:
    """The spec's plain fields as stored (durations in seconds, None: unset) and, for those a
    setting stands in for, ``effective_<name>``: the value in force.

    Part of :func:`schedule_json`'s contract: one key for every field of
    :data:`~goatbeat_celery.core.types.spec.PLAIN_FIELDS`, always present."""
    found: dict[str, Any] = {}
    for field in PLAIN_FIELDS:
        own = getattr(spec, field.name)
        found[field.name] = _json_value(own)
        if field.default is not None:
            found[f"effective_{field.name}"] = _json_value(
                own_or_default(own, getattr(defaults, field.default)))
    return found


def _json_value(value: Any) -> Any:
    return seconds(value) if isinstance(value, timedelta) else value


def plain_lines(spec: ScheduleSpec, defaults: Settings, group: Group,
                written: Mapping[str, list[tuple[str, Value]]]) -> list[tuple[str, Value]]:
    """The lines of the spec's plain fields in ``group``, in their order: ``written[name]`` for
    a field shown its own way, else ``label  value`` (``default (value)`` while a setting
    stands in; no line when unset and no setting applies)."""
    pairs: list[tuple[str, Value]] = []
    for field in PLAIN_FIELDS:
        if field.group != group:
            continue
        if field.name in written:
            pairs.extend(written[field.name])
            continue
        own = getattr(spec, field.name)
        value = own_or_default(own, None if field.default is None
                               else getattr(defaults, field.default))
        if value is None:
            continue
        text = (human_duration(value) if isinstance(value, timedelta)
                else f"{value:g}" if isinstance(value, float) else str(value))
        pairs.append((field.label, text if own is not None else f"default ({text})"))
    return pairs


def misfire_text(schedule: Schedule, defaults: Settings) -> str:
    policy = schedule.spec.misfire_policy
    return policy.value if policy is not None else f"default ({defaults.misfire_policy.value})"


def state_text(schedule: Schedule, now: datetime) -> str:
    """The schedule's status (:mod:`goatbeat_celery.core.rules.status`) in words: ``enabled``,
    ``paused`` (``paused, damaged`` for a row that cannot be read as stored), ``paused until
    <instant>``, ``set aside`` or ``ended``."""
    found = schedule.status_at(now)
    if found.state is State.PAUSED and schedule.damage:
        return "paused, damaged"
    if found.state is State.PAUSED_UNTIL:
        return f"paused until {when(found.until)}"
    return str(found.state.value)


def next_run_text(schedule: Schedule, now: datetime) -> str:
    """The next run as faces show it: none while the schedule is paused or ended, whatever
    instant the row still holds (it would only be past, or run after a resume)."""
    if not shows_next_run(schedule.status_at(now).state):
        return NONE
    return when(schedule.next_run_at)


SCHEDULE_COLUMNS = ("NAME", "TASK", "TRIGGER", "ZONE", "NEXT RUN", "LAST RUN", "STATE",
                    "SOURCE", "MISFIRE")
#: The columns of ``list`` cut short to fit a width, and where each is cut: a name, a trigger
#: or a state keeps its start, a task its start and its end (``proj.tas…report``).
SCHEDULE_CLIPPED = {"NAME": "end", "TASK": "middle", "TRIGGER": "end", "STATE": "end"}
#: The columns ``list`` leaves out, first first, when the line would not fit otherwise.
SCHEDULE_DROPPED = ("MISFIRE", "SOURCE", "LAST RUN", "ZONE")


def schedule_row(schedule: Schedule, defaults: Settings, now: datetime) -> tuple[str, ...]:
    spec = schedule.spec
    return (spec.name, spec.task, describe_trigger(spec.trigger), zone_of(spec.trigger) or NONE,
            next_run_text(schedule, now), when(schedule.last_occurrence_at),
            state_text(schedule, now), spec.source.value, misfire_text(schedule, defaults))


def schedule_fields(schedule: Schedule, defaults: Settings,
                    now: datetime) -> list[tuple[str, Value]]:
    """Every detail of one schedule, as ``(label, value)`` lines for :func:`fields`."""
    spec = schedule.spec
    shift = NONE
    if spec.offset is not None:
        shift = f"offset {human_duration(spec.offset)}"
    elif spec.jitter is not None:
        shift = (f"jitter up to {human_duration(spec.jitter)} "
                 f"(this schedule: {human_duration(spec.effective_offset())})")

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
        *([("description", spec.description)] if spec.description is not None else []),
        *([("tags", ", ".join(spec.tags))] if spec.tags else []),
        *([("calendars", ", ".join(spec.calendars))] if spec.calendars else []),
        *([("rotates over", rotation_text(spec))] if spec.rotate else []),
        ("state", state_text(schedule, now)),
        *pause_fields(schedule, now, at),
        *fault_fields(schedule, at),
        ("source", spec.source.value),
        ("misfire policy", misfire_text(schedule, defaults)),
        *plain_lines(spec, defaults, "lateness", {"offset": [("offset", shift)], "jitter": []}),
        *policy_fields(schedule, defaults),
        *control_fields(schedule, defaults),
        *plain_lines(spec, defaults, "alerts", {}),
        ("next run", at(schedule.next_run_at) if shows_next_run(schedule.status_at(now).state)
         else NONE),
        ("next occurrence", when(schedule.next_occurrence_at)),
        ("last occurrence", when(schedule.last_occurrence_at)),
        ("runs", str(schedule.total_runs)),
        ("missed", str(schedule.total_missed)),
        *([("skipped", str(schedule.total_skipped))] if schedule.total_skipped else []),
        ("version", str(schedule.version)),
        ("created", when(schedule.created_at)),
        ("updated", when(schedule.updated_at)),
    ]


def pause_fields(schedule: Schedule, now: datetime | None,
                 at: Callable[[datetime | None], str]) -> list[tuple[str, Value]]:
    """Why the schedule is paused and until when, while it is (a pause with an end is over
    once it passed: its note is no longer shown)."""
    until = schedule.paused_until
    pausing = until is not None and (now is None or until > now)
    pairs: list[tuple[str, Value]] = []
    if pausing:
        pairs.append(("paused until", at(until)))
    if schedule.paused_reason is not None and (pausing or not schedule.spec.enabled):
        pairs.append(("paused because", schedule.paused_reason))
    return pairs


def control_fields(schedule: Schedule, defaults: Settings) -> list[tuple[str, Value]]:
    """The bounds and the run limit, when set."""
    spec = schedule.spec
    pairs: list[tuple[str, Value]] = []
    if spec.start_at is not None:
        pairs.append(("starts", when(spec.start_at)))
    if spec.end_at is not None:
        pairs.append(("ends", when(spec.end_at)))
    limit: list[tuple[str, Value]] = (
        [] if spec.max_runs is None
        else [("max runs", f"{spec.max_runs} ({schedule.runs_left} left)")])
    return [*pairs, *plain_lines(spec, defaults, "controls", {"max_runs": limit})]


def policy_fields(schedule: Schedule, defaults: Settings) -> list[tuple[str, Value]]:
    """The run policies that differ from the defaults (those a setting stands in for always,
    as ``default (…)`` while it does), and the failures in a row."""
    spec = schedule.spec
    pairs: list[tuple[str, Value]] = []
    if spec.overlap is not None:
        pairs.append(("overlap", spec.overlap.value))
    elif defaults.overlap_policy is not OverlapPolicy.ALLOW:
        pairs.append(("overlap", f"default ({defaults.overlap_policy.value})"))
    if spec.mode is ScheduleMode.FIXED_DELAY:
        delay = spec.delay()
        pairs.append(("mode", "fixed delay" + ("" if delay is None
                                               else f" ({human_duration(delay)} after each run)")))
    backoff = spec.backoff()
    backoff_line: list[tuple[str, Value]] = []
    if backoff is not None:
        cap = "" if backoff.maximum is None else f", at most {human_duration(backoff.maximum)}"
        backoff_line.append(("failure backoff", f"{human_duration(backoff.base)} × "
                                                f"{backoff.factor:g} per failure{cap}"))
    pause_line: list[tuple[str, Value]] = (
        [] if spec.pause_after_failures is None
        else [("pause after", f"{spec.pause_after_failures} failed runs in a row")])
    pairs += plain_lines(spec, defaults, "policies", {
        "failure_backoff": backoff_line, "failure_backoff_factor": [],
        "failure_backoff_max": [], "pause_after_failures": pause_line})
    if schedule.consecutive_failures:
        pairs.append(("failures in a row", str(schedule.consecutive_failures)))
    return pairs


def fault_fields(schedule: Schedule,
                 at: Callable[[datetime | None], str]) -> list[tuple[str, Value]]:
    """Why a schedule is set aside, since when, how many times in a row and when the leader
    looks at it again; and which stored columns could not be read. None for a healthy one."""
    pairs: list[tuple[str, Value]] = []
    if schedule.fault is not None:
        pairs += [
            ("set aside", schedule.fault),
            ("set aside since", at(schedule.fault_at)),
            ("times in a row", str(schedule.faults)),
            ("retry at", at(schedule.next_run_at)),
        ]
    elif schedule.damage and schedule.spec.enabled:
        pairs.append(("set aside", "not yet: the leader sets it aside when it next reads it"))
    if schedule.damage:
        pairs.append(("damage", tuple(str(d) for d in schedule.damage)))
    return pairs


def rotation_text(spec: ScheduleSpec) -> str:
    """A rotation on one line: its queues in turn, and what an unconsumed owner does."""
    handover = ("handed to the next consumed queue" if spec.rotate_handover
                else "waits in its queue")
    return f"{', '.join(spec.rotate)} (occurrence k on queue k mod {len(spec.rotate)}; " \
           f"an occurrence whose queue nobody consumes {handover})"
