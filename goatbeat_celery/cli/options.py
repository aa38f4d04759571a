"""Options and option types the commands share: instants, durations, JSON, ``--json``, and
the schedule options of ``add`` and ``edit`` read into API keywords."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from goatbeat_celery import display
from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.validation import INSTANT_RANGE, MAX_LIMIT, instant_problem
from goatbeat_celery.core.types.fields import Group
from goatbeat_celery.core.types.instants import parse_duration
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import PLAIN_FIELDS, MisfirePolicy
from goatbeat_celery.spec_input import SOLAR_PARAMS, given_triggers

F = TypeVar("F", bound=Callable[..., Any])


if TYPE_CHECKING:
    ParamType = click.ParamType[Any, Any]
else:  # older click releases cannot subscript ParamType at runtime
    ParamType = click.ParamType


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print a JSON document (instants in ISO-8601 UTC) for scripts.")(f)


def reason_option(f: F) -> F:
    return click.option("--reason", metavar="TEXT",
                        help="Why, for the audit log (`audit NAME` shows it).")(f)


def limit_option(default: int, help: str) -> Callable[[F], F]:
    """``--limit N`` of a listing: from 1 to the most a store reads in one listing."""
    return click.option("--limit", type=click.IntRange(min=1, max=MAX_LIMIT), default=default,
                        show_default=True, metavar="N", help=help)


# -- option types ---------------------------------------------------------------------------
class JSONParam(ParamType):
    """A JSON array or object given on the command line."""

    def __init__(self, expected: type[list[Any]] | type[dict[str, Any]], example: str) -> None:
        self.expected = expected
        self.example = example
        self.name = "json " + ("array" if expected is list else "object")

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            self.fail(f"{value!r} is not valid JSON ({exc.msg} at column {exc.colno}); "
                      f"give a {self.name} such as {self.example}", param, ctx)
        if not isinstance(parsed, self.expected):
            self.fail(f"expected a {self.name} such as {self.example}, got "
                      f"{type(parsed).__name__} {value!r}", param, ctx)
        return parsed


class InstantParam(ParamType):
    """An ISO-8601 instant with its zone (``Z`` allowed) within the range every instant a user
    gives must lie in (``core.rules.validation.INSTANT_RANGE``); naive times are refused."""

    name = "instant"
    example = "2026-12-24T18:00:00+01:00"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, datetime):
            return value
        text = str(value).strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except (ValueError, OverflowError):
            self.fail(f"{display.shown(repr(value))} is not an ISO-8601 instant; give e.g. "
                      f"{self.example}", param, ctx)
        if parsed.tzinfo is None or parsed.utcoffset() is None:
            self.fail(f"{display.shown(repr(value))} has no zone; add its offset, e.g. "
                      f"{display.shown(text)}+00:00 (or {display.shown(text)}Z for UTC)",
                      param, ctx)
        if instant_problem(parsed, "instant") is not None:
            self.fail(f"{display.shown(repr(value))} is out of range; give an instant "
                      f"{INSTANT_RANGE}", param, ctx)
        return parsed


class ClearableInstantParam(InstantParam):
    """An instant, or ``none`` to remove one (``edit``)."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.strip().lower() == NO_VALUE:
            return NO_VALUE
        return super().convert(value, param, ctx)


#: What ``edit --start-at`` and ``--end-at`` take to remove a bound.
NO_VALUE = "none"


class DurationParam(ParamType):
    """A duration as tables print it (``90s``, ``1m``, ``1h30m``, ``2d``, ``1.5h``) or plain
    seconds (``60``, ``0.5``), read by the core's one parser; given on as seconds."""

    name = "duration"

    def __init__(self, *, positive: bool = False) -> None:
        self.positive = positive

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        try:
            seconds = parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if self.positive and seconds == 0:
            self.fail(f"must be more than zero, got {value!r}", param, ctx)
        return seconds


_POLICIES = [p.value for p in MisfirePolicy]
_OVERLAPS = [p.value for p in OverlapPolicy]
DEFAULT_POLICY = "default"
#: The trigger kinds read in a zone (the keyword that gives each is the kind's name).
ZONED_TRIGGERS = ("cron", "rrule")


def plain_options(group: Group, *, editing: bool) -> list[Callable[[F], F]]:
    """The options of the spec's plain fields in ``group``, made from their descriptions
    (:data:`~goatbeat_celery.core.types.spec.PLAIN_FIELDS`); on ``edit``, 0 turns back to unset
    a field that says so."""
    options = []
    for field in PLAIN_FIELDS:
        if field.group != group:
            continue
        off = editing and field.off is not None
        kind: Any
        if field.kind == "duration":
            kind, metavar = DurationParam(), "DURATION"
        # Only the form is read here: the range is judged by the API with every other
        # problem, so one out-of-range number does not hide the rest.
        elif field.kind == "count":
            kind, metavar = click.INT, "N"
        else:
            kind, metavar = click.FLOAT, "FACTOR"
        help_text = (field.help.rstrip(".")
                     + (f" (default {field.unset})" if field.unset is not None else "")
                     + (f"; 0 {field.off}." if off else "."))
        options.append(click.option(field.option, field.name, type=kind, metavar=metavar,
                                    help=help_text))
    return options


def spec_options(*, editing: bool) -> Callable[[F], F]:
    """The options ``add`` and ``edit`` share; ``edit`` changes only those given."""
    policies = [*_POLICIES, DEFAULT_POLICY] if editing else _POLICIES
    overlaps = [*_OVERLAPS, DEFAULT_POLICY] if editing else _OVERLAPS
    options = [
        click.option("--every", type=DurationParam(positive=True), metavar="DURATION",
                     help="Run every DURATION (60, 90s, 1h30m, 2d) on a fixed grid counted "
                          "from the Unix epoch."),
        click.option("--cron", metavar="EXPR",
                     help='Run on a 5-field cron expression, e.g. "0 7 * * mon-fri".'),
        click.option("--timezone", metavar="ZONE",
                     help="IANA zone the --cron expression or --rrule rule is read in "
                          "(default: the app's timezone)."),
        click.option("--at", type=InstantParam(), metavar="ISO",
                     help=f"Run once at this instant, with its zone, e.g. {InstantParam.example}."),
        click.option("--rrule", metavar="TEXT",
                     help='Run on an RFC 5545 recurrence rule, e.g. "FREQ=WEEKLY;BYDAY=TU;'
                          'BYHOUR=9;BYMINUTE=0" (without a DTSTART line it counts from '
                          "midnight of today in its zone)."),
        # Three values, so that a negative longitude reads as one rather than as an option.
        click.option("--solar", type=click.Tuple([str, float, float]),
                     metavar="EVENT LAT LON",
                     help="Run at Celery's solar EVENT (sunrise, sunset, dawn_civil…) at a "
                          "latitude and longitude in degrees (north and east), e.g. "
                          "--solar sunrise 48.85 2.35."),
        click.option("--args", type=JSONParam(list, '\'[1, "a"]\''), metavar="JSON",
                     help="Positional arguments, a JSON array."),
        click.option("--kwargs", type=JSONParam(dict, '\'{"key": 1}\''), metavar="JSON",
                     help="Keyword arguments, a JSON object."),
        click.option("--misfire-policy", type=click.Choice(policies),
                     help="Late occurrences: latest runs one for the backlog, all runs each "
                          "(up to --max-catchup), skip runs none"
                          + ("; default follows goatbeat_misfire_policy." if editing else ".")),
        *plain_options("lateness", editing=editing),
        # The run policies need run tracking on the workers (docs/run-tracking.md).
        click.option("--overlap", type=click.Choice(overlaps),
                     help="A due run while the previous one has not finished: allow sends it, "
                          "skip records it as skipped, buffer_one holds one until the previous "
                          "finishes (needs run tracking)"
                          + ("; default follows goatbeat_overlap_policy." if editing else ".")),
        click.option("--fixed-delay/--fixed-rate", "fixed_delay", default=None,
                     help="With --every: the next run is due DURATION after the previous one "
                          "finished (needs run tracking), instead of on the grid."),
        *plain_options("policies", editing=editing),
        # The controls (docs/controls.md).
        click.option("--start-at", type=ClearableInstantParam() if editing else InstantParam(),
                     metavar="ISO", help="No run due before this instant"
                                         + (" (none removes it)." if editing else ".")),
        click.option("--end-at", type=ClearableInstantParam() if editing else InstantParam(),
                     metavar="ISO", help="No run due after this instant; then it has no next "
                                         "run" + (" (none removes it)." if editing else ".")),
        *plain_options("controls", editing=editing),
        # The alert thresholds (docs/alerts.md).
        *plain_options("alerts", editing=editing),
        click.option("--description", metavar="TEXT",
                     help="What the schedule is for, shown with it"
                          + (" (\"\" removes it)." if editing else ".")),
        click.option("--tag", "tags", multiple=True, metavar="TAG",
                     help="A label to filter `list --tag` by; repeat for several"
                          + (" (replaces the tags; --tag \"\" removes them all)." if editing
                             else ".")),
        click.option("--calendar", "calendars", multiple=True, metavar="NAME",
                     help="An exclusion calendar to observe: no run on its dates; repeat for "
                          "several" + (" (replaces them; --calendar \"\" removes them all)."
                                       if editing else ".")),
        # Rotation across clusters (docs/scheduling.md).
        click.option("--rotate", metavar="QUEUES",
                     help="Queues to rotate over, separated by commas: occurrence k goes to "
                          "queue k mod N" + (" (--rotate \"\" removes the rotation)."
                                             if editing else ".")),
        click.option("--rotate-handover/--no-rotate-handover", "rotate_handover",
                     default=None,
                     help="With --rotate: an occurrence whose queue nobody consumes goes to the "
                          "next queue somebody does (default: it waits in its own)."),
    ]
    if editing:
        options.insert(0, click.option("--task", metavar="TASK", help="Task to send."))
        options.append(click.option("--paused/--enabled", "paused", default=None,
                                    help="Pause the schedule, or run it again."))
    else:
        options.append(click.option("--paused", is_flag=True,
                                    help="Store it paused; `resume` starts it."))

    def apply(f: F) -> F:
        for option in reversed(options):
            f = option(f)
        return f

    return apply


def trigger_choice(given: Mapping[str, Any], *, required: bool,
                   current: Schedule | None = None) -> dict[str, Any]:
    """The trigger keywords for the API, after checking the options make one trigger (and
    that ``--timezone`` comes with a trigger read in a zone, or changes the zone of one)."""
    chosen = [f"--{key}" for key in given_triggers(given)]
    if len(chosen) > 1 or (required and not chosen):
        raise click.UsageError("give exactly one of --every DURATION, --cron EXPR, --at ISO, "
                               "--rrule TEXT or --solar EVENT LAT LON "
                               f"(got {', '.join(chosen) or 'none'})")
    if given.get("timezone") is not None and not any(
            given.get(key) is not None for key in ZONED_TRIGGERS):
        zoned_now = current is not None and current.spec.trigger.kind in ZONED_TRIGGERS
        if not zoned_now:
            raise click.UsageError("--timezone applies to cron and rrule schedules: give "
                                   "--cron EXPR or --rrule TEXT with it")
    keywords = {key: given[key] for key in ("every", "cron", "at", "rrule", "timezone")
                if given.get(key) is not None}
    if given.get("solar") is not None:
        keywords["solar"] = dict(zip(SOLAR_PARAMS, given["solar"], strict=True))
    return keywords


def spec_changes(given: Mapping[str, Any], current: Schedule | None) -> dict[str, Any]:
    """The non-trigger fields the options set, as API keywords."""
    changes: dict[str, Any] = {}
    if given.get("task") is not None:
        changes["task"] = given["task"]
    if given.get("args") is not None:
        changes["args"] = tuple(given["args"])
    if given.get("kwargs") is not None:
        changes["kwargs"] = dict(given["kwargs"])
    policy = given.get("misfire_policy")
    if policy is not None:
        changes["misfire_policy"] = None if policy == DEFAULT_POLICY else policy
    for field in PLAIN_FIELDS:
        value = given.get(field.name)
        if value is not None:
            changes[field.name] = None if field.off is not None and not value else value
    changes.update(_policy_changes(given))
    changes.update(_control_changes(given))
    # An offset replaces a jitter and the other way round (a schedule has one shift).
    if given.get("offset") is not None:
        changes.setdefault("jitter", None)
    if given.get("jitter") is not None:
        changes.setdefault("offset", None)
    return changes


def _control_changes(given: Mapping[str, Any]) -> dict[str, Any]:
    """The controls the options set, as API keywords (on ``edit``, ``none`` and "" remove
    one)."""
    changes: dict[str, Any] = {}
    for key in ("start_at", "end_at"):
        if given.get(key) is not None:
            changes[key] = None if given[key] == NO_VALUE else given[key]
    if given.get("description") is not None:
        changes["description"] = given["description"] or None
    if given.get("tags"):
        changes["tags"] = [tag for tag in given["tags"] if tag] if given["tags"] != ("",) \
            else []
    if given.get("calendars"):
        changes["calendars"] = [name for name in given["calendars"] if name]
    rotate = given.get("rotate")
    if rotate is not None:
        changes["rotate"] = [queue.strip() for queue in rotate.split(",")] if rotate.strip() \
            else []
        if not changes["rotate"] and given.get("rotate_handover") is None:
            changes["rotate_handover"] = False  # no rotation, no handover
    if given.get("rotate_handover") is not None:
        changes["rotate_handover"] = given["rotate_handover"]
    return changes


def _policy_changes(given: Mapping[str, Any]) -> dict[str, Any]:
    """The run policies the options set, as API keywords (on ``edit``, ``default`` turns a
    policy back to the default, and 0 a backoff off with its shape)."""
    changes: dict[str, Any] = {}
    overlap = given.get("overlap")
    if overlap is not None:
        changes["overlap"] = None if overlap == DEFAULT_POLICY else overlap
    if given.get("fixed_delay") is not None:
        changes["mode"] = (ScheduleMode.FIXED_DELAY if given["fixed_delay"]
                           else ScheduleMode.FIXED_RATE)
    backoff = given.get("failure_backoff")
    if backoff is not None and not backoff:  # off: its shape goes with it, unless given
        for key in ("failure_backoff_factor", "failure_backoff_max"):
            if given.get(key) is None:
                changes[key] = None
    return changes
