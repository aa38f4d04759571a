"""Loose input → a validated :class:`~goatbeat_celery.core.types.spec.ScheduleSpec`: the one
conversion behind every way a schedule is given.

The API's keywords (which the CLI, the dashboard and the admin call with what was typed) and a
``beat_schedule`` entry's ``goatbeat`` options are read here: names of policies, durations,
instants, tags and calendars, the trigger from ``every=``/``cron=``/``at=``, then the spec's
own rules and what only kombu knows of its options. Each caller says how its fields are
labelled in problems (``misfire_grace`` for the API, ``beat_schedule['x'].goatbeat.misfire_grace``
for a config entry); every problem found is appended, none raised, so the caller reports all
of them at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields as dataclass_fields
from dataclasses import replace
from datetime import datetime
from typing import Any

from kombu import compression, serialization

from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.triggers import IntervalTrigger, OnceTrigger
from goatbeat_celery.core.rules.validation import instant_problem, shown_value
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import UTC, Duration, ensure_aware, to_timedelta
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import (
    PLAIN_FIELDS,
    MisfirePolicy,
    ScheduleSource,
    ScheduleSpec,
    TriggerSpec,
)
from goatbeat_celery.cron import CronTrigger
from goatbeat_celery.rrule import RRuleTrigger, with_start
from goatbeat_celery.solar import SolarTrigger

#: The fields of a spec besides its name, trigger, ``enabled`` and source, as keywords.
SPEC_FIELDS = tuple(field.name for field in dataclass_fields(ScheduleSpec)
                    if field.name not in ("name", "trigger", "enabled", "source"))
#: The fields given as durations (seconds, a timedelta or text such as ``"1m30s"``).
DURATION_FIELDS = tuple(field.name for field in PLAIN_FIELDS if field.kind == "duration")
#: A stored trigger's kind → the keyword (and form field) that gives it.
KEYWORD_OF_KIND = {"interval": "every", "cron": "cron", "once": "at", "rrule": "rrule",
                   "solar": "solar"}
#: The keywords that each give a trigger (a schedule takes one).
TRIGGER_KEYWORDS = ("every", "cron", "at", "rrule", "solar")
#: A solar trigger given as the keyword ``solar``: its parameters, or these three in order.
SOLAR_PARAMS = ("event", "latitude", "longitude")
#: A zone given for a schedule that is not a cron schedule.
ZONE_WITHOUT_CRON = Problem("timezone", "applies to cron and rrule schedules only (an every= "
                            "interval runs on a grid counted from the Unix epoch, an at= instant "
                            "carries its own offset, a solar event happens at its place)",
                            "remove it, or give cron= or rrule= with it")

#: ``day_or`` given alone to a schedule that is not a cron schedule.
DAY_OR_WITHOUT_CRON = Problem("day_or", "applies to cron schedules only (it says how a cron "
                              "expression's day fields combine)",
                              "remove it, or give cron= with it")

Label = Callable[[str], str]


def _as_is(key: str) -> str:
    return key


def given_triggers(values: Mapping[str, Any]) -> list[str]:
    """Which of :data:`TRIGGER_KEYWORDS` ``values`` gives (a schedule takes one)."""
    return [key for key in TRIGGER_KEYWORDS if values.get(key) is not None]


def trigger_spec(every: Duration | None, cron: str | None, at: datetime | str | None,
                 timezone: str | None, problems: list[Problem], *, default_zone: str,
                 day_or: bool = True, rrule: str | None = None, solar: Any = None,
                 now: datetime | None = None) -> TriggerSpec | None:
    """The trigger of exactly one of ``every``, ``cron`` (read in ``timezone``, by default
    ``default_zone``), ``at`` (an aware datetime, or ISO-8601 text with an offset), ``rrule``
    (RFC 5545 text read in the zone as cron is; without a ``DTSTART``, it starts at midnight of
    ``now``'s day there) or ``solar`` (``{"event", "latitude", "longitude"}``, or those three in
    order); None with the problems appended."""
    given = given_triggers({"every": every, "cron": cron, "at": at, "rrule": rrule,
                            "solar": solar})
    if len(given) != 1:
        problems.append(Problem("trigger", "give exactly one of every=, cron=, at=, rrule= or "
                                f"solar= (got {', '.join(given) or 'none'})"))
        return None
    if cron is None and not isinstance(day_or, bool):  # a cron trigger judges its own
        problems.append(Problem("day_or", f"expected true or false, got {shown_value(day_or)}"))
        return None
    if isinstance(at, str):
        at = _instant(at, "at", problems, text=True)
        if at is None:
            return None
    if timezone is not None and cron is None and rrule is None:
        problems.append(ZONE_WITHOUT_CRON)
        return None
    if isinstance(timezone, str) and not timezone.strip():
        problems.append(Problem("timezone", "is empty",
                                "give an IANA zone such as 'Europe/Paris', or leave it out "
                                f"for the app's zone ({default_zone})"))
        return None
    try:
        if every is not None:
            return IntervalTrigger(to_timedelta(every, "every")).to_spec()
        if cron is not None:
            return CronTrigger(cron, default_zone if timezone is None else timezone,
                               day_or=day_or).to_spec()
        zone = default_zone if timezone is None else timezone
        if rrule is not None:
            return _rrule_spec(rrule, zone, datetime.now(UTC) if now is None else now,
                               problems)
        if solar is not None:
            return _solar_spec(solar, problems)
        assert at is not None
        return OnceTrigger(ensure_aware(at, "at")).to_spec()
    except ConfigurationError as exc:
        problems.extend(exc.details)
        return None


def _rrule_spec(rule: str, zone: str, now: datetime, problems: list[Problem]
                ) -> TriggerSpec | None:
    try:
        trigger = RRuleTrigger(with_start(rule, zone, now), zone)
    except ConfigurationError as exc:
        problems.extend(replace(p, field="rrule" if p.field == "rule" else p.field, subject="")
                        for p in exc.details)
        return None
    if trigger.next_after(now) is None:
        problems.append(Problem("rrule", "has no occurrence after now (its COUNT or UNTIL "
                                "has passed, or it matches no date)",
                                "check DTSTART, COUNT and UNTIL"))
        return None
    return trigger.to_spec()


def _solar_spec(value: Any, problems: list[Problem]) -> TriggerSpec | None:
    if isinstance(value, Mapping):
        params = {key: value.get(key) for key in SOLAR_PARAMS}
        unknown = sorted(set(map(str, value)) - set(SOLAR_PARAMS))
        if unknown:
            problems.append(Problem(f"solar.{unknown[0]}", "unknown field",
                                    f"use {', '.join(SOLAR_PARAMS)}"))
            return None
    elif isinstance(value, (list, tuple)) and len(value) == len(SOLAR_PARAMS):
        params = dict(zip(SOLAR_PARAMS, value, strict=True))
    else:
        problems.append(Problem("solar", f"expected an event, a latitude and a longitude, got "
                                f"{shown_value(value)}",
                                "give e.g. {'event': 'sunrise', 'latitude': 48.85, "
                                "'longitude': 2.35}"))
        return None
    try:
        return SolarTrigger.from_params(params).to_spec()
    except ConfigurationError as exc:
        problems.extend(replace(p, field=f"solar.{p.field}" if p.field != "solar" else "solar",
                                subject="") for p in exc.details)
        return None


def spec_fields(values: Mapping[str, Any], problems: list[Problem], *, label: Label = _as_is,
                text_instants: bool = False) -> dict[str, Any]:
    """The spec fields of ``values`` (those of :data:`SPEC_FIELDS` it holds), read into the
    types a spec holds: policies by name, durations, aware instants (ISO-8601 text too with
    ``text_instants``), lists as tuples. What cannot be read is named under ``label(key)`` and
    left unset, so that it is reported once; the rest is judged by the spec's own rules."""
    found = {key: values[key] for key in SPEC_FIELDS if key in values}
    readers: tuple[tuple[str, Any], ...] = (
        ("misfire_policy", MisfirePolicy), ("overlap", OverlapPolicy), ("mode", ScheduleMode))
    for key, kind in readers:
        if found.get(key) is not None:
            found[key] = kind.read(found[key], label(key), problems)
    if "mode" in found:
        found["mode"] = found["mode"] or ScheduleMode.FIXED_RATE
    for key in DURATION_FIELDS:
        if found.get(key) is not None:
            try:
                found[key] = to_timedelta(found[key], label(key))
            except ConfigurationError as exc:
                problems.extend(exc.details)
                found[key] = None
    for key in ("start_at", "end_at"):
        if found.get(key) is not None:
            found[key] = _instant(found[key], label(key), problems, text=text_instants)
    for key in ("tags", "calendars", "rotate"):
        if key in found:
            found[key] = tuple(found[key]) if isinstance(found[key], list) else (
                () if found[key] is None else found[key])
    # Kept as given when of the wrong shape (a string is not split into characters): the
    # spec's own check names the field.
    if isinstance(found.get("args"), list):
        found["args"] = tuple(found["args"])
    return found


def _instant(value: Any, label: str, problems: list[Problem], *, text: bool
             ) -> datetime | None:
    if text and isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            problems.append(Problem(label, f"cannot read {value!r} as an ISO-8601 instant",
                                    "give e.g. '2030-01-01T09:00:00+01:00' or an aware "
                                    "datetime"))
            return None
    problem = instant_problem(value, label)
    if problem is not None:
        problems.append(problem)
        return None
    return ensure_aware(value, label)


def checked_spec(fields: Mapping[str, Any], problems: list[Problem], *, name: str,
                 trigger: TriggerSpec | None, source: ScheduleSource, enabled: bool = True,
                 relabel: Callable[[list[Problem]], list[Problem]] | None = None,
                 options_label: str = "options") -> ScheduleSpec:
    """The spec of ``fields`` (as :func:`spec_fields` reads them), with every problem of its
    options and of its own rules appended (``relabel`` rewrites the latter for the caller's
    naming). A missing ``trigger`` (already reported) stands in as an invalid one."""
    problems.extend(kombu_problems(fields.get("options"), options_label))
    spec = ScheduleSpec(name=name, trigger=trigger or TriggerSpec(kind="invalid"),
                        enabled=enabled, source=source, **fields)
    found = spec.problems()
    problems.extend(found if relabel is None else relabel(found))
    return spec


def kombu_problems(options: object, label: str = "options") -> list[Problem]:
    """What only kombu can tell about a schedule's options: whether the serializer and the
    compression they name are known to it."""
    if not isinstance(options, Mapping):
        return []
    found: list[Problem] = []
    serializer = options.get("serializer")
    if isinstance(serializer, str) and serializer not in serialization.registry.name_to_type:
        known = ", ".join(sorted(serialization.registry.name_to_type))
        found.append(Problem(f"{label}.serializer", f"unknown serializer {serializer!r}",
                             f"use one of: {known}"))
    method = options.get("compression")
    if isinstance(method, str):
        try:
            compression.get_encoder(method)  # type: ignore[no-untyped-call]
        except KeyError:
            found.append(Problem(f"{label}.compression", f"unknown compression {method!r}",
                                 "use one of: zlib, bzip2, lzma (or one registered with "
                                 "kombu)"))
    return found
