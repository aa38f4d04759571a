"""The create and edit forms: what was typed → keywords of :class:`~goatbeat_celery.api.Schedules`,
and the API's problems → the field each names (:attr:`Problem.field
<goatbeat_celery.core.types.problems.Problem.field>`), so the page shows it next to that field.

Nothing is checked here that the API checks: a form only reads text into values (a duration,
an instant, JSON), and reports the text it cannot read under its field as the API would.

A schedule's ``options`` are shown in four fields: ``queue``, ``priority`` and ``expires``,
the ones most often changed, each in its own, and every other option as a JSON object
(``options``). Submitting the form sets the options to exactly what the four say.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.validation import finite_number
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.fields import FieldInfo, Group
from goatbeat_celery.core.types.instants import parse_duration
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import PLAIN_FIELDS, MisfirePolicy
from goatbeat_celery.display import human_duration
from goatbeat_celery.spec_input import KEYWORD_OF_KIND

KINDS = tuple(KEYWORD_OF_KIND.values())
#: Options with a field of their own; the others are edited as JSON in ``options``.
OPTION_FIELDS = ("queue", "priority", "expires")
#: The spec's plain fields (durations, counts, factors), each a text field made from its
#: description and shown in its group's fieldset; named as the API's keyword.
PLAIN = {field.name: field for field in PLAIN_FIELDS}
#: The other fields of lateness, run policies and controls, each named as the API's keyword.
POLICY_FIELDS = ("misfire_policy", "overlap", "mode")
CONTROL_FIELDS = ("start_at", "end_at", "calendars", "tags", "description")
#: Rotation across clusters: the queues (separated by commas) and the handover ("yes" or "").
ROTATION_FIELDS = ("rotate", "rotate_handover")
#: Form fields, in page order; problems naming none of them are shown above the form.
FIELDS = ("name", "task", "kind", "every", "cron", "at", "rrule", "solar", "timezone",
          *OPTION_FIELDS, "args",
          "kwargs", "options", *POLICY_FIELDS, *PLAIN, *CONTROL_FIELDS, *ROTATION_FIELDS)
#: Choices of the policies shown as lists (empty: the global setting).
MISFIRE_CHOICES = ("", *(policy.value for policy in MisfirePolicy))
OVERLAP_CHOICES = ("", *(policy.value for policy in OverlapPolicy))
MODE_CHOICES = tuple(mode.value for mode in ScheduleMode)
GENERAL = "_form"
#: What a duration field's hint says it takes (the short form of ``DURATION_FORMS``).
_DURATION_HINT = "seconds, or 30s, 5m, 1h30m"
#: A typical value of each kind, shown in its empty field.
_PLACEHOLDERS = {"duration": "5m", "count": "3", "factor": "2"}

#: Fields of a spec shown under another form field (the trigger's kind is chosen in ``kind``).
_SHOWN_IN = {"trigger": "kind", "cron expression": "cron"}


@dataclass(frozen=True)
class PlainField:
    """A plain field as the form shows it: its description, and the hint made from it."""

    info: FieldInfo
    hint: str

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def label(self) -> str:
        return self.info.label[0].upper() + self.info.label[1:]

    @property
    def placeholder(self) -> str:
        return _PLACEHOLDERS[self.info.kind]


def plain_groups(settings: Settings) -> dict[Group, list[PlainField]]:
    """The plain fields of each group, in their order, with their hints: what the field does,
    how it is typed, and what empty means (the setting standing in, with its value now, or
    none; ``settings`` are those of the dashboard's app)."""
    found: dict[Group, list[PlainField]] = {"lateness": [], "policies": [], "controls": [],
                                          "alerts": []}
    for info in PLAIN_FIELDS:
        hint = info.phrase  # as the form's other hints read
        if info.kind == "duration":
            hint += f": {_DURATION_HINT}"
        empty = _empty_means(info, settings)
        found[info.group].append(PlainField(info, f"{hint}; empty for {empty}"))
    return found


def _empty_means(info: FieldInfo, settings: Settings) -> str:
    """What an empty field gives: the setting standing in, with its value, or none."""
    if info.default is None:
        return info.unset or "none"
    value = getattr(settings, info.default)
    text = ("none" if value is None else human_duration(value)
            if isinstance(value, timedelta) else _number_text(value))
    return f"the global setting ({text})"


@dataclass
class FormState:
    """What a form shows: the values typed (or stored) and the problems under each field."""

    values: dict[str, str]
    errors: dict[str, list[str]] = field(default_factory=dict)
    #: Fields showing the person's own change laid over values saved since they read the
    #: page (after a refused edit): marked, so they see what a second Save applies.
    kept: set[str] = field(default_factory=set)

    def add(self, field_name: str, problem: str) -> None:
        self.errors.setdefault(field_name, []).append(problem)

    def add_problems(self, problems: Iterable[Problem]) -> None:
        for problem in problems:
            self.add(field_of(problem), problem.text)

    def add_refusal(self, exc: Exception) -> None:
        """The problems of a refused call under their fields (a conflict above the form)."""
        if isinstance(exc, ConfigurationError):
            self.add_problems(exc.details)
        else:
            self.add(GENERAL, str(exc))


def field_of(problem: Problem) -> str:
    """The form field showing ``problem``: the one it names (an option with a field of its own
    in that field, any other in ``options``), or :data:`GENERAL`."""
    if problem.field in _SHOWN_IN:
        return _SHOWN_IN[problem.field]
    if problem.root == "options" and problem.detail in OPTION_FIELDS:
        return problem.detail
    return problem.root if problem.root in FIELDS else GENERAL


def stored_values(schedule: Schedule, default_timezone: str) -> dict[str, str]:
    """The edit form of a stored schedule, filled with what it holds."""
    spec = schedule.spec
    params = spec.trigger.params if isinstance(spec.trigger.params, Mapping) else {}
    kind = KEYWORD_OF_KIND.get(spec.trigger.kind, "")
    every = params.get("every")
    return {
        "name": spec.name, "task": str(spec.task), "kind": kind,
        "every": f"{every:g}" if isinstance(every, (int, float)) and kind == "every" else "",
        "cron": str(params.get("expression", "")) if kind == "cron" else "",
        "at": str(params.get("at", "")) if kind == "at" else "",
        "rrule": str(params.get("rule", "")) if kind == "rrule" else "",
        "solar": " ".join(str(params.get(key, "")) for key in ("event", "latitude", "longitude"))
        if kind == "solar" else "",
        "timezone": (str(params.get("timezone", "")) if kind in ("cron", "rrule")
                     else default_timezone),
        **option_values(spec.options),
        "args": _json_text(list(spec.args) if isinstance(spec.args, (list, tuple)) else []),
        "kwargs": _json_text(dict(spec.kwargs) if isinstance(spec.kwargs, Mapping) else {}),
        **policy_values(schedule),
    }


def policy_values(schedule: Schedule) -> dict[str, str]:
    """The lateness, policy and control fields of a stored schedule, as text that reads back
    the same (saving the form unchanged changes nothing): a duration in seconds."""
    spec = schedule.spec
    values = {
        "misfire_policy": _choice_text(spec.misfire_policy),
        "overlap": _choice_text(spec.overlap),
        "mode": _choice_text(spec.mode),
        "start_at": "" if spec.start_at is None else spec.start_at.isoformat(),
        "end_at": "" if spec.end_at is None else spec.end_at.isoformat(),
        "tags": ", ".join(spec.tags), "calendars": ", ".join(spec.calendars),
        "description": spec.description or "",
        "rotate": ", ".join(spec.rotate), "rotate_handover": "yes" if spec.rotate_handover else "",
    }
    for name in PLAIN:
        value = getattr(spec, name)
        values[name] = ("" if value is None else str(value) if isinstance(value, int)
                        else _number_text(value.total_seconds())
                        if isinstance(value, timedelta) else _number_text(value))
    return values


def _choice_text(value: object) -> str:
    return "" if value is None else str(getattr(value, "value", value))


def policy_keywords(state: FormState, default_timezone: str) -> dict[str, Any]:
    """The API's keywords for the lateness, policy and control fields the form sent: empty
    text unsets one (the global setting, no bound, no limit). Text is passed on for the API to
    read (policy names, durations); only what the API takes as a value is read here: counts and
    factors (:func:`plain_value`), instants (ISO-8601, one without offset in the form's zone)
    and comma-separated lists."""
    values = state.values
    found: dict[str, Any] = {}
    for key in (*POLICY_FIELDS, *PLAIN, *CONTROL_FIELDS, *ROTATION_FIELDS):
        if key not in values:
            continue
        text = values[key].strip()
        if key in ("tags", "calendars"):
            found[key] = [part.strip() for part in text.split(",") if part.strip()]
        elif key == "rotate":
            # An empty part is kept, for the API to name ("eu,,us").
            found[key] = [part.strip() for part in text.split(",")] if text else []
        elif key == "rotate_handover":
            found[key] = text == "yes"
        elif key == "mode":
            found[key] = text or ScheduleMode.FIXED_RATE.value
        elif not text:
            found[key] = None
        elif key in PLAIN:
            value = plain_value(PLAIN[key], text, state)
            if value is not None:
                found[key] = value
        elif key in ("start_at", "end_at"):
            instant = read_instant(text, values.get("timezone") or default_timezone, state,
                                   key)
            if instant is not None:
                found[key] = instant
        else:
            found[key] = text
    return found


def plain_value(info: FieldInfo, text: str, state: FormState) -> str | float | int | None:
    """The value of a plain field typed as ``text`` (not empty), read by its kind: a count a
    whole number, a factor a number; unreadable text is reported under the field (None). A
    duration (seconds, or ``30s``, ``5m``) goes on as typed: the API reads it, so that its
    problems come with the API's others. Whether a value is allowed is the API's to say."""
    name = info.name
    if info.kind == "duration":
        return text
    if info.kind == "count":
        if re.fullmatch(r"[+-]?[0-9]{1,18}", text):
            return int(text)
        state.add(name, f"{name}: {text!r} is not a whole number; give e.g. 3, or leave it "
                        "empty")
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isfinite(value):
        return value
    state.add(name, f"{name}: {text!r} is not a number; give e.g. 2 or 1.5, or leave it empty")
    return None


def read_values(form: Mapping[str, Any]) -> dict[str, str]:
    """The fields as the edit page showed them (its ``read`` field: :func:`stored_values` as
    JSON); empty when it sent none or something else (a page of an older release, or edited)."""
    try:
        values = json.loads(str(form.get("read") or "{}"))
    except ValueError:
        return {}
    if not isinstance(values, dict):
        return {}
    return {str(key): str(value) for key, value in values.items() if isinstance(value, str)}


def own_changes(typed: Mapping[str, str], read: Mapping[str, str]) -> dict[str, str]:
    """The fields the person changed: those of ``typed`` whose value differs from what the
    page showed (``read``, :func:`read_values`). Without ``read`` (a page that sent none) every
    field typed counts as changed, as it cannot be told apart."""
    if not read:
        return dict(typed)
    return {key: value for key, value in typed.items()
            if key not in read or value != read[key].strip()}


def option_values(options: object) -> dict[str, str]:
    """``options`` as the four fields show them: an option goes to its own field when that
    field can show it as stored (a text queue, an integer priority, seconds to expire), to the
    JSON of the others otherwise, so that saving the form unchanged changes nothing."""
    rest = dict(options) if isinstance(options, Mapping) else {}
    shown = dict.fromkeys(OPTION_FIELDS, "")
    queue = rest.get("queue")
    if isinstance(queue, str) and queue:
        shown["queue"] = rest.pop("queue")
    priority = rest.get("priority")
    if isinstance(priority, int) and not isinstance(priority, bool):
        shown["priority"] = str(rest.pop("priority"))
    expires = rest.get("expires")
    if finite_number(expires) is not None:
        shown["expires"] = _number_text(rest.pop("expires"))
    shown["options"] = _json_text(rest)
    return shown


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):  # keys that do not sort
        return json.dumps(value, ensure_ascii=False)


def typed_values(form: Mapping[str, Any]) -> dict[str, str]:
    """The fields the form sent, as typed (a field it did not send is left out, so that an edit
    keeps what is stored there)."""
    return {name: str(form[name]).strip() for name in FIELDS if name in form}


def trigger_keywords(state: FormState, default_timezone: str) -> dict[str, Any]:
    """``every=`` / ``cron=`` + ``timezone=`` / ``at=`` from the chosen kind; unreadable text is
    reported under its field (and the trigger left out, so the API names nothing twice)."""
    values = state.values
    kind = values.get("kind", "")
    zone = values.get("timezone") or default_timezone
    if kind == "every":
        try:
            return {"every": parse_duration(values.get("every", ""))}
        except ValueError as exc:
            state.add("every", f"every: {exc}")
            return {}
    if kind == "cron":
        return {"cron": values.get("cron", ""), "timezone": zone}
    if kind == "at":
        instant = read_instant(values.get("at", ""), zone, state)
        return {} if instant is None else {"at": instant}
    if kind == "rrule":
        # A browser sends a text area's line breaks as CRLF: the rule is stored as given.
        return {"rrule": values.get("rrule", "").replace("\r\n", "\n"), "timezone": zone}
    if kind == "solar":
        return _solar_keywords(values.get("solar", ""), state)
    state.add("kind", "trigger: choose every, cron, at, rrule or solar")
    return {}


def _solar_keywords(text: str, state: FormState) -> dict[str, Any]:
    """``solar=`` from "EVENT LATITUDE LONGITUDE"; the API checks the event and the ranges."""
    parts = text.split()
    try:
        if len(parts) != 3:
            raise ValueError
        return {"solar": (parts[0], float(parts[1]), float(parts[2]))}
    except ValueError:
        state.add("solar", f"solar: {text!r} is not an event, a latitude and a longitude; give "
                           "e.g. sunrise 48.85 2.35")
        return {}


def read_instant(text: str, zone: str, state: FormState, name: str = "at",
                 ) -> datetime | None:
    """An ISO-8601 instant; one without an offset (a browser's date-time field) is read in
    ``zone``; unreadable text is reported under the field ``name``."""
    raw = text.strip()
    if raw.endswith(("Z", "z")):
        raw = raw[:-1] + "+00:00"
    try:
        instant = datetime.fromisoformat(raw)
    except ValueError:
        state.add(name, f"{name}: {text!r} is not an ISO-8601 instant; give e.g. "
                        "2026-12-24T18:00 (in the zone below) or 2026-12-24T18:00:00+01:00")
        return None
    if instant.tzinfo is None:
        try:
            instant = instant.replace(tzinfo=ZoneInfo(zone))
        except (ZoneInfoNotFoundError, ValueError):
            state.add("timezone", f"timezone: unknown zone {zone!r}; use an IANA name such as "
                                  "'Europe/Paris'")
            return None
    return instant


def json_value(state: FormState, name: str, expected: type) -> Any:
    text = state.values.get(name, "")
    if not text:
        return expected()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        state.add(name, f"{name}: not valid JSON ({exc.msg} at column {exc.colno})")
        return None
    except ValueError as exc:  # a number too long to convert
        state.add(name, f"{name}: not readable ({exc})")
        return None
    except RecursionError:
        state.add(name, f"{name}: nested too deeply to read; flatten it")
        return None
    if not isinstance(value, expected):
        what = "array such as [1, \"a\"]" if expected is list else "object such as {\"a\": 1}"
        state.add(name, f"{name}: expected a JSON {what}")
        return None
    return value


def call_keywords(state: FormState) -> dict[str, Any]:
    """``args=``, ``kwargs=`` and ``options=`` from the form; text that cannot be read is
    reported under its field (and the keywords are then not to be used)."""
    args = json_value(state, "args", list)
    kwargs = json_value(state, "kwargs", dict)
    options = options_value(state)
    return {"args": tuple(args or ()), "kwargs": kwargs or {}, "options": options}


def options_value(state: FormState) -> dict[str, Any]:
    """The options the four option fields give: the JSON object of ``options`` with
    ``queue``, ``priority`` and ``expires`` set from their fields when filled in."""
    given = json_value(state, "options", dict)
    options: dict[str, Any] = dict(given or {})
    for key in OPTION_FIELDS:
        text = state.values.get(key, "")
        if not text:
            continue
        if key in options:
            state.add(key, f"options.{key}: also given in the other options; give it in one "
                           "place")
            continue
        if key == "priority":
            # A number is read as one; other text (a number too long to be a priority
            # among it) goes as typed, for the API to refuse.
            options[key] = int(text) if re.fullmatch(r"[+-]?[0-9]{1,9}", text) else text
        elif key == "expires":
            try:
                options[key] = _plain_number(parse_duration(text))
            except ValueError as exc:
                state.add(key, f"options.expires: {exc}")
        else:
            options[key] = text
    return options


def _plain_number(seconds: float) -> int | float:
    return int(seconds) if seconds.is_integer() else seconds


#: The fields of the calendar forms.
CALENDAR_FIELDS = ("name", "entries", "description")


def calendar_values(entries: Iterable[str], description: str | None, name: str) -> dict[str, str]:
    """A calendar's form: one date (``2026-12-25``) or range (``2026-12-24..2027-01-02``) a
    line, as ``celery goatbeat calendar`` takes them."""
    return {"name": name, "entries": "\n".join(entries), "description": description or ""}


def calendar_keywords(state: FormState) -> dict[str, Any]:
    """``dates=``, ``ranges=`` and ``description=`` from the form: an entry with ``..`` is a
    range, any other a date; the API reads and judges each (lines, commas or spaces apart)."""
    entries = [part for part in re.split(r"[\s,]+", state.values.get("entries", "")) if part]
    return {"dates": [entry for entry in entries if ".." not in entry],
            "ranges": [entry for entry in entries if ".." in entry],
            "description": state.values.get("description", "").strip() or None}


def add_calendar_problems(state: FormState, problems: Iterable[Problem]) -> None:
    """The API's problems with a calendar under its fields (dates and ranges: ``entries``)."""
    for problem in problems:
        root = problem.root
        field_name = ("entries" if root in ("dates", "ranges")
                      else root if root in CALENDAR_FIELDS else GENERAL)
        state.add(field_name, problem.text)
