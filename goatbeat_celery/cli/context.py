"""What every command works with: the app given with ``-A``, its schedules on the database, and
goatbeat's errors reported as click errors (problems naming the options an operator typed)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from goatbeat_celery import display
from goatbeat_celery.cli import checks as checks_module
from goatbeat_celery.cli import suggest
from goatbeat_celery.cli.sending import OPTION_FLAGS
from goatbeat_celery.core.types.errors import ConfigurationError, ErrorKind, GoatbeatError
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import PLAIN_FIELDS

if TYPE_CHECKING:
    from goatbeat_celery.api import Schedules


#: Exit status for a database that cannot be reached, as Celery's own commands use for a broker.
EX_UNAVAILABLE = 69

#: The fields goatbeat's problems name → the option of ``add`` and ``edit`` that gives each.
_OPTION_OF = {
    "every": "--every",
    "cron expression": "--cron",
    "timezone": "--timezone",
    "at": "--at",
    "rrule": "--rrule",
    "solar": "--solar",
    "solar.event": "--solar EVENT",
    "solar.latitude": "--solar LAT",
    "solar.longitude": "--solar LON",
    "misfire_policy": "--misfire-policy",
    **{field.name: field.option for field in PLAIN_FIELDS},
    "overlap": "--overlap",
    "mode": "--fixed-delay",
    "start_at": "--start-at",
    "end_at": "--end-at",
    "description": "--description",
    "tags": "--tag",
    "calendars": "--calendar",
    "rotate": "--rotate",
    "rotate_handover": "--rotate-handover",
    "note": "--note",
    "reason": "--reason",
    "until": "--until",
    "count": "--count",
    "task": "TASK",
    "args": "--args",
    "kwargs": "--kwargs",
    **OPTION_FLAGS,
}


class CommandError(click.ClickException):
    """A failure reported to the operator as one message and a non-zero exit status."""

    def __init__(self, message: str) -> None:
        # Messages quote names and driver errors: escaped like all text output.
        super().__init__(display.shown(message, keep_newlines=True))


class DatabaseUnavailable(CommandError):
    exit_code = EX_UNAVAILABLE


#: Keywords of ``Schedules.update`` a problem mentions (the API's repair advice: "edit it
#: giving {args}, {misfire_policy} anew") → the option of ``edit`` that sets each.
_EDIT_OPTION = {
    **_OPTION_OF, "cron": "--cron", "task": "--task", "args": "--args", "kwargs": "--kwargs",
    "options": "--queue", "mode": "--fixed-delay/--fixed-rate",
}


def with_options(problem: Problem, options: Mapping[str, str]) -> Problem:
    """``problem`` naming the option that gave its field (``timezone`` → ``--timezone``), by
    ``options`` keyed on the field, and each field it mentions by the option that sets it;
    with no option for its field, the fields it mentions keep their names too (a field is
    not told apart from the option beside it), unless it names no field: advice on what to
    give (the repair of a damaged row) names the options to give, whichever command refused."""
    option = options.get(problem.field)
    labels = _EDIT_OPTION if option is not None or not problem.field else {}
    return replace(problem, field=problem.field if option is None else option,
                   message=problem.message_as(labels), hint=problem.hint_as(labels), mentions=())


#: Reports a goatbeat error: ``(error, as_options, stored)`` → the message (see :func:`reported`).
Reporter = Callable[[GoatbeatError, bool, Collection[Problem]], str]


def _invalid(exc: GoatbeatError, as_options: bool, stored: Collection[Problem]) -> str:
    """Every problem, each field it mentions named by its option and (``as_options``) its
    field too, but for the damage in ``stored``: a schedule's own problems without the
    schedule's name, which the error's subject says already."""
    if not isinstance(exc, ConfigurationError):
        return str(exc)
    shown = [with_options(replace(problem, subject=""), _OPTION_OF)
             if as_options and problem not in stored and _of_a_schedule(problem)
             else with_options(problem, {}) for problem in exc.details]
    return str(ConfigurationError(shown, subject=exc.subject))


def _of_a_schedule(problem: Problem) -> bool:
    """Whether ``problem`` is about the schedule the command gives options of (a calendar's
    fields are not those options)."""
    return not problem.subject or problem.subject.startswith("schedule ")


#: What a not-found error says is missing (its ``thing``) → the command listing such things,
#: what they are, and whether close names are suggested; one not here is reported by its
#: message alone.
_LISTED_BY: dict[str, tuple[str, str, bool]] = {
    "schedule": ("list", "schedules", True),
    "calendar": ("calendar list", "calendars", False),
    "backfill": ("backfills", "backfills", False),
    "token": ("token list", "tokens", False),
    "audit entry": ("audit", "audit entries", False),
    "alert": ("alerts --all", "alerts", False),
}


def _not_found(exc: GoatbeatError, as_options: bool, stored: Collection[Problem]) -> str:
    """The message, then the command that lists what exists (and close names, for a
    schedule)."""
    listed = _LISTED_BY.get(getattr(exc, "thing", ""))
    if listed is None:
        return str(exc)
    command, things, suggested = listed
    close = _did_you_mean(getattr(exc, "name", None)) if suggested else ""
    return f"{exc}{close}; `{app_command(command)}` shows the {things}"


def _as_said(exc: GoatbeatError, as_options: bool, stored: Collection[Problem]) -> str:
    return str(exc)


def _failed(exc: GoatbeatError, as_options: bool, stored: Collection[Problem]) -> str:
    """The message, a migrate command in it naming the app given (an old schema's)."""
    return display.with_migrate_command(str(exc), app_given())


#: goatbeat's errors by kind → (the click error, whose class holds the exit status: 1, or
#: :data:`EX_UNAVAILABLE`; how the message reads).
ANSWERS: dict[ErrorKind, tuple[type[CommandError], Reporter]] = {
    ErrorKind.INVALID: (CommandError, _invalid),
    ErrorKind.NOT_FOUND: (CommandError, _not_found),
    ErrorKind.CONFLICT: (CommandError, _as_said),
    ErrorKind.UNAVAILABLE: (DatabaseUnavailable, _as_said),
    ErrorKind.FAILED: (CommandError, _failed),
}


@contextmanager
def reported(*, as_options: bool = False, stored: Collection[Problem] = ()) -> Iterator[None]:
    """goatbeat's errors as click errors: a clear message and a non-zero exit status, by the
    error's kind (:data:`ANSWERS`).

    With ``as_options``, problems about schedule fields name the command-line options instead,
    except those in ``stored``: the damage of the row being edited, which describes what the
    database holds, not what was typed.
    """
    try:
        yield
    except GoatbeatError as exc:
        error, message = ANSWERS[exc.kind]
        raise error(message(exc, as_options, stored)) from exc


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
        ctx.meta[_OPENED] = schedules  # for "did you mean" when a name is not found
        try:
            yield schedules
        finally:
            ctx.meta.pop(_OPENED, None)
            schedules.close()


_OPENED = "goatbeat.schedules"


def _did_you_mean(name: object) -> str:
    """`` (did you mean 'x'?)`` naming the stored names closest to ``name``, or ""."""
    ctx = click.get_current_context(silent=True)
    schedules = None if ctx is None else ctx.meta.get(_OPENED)
    if schedules is None or not isinstance(name, str):
        return ""
    try:
        close = suggest.close_names(schedules, name)
    except GoatbeatError:  # the look-up is a courtesy: the error stands without it
        return ""
    return f" (did you mean {' or '.join(repr(n) for n in close)}?)" if close else ""


def masked_url(schedules: Schedules) -> str:
    from goatbeat_celery.store import mask_url

    return mask_url(schedules.config.database_url)
