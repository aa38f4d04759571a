"""What goatbeat shows people and scripts: plain aligned tables, JSON documents, and the
escaping, durations and instants they share. The CLI commands print these; the web pages and the
scheduler's messages use the same pieces, so they live outside the ``cli`` package.

Instants are shown in UTC: ``2026-11-29T21:40:02Z`` in tables, full ISO-8601 in JSON.
Durations are seconds in JSON and ``1h30m`` / ``2.5s`` in tables.

Names, tasks, reasons and errors are data a user chose (or a row edited by hand): text output
passes every one of them through :func:`shown`, so a control or bidirectional character can
neither move the cursor nor reorder what the operator reads. JSON output keeps the data exact,
with every character outside ASCII escaped.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeGuard, Union

from goatbeat_celery.core.links import doc
from goatbeat_celery.core.rules.alerts import Alert
from goatbeat_celery.core.rules.backfill import Backfill, BackfillPreview
from goatbeat_celery.core.rules.calendars import Calendar
from goatbeat_celery.core.rules.defaults import own_or_default
from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.shards import (
    Replica,
    Shard,
    ShardingView,
    shard_lease_name,
    standbys,
)
from goatbeat_celery.core.rules.status import State, shows_next_run
from goatbeat_celery.core.rules.validation import hidden_characters
from goatbeat_celery.core.types.audit import AuditAction, AuditEntry, AuditNote, FieldChange
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.fields import Group
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.lease import LeaseInfo
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import PLAIN_FIELDS, ScheduleSpec, TriggerSpec, quoted_name

NONE = "-"

#: A value in :func:`fields`: one line, or several (each shown on its own line).
Value = Union[str, tuple[str, ...]]

#: Most set-aside schedules ``status`` names.
SET_ASIDE_SHOWN = 10


# -- escaping ---------------------------------------------------------------------------------
_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(char: str) -> str:
    code = ord(char)
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def shown(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` fit for a terminal: each character it would not show as itself (control,
    format and bidirectional characters such as ``U+202E``, line separators) written as a Python
    escape (``\\n``, ``\\x1b``, ``\\u202e``). With ``keep_newlines``, ``\\n`` still breaks the
    line (for multi-line messages built here, never for user data)."""
    if text.isprintable():  # the common case: no such character at all
        return text
    if keep_newlines:
        return "\n".join(shown(line) for line in text.split("\n"))
    return "".join(_escape(char) if hidden_characters(char) else char for char in text)


# -- commands ---------------------------------------------------------------------------------
#: What a suggested command says for the app when no -A was given.
ANY_APP = "<your app>"


def command_line(app_given: str | None, words: str) -> str:
    """``celery -A <app> goatbeat <words>`` for the app given with -A, as a suggestion to run
    (``<your app>`` when none was given)."""
    app = ANY_APP if app_given is None else shlex.quote(app_given)
    return f"celery -A {app} goatbeat {words}"


def with_migrate_command(message: str, app_given: str | None) -> str:
    """``message`` from :mod:`goatbeat_celery.migrations`, its migrate command naming the app
    given rather than the placeholder app there."""
    from goatbeat_celery.migrations import MIGRATE_COMMAND

    return message.replace(MIGRATE_COMMAND, command_line(app_given, "migrate"))


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
    if not math.isfinite(value):  # a hand-edited row may hold NaN or infinity
        return f"{value}s"
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
    """``value`` as one line of JSON for a table (``repr`` for what JSON cannot hold)."""
    try:
        return json.dumps(value, separators=(", ", ": "), sort_keys=True, ensure_ascii=False,
                          default=repr)
    except (TypeError, ValueError):  # keys that do not sort, or a value that holds itself
        return repr(value)


def document(value: Any) -> str:
    """A ``--json`` document: the exact data, ASCII only (``\\u202e``, never the character);
    ``repr`` for a value JSON cannot hold (none comes from a store)."""
    return json.dumps(value, indent=2, ensure_ascii=True, default=repr)


# -- triggers ---------------------------------------------------------------------------------
def describe_trigger(trigger: TriggerSpec) -> str:
    """A short description from the stored parameters (no trigger object needed, so schedules
    whose trigger only a beat replica can build are still shown).

    Never raises: parameters of unexpected types, and the stand-in for a trigger that could not
    be read (kind ``invalid``), are shown as stored."""
    kind, params = trigger.kind, _params(trigger)
    every = params.get("every")
    if kind == "interval" and _finite_number(every):
        return f"every {human_seconds(float(every))}"
    expression = params.get("expression")
    if kind == "cron" and isinstance(expression, str):
        text = f"cron {expression}"
        if params.get("day_or") is False and _both_days_restricted(expression):
            text += " (day of month and day of week)"
        return text
    at = params.get("at")
    if kind == "once" and isinstance(at, str):
        return f"once at {_instant_text(at)}"
    if kind == "celery" and ("repr" in params or "entry" in params):
        text = str(params.get("repr", params.get("entry")))
        found = _SOLAR.fullmatch(text)
        if found is not None:
            return f"solar {found['event']} at {_place(found['lat'], found['lon'])}"
        return f"celery {text}"
    return f"{kind} {compact_json(dict(params))}"


def _both_days_restricted(expression: str) -> bool:
    """Whether a cron expression restricts both its day of month and its day of week: only
    then does matching both (Celery's crontab) differ from matching either (cron's rule)."""
    fields = expression.split()
    return len(fields) == 5 and fields[2] != "*" and fields[4] != "*"


#: How celery.schedules.solar shows itself (its repr), the only trace a stored trigger keeps.
_SOLAR = re.compile(r"<solar: (?P<event>[\w_]+) at latitude (?P<lat>-?[\d.]+), "
                    r"longitude: (?P<lon>-?[\d.]+)>")


def _place(latitude: str, longitude: str) -> str:
    """``48.85°N 2.35°E``."""
    lat, lon = float(latitude), float(longitude)
    return (f"{abs(lat):g}°{'N' if lat >= 0 else 'S'} "
            f"{abs(lon):g}°{'E' if lon >= 0 else 'W'}")


def trigger_text(trigger: TriggerSpec) -> str:
    """The trigger in full, for a page: :func:`describe_trigger`, a cron's zone and, when
    cron-descriptor is installed (django-celery-beat brings it), what it means in words."""
    text = describe_trigger(trigger)
    zone = zone_of(trigger)
    if zone is not None:
        text = text.replace(f"cron {_params(trigger).get('expression')}",
                            f"cron {_params(trigger).get('expression')} in {zone}", 1)
    phrase = cron_phrase(trigger)
    return text if phrase is None else f"{text}: {phrase}"


def cron_phrase(trigger: TriggerSpec) -> str | None:
    """A cron expression in words (``At 07:30 AM, Monday through Friday``), None for other
    triggers, or without cron-descriptor, or for what it cannot read."""
    expression = _params(trigger).get("expression")
    if trigger.kind != "cron" or not isinstance(expression, str):
        return None
    try:
        from cron_descriptor import get_description  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    try:
        phrase = str(get_description(expression))
    except Exception:  # its own error types differ between versions; a phrase is a nicety
        return None
    return phrase or None


def _params(trigger: TriggerSpec) -> Mapping[str, Any]:
    # A TriggerSpec built by hand may hold anything; the stores only ever give a mapping.
    params: object = trigger.params
    return params if isinstance(params, Mapping) else {}


def _finite_number(value: object) -> TypeGuard[int | float]:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _instant_text(text: str) -> str:
    """An ISO-8601 instant as tables show it, or the text as stored if it is none."""
    try:
        instant = datetime.fromisoformat(text)
        return when(instant) if instant.tzinfo is not None else text
    except (ValueError, OverflowError):  # not an instant, or beyond year 1..9999 in UTC
        return text


def zone_of(trigger: TriggerSpec) -> str | None:
    """The zone a trigger is evaluated in; intervals and instants have none."""
    zone = _params(trigger).get("timezone") if trigger.kind == "cron" else None
    return None if zone is None else str(zone)


def trigger_json(trigger: TriggerSpec) -> dict[str, Any]:
    """The trigger as stored: its kind and parameters."""
    return {"kind": trigger.kind, **_params(trigger)}


# -- schedules --------------------------------------------------------------------------------
def schedule_json(schedule: Schedule, defaults: Settings, now: datetime) -> dict[str, Any]:
    """A schedule for ``--json``: stored values, with ``effective_*`` for inherited defaults.

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
        "next_run_at": iso(schedule.next_run_at),
        "next_occurrence_at": iso(schedule.next_occurrence_at),
        "last_occurrence_at": iso(schedule.last_occurrence_at),
        "total_runs": schedule.total_runs,
        "total_missed": schedule.total_missed,
        "version": schedule.spec_version,
        "created_at": iso(schedule.created_at),
        "updated_at": iso(schedule.updated_at),
        "set_aside": schedule.set_aside,
        "fault": schedule.fault,
        "fault_at": iso(schedule.fault_at),
        "faults": schedule.faults,
        "damage": list(schedule.damage),
    }


def plain_json(spec: ScheduleSpec, defaults: Settings) -> dict[str, Any]:
    """The spec's plain fields as stored (durations in seconds, None: unset) and, for those a
    setting stands in for, ``effective_<name>``: the value in force."""
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
        ("version", str(schedule.spec_version)),
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
        pairs.append(("damage", tuple(schedule.damage)))
    return pairs


def set_aside_json(schedules: Sequence[Schedule]) -> dict[str, Any]:
    """How many schedules are set aside, and the first :data:`SET_ASIDE_SHOWN` of them."""
    return {"count": len(schedules), "schedules": [
        {"name": s.name, "fault": s.fault, "fault_at": iso(s.fault_at), "faults": s.faults,
         "retry_at": iso(s.next_run_at), "damage": list(s.damage)}
        for s in schedules[:SET_ASIDE_SHOWN]
    ]}


def set_aside_lines(schedules: Sequence[Schedule], list_command: str) -> Value:
    """The ``set aside`` value of ``status``: a count, then one ``name: reason`` line each."""
    if not schedules:
        return "none"
    noun = "schedule" if len(schedules) == 1 else "schedules"
    lines = [f"{len(schedules)} {noun}"]
    lines.extend(f"{s.name}: {s.fault or ', '.join(s.damage)}"
                 for s in schedules[:SET_ASIDE_SHOWN])
    more = len(schedules) - SET_ASIDE_SHOWN
    if more > 0:
        lines.append(f"and {more} more: `{list_command} --set-aside` lists them all")
    return tuple(lines)


# -- executions -------------------------------------------------------------------------------
def lateness(execution: Execution) -> float | None:
    """Seconds from due to accepted by the broker (``None`` until submitted)."""
    if execution.submitted_at is None:
        return None
    return (execution.submitted_at - execution.due_at).total_seconds()


def run_status(execution: Execution) -> str:
    """One word for where a run stands, the truthful one: what a worker reported (or the
    leader's verdict) once there is any, beat's dispatch state before that. A run that was
    ``submitted`` and then failed is ``failed``, never both."""
    if execution.run_state is not None:
        return str(execution.run_state.value)
    return str(execution.state.value)


#: Every word :func:`run_status` can give, in the order a filter lists them.
RUN_STATUSES = ("succeeded", "failed", "running", "retrying", "submitted", "claimed", "held",
                "lost", "unknown", "revoked", "rejected", "skipped", "expired", "abandoned")


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
        "expires_at": iso(execution.expires_at),
        # What the workers reported (run tracking); null where nothing was.
        "run_state": None if execution.run_state is None else execution.run_state.value,
        "worker": execution.worker,
        "run_attempts": execution.run_attempts,
        "started_at": iso(execution.started_at),
        "finished_at": iso(execution.finished_at),
        "heartbeat_at": iso(execution.heartbeat_at),
        "runtime_seconds": seconds(execution.runtime),
        "run_error": execution.run_error,
    }


def execution_reason(execution: Execution) -> str:
    """Why a run failed or never ran, on one line: the worker's error, then the broker's error
    or the reason it was skipped, then the missed occurrences folded into it (``-``: none)."""
    parts = [text for text in (execution.run_error, execution.last_error) if text]
    if execution.missed:
        parts.append(f"{execution.missed} missed before it")
    return "; ".join(parts) or NONE


def _seconds_text(value: float | None) -> str:
    return NONE if value is None else human_seconds(value)


#: ``history --wide``: every column, nothing cut.
EXECUTION_COLUMNS = ("KEY", "STATE", "OCCURRENCE", "DUE", "CLAIMED", "SUBMITTED", "LATENESS",
                     "ATTEMPTS", "MISSED", "RUN", "WORKER", "RUNTIME", "WHY")


def execution_row(execution: Execution) -> tuple[str, ...]:
    return (execution.key, execution.state.value, when(execution.occurrence_at),
            when(execution.due_at), when(execution.claimed_at), when(execution.submitted_at),
            _seconds_text(lateness(execution)), str(execution.attempts), str(execution.missed),
            NONE if execution.run_state is None else execution.run_state.value,
            execution.worker or NONE, _seconds_text(seconds(execution.runtime)),
            execution_reason(execution))


#: ``history``: one run a line, made to fit 100 columns (``LATE`` is the lateness, ``TRIES``
#: the submission attempts); the key and the other instants are in ``--wide`` and ``--json``.
HISTORY_COLUMNS = ("DUE", "STATE", "RUN", "LATE", "RUNTIME", "TRIES", "WORKER", "WHY")
#: A worker keeps its start and its end (``celery@``, the host's unique part); a reason its
#: start (the exception and its message, the run that was in the way).
HISTORY_CLIPPED = {"WORKER": "middle", "WHY": "end"}
HISTORY_DROPPED = ("RUNTIME", "LATE", "TRIES")
#: What the worker and the reason keep before a column of ``history`` is left out.
HISTORY_ROOMY = 12


def history_row(execution: Execution) -> tuple[str, ...]:
    """The :data:`HISTORY_COLUMNS` of one execution, taken from its :func:`execution_row`."""
    row = dict(zip(EXECUTION_COLUMNS, execution_row(execution), strict=True))
    return tuple(row[_HISTORY_SOURCES.get(column, column)] for column in HISTORY_COLUMNS)


_HISTORY_SOURCES = {"LATE": "LATENESS", "TRIES": "ATTEMPTS"}


# -- backfills --------------------------------------------------------------------------------
def backfill_json(backfill: Backfill) -> dict[str, Any]:
    return {
        "id": backfill.id,
        "schedule": backfill.schedule_name,
        "start": iso(backfill.start),
        "end": iso(backfill.end),
        "mode": backfill.mode.value,
        "newest_first": backfill.newest_first,
        "per_tick": backfill.per_tick,
        "state": backfill.state.value,
        "total": backfill.total,
        "examined": backfill.examined,
        "claimed": backfill.claimed,
        "cursor": iso(backfill.cursor),
        "created_at": iso(backfill.created_at),
        "finished_at": iso(backfill.finished_at),
        "error": backfill.error,
        "damage": list(backfill.damage),
    }


BACKFILL_COLUMNS = ("ID", "SCHEDULE", "FROM", "TO", "MODE", "STATE", "EXAMINED", "CLAIMED",
                    "CREATED")


def backfill_row(backfill: Backfill) -> tuple[str, ...]:
    order = " newest first" if backfill.newest_first else ""
    return (str(backfill.id), backfill.schedule_name, when(backfill.start), when(backfill.end),
            backfill.mode.value + order, backfill.state.value,
            f"{backfill.examined}/{backfill.total}", str(backfill.claimed),
            when(backfill.created_at))


def backfill_preview_json(preview: BackfillPreview) -> dict[str, Any]:
    return {
        "schedule": preview.schedule_name,
        "start": iso(preview.start),
        "end": iso(preview.end),
        "mode": preview.mode.value,
        "newest_first": preview.newest_first,
        "total": preview.total,
        "runs": [{"occurrence_at": iso(run.occurrence_at), "key": run.key,
                  "reason": run.reason} for run in preview.runs],
    }


PREVIEW_COLUMNS = ("OCCURRENCE", "KEY", "WHY")


def backfill_preview_rows(preview: BackfillPreview) -> list[tuple[str, ...]]:
    return [(when(run.occurrence_at), run.key, run.reason) for run in preview.runs]


# -- the audit log ----------------------------------------------------------------------------
def audit_value_text(value: Any) -> str:
    """One side of a change for people: ``none``, text as it is, anything else as JSON."""
    if value is None:
        return "none"
    if isinstance(value, str):
        return value
    return compact_json(value)


def audit_changes_text(changes: Mapping[str, FieldChange]) -> str:
    """``task: a → b; enabled: true → false``; the one side there is for a creation or a
    deletion (``task: a``), and for what the change added (``run: <key>``)."""
    parts = []
    for key, (before, after) in changes.items():
        if before is None and after is not None:
            parts.append(f"{key}: {audit_value_text(after)}")
        elif after is None and before is not None:
            parts.append(f"{key}: {audit_value_text(before)} \u2192 none")
        else:
            parts.append(f"{key}: {audit_value_text(before)} \u2192 {audit_value_text(after)}")
    return "; ".join(parts) or NONE


def audit_action(action: AuditAction | str) -> str:
    return action.value if isinstance(action, AuditAction) else action


def audit_json(entry: AuditEntry) -> dict[str, Any]:
    return {"id": entry.id, "schedule": entry.schedule_name, "at": iso(entry.at),
            "action": audit_action(entry.action), "actor": entry.actor, "reason": entry.reason,
            "changes": {key: [before, after] for key, (before, after) in entry.changes.items()},
            "damage": list(entry.damage)}


AUDIT_COLUMNS = ("WHEN", "ACTION", "ACTOR", "CHANGES", "REASON")
AUDIT_CLIPPED = {"ACTOR": "middle", "CHANGES": "end", "REASON": "end"}


def audit_row(entry: AuditEntry) -> tuple[str, ...]:
    return (when(entry.at), audit_action(entry.action), entry.actor,
            audit_changes_text(entry.changes), entry.reason or NONE)


#: How ``sync --plan`` marks each kind of change.
PLAN_MARKS = {AuditAction.CREATE: "+", AuditAction.EDIT: "~", AuditAction.DISABLE: "-",
              AuditAction.DELETE: "x"}


def plan_line(name: str, note: AuditNote) -> str:
    """``~ report  edit  trigger: … → …``: one change of a config sync plan."""
    mark = PLAN_MARKS.get(note.action, "?")
    why = f" ({note.reason})" if note.reason else ""
    return (f"{mark} {quoted_name(name)}  {note.action.value}{why}  "
            f"{audit_changes_text(note.changes)}")


# -- edits ------------------------------------------------------------------------------------
def field_changes(read: Mapping[str, object], now: Mapping[str, object]) -> list[str]:
    """What differs between the fields a person read (``read``, as the form showed them) and
    the same fields now: ``cron '*/5 * * * *' → '*/10 * * * *'``, in the order of ``now``;
    an empty field reads ``none``."""
    def quoted(value: object) -> str:
        return "none" if value in (None, "") else f"'{shown(str(value))}'"

    return [f"{key} {quoted(read.get(key))} \u2192 {quoted(value)}"
            for key, value in now.items()
            if key in read and str(read.get(key) or "") != str(value or "")]


def changed_since_read(name: str, read: Mapping[str, object],
                       now: Mapping[str, object]) -> str | None:
    """The refusal of an edit made over a definition changed since the person read it, naming
    what changed (None when no field shown differs: then only the version says so)."""
    changes = field_changes(read, now)
    if not changes:
        return None
    return (f"schedule {quoted_name(name)} changed since you read it: {', '.join(changes)}; "
            "read it again and redo your change")


# -- lease ------------------------------------------------------------------------------------
def lease_json(name: str, info: LeaseInfo | None,
               settings: Settings | None = None) -> dict[str, Any]:
    """The lease as stored; ``seconds_left`` is by the database clock (negative: expired).
    With ``settings``, also when the holder last renewed it, how long it has been silent
    since, and whether that is longer than its renewals allow (``holder_silent``)."""
    found: dict[str, Any] = {
        "name": name, "holder": None, "token": 0, "acquired_at": None, "expires_at": None,
        "held": False, "seconds_left": None, "previous_holder": None, "changed_at": None}
    if info is not None:
        left = None if info.expires_at is None else (info.expires_at - info.store_now)
        found.update({"name": info.name, "holder": info.holder, "token": info.token,
                      "acquired_at": iso(info.acquired_at), "expires_at": iso(info.expires_at),
                      "held": info.held, "seconds_left": seconds(left),
                      "previous_holder": info.previous_holder,
                      "changed_at": iso(info.changed_at)})
    if settings is not None:
        renewed = None if info is None else info.last_renewal(settings.lease_ttl)
        found.update({
            "last_renewal_at": iso(renewed),
            "silent_seconds": (None if info is None or renewed is None
                               else seconds(info.store_now - renewed)),
            "holder_silent": info is not None and info.silent(settings.lease_ttl,
                                                              settings.lease_renew_interval),
            "renew_interval": seconds(settings.lease_renew_interval)})
    return found


def lease_health(info: LeaseInfo | None, settings: Settings) -> str:
    """``status``'s line on the holder: when it last renewed and, when it has gone silent,
    what happens next (the lease expires, then a standby takes over)."""
    renewed, rest = lease_health_parts(info, settings)
    if info is None or renewed is None:
        return rest
    return relative(renewed, info.store_now) + rest


def lease_health_parts(info: LeaseInfo | None,
                       settings: Settings) -> tuple[datetime | None, str]:
    """:func:`lease_health`'s line in two: the instant of the last renewal it opens with (None
    when it opens with none), for a face to show its own way, and the words after it."""
    renewed = None if info is None else info.last_renewal(settings.lease_ttl)
    if info is None or renewed is None:
        return None, NONE
    every = human_duration(settings.lease_renew_interval)
    if not info.held:
        return renewed, (": the holder stopped renewing and its lease expired; a standby "
                         "takes it at its next attempt")
    if info.silent(settings.lease_ttl, settings.lease_renew_interval):
        silence = human_seconds((info.store_now - renewed).total_seconds())
        left = human_seconds(((info.expires_at or info.store_now) - info.store_now)
                             .total_seconds())
        return None, (f"holder silent for {silence} (it renews every {every}): lease expires "
                      f"in {left}, then a standby takes over")
    return renewed, f"; the leader renews every {every}"


def previous_holder_line(info: LeaseInfo | None) -> str:
    """``status``'s line on who held the lease before: ``X until <instant>`` (its release, or
    the expiry its successor found)."""
    if info is None or info.previous_holder is None:
        return NONE
    return f"{info.previous_holder} until {relative(info.changed_at, info.store_now)}"


def standby_replicas(rows: Sequence[LeaseInfo], info: LeaseInfo | None,
                     settings: Settings) -> list[Replica]:
    """The live replicas leading nothing, from the sharding's lease ``rows`` (their member
    rows) and ``info``, the lease row of one shard (with several, rows holds the shards')."""
    names = {shard_lease_name(settings.lease_name, Shard(k, settings.shards))
             for k in range(settings.shards)}
    leases = [*rows, *(() if info is None else (info,))]
    leaders = {row.holder for row in leases
               if row.name in names and row.held and row.holder is not None}
    return standbys(rows, lease_name=settings.lease_name, count=settings.shards,
                    ttl=settings.lease_ttl, leaders=leaders)


def _seen_ago(replica: Replica, now: datetime) -> float:
    # Whole seconds: a heartbeat's round trip makes the fraction noise.
    return float(round(max(0.0, (now - replica.seen_at).total_seconds())))


def standbys_json(replicas: Sequence[Replica], now: datetime) -> list[dict[str, Any]]:
    """``status --json``'s standbys: each live replica leading nothing, when it was last seen
    (by the database clock ``now``) and how long ago."""
    return [{"holder": replica.holder, "seen_at": iso(replica.seen_at),
             "seen_seconds_ago": _seen_ago(replica, now)} for replica in replicas]


def standbys_line(replicas: Sequence[Replica], now: datetime) -> str:
    """``status``'s standbys: ``host-a (seen 3s ago), host-b (seen 5s ago)``."""
    return ", ".join(f"{replica.holder} (seen {human_seconds(_seen_ago(replica, now))} ago)"
                     for replica in replicas) or NONE


def _shard_rows(rows: Sequence[LeaseInfo],
                settings: Settings) -> list[tuple[int, str, LeaseInfo | None]]:
    by_name = {row.name: row for row in rows}
    names = [shard_lease_name(settings.lease_name, Shard(k, settings.shards))
             for k in range(settings.shards)]
    return [(k, name, by_name.get(name)) for k, name in enumerate(names)]


def _members(rows: Sequence[LeaseInfo], settings: Settings) -> tuple[str, ...]:
    return ShardingView.read(rows, lease_name=settings.lease_name, count=settings.shards,
                             holder="").members


def shards_json(rows: Sequence[LeaseInfo], settings: Settings) -> dict[str, Any]:
    """``status --json``'s shards: each shard's lease, and the live replicas sharing them."""
    return {"shard_count": settings.shards,
            "shards": [{"shard": k, "lease": lease_json(name, info)}
                       for k, name, info in _shard_rows(rows, settings)],
            "replicas": list(_members(rows, settings))}


def shard_lines(rows: Sequence[LeaseInfo], settings: Settings) -> tuple[str, ...]:
    """``status``'s shards: one line each (holder, token, expiry), then the live replicas."""
    lines = []
    for k, info in shard_holders(rows, settings):
        if info is None or info.expires_at is None:
            lines.append(f"{k}: not held")
            continue
        lines.append(f"{k}: {info.holder}, token {info.token}, expires "
                     f"{relative(info.expires_at, info.store_now)}")
    lines.append(shard_members_line(rows, settings))
    return tuple(lines)


def shard_holders(rows: Sequence[LeaseInfo],
                  settings: Settings) -> list[tuple[int, LeaseInfo | None]]:
    """Each shard's number and its lease row while held (None: not held)."""
    return [(k, info if info is not None and info.held and info.expires_at is not None
             else None) for k, _name, info in _shard_rows(rows, settings)]


def shard_members_line(rows: Sequence[LeaseInfo], settings: Settings) -> str:
    """``3 live replicas: a, b, c``: the replicas sharing the shards."""
    members = _members(rows, settings)
    return f"{len(members)} live replicas: {', '.join(members) or NONE}"


# -- layout -----------------------------------------------------------------------------------
#: How wide ``list`` and ``history`` are when standard output is no terminal and ``COLUMNS`` is
#: not set (a pipe, a file): wide enough for their main columns; ``--wide`` and ``--json`` give
#: scripts every value whole.
DEFAULT_WIDTH = 100
#: The narrowest a column is cut to, even when the line then exceeds the width.
CLIPPED_MIN = 10
#: What the cut columns keep before a column that may be left out is (unless told otherwise).
ROOMY = 24
ELLIPSIS = "\u2026"


def _terminal_columns() -> int | None:
    """The width of the terminal standard output is, or None when it is none (a pipe, a file)."""
    try:
        if sys.stdout.isatty():
            return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError, AttributeError):  # a stream without a file descriptor
        pass
    return None


def terminal_width() -> int:
    """How wide a table may be: ``COLUMNS`` when set to a positive number (as ``click`` and
    :func:`shutil.get_terminal_size` read it), else the width of the terminal standard output
    is, else :data:`DEFAULT_WIDTH`. The terminal measured is the stream written to, not
    ``sys.__stdout__``, so output sent elsewhere is not fitted to a terminal it never reaches."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    return _terminal_columns() or DEFAULT_WIDTH


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, width: int | None = None,
          clipped: Mapping[str, str] | None = None, dropped: Sequence[str] = (),
          roomy: int = ROOMY) -> str:
    """Left-aligned columns two spaces apart; no trailing spaces; every cell :func:`shown`.

    With ``width``, the table is made to fit it: first the columns named in ``dropped`` are left
    out, in that order, while the line would not fit with the ``clipped`` columns cut to
    ``roomy`` characters; then the columns named in ``clipped`` are cut short with an ellipsis
    (at their ``"end"`` or in the ``"middle"``) as far as the other columns leave room: a cut
    column keeps at least :data:`CLIPPED_MIN` characters."""
    raw = [list(line) for line in (headers, *rows)]
    lines = [[shown(cell) for cell in line] for line in raw]
    if width is not None and (clipped or dropped):
        cuts = clipped or {}
        kept = _columns_kept(lines, cuts, dropped, width, roomy)
        raw = [[line[i] for i in kept] for line in raw]
        lines = [[line[i] for i in kept] for line in lines]
        names = raw[0]
        widths = _widths(lines)
        flexible = [i for i, name in enumerate(names) if name in cuts]
        limits = _fitted(widths, flexible, width)
        lines = [[_clip(cell, shown_cell, limits.get(i), cuts.get(names[i], "end"))
                  for i, (cell, shown_cell) in enumerate(zip(line, shown_line, strict=True))]
                 for line, shown_line in zip(raw, lines, strict=True)]
    widths = _widths(lines)
    return "\n".join(
        "  ".join(cell.ljust(size) for cell, size in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def _widths(lines: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]


def _columns_kept(lines: Sequence[Sequence[str]], clipped: Mapping[str, str],
                  dropped: Sequence[str], width: int, roomy: int) -> list[int]:
    """The indexes of the columns shown: all but those of ``dropped`` that must go for the line
    to fit. Those holding nothing (``-`` in every row) go first, while anything is cut; then the
    others, in order, while a clipped column would be cut below ``roomy``."""
    headers, *rows = lines
    widths = _widths(lines)
    kept = list(range(len(headers)))
    present = [headers.index(name) for name in dropped if name in headers]
    empty = [i for i in present if all(row[i] == NONE for row in rows)]

    def needed(cut: int | None) -> int:
        return sum(min(widths[i], cut) if cut is not None and headers[i] in clipped
                   else widths[i] for i in kept) + 2 * (len(kept) - 1)

    for index in empty:
        if needed(None) > width:
            kept.remove(index)
    for index in present:
        if index in kept and needed(roomy) > width:
            kept.remove(index)
    return kept


def _fitted(widths: Sequence[int], flexible: Sequence[int], width: int) -> dict[int, int]:
    """How wide each flexible column may be so the line fits in ``width``: the narrow ones keep
    their width, the others share what is left equally."""
    fixed = sum(w for i, w in enumerate(widths) if i not in flexible) + 2 * (len(widths) - 1)
    room = width - fixed
    limits: dict[int, int] = {}
    order = sorted(flexible, key=lambda i: widths[i])
    for done, index in enumerate(order):
        share = room // (len(order) - done)
        limits[index] = min(widths[index], max(share, CLIPPED_MIN))
        room -= limits[index]
    return limits


def _clip(raw: str, cell: str, limit: int | None, where: str = "end") -> str:
    """``cell`` (``raw`` as :func:`shown`) cut to ``limit`` characters with an ellipsis at its
    end or in its middle; an escape is kept whole or left out, never cut."""
    if limit is None or len(cell) <= limit:
        return cell
    room = limit - len(ELLIPSIS)
    if where == "middle":
        tail = "".join(reversed(_kept(reversed(raw), room // 2)))
        return "".join(_kept(iter(raw), room - len(tail))) + ELLIPSIS + tail
    return "".join(_kept(iter(raw), room)) + ELLIPSIS


def _kept(chars: Iterator[str], room: int) -> list[str]:
    """The characters taken from ``chars``, each as :func:`shown`, while they fit in
    ``room``."""
    pieces: list[str] = []
    used = 0
    for char in chars:
        piece = shown(char)
        if used + len(piece) > room:
            break
        pieces.append(piece)
        used += len(piece)
    return pieces


def calendar_entries(calendar: Calendar) -> list[str]:
    """A calendar's dates and ranges as typed: ``2026-12-24``, ``2026-12-24..2027-01-02``."""
    return [entry if isinstance(entry, str) else f"{entry['from']}..{entry['to']}"
            for entry in calendar.entries() if isinstance(entry, (str, dict))]


def calendar_json(calendar: Calendar) -> dict[str, Any]:
    """One calendar for scripts: entries as stored (dates, then ``{"from", "to"}`` ranges)."""
    return {
        "name": calendar.name,
        "description": calendar.description,
        "entries": calendar.entries(),
        "version": calendar.version,
        "created_at": iso(calendar.created_at),
        "updated_at": iso(calendar.updated_at),
        "damage": list(calendar.damage),
    }


def calendar_fields(calendar: Calendar,
                    observed_by: Sequence[str] | None = None) -> list[tuple[str, Value]]:
    """Every detail of one calendar, as ``(label, value)`` lines for :func:`fields`, with the
    schedules observing it when given."""
    entries = calendar_entries(calendar)
    observers: list[tuple[str, Value]] = []
    if observed_by is not None:
        observers = [("observed by", ", ".join(observed_by) or NONE)]
    return [
        ("name", calendar.name),
        *([("description", calendar.description)] if calendar.description is not None
          else []),
        ("excluded", tuple(entries) if entries else NONE),
        *([("damage", tuple(calendar.damage))] if calendar.damage else []),
        *observers,
        ("version", str(calendar.version)),
        ("updated", when(calendar.updated_at)),
    ]


def calendar_row(calendar: Calendar) -> tuple[str, ...]:
    """A calendar as a row of the ``calendar list`` table."""
    entries = calendar_entries(calendar)
    shown_entries = ", ".join(entries[:3]) + (f", … ({len(entries)})" if len(entries) > 3
                                              else "")
    return (calendar.name, "unreadable" if calendar.damage else (shown_entries or NONE),
            calendar.description or "")


def fields(pairs: Sequence[tuple[str, Value]]) -> str:
    """``label  value`` lines with the values aligned, each :func:`shown` (a newline in a value
    is escaped); a value given as a tuple is one line per item, the later ones indented."""
    width = max(len(shown(label)) for label, _ in pairs)
    lines: list[str] = []
    for label, value in pairs:
        first, *rest = [shown(line) for line in
                        ((value,) if isinstance(value, str) else value)] or [""]
        lines.append(f"{shown(label).ljust(width)}  {first}".rstrip())
        lines.extend(f"{'':{width}}  {line}".rstrip() for line in rest)
    return "\n".join(lines)


# -- alerts (docs/alerts.md) -----------------------------------------------------------------
ALERT_COLUMNS = ("ID", "SCHEDULE", "RULE", "STATE", "COUNT", "FIRST", "LAST", "REASON")


def alert_row(alert: Alert) -> list[str]:
    """An alert as a row of :data:`ALERT_COLUMNS`."""
    return [str(alert.id), alert.schedule_name, alert.rule.value, alert.state.value,
            str(alert.count), when(alert.first_at), when(alert.last_at), alert.reason]


def untracked_rules_note(settings: Settings) -> str | None:
    """What the alerts cannot say where the workers do not track runs; None where they do."""
    return None if settings.track_runs else (
        "the workers do not track runs (goatbeat_track_runs is off): overrun and silent are "
        f"not judged, and failed and lost have no evidence ({doc('run-tracking.md')})")
