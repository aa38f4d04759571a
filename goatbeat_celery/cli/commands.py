"""The ``goatbeat`` command group and its commands (see the package docstring for a tour)."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click
from celery.bin.base import CeleryCommand

from goatbeat_celery import display
from goatbeat_celery.cli import checks as checks_module
from goatbeat_celery.core.backfill import MAX_PER_TICK, BackfillMode
from goatbeat_celery.core.calendars import Calendar, parse_entries
from goatbeat_celery.core.errors import (
    BackfillNotFound,
    CalendarInUse,
    CalendarNotFound,
    ConfigurationError,
    GoatbeatError,
    ScheduleConflict,
    ScheduleNotFound,
    StoreUnavailable,
)
from goatbeat_celery.core.model import (
    MisfirePolicy,
    Schedule,
    ScheduleSource,
    parse_duration,
)
from goatbeat_celery.core.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.protocols import LeaseManager
from goatbeat_celery.core.shards import Shard, shard_lease_name, shard_of, sharding_prefix
from goatbeat_celery.core.validation import INSTANT_RANGE, MAX_LIMIT, instant_problem
from goatbeat_celery.specs import given_triggers

if TYPE_CHECKING:
    from goatbeat_celery.api import Schedules

F = TypeVar("F", bound=Callable[..., Any])

#: Exit status for a database that cannot be reached, as Celery's own commands use for a broker.
EX_UNAVAILABLE = 69

#: Leading field names in goatbeat's problem messages → the option an operator typed.
_OPTION_OF = {
    "every": "--every",
    "cron expression": "--cron",
    "timezone": "--timezone",
    "at": "--at",
    "misfire_policy": "--misfire-policy",
    "misfire_grace": "--misfire-grace",
    "max_catchup": "--max-catchup",
    "offset": "--offset",
    "jitter": "--jitter",
    "starting_deadline": "--starting-deadline",
    "overlap": "--overlap",
    "mode": "--fixed-delay",
    "failure_backoff": "--failure-backoff",
    "failure_backoff_factor": "--failure-backoff-factor",
    "failure_backoff_max": "--failure-backoff-max",
    "pause_after_failures": "--pause-after-failures",
    "start_at": "--start-at",
    "end_at": "--end-at",
    "max_runs": "--max-runs",
    "description": "--description",
    "tags": "--tag",
    "calendars": "--calendar",
    "note": "--note",
    "until": "--until",
    "count": "--count",
    "task": "TASK",
    "options.queue": "--queue",
}


class CommandError(click.ClickException):
    """A failure reported to the operator as one message and a non-zero exit status."""

    def __init__(self, message: str) -> None:
        # Messages quote names and driver errors: escaped like all text output.
        super().__init__(display.shown(message, keep_newlines=True))


class DatabaseUnavailable(CommandError):
    exit_code = EX_UNAVAILABLE


if TYPE_CHECKING:
    _ParamType = click.ParamType[Any, Any]
else:  # older click releases cannot subscript ParamType at runtime
    _ParamType = click.ParamType


# -- plumbing -------------------------------------------------------------------------------
#: Field names that read unambiguously as options wherever they appear in a problem.
_FIELD_WORDS = re.compile(
    r"\b(offset|jitter|misfire_policy|misfire_grace|max_catchup|starting_deadline|overlap|"
    r"failure_backoff_factor|failure_backoff_max|failure_backoff|pause_after_failures|"
    r"start_at|end_at|max_runs)\b")


#: Leading field names of a spec's own problems that are read as options only there (a word
#: such as "tags" may appear in other text).
_SPEC_OPTION_WORDS = frozenset({"tags", "description", "calendars", "options.queue"})


def _option_names(problem: str) -> str:
    """``"timezone: unknown zone…"`` → ``"--timezone: unknown zone…"``; the schedule's own
    name prefix is dropped (the error's subject already names it)."""
    field, sep, rest = problem.partition(": ")
    if sep and field in _OPTION_OF:
        return f"{_OPTION_OF[field]}: {rest}"
    if sep and field.startswith("schedule "):
        problem = rest
        if problem.startswith("task "):
            problem = "TASK " + problem[len("task "):]
        inner, sep, rest = problem.partition(": ")
        if sep and inner in _SPEC_OPTION_WORDS:
            return f"{_OPTION_OF[inner]}: {rest}"
    return _FIELD_WORDS.sub(lambda m: _OPTION_OF[m.group(1)], problem)


#: Keywords of ``Schedules.update`` → the option of ``edit`` that sets each.
_EDIT_OPTION = {
    "every": "--every", "cron": "--cron", "at": "--at", "task": "--task", "args": "--args",
    "kwargs": "--kwargs", "options": "--queue", "misfire_policy": "--misfire-policy",
    "misfire_grace": "--misfire-grace", "max_catchup": "--max-catchup", "offset": "--offset",
    "jitter": "--jitter", "starting_deadline": "--starting-deadline", "overlap": "--overlap",
    "mode": "--fixed-delay/--fixed-rate", "failure_backoff": "--failure-backoff",
    "failure_backoff_factor": "--failure-backoff-factor",
    "failure_backoff_max": "--failure-backoff-max",
    "pause_after_failures": "--pause-after-failures", "start_at": "--start-at",
    "end_at": "--end-at", "max_runs": "--max-runs", "description": "--description",
    "tags": "--tag", "calendars": "--calendar",
}
#: The API's advice for a damaged row: "edit it giving args, misfire_policy anew".
_REPAIR_HINT = re.compile(r"(?<=\bgiving )[a-z_]+(?:, [a-z_]+)*(?= anew\b)")


def _edit_options(problem: str) -> str:
    """The API's repair advice in the options an operator types (``args`` → ``--args``)."""
    return _REPAIR_HINT.sub(lambda m: ", ".join(_EDIT_OPTION.get(word, word)
                                                for word in m[0].split(", ")), problem)


@contextmanager
def reported(*, as_options: bool = False, stored: Collection[str] = ()) -> Iterator[None]:
    """goatbeat's errors as click errors: a clear message and a non-zero exit status.

    With ``as_options``, problems about schedule fields name the command-line options instead,
    except those in ``stored``: the damage of the row being edited, which describes what the
    database holds, not what was typed.
    """
    try:
        yield
    except ScheduleNotFound as exc:
        raise CommandError(f"{exc}; `{app_command('list')}` shows the schedules") from exc
    except CalendarNotFound as exc:
        raise CommandError(f"{exc}; `{app_command('calendar list')}` shows the calendars"
                           ) from exc
    except CalendarInUse as exc:
        raise CommandError(str(exc)) from exc
    except ConfigurationError as exc:
        problems = [_edit_options(p) for p in exc.problems]
        if as_options:
            problems = [p if p in stored else _option_names(p) for p in problems]
        raise CommandError(str(ConfigurationError(problems, subject=exc.subject))) from exc
    except ScheduleConflict as exc:
        raise CommandError(str(exc)) from exc
    except BackfillNotFound as exc:
        raise CommandError(f"{exc}; `{app_command('backfills')}` shows the backfills") from exc
    except StoreUnavailable as exc:
        raise DatabaseUnavailable(str(exc)) from exc
    except GoatbeatError as exc:  # SchemaOutOfDate names the migrate command
        raise CommandError(display.with_migrate_command(str(exc), app_given())) from exc


def app_given(ctx: click.Context | None = None) -> str | None:
    """What ``-A`` named (the app's import path), or None when no -A was given."""
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is None:
        return None
    value = ctx.find_root().params.get("app")
    if isinstance(value, str):
        return value.strip() or None
    # An app object, when Celery's command is invoked from Python with one.
    main = getattr(value, "main", None)
    return main if isinstance(main, str) and main else None


def app_command(words: str) -> str:
    """``celery -A <the app given> goatbeat <words>``, for messages that suggest a command."""
    return display.command_line(app_given(), words)


def app_label() -> str:
    """The app as warnings name it."""
    given = app_given()
    return "Celery's default app (no -A given)" if given is None else f"app {given!r}"


def celery_app(ctx: click.Context) -> Any:
    """The app Celery's top-level command loaded from ``-A``."""
    app = getattr(ctx.obj, "app", None)
    if app is None:
        raise click.UsageError("run these commands through Celery: "
                               f"{display.command_line(None, '…')}")
    return app


@contextmanager
def opened(ctx: click.Context) -> Iterator[Schedules]:
    """The app's schedules on the database its settings name, closed afterwards."""
    from goatbeat_celery import config as config_module
    from goatbeat_celery.api import Schedules
    from goatbeat_celery.store.url import Backend, backend_of

    app = celery_app(ctx)
    with reported():
        url = config_module.load(app, with_schedules=False).config.database_url
        if backend_of(url) is Backend.MEMORY:
            raise CommandError(
                "goatbeat_database_url is memory://, which lives inside one process: these "
                "commands cannot see beat's schedules; use postgresql://… (or sqlite:///path)"
            )
        # Opening a SQLite store creates its file: only `migrate` may create a database.
        missing = checks_module.missing_sqlite_problem(url, app_given(ctx))
        if missing is not None:
            raise CommandError(missing)
        schedules = Schedules.from_app(app)
        try:
            yield schedules
        finally:
            schedules.close()


def lease_manager(schedules: Schedules) -> LeaseManager:
    # open_store returns one object that is both the schedule store and the lease manager.
    return cast(LeaseManager, schedules.store)


def masked_url(schedules: Schedules) -> str:
    from goatbeat_celery.store import mask_url

    return mask_url(schedules.config.database_url)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print a JSON document (instants in ISO-8601 UTC) for scripts.")(f)


def emit(data: Any) -> None:
    click.echo(display.document(data))


def say(text: str) -> None:
    """Print one line for people, user data in it escaped."""
    click.echo(display.shown(text))


def warn(message: str) -> None:
    click.echo(f"warning: {display.shown(message)}", err=True)


def warn_config_source(schedule: Schedule, consequence: str) -> None:
    if schedule.spec.source is ScheduleSource.CONFIG:
        warn(f"{schedule.name!r} comes from beat_schedule: the next config sync (when a replica "
             f"becomes leader) {consequence}; change beat_schedule to make it last")


def warn_unknown_task(ctx: click.Context, task: str) -> None:
    """Warn (never refuse: beat may not import every task module) when ``task`` is not among
    the app's tasks once its task modules are imported as a worker imports them."""
    app = celery_app(ctx)
    try:
        app.loader.import_default_modules()  # `imports`, `include` and autodiscovery
        known = sorted(str(name) for name in app.tasks)
    except Exception as exc:  # the app's own modules failed to import: nothing to compare
        warn(f"could not check task {task!r}: importing the task modules of {app_label()} "
             f"failed ({type(exc).__name__}: {exc})")
        return
    if task in known:
        return
    close = difflib.get_close_matches(task, [n for n in known if not n.startswith("celery.")],
                                      n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    warn(f"task {task!r} is not registered in {app_label()}{hint}: stored anyway, as beat "
         "sends tasks by name, but a worker that does not know it rejects every run")


def show_schedule(schedules: Schedules, schedule: Schedule, as_json: bool,
                  headline: str | None = None) -> None:
    defaults = schedules.config.settings
    with reported():
        now = schedules.store.now()
    if as_json:
        emit(display.schedule_json(schedule, defaults, now))
        return
    if headline:
        say(headline)
    click.echo(display.fields(display.schedule_fields(schedule, defaults, now)))


# -- option types ---------------------------------------------------------------------------
class JSONParam(_ParamType):
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


class InstantParam(_ParamType):
    """An ISO-8601 instant with its zone (``Z`` allowed) within the range every instant a user
    gives must lie in (``core.validation.INSTANT_RANGE``); naive times are refused."""

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


class DurationParam(_ParamType):
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
                     help="IANA zone the --cron expression is read in (default: the app's "
                          "timezone)."),
        click.option("--at", type=InstantParam(), metavar="ISO",
                     help=f"Run once at this instant, with its zone, e.g. {InstantParam.example}."),
        click.option("--args", type=JSONParam(list, '\'[1, "a"]\''), metavar="JSON",
                     help="Positional arguments, a JSON array."),
        click.option("--kwargs", type=JSONParam(dict, '\'{"key": 1}\''), metavar="JSON",
                     help="Keyword arguments, a JSON object."),
        click.option("--queue", metavar="NAME",
                     help="Celery queue to send to" + (" (\"\" for the default)." if editing
                                                       else ".")),
        click.option("--misfire-policy", type=click.Choice(policies),
                     help="Late occurrences: latest runs one for the backlog, all runs each "
                          "(up to --max-catchup), skip runs none"
                          + ("; default follows goatbeat_misfire_policy." if editing else ".")),
        click.option("--misfire-grace", type=DurationParam(), metavar="DURATION",
                     help="An occurrence later than this is missed (e.g. 5m)."),
        click.option("--max-catchup", type=click.IntRange(min=1), metavar="N",
                     help="Most missed occurrences the all policy runs."),
        click.option("--offset", type=DurationParam(), metavar="DURATION",
                     help="Shift every occurrence by DURATION (shorter than the interval)."),
        click.option("--jitter", type=DurationParam(), metavar="DURATION",
                     help="Shift every occurrence by a stable amount below DURATION, derived "
                          "from the name."),
        click.option("--starting-deadline", type=DurationParam(), metavar="DURATION",
                     help="Drop a run not started DURATION after it was due (the message "
                          "expires then)."),
        # The run policies need run tracking on the workers (docs/run-tracking.md).
        click.option("--overlap", type=click.Choice(overlaps),
                     help="A due run while the previous one has not finished: allow sends it, "
                          "skip records it as skipped, buffer_one holds one until the previous "
                          "finishes (needs run tracking)"
                          + ("; default follows goatbeat_overlap_policy." if editing else ".")),
        click.option("--fixed-delay/--fixed-rate", "fixed_delay", default=None,
                     help="With --every: the next run is due DURATION after the previous one "
                          "finished (needs run tracking), instead of on the grid."),
        click.option("--failure-backoff", type=DurationParam(), metavar="DURATION",
                     help="After a failed run, wait at least DURATION before the next, "
                          "multiplied for each further failure in a row"
                          + ("; 0 turns it off." if editing else ".")),
        click.option("--failure-backoff-factor", type=click.FloatRange(min=1, max=100),
                     metavar="FACTOR", help="How much each further failure multiplies the "
                                            "backoff (default 2)."),
        click.option("--failure-backoff-max", type=DurationParam(), metavar="DURATION",
                     help="The longest backoff."),
        click.option("--pause-after-failures", type=click.IntRange(min=0 if editing else 1),
                     metavar="N", help="Pause the schedule after N failed runs in a row, with "
                                       "the reason shown; resume clears it"
                                       + (" (0 turns it off)." if editing else ".")),
        # The controls (docs/controls.md).
        click.option("--start-at", type=ClearableInstantParam() if editing else InstantParam(),
                     metavar="ISO", help="No run due before this instant"
                                         + (" (none removes it)." if editing else ".")),
        click.option("--end-at", type=ClearableInstantParam() if editing else InstantParam(),
                     metavar="ISO", help="No run due after this instant; then it has no next "
                                         "run" + (" (none removes it)." if editing else ".")),
        click.option("--max-runs", type=click.IntRange(min=0 if editing else 1), metavar="N",
                     help="Run at most N times in all (run-now does not count)"
                          + ("; 0 removes the limit." if editing else ".")),
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
    """The trigger keywords for the API, after checking the options make one trigger."""
    chosen = [f"--{key}" for key in given_triggers(given)]
    if len(chosen) > 1 or (required and not chosen):
        raise click.UsageError("give exactly one of --every DURATION, --cron EXPR or --at ISO "
                               f"(got {', '.join(chosen) or 'none'})")
    if given.get("timezone") is not None and given.get("cron") is None:
        cron_now = current is not None and current.spec.trigger.kind == "cron"
        if not cron_now:
            raise click.UsageError("--timezone applies to cron schedules: give --cron EXPR "
                                   "with it")
    return {key: given[key] for key in ("every", "cron", "at", "timezone")
            if given.get(key) is not None}


def spec_changes(given: Mapping[str, Any], current: Schedule | None) -> dict[str, Any]:
    """The non-trigger fields the options set, as API keywords."""
    changes: dict[str, Any] = {}
    if given.get("task") is not None:
        changes["task"] = given["task"]
    if given.get("args") is not None:
        changes["args"] = tuple(given["args"])
    if given.get("kwargs") is not None:
        changes["kwargs"] = dict(given["kwargs"])
    if given.get("queue") is not None:
        options = dict(current.spec.options) if current is not None else {}
        if given["queue"]:
            options["queue"] = given["queue"]
        else:
            options.pop("queue", None)
        changes["options"] = options
    policy = given.get("misfire_policy")
    if policy is not None:
        changes["misfire_policy"] = None if policy == DEFAULT_POLICY else policy
    for key in ("misfire_grace", "max_catchup", "starting_deadline"):
        if given.get(key) is not None:
            changes[key] = given[key]
    changes.update(_policy_changes(given))
    changes.update(_control_changes(given))
    # An offset replaces a jitter and the other way round (a schedule has one shift).
    if given.get("offset") is not None:
        changes["offset"] = given["offset"]
        if given.get("jitter") is None:
            changes["jitter"] = None
    if given.get("jitter") is not None:
        changes["jitter"] = given["jitter"]
        if given.get("offset") is None:
            changes["offset"] = None
    return changes


def _control_changes(given: Mapping[str, Any]) -> dict[str, Any]:
    """The controls the options set, as API keywords (on ``edit``, ``none``, 0 and "" remove
    one)."""
    changes: dict[str, Any] = {}
    for key in ("start_at", "end_at"):
        if given.get(key) is not None:
            changes[key] = None if given[key] == NO_VALUE else given[key]
    if given.get("max_runs") is not None:
        changes["max_runs"] = given["max_runs"] or None
    if given.get("description") is not None:
        changes["description"] = given["description"] or None
    if given.get("tags"):
        changes["tags"] = [tag for tag in given["tags"] if tag] if given["tags"] != ("",) \
            else []
    if given.get("calendars"):
        changes["calendars"] = [name for name in given["calendars"] if name]
    return changes


def _policy_changes(given: Mapping[str, Any]) -> dict[str, Any]:
    """The run policies the options set, as API keywords (on ``edit``, ``default`` and 0 turn
    a policy back to the default)."""
    changes: dict[str, Any] = {}
    overlap = given.get("overlap")
    if overlap is not None:
        changes["overlap"] = None if overlap == DEFAULT_POLICY else overlap
    if given.get("fixed_delay") is not None:
        changes["mode"] = (ScheduleMode.FIXED_DELAY if given["fixed_delay"]
                           else ScheduleMode.FIXED_RATE)
    backoff = given.get("failure_backoff")
    if backoff is not None:
        changes["failure_backoff"] = backoff or None
        if not backoff:  # off: its shape goes with it
            changes["failure_backoff_factor"] = changes["failure_backoff_max"] = None
    for key in ("failure_backoff_factor", "failure_backoff_max"):
        if given.get(key) is not None:
            changes[key] = given[key]
    pause_after = given.get("pause_after_failures")
    if pause_after is not None:
        changes["pause_after_failures"] = pause_after or None
    return changes


# -- the group ------------------------------------------------------------------------------
@click.group(name="goatbeat")
@click.pass_context
def goatbeat(ctx: click.Context) -> None:
    """goatbeat: schedules, lease and database schema of goatbeat_celery.

    Settings (goatbeat_database_url, …) are read from the app given with -A.
    """


#: Active backfills ``status`` lists at most.
_STATUS_BACKFILLS = 100


@goatbeat.command(cls=CeleryCommand)
@json_option
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Who leads (lease holder, token, expiry by the database clock; with shards, of each
    shard), submission lag, and the schedules the leader has set aside."""
    with opened(ctx) as schedules, reported():
        settings = schedules.config.settings
        # With shards, the lease shown first is shard 0's: its leader does the global work.
        lease_name = shard_lease_name(settings.lease_name, Shard(0, settings.shards))
        info = lease_manager(schedules).inspect(lease_name)
        sharding = (None if settings.shards == 1 else
                    lease_manager(schedules).list_leases(sharding_prefix(settings.lease_name)))
        store = schedules.store
        pending = store.oldest_pending()
        now = store.now()
        next_due = store.due_schedules(1).next_due_at
        set_aside = store.list_schedules(set_aside=True)
        backfilling = store.list_backfills(active=True, limit=_STATUS_BACKFILLS)
        url = masked_url(schedules)
    lag = None if pending is None else (now - pending.due_at).total_seconds()
    lease = display.lease_json(lease_name, info, settings)
    if as_json:
        emit({
            "database": url,
            "now": display.iso(now),
            "lease": lease,
            "pending": None if pending is None else {
                "key": pending.key, "schedule": pending.schedule_name,
                "due_at": display.iso(pending.due_at), "attempts": pending.attempts,
                "lag_seconds": lag,
            },
            "next_due_at": display.iso(next_due),
            "set_aside": display.set_aside_json(set_aside),
            "active_backfills": [b.id for b in reversed(backfilling)],
            **({} if sharding is None else display.shards_json(sharding, settings)),
        })
        return
    expiry = display.NONE
    if info is not None and info.expires_at is not None:
        expiry = display.relative(info.expires_at, info.store_now)
        if not info.held:
            expiry += " expired"
    pairs: list[tuple[str, display.Value]] = [
        ("database", url),
        ("database clock", display.when(now)),
        ("lease", lease_name),
        ("held", "yes" if lease["held"] else "no"),
        ("holder", lease["holder"] or display.NONE),
        ("token", str(lease["token"])),
        ("acquired", display.when(None if info is None else info.acquired_at)),
        ("last renewal", display.lease_health(info, settings)),
        ("expires", expiry),
        ("oldest pending", display.NONE if pending is None else
         f"{pending.key} due {display.when(pending.due_at)}, "
         f"{display.human_seconds(lag or 0.0)} late, {pending.attempts} attempt(s)"),
        ("next due", display.relative(next_due, now)),
        ("set aside", display.set_aside_lines(set_aside, app_command("list"))),
    ]
    if backfilling:
        # Only when there are some: most deployments never backfill.
        pairs.append(("backfills", f"{len(backfilling)} active (`{app_command('backfills')}` "
                                   "shows their progress)"))
    if info is None:
        pairs[3] = ("held", "no (no replica has taken this lease yet)")
    if sharding is not None:
        pairs[2:3] = [("lease", f"{lease_name} (shard 0: config sync, settling runs, "
                                "pruning)")]
        pairs.append(("shards", display.shard_lines(sharding, settings)))
    click.echo(display.fields(pairs))


@goatbeat.command(name="list", cls=CeleryCommand)
@click.option("--enabled/--disabled", "enabled", default=None,
              help="Only schedules not paused (--enabled) or paused (--disabled), a pause "
                   "with an end included.")
@click.option("--source", type=click.Choice([s.value for s in ScheduleSource]),
              help="Only schedules from beat_schedule (config) or created here or in code (api).")
@click.option("--prefix", metavar="TEXT", help="Only names starting with TEXT.")
@click.option("--set-aside", "set_aside", is_flag=True,
              help="Only schedules the leader set aside, or that cannot be read as stored.")
@click.option("--tag", "tags", multiple=True, metavar="TAG",
              help="Only schedules carrying TAG; repeat it: each one must match.")
@click.option("--wide", is_flag=True,
              help=f"Show every column whole. Otherwise the table fits the terminal (COLUMNS, "
                   f"or {display.DEFAULT_WIDTH} columns when not a terminal): the zone, last "
                   f"run, source and misfire policy are left out as needed, long values cut "
                   f"short with {display.ELLIPSIS}.")
@json_option
@click.pass_context
def list_(ctx: click.Context, enabled: bool | None, source: str | None, prefix: str | None,
          set_aside: bool, tags: tuple[str, ...], wide: bool, as_json: bool) -> None:
    """The schedules, with trigger, zone, next and last run, state, source and policy."""
    with opened(ctx) as schedules, reported():
        found = schedules.list(enabled=enabled, source=source, prefix=prefix, tags=tags)
        now = schedules.store.now()
    if set_aside:
        # Judged on the rows read, so a damaged row the leader has not yet seen is listed too.
        found = [s for s in found if s.set_aside]
    defaults = schedules.config.settings
    if as_json:
        emit([display.schedule_json(s, defaults, now) for s in found])
    elif not found:
        filtered = set_aside or bool(tags) or any(v is not None
                                                  for v in (enabled, source, prefix))
        click.echo("no schedules match" if filtered else "no schedules yet")
    else:
        click.echo(display.table(display.SCHEDULE_COLUMNS,
                               [display.schedule_row(s, defaults, now) for s in found],
                               width=None if wide else display.terminal_width(),
                               clipped=display.SCHEDULE_CLIPPED,
                               dropped=display.SCHEDULE_DROPPED))


@goatbeat.command(cls=CeleryCommand)
@click.argument("name")
@json_option
@click.pass_context
def show(ctx: click.Context, name: str, as_json: bool) -> None:
    """Every detail of schedule NAME."""
    with opened(ctx) as schedules, reported():
        show_schedule(schedules, schedules.get(name), as_json)


@goatbeat.command(cls=CeleryCommand)
@click.argument("name")
@click.argument("task")
@spec_options(editing=False)
@json_option
@click.pass_context
def add(ctx: click.Context, /, name: str, task: str, paused: bool, as_json: bool,
        **given: Any) -> None:
    """Store a new schedule NAME sending TASK (give one of --every, --cron or --at)."""
    trigger = trigger_choice(given, required=True)
    with opened(ctx) as schedules:
        with reported(as_options=True):
            try:
                schedule = schedules.create(name, task, enabled=not paused, **trigger,
                                            **spec_changes(given, None))
            except ScheduleConflict as exc:
                raise CommandError(f"{exc}; change it with `edit`") from exc
        warn_unknown_task(ctx, task)
        show_schedule(schedules, schedule, as_json, headline=f"added {name!r}")


@goatbeat.command(cls=CeleryCommand)
@click.argument("name")
@spec_options(editing=True)
@json_option
@click.pass_context
def edit(ctx: click.Context, /, name: str, paused: bool | None, as_json: bool,
         **given: Any) -> None:
    """Change schedule NAME: only the options given change.

    A new trigger, offset or jitter reschedules it from now; other changes keep its next run.
    """
    if paused is None and all(value is None or value == () for value in given.values()):
        raise click.UsageError("nothing to change: give at least one option (see --help)")
    with opened(ctx) as schedules:
        with reported():
            current = schedules.get(name)
        with reported(as_options=True, stored=current.damage):
            trigger = trigger_choice(given, required=False, current=current)
            changes = spec_changes(given, current)
            enabled = None if paused is None else not paused
            schedule = schedules.update(name, enabled=enabled, **trigger, **changes)
        if schedule.version != current.version:
            warn_config_source(schedule, "puts back the configured version")
        if given.get("task") is not None:
            warn_unknown_task(ctx, given["task"])
        show_schedule(schedules, schedule, as_json, headline=f"edited {name!r}")


@goatbeat.command(cls=CeleryCommand)
@click.argument("name")
@click.option("--note", metavar="TEXT", help="Why it is paused, shown with the schedule.")
@click.option("--until", type=InstantParam(), metavar="ISO",
              help="End the pause by itself at this instant: the schedule then runs from its "
                   "first occurrence at or after it.")
@json_option
@click.pass_context
def pause(ctx: click.Context, name: str, note: str | None, until: datetime | None,
          as_json: bool) -> None:
    """Stop schedule NAME from running (its history stays), until resumed or --until."""
    with opened(ctx) as schedules:
        with reported():
            current = schedules.get(name)
        # The note and the end are named as typed; a damaged row's columns as stored.
        with reported(as_options=True, stored=current.damage):
            schedule = schedules.pause(name, note=note, until=until)
        warn_config_source(schedule, "enables it again (set its goatbeat.enabled to False)")
        show_schedule(schedules, schedule, as_json, headline=f"paused {name!r}")


@goatbeat.command(cls=CeleryCommand)
@click.argument("name")
@json_option
@click.pass_context
def resume(ctx: click.Context, name: str, as_json: bool) -> None:
    """Run paused schedule NAME again from its next occurrence (no backlog)."""
    with opened(ctx) as schedules:
        with reported():
            schedule = schedules.resume(name)
        show_schedule(schedules, schedule, as_json, headline=f"resumed {name!r}")


@goatbeat.command(name="next", cls=CeleryCommand)
@click.argument("name")
@click.option("--count", type=int, default=5, show_default=True, metavar="N",
              help="How many runs to list (at most 1000).")
@json_option
@click.pass_context
def next_(ctx: click.Context, name: str, count: int, as_json: bool) -> None:
    """When NAME's next N runs are due: after its offset or jitter, within its start, end and
    pause, no more than its max runs leave."""
    with opened(ctx) as schedules, reported(as_options=True):
        runs = schedules.next_runs(name, count)
        now = schedules.store.now()
    if as_json:
        emit([display.iso(instant) for instant in runs])
    elif not runs:
        say(f"{name!r} has no next run (paused, ended, or out of runs)")
    else:
        click.echo("\n".join(display.relative(instant, now) for instant in runs))


@goatbeat.command(cls=CeleryCommand)
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_context
def remove(ctx: click.Context, name: str, yes: bool, as_json: bool) -> None:
    """Delete schedule NAME; its executions stay as history."""
    with opened(ctx) as schedules:
        with reported():
            schedule = schedules.get(name)
        if not yes:
            click.confirm(display.shown(f"Remove schedule {name!r} "
                                      f"({display.describe_trigger(schedule.spec.trigger)}, "
                                      f"{schedule.spec.task})?"), abort=True, err=True)
        with reported():
            schedules.delete(name)
        warn_config_source(schedule, "creates it again")
    if as_json:
        emit({"removed": name})
    else:
        say(f"removed {name!r}")


@goatbeat.command(name="run-now", cls=CeleryCommand)
@click.argument("name")
@json_option
@click.pass_context
def run_now(ctx: click.Context, name: str, as_json: bool) -> None:
    """Queue an extra run of NAME under its own key; the leader sends it."""
    with opened(ctx) as schedules, reported():
        execution = schedules.run_now(name)
        settings = schedules.config.settings
        # The leader of the schedule's shard sends it.
        lease_name = shard_lease_name(settings.lease_name, shard_of(name, settings.shards))
        info = lease_manager(schedules).inspect(lease_name)
    if info is None or not info.held:
        warn(f"no replica holds lease {lease_name!r} right now: the run is sent when one "
             "becomes leader")
    if as_json:
        emit(display.execution_json(execution))
    else:
        say(f"queued {execution.key!r}; the leader sends it with task id {execution.key}")


@goatbeat.command(cls=CeleryCommand)
@click.argument("name")
@click.option("--from", "start", type=InstantParam(), required=True, metavar="ISO",
              help="The first instant of the range (with its zone).")
@click.option("--to", "end", type=InstantParam(), required=True, metavar="ISO",
              help="The last instant of the range, not in the future.")
@click.option("--mode", type=click.Choice([m.value for m in BackfillMode]),
              default=BackfillMode.MISSING.value, show_default=True,
              help="missing: occurrences with no execution; failed: those that failed, were "
                   "lost or never sent; all: every one.")
@click.option("--newest-first", is_flag=True, help="Run the end of the range first.")
@click.option("--per-tick", type=click.IntRange(min=1, max=MAX_PER_TICK), metavar="N",
              help="Occurrences the leader claims a tick (default: goatbeat_backfill_per_tick).")
@click.option("--dry-run", is_flag=True, help="List what would run; store nothing.")
@json_option
@click.pass_context
def backfill(ctx: click.Context, name: str, start: datetime, end: datetime, mode: str,
             newest_first: bool, per_tick: int | None, dry_run: bool, as_json: bool) -> None:
    """Run NAME's occurrences between --from and --to that --mode selects, without moving its
    next run; the leader sends them after the live schedules, a few each tick."""
    with opened(ctx) as schedules, reported(), _backfill_options():
        if dry_run:
            preview = schedules.backfill(name, start, end, mode=mode, newest_first=newest_first,
                                         per_tick=per_tick, dry_run=True)
        else:
            created = schedules.backfill(name, start, end, mode=mode,
                                         newest_first=newest_first, per_tick=per_tick)
            settings = schedules.config.settings
            # The leader of the schedule's shard runs its backfills.
            lease_name = shard_lease_name(settings.lease_name, shard_of(name, settings.shards))
            info = lease_manager(schedules).inspect(lease_name)
            if info is None or not info.held:
                warn(f"no replica holds lease {lease_name!r} right now: the backfill runs "
                     "when one becomes leader")
    if dry_run:
        if as_json:
            emit(display.backfill_preview_json(preview))
            return
        say(f"{len(preview.runs)} of {preview.total} occurrences of {name!r} would run "
            f"(mode {preview.mode.value})")
        if preview.runs:
            click.echo(display.table(display.PREVIEW_COLUMNS,
                                     display.backfill_preview_rows(preview)))
        return
    if as_json:
        emit(display.backfill_json(created))
    else:
        say(f"backfill {created.id} of {name!r} queued: {created.total} occurrences to look "
            f"at (mode {created.mode.value}); `{app_command('backfills')}` shows its progress")


#: Fields of a backfill request → the options of ``backfill`` that give them.
_BACKFILL_OPTION = {"start": "--from", "end": "--to", "mode": "--mode",
                    "per_tick": "--per-tick", "range": "--from/--to"}


@contextmanager
def _backfill_options() -> Iterator[None]:
    """A refused backfill's problems, each named by the option that gave the field."""
    try:
        yield
    except ConfigurationError as exc:
        if exc.subject != "backfill":
            raise
        problems = []
        for problem in exc.problems:
            field, sep, rest = problem.partition(": ")
            option = _BACKFILL_OPTION.get(field) if sep else None
            problems.append(problem if option is None else f"{option}: {rest}")
        raise ConfigurationError(problems, subject="backfill") from exc


@goatbeat.command(cls=CeleryCommand)
@click.option("--schedule", "name", metavar="NAME", help="Only the backfills of NAME.")
@click.option("--active/--finished", "active", default=None,
              help="Only active backfills, or only finished ones (done, cancelled, failed).")
@click.option("--limit", type=click.IntRange(min=1, max=MAX_LIMIT), default=50,
              show_default=True, metavar="N", help="How many, newest first.")
@json_option
@click.pass_context
def backfills(ctx: click.Context, name: str | None, active: bool | None, limit: int,
              as_json: bool) -> None:
    """Backfills and their progress, newest first."""
    with opened(ctx) as schedules, reported():
        found = schedules.backfills(name=name, active=active, limit=limit)
    if as_json:
        emit([display.backfill_json(b) for b in found])
    elif not found:
        say("no backfills")
    else:
        click.echo(display.table(display.BACKFILL_COLUMNS,
                                 [display.backfill_row(b) for b in found]))
        for failed in (b for b in found if b.error is not None):
            say(f"backfill {failed.id}: {failed.error}")


@goatbeat.command(name="backfill-cancel", cls=CeleryCommand)
@click.argument("backfill_id", type=click.IntRange(min=1), metavar="ID")
@json_option
@click.pass_context
def backfill_cancel(ctx: click.Context, backfill_id: int, as_json: bool) -> None:
    """Stop backfill ID: nothing more is claimed for it; what it claimed is still sent."""
    with opened(ctx) as schedules, reported():
        cancelled = schedules.cancel_backfill(backfill_id)
    if as_json:
        emit(display.backfill_json(cancelled))
    else:
        say(f"backfill {cancelled.id} is {cancelled.state.value} "
            f"({cancelled.claimed} occurrences claimed)")


@goatbeat.command(cls=CeleryCommand)
@click.argument("name")
@click.option("--limit", type=click.IntRange(min=1, max=MAX_LIMIT), default=20,
              show_default=True, metavar="N", help="How many executions, newest first.")
@click.option("--wide", is_flag=True,
              help="Show every column (key, occurrence, claimed and submitted instants, missed "
                   "occurrences) and every value whole.")
@json_option
@click.pass_context
def history(ctx: click.Context, name: str, limit: int, wide: bool, as_json: bool) -> None:
    """Recent executions of NAME, newest first: when each was due, its state and its run's,
    lateness (submitted - due), runtime, submission attempts, worker, and why it failed or
    did not run."""
    with opened(ctx) as schedules, reported():
        executions = schedules.history(name, limit=limit)
    if as_json:
        emit([display.execution_json(e) for e in executions])
    elif not executions:
        say(f"no executions of {name!r} yet")
    elif wide:
        click.echo(display.table(display.EXECUTION_COLUMNS,
                               [display.execution_row(e) for e in executions]))
    else:
        click.echo(display.table(display.HISTORY_COLUMNS,
                               [display.history_row(e) for e in executions],
                               width=display.terminal_width(), clipped=display.HISTORY_CLIPPED,
                               dropped=display.HISTORY_DROPPED, roomy=display.HISTORY_ROOMY))


# -- exclusion calendars --------------------------------------------------------------------
@goatbeat.group(name="calendar")
def calendar() -> None:
    """Exclusion calendars: dates and ranges (holidays, freeze windows) on which the schedules
    observing them (add/edit --calendar NAME) do not run.

    ENTRY is a date, 2026-12-24, or a range with both ends included, 2026-12-24..2027-01-02;
    each schedule reads them as dates in its own zone (cron: its timezone; others: UTC).
    """


def _entries(words: Sequence[str], label: str) -> tuple[list[date], list[tuple[date, date]]]:
    """Typed dates and ranges, read as a stored calendar's entries are, or a usage error
    naming every bad one."""
    dates, ranges, problems = parse_entries(list(words), label)
    if problems:
        raise click.UsageError(display.shown("; ".join(problems)))
    return list(dates), list(ranges)


def show_calendar(calendar: Calendar, as_json: bool, headline: str | None = None,
                  observed_by: Sequence[str] | None = None) -> None:
    if as_json:
        document = display.calendar_json(calendar)
        if observed_by is not None:
            document["observed_by"] = list(observed_by)
        emit(document)
        return
    if headline:
        say(headline)
    click.echo(display.fields(display.calendar_fields(calendar, observed_by)))


@calendar.command(name="add", cls=CeleryCommand)
@click.argument("name")
@click.argument("entries", nargs=-1, metavar="[ENTRY]...")
@click.option("--description", metavar="TEXT", help="What the calendar is for.")
@json_option
@click.pass_context
def calendar_add(ctx: click.Context, name: str, entries: tuple[str, ...],
                 description: str | None, as_json: bool) -> None:
    """Store a new calendar NAME excluding each ENTRY."""
    dates, ranges = _entries(entries, "ENTRY")
    with opened(ctx) as schedules, reported():
        created = schedules.create_calendar(name, dates=dates, ranges=ranges,
                                            description=description)
    show_calendar(created, as_json, headline=f"added calendar {name!r}")


@calendar.command(name="edit", cls=CeleryCommand)
@click.argument("name")
@click.option("--add", "added", multiple=True, metavar="ENTRY",
              help="A date or range to exclude; repeat for several.")
@click.option("--remove", "removed", multiple=True, metavar="ENTRY",
              help="A date or range to exclude no more, as listed by show; repeat for several.")
@click.option("--clear", is_flag=True, help="Remove every entry first (then --add).")
@click.option("--description", metavar="TEXT", help="What it is for (\"\" removes it).")
@json_option
@click.pass_context
def calendar_edit(ctx: click.Context, name: str, added: tuple[str, ...],
                  removed: tuple[str, ...], clear: bool, description: str | None,
                  as_json: bool) -> None:
    """Change calendar NAME; the leader applies it the next time it plans."""
    if not (added or removed or clear or description is not None):
        raise click.UsageError("nothing to change: give --add, --remove, --clear or "
                               "--description")
    add_dates, add_ranges = _entries(added, "--add")
    drop_dates, drop_ranges = _entries(removed, "--remove")
    with opened(ctx) as schedules, reported():
        current = schedules.get_calendar(name)
        dates = [] if clear else list(current.dates)
        ranges = [] if clear else list(current.ranges)
        absent = []
        for word in removed:
            day, span = _entries([word], "--remove")
            if (day and day[0] not in dates) or (span and span[0] not in ranges):
                absent.append(word)
        if absent:
            raise click.UsageError(display.shown(
                f"--remove: {', '.join(absent)} not in calendar {name!r}; "
                f"`{app_command('calendar show ' + name)}` lists its entries"))
        dates = [d for d in dates if d not in drop_dates] + add_dates
        ranges = [r for r in ranges if r not in drop_ranges] + add_ranges
        kept_description: Any = current.description
        if description is not None:
            kept_description = description or None
        edited = schedules.update_calendar(name, dates=dates, ranges=ranges,
                                           description=kept_description,
                                           expected_version=current.version)
    show_calendar(edited, as_json, headline=f"edited calendar {name!r}")


@calendar.command(name="show", cls=CeleryCommand)
@click.argument("name")
@json_option
@click.pass_context
def calendar_show(ctx: click.Context, name: str, as_json: bool) -> None:
    """Every date and range of calendar NAME, and the schedules observing it."""
    with opened(ctx) as schedules, reported():
        found = schedules.get_calendar(name)
        observed_by = schedules.observing(name)
    show_calendar(found, as_json, observed_by=observed_by)


@calendar.command(name="list", cls=CeleryCommand)
@json_option
@click.pass_context
def calendar_list(ctx: click.Context, as_json: bool) -> None:
    """Every calendar, by name."""
    with opened(ctx) as schedules, reported():
        found = schedules.list_calendars()
    if as_json:
        emit([display.calendar_json(c) for c in found])
    elif not found:
        say(f"no calendars; add one with `{app_command('calendar add NAME 2026-12-24')}`")
    else:
        click.echo(display.table(("NAME", "EXCLUDED", "DESCRIPTION"),
                               [display.calendar_row(c) for c in found],
                               width=display.terminal_width()))


@calendar.command(name="remove", cls=CeleryCommand)
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_context
def calendar_remove(ctx: click.Context, name: str, yes: bool, as_json: bool) -> None:
    """Delete calendar NAME; refused while schedules observe it (edit them first)."""
    with opened(ctx) as schedules:
        with reported():
            schedules.get_calendar(name)
        if not yes:
            click.confirm(display.shown(f"Remove calendar {name!r}?"), abort=True, err=True)
        with reported():
            schedules.delete_calendar(name)
    if as_json:
        emit({"removed": name})
    else:
        say(f"removed calendar {name!r}")


@goatbeat.command(cls=CeleryCommand)
@json_option
@click.pass_context
def migrate(ctx: click.Context, as_json: bool) -> None:
    """Create or upgrade goatbeat's tables to this version's schema (Alembic, to head)."""
    from goatbeat_celery import config as config_module
    from goatbeat_celery.migrations import alembic_config, head_revision
    from goatbeat_celery.store import mask_url, migration_engine
    from goatbeat_celery.store.migrate import current_revision, upgrade

    app = celery_app(ctx)
    with reported():
        url = config_module.load(app, with_schedules=False).config.database_url
        if app_given(ctx) is None:
            warn(f"no -A given: migrating the database of Celery's default app ({mask_url(url)});"
                 f" `{app_command('migrate')}` migrates your app's")
        engine = migration_engine(url)
        try:
            before = current_revision(engine)
            head = head_revision()
            if before is not None and before not in _known_revisions(alembic_config()):
                raise CommandError(
                    f"the database is at revision {before}, which this version of "
                    f"goatbeat_celery does not know (its newest is {head}): it was migrated by "
                    "a newer version; upgrade goatbeat_celery instead")
            upgrade(engine)
            after = current_revision(engine)
        finally:
            engine.dispose()
    shown = mask_url(url)
    if as_json:
        emit({"database": shown, "from": before, "to": after, "head": head,
              "upgraded": before != after})
    elif before == after:
        say(f"{shown}: already at revision {after} (head); nothing to do")
    else:
        say(f"{shown}: upgraded from {before or 'base (no tables)'} to {after} (head)")


def _known_revisions(config: Any) -> set[str]:
    from alembic.script import ScriptDirectory

    return {str(rev.revision) for rev in ScriptDirectory.from_config(config).walk_revisions()}


@goatbeat.command(cls=CeleryCommand)
@json_option
@click.pass_context
def check(ctx: click.Context, as_json: bool) -> None:
    """Check settings, beat_schedule, the database connection and the schema revision.

    Exits non-zero when any check fails.
    """
    results = checks_module.run_checks(celery_app(ctx), app_given=app_given(ctx))
    failures = checks_module.failed(results)
    warnings = [c for c in results if c.outcome is checks_module.Outcome.WARN]
    if as_json:
        emit({"ok": not failures, "checks": [c.as_json() for c in results]})
    else:
        width = max(len(c.name) for c in results)
        for result in results:
            label = {"fail": "FAIL"}.get(result.outcome.value, result.outcome.value)
            # Details are lines joined here; what they quote (entry names, errors) is escaped.
            first, *rest = result.detail.split("\n")
            say(f"{label:<4}  {result.name:<{width}}  {first}")
            for line in rest:
                say(f"{'':<4}  {'':<{width}}  {line}")
        noted = f" ({len(warnings)} warning{'s' if len(warnings) > 1 else ''})" if warnings else ""
        click.echo(f"all checks passed{noted}" if not failures else
                   f"{len(failures)} check(s) failed")
    if failures:
        ctx.exit(1)


@goatbeat.command(cls=CeleryCommand)
@click.option("--bind", default="127.0.0.1:8765", show_default=True, metavar="HOST:PORT",
              help="Where to listen. An address other hosts can reach is refused unless "
                   "GOATBEAT_WEB_TOKEN is set.")
@click.option("--read-only", "read_only", is_flag=True,
              help="Show everything, change nothing: no forms, every POST refused.")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME",
              help="A host name the dashboard answers to besides 127.0.0.1, [::1] and "
                   "localhost (the name a proxy or tunnel reaches it by); repeatable.")
@click.pass_context
def web(ctx: click.Context, bind: str, read_only: bool,
        allowed_hosts: tuple[str, ...]) -> None:
    """Serve the web dashboard: lease, schedules, history and lateness; pause, resume, run
    now, edit, create and remove.

    With GOATBEAT_WEB_TOKEN set (16 characters or more), every request must give it: the
    sign-in page, `Authorization: Bearer TOKEN`, or basic auth with TOKEN as password.
    Needs the web extra: pip install "goatbeat_celery[web]".
    """
    import os

    try:
        from goatbeat_celery.web import WebSettings, create_app
        from goatbeat_celery.web.security import (
            TOKEN_VARIABLE,
            bind_problem,
            parse_bind,
        )
        from goatbeat_celery.web.server import DEFAULT_PORT, serve
    except ImportError as exc:
        raise CommandError(f"the web dashboard needs the web extra: pip install "
                           f"\"goatbeat_celery[web]\" ({exc})") from exc
    try:
        host, port = parse_bind(bind, DEFAULT_PORT)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--bind") from exc
    settings = WebSettings(token=os.environ.get(TOKEN_VARIABLE) or None, read_only=read_only,
                           allowed_hosts=allowed_hosts)
    problems = settings.problems()
    if problems:
        raise CommandError("; ".join(problems))
    refused = bind_problem(host, settings)
    if refused is not None:
        raise CommandError(refused)
    with opened(ctx) as schedules:
        with reported():
            app = create_app(schedules, settings)
        shown_host = f"[{host}]" if ":" in host else host
        mode = ", read-only" if read_only else ""
        auth = "token required" if settings.token else "no token: this host only"
        say(f"goatbeat web on http://{shown_host}:{port}/ ({auth}{mode}); database "
            f"{masked_url(schedules)}")
        serve(app, host, port)
