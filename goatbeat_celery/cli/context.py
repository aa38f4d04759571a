"""What every command works with: the app given with ``-A``, its schedules on the database, and
goatbeat's errors reported as click errors (problems naming the options an operator typed)."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator
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

#: Leading field names in goatbeat's problem messages → the option an operator typed.
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


#: Field names that read unambiguously as options wherever they appear in a problem.
_FIELD_WORDS = re.compile(r"\b({})\b".format("|".join(
    (*(field.name for field in PLAIN_FIELDS), "misfire_policy", "overlap", "start_at",
     "end_at"))))


#: Leading field names of a spec's own problems that are read as options only there (a word
#: such as "tags" may appear in other text).
_SPEC_OPTION_WORDS = frozenset({"tags", "description", "calendars", "args", "kwargs",
                                *OPTION_FLAGS})


def _option_names(problem: Problem) -> str:
    """``timezone: unknown zone…`` → ``--timezone: unknown zone…``, by the field the problem
    names; a schedule's own name prefix is dropped (the error's subject already names it)."""
    said = problem.text.partition(": ")[2]
    if not problem.subject and problem.field in _OPTION_OF:
        return f"{_OPTION_OF[problem.field]}: {said}"
    text = str(problem)
    if problem.subject.startswith("schedule "):
        if problem.field in _SPEC_OPTION_WORDS:
            return f"{_OPTION_OF[problem.field]}: {said}"
        text = problem.text
        if text.startswith("task "):
            text = "TASK " + text[len("task "):]
    return _FIELD_WORDS.sub(lambda m: _OPTION_OF[m.group(1)], text)


#: Keywords of ``Schedules.update`` → the option of ``edit`` that sets each.
_EDIT_OPTION = {
    **_OPTION_OF, "cron": "--cron", "task": "--task", "args": "--args", "kwargs": "--kwargs",
    "options": "--queue", "mode": "--fixed-delay/--fixed-rate",
}
#: The API's advice for a damaged row: "edit it giving args, misfire_policy anew".
_REPAIR_HINT = re.compile(r"(?<=\bgiving )[a-z_]+(?:, [a-z_]+)*(?= anew\b)")


def _edit_options(problem: str) -> str:
    """The API's repair advice in the options an operator types (``args`` → ``--args``)."""
    return _REPAIR_HINT.sub(lambda m: ", ".join(_EDIT_OPTION.get(word, word)
                                                for word in m[0].split(", ")), problem)


#: Reports a goatbeat error: ``(error, as_options, stored)`` → the message (see :func:`reported`).
Reporter = Callable[[GoatbeatError, bool, Collection[str]], str]


def _invalid(exc: GoatbeatError, as_options: bool, stored: Collection[str]) -> str:
    """Every problem, the API's repair advice and (``as_options``) the fields named as the
    options an operator types."""
    if not isinstance(exc, ConfigurationError):
        return str(exc)
    problems = [replace(p, message=_edit_options(p.message), hint=_edit_options(p.hint))
                for p in exc.details]
    shown = [str(p) if not as_options or str(p) in stored else _option_names(p)
             for p in problems]
    return str(ConfigurationError(shown, subject=exc.subject))


#: What a not-found error says is missing (its ``thing``) → the command listing such things,
#: what they are, and whether close names are suggested; one not here is reported by its
#: message alone.
_LISTED_BY: dict[str, tuple[str, str, bool]] = {
    "schedule": ("list", "schedules", True),
    "calendar": ("calendar list", "calendars", False),
    "backfill": ("backfills", "backfills", False),
    "token": ("token list", "tokens", False),
    "alert": ("alerts --all", "alerts", False),
}


def _not_found(exc: GoatbeatError, as_options: bool, stored: Collection[str]) -> str:
    """The message, then the command that lists what exists (and close names, for a
    schedule)."""
    listed = _LISTED_BY.get(getattr(exc, "thing", ""))
    if listed is None:
        return str(exc)
    command, things, suggested = listed
    close = _did_you_mean(getattr(exc, "name", None)) if suggested else ""
    return f"{exc}{close}; `{app_command(command)}` shows the {things}"


def _as_said(exc: GoatbeatError, as_options: bool, stored: Collection[str]) -> str:
    return str(exc)


def _failed(exc: GoatbeatError, as_options: bool, stored: Collection[str]) -> str:
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
def reported(*, as_options: bool = False, stored: Collection[str] = ()) -> Iterator[None]:
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
