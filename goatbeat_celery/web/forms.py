"""The create and edit forms: what was typed → keywords of :class:`~goatbeat_celery.api.Schedules`,
and the API's problems → the field each names, so the page shows it next to that field.

Nothing is checked here that the API checks: a form only reads text into values (a duration,
an instant, JSON), and reports the text it cannot read under its field as the API would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from goatbeat_celery.core.model import Schedule, parse_duration

KINDS = ("every", "cron", "at")
#: Form fields, in page order; problems naming none of them are shown above the form.
FIELDS = ("name", "task", "kind", "every", "cron", "at", "timezone", "queue", "args", "kwargs")
GENERAL = "_form"

#: The leading word of an API problem → the form field it is about.
_FIELD_OF = {
    "name": "name", "task": "task", "trigger": "kind", "every": "every",
    "cron expression": "cron", "cron": "cron", "at": "at", "timezone": "timezone",
    "options.queue": "queue", "queue": "queue", "args": "args", "kwargs": "kwargs",
}
_SUBJECT = re.compile(r"^schedule (?:'[^']*'|\"[^\"]*\"|\S+): ")


@dataclass
class FormState:
    """What a form shows: the values typed (or stored) and the problems under each field."""

    values: dict[str, str]
    errors: dict[str, list[str]] = field(default_factory=dict)

    def add(self, field_name: str, problem: str) -> None:
        self.errors.setdefault(field_name, []).append(problem)

    def add_problems(self, problems: tuple[str, ...] | list[str]) -> None:
        for problem in problems:
            name, text = field_of(problem)
            self.add(name, text)


def field_of(problem: str) -> tuple[str, str]:
    """``"schedule 'x': task: must be …"`` → ``("task", "task: must be …")``."""
    text = _SUBJECT.sub("", problem, count=1)
    head, sep, _ = text.partition(":")
    if sep and head in _FIELD_OF:
        return _FIELD_OF[head], text
    return GENERAL, text


def stored_values(schedule: Schedule, default_timezone: str) -> dict[str, str]:
    """The edit form of a stored schedule, filled with what it holds."""
    spec = schedule.spec
    params = spec.trigger.params if isinstance(spec.trigger.params, Mapping) else {}
    kind = {"interval": "every", "cron": "cron", "once": "at"}.get(spec.trigger.kind, "")
    every = params.get("every")
    queue = spec.options.get("queue") if isinstance(spec.options, Mapping) else None
    return {
        "name": spec.name, "task": str(spec.task), "kind": kind,
        "every": f"{every:g}" if isinstance(every, (int, float)) and kind == "every" else "",
        "cron": str(params.get("expression", "")) if kind == "cron" else "",
        "at": str(params.get("at", "")) if kind == "at" else "",
        "timezone": str(params.get("timezone", "")) if kind == "cron" else default_timezone,
        "queue": queue if isinstance(queue, str) else "",
        "args": json.dumps(list(spec.args)), "kwargs": json.dumps(dict(spec.kwargs)),
    }


def typed_values(form: Mapping[str, Any]) -> dict[str, str]:
    return {name: str(form.get(name, "")).strip() for name in FIELDS}


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
        instant = _instant(values.get("at", ""), zone, state)
        return {} if instant is None else {"at": instant}
    state.add("kind", "trigger: choose every, cron or at")
    return {}


def _instant(text: str, zone: str, state: FormState) -> datetime | None:
    """An ISO-8601 instant; one without an offset (a browser's date-time field) is read in
    ``zone``."""
    raw = text.strip()
    if raw.endswith(("Z", "z")):
        raw = raw[:-1] + "+00:00"
    try:
        instant = datetime.fromisoformat(raw)
    except ValueError:
        state.add("at", f"at: {text!r} is not an ISO-8601 instant; give e.g. "
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
    if not isinstance(value, expected):
        what = "array such as [1, \"a\"]" if expected is list else "object such as {\"a\": 1}"
        state.add(name, f"{name}: expected a JSON {what}")
        return None
    return value


def options_with_queue(options: Mapping[str, Any], queue: str) -> dict[str, Any]:
    """A schedule's options with its queue set to ``queue`` (removed when empty)."""
    changed = {k: v for k, v in options.items() if k != "queue"}
    if queue:
        changed["queue"] = queue
    return changed
