"""``pause``, ``resume`` and ``run-now`` over many schedules: ``--tag T`` (every schedule
carrying it) or several names, one ``--reason`` recorded for each (``Schedules.bulk``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

import click

from goatbeat_celery import display
from goatbeat_celery.api.bulk import BulkAction
from goatbeat_celery.cli.context import opened, reported
from goatbeat_celery.cli.output import emit, say
from goatbeat_celery.core.types.errors import ConfigurationError

#: The API's fields → what an operator types for them.
_TYPED = {"names": "NAME", "tag": "--tag", "until": "--until", "note": "--note",
          "reason": "--reason"}
BULK_COLUMNS = ("SCHEDULE", "OUTCOME", "WHY")

#: The ``--tag`` option of ``pause``, ``resume`` and ``run-now``.
tag_option = click.option(
    "--tag", metavar="TAG", default=None,
    help="Every schedule carrying TAG instead of NAME (each answered on its own; exit 1 when "
         "one was refused).")


def bulk_wanted(names: Sequence[str], tag: str | None) -> bool:
    """Whether a command acts on many schedules: a tag, or more than one name."""
    if not names and tag is None:
        raise click.UsageError("give NAME (one or more), or --tag TAG")
    return tag is not None or len(names) > 1


def run_bulk(ctx: click.Context, action: BulkAction, names: Sequence[str], tag: str | None,
             reason: str | None, as_json: bool, *, until: datetime | None = None,
             note: str | None = None) -> None:
    """Act on each schedule selected and print one line each; exit 1 when one was refused
    (the others are done: nothing is undone)."""
    with opened(ctx) as schedules, reported():
        try:
            result = schedules.bulk(action, list(names) or None, tag=tag,
                                    until=until, note=note, reason=reason)
        except ConfigurationError as exc:  # named as typed: --tag, NAME...
            raise ConfigurationError(
                [replace(p, field=_TYPED.get(p.field, p.field)) for p in exc.details],
                subject=exc.subject) from exc
    if as_json:
        emit(result.as_json())
    else:
        done, refused = len(result.done), len(result.refused)
        say(f"{action.replace('_', ' ')}: {done} done, {refused} refused")
        click.echo(display.table(
            BULK_COLUMNS,
            [[o.name, "done" if o.done else "refused",
              o.reason if o.run_key is None else f"{o.reason} ({o.run_key})"]
             for o in result.outcomes],
            width=display.terminal_width(), clipped={"WHY": "end"}))
    if result.refused:
        ctx.exit(1)
