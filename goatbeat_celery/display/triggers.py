"""Triggers described from their stored parameters: short for a table, in full for a page,
as stored for JSON."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeGuard

from goatbeat_celery.core.types.spec import TriggerSpec
from goatbeat_celery.display.scalars import compact_json, human_seconds, when


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
    rule = params.get("rule")
    if kind == "rrule" and isinstance(rule, str):
        return f"rrule {rrule_text(rule)}"
    if kind == "solar" and isinstance(params.get("event"), str) \
            and _finite_number(params.get("latitude")) and _finite_number(params.get("longitude")):
        return (f"solar {params['event']} at "
                f"{_place(str(params['latitude']), str(params['longitude']))}")
    if kind == "celery" and ("repr" in params or "entry" in params):
        text = str(params.get("repr", params.get("entry")))
        found = _SOLAR.fullmatch(text)
        if found is not None:
            return f"solar {found['event']} at {_place(found['lat'], found['lon'])}"
        return f"celery {text}"
    return f"{kind} {compact_json(dict(params))}"


def rrule_text(rule: str) -> str:
    """A recurrence rule on one line: its rule parts, then where it starts and what it leaves
    out (``FREQ=WEEKLY;BYDAY=TU from 2026-01-05 09:00 except 2026-01-20 09:00``)."""
    parts: list[str] = []
    extra: list[str] = []
    for line in rule.split():
        name, _, value = line.rpartition(":") if ":" in line else ("RRULE", "", line)
        name = name.split(";")[0].upper()
        if name == "DTSTART":
            extra.insert(0, f"from {_wall(value)}")
        elif name == "EXDATE":
            extra.append("except " + ", ".join(_wall(v) for v in value.split(",")))
        elif name == "RDATE":
            extra.append("also " + ", ".join(_wall(v) for v in value.split(",")))
        else:
            parts.append(value if name == "RRULE" else line)
    return " ".join((*parts, *extra))


def _wall(value: str) -> str:
    """``20260105T090000`` as ``2026-01-05 09:00`` (seconds when there are some)."""
    try:
        moment = datetime.strptime(value.rstrip("Zz"), "%Y%m%dT%H%M%S")
    except ValueError:
        return value
    shown = f"{moment:%Y-%m-%d %H:%M}" + (f":{moment:%S}" if moment.second else "")
    return shown + (" UTC" if value[-1:] in "Zz" else "")


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
    if zone is not None and trigger.kind == "rrule":
        text = f"{text} in {zone}"
    elif zone is not None:
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
    zone = _params(trigger).get("timezone") if trigger.kind in ("cron", "rrule") else None
    return None if zone is None else str(zone)


def trigger_json(trigger: TriggerSpec) -> dict[str, Any]:
    """The trigger as stored: its kind and parameters.

    Part of :func:`~goatbeat_celery.display.schedules.schedule_json`'s contract (``--json`` and
    the HTTP API): ``kind`` always, then the trigger's stored parameters as they are (``every``
    for an interval, ``expression`` and ``timezone`` for a cron, ``at`` for a one-off,
    ``rule`` and ``timezone`` for a recurrence rule, ``event``, ``latitude`` and ``longitude``
    for a solar event…)."""
    return {"kind": trigger.kind, **_params(trigger)}
