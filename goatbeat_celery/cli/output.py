"""What the commands print: documents for scripts, lines for people, warnings, one schedule."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from goatbeat_celery import display
from goatbeat_celery.cli.context import (
    CommandError,
    app_command,
    app_label,
    celery_app,
    reported,
)
from goatbeat_celery.core.rules.sync import config_row_refusal
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSource

if TYPE_CHECKING:
    from goatbeat_celery.api import Schedules


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


def refuse_config_row(schedule: Schedule) -> None:
    """Refuse an edit or a removal of a schedule from beat_schedule, as every face does."""
    refusal = config_row_refusal(schedule)
    if refusal is not None:
        raise CommandError(f"{refusal}; change or remove its entry there (`"
                           f"{app_command('sync --plan')}` shows what the next sync does)")


def warn_unknown_task(ctx: click.Context, task: str) -> None:
    """Warn (never refuse: beat may not import every task module) when ``task`` is not among
    the app's tasks once its task modules are imported as a worker imports them."""
    from goatbeat_celery.tasknames import registered_tasks, unknown_task_warning

    try:
        known = registered_tasks([celery_app(ctx)])
    except Exception as exc:  # the app's own modules failed to import: nothing to compare
        warn(f"could not check task {task!r}: importing the task modules of {app_label()} "
             f"failed ({type(exc).__name__}: {exc})")
        return
    warning = unknown_task_warning(task, known, app_label())
    if warning is not None:
        warn(warning)


def show_schedule(schedules: Schedules, schedule: Schedule, as_json: bool,
                  headline: str | None = None) -> None:
    defaults = schedules.config.settings
    with reported():
        now = schedules.now()
    if as_json:
        emit(display.schedule_json(schedule, defaults, now))
        return
    if headline:
        say(headline)
    click.echo(display.fields(display.schedule_fields(schedule, defaults, now)))
