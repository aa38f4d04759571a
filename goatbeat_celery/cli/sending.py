"""The options of ``add`` and ``edit`` that set how each run's message is sent: one for each
``apply_async`` option a schedule may carry (``core.rules.validation.OPTION_CHECKS``), stored
in its ``options``.

An option here reads only its value's form (a number, a duration, JSON); whether the value is
allowed (a priority from 0 to 255, headers Celery keeps for itself, …) is judged by
``Schedules`` with every other problem, as for every face. On ``edit``, ``""`` removes one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from goatbeat_celery.cli.options import DurationParam, JSONParam, ParamType
from goatbeat_celery.core.types.schedule import Schedule

F = TypeVar("F", bound=Callable[..., Any])

#: What an option of ``edit`` takes to remove its key from the schedule's options.
REMOVED = ""


@dataclass(frozen=True)
class MessageOption:
    """One key of a schedule's ``options`` as a command-line option."""

    key: str
    metavar: str
    help: str
    kind: Any = click.STRING

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")


class Removable(ParamType):
    """``kind``, or ``""`` to remove the option (``edit``)."""

    def __init__(self, kind: Any) -> None:
        self.kind = kind
        self.name = getattr(kind, "name", "text")

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if value == REMOVED:
            return REMOVED
        return self.kind.convert(value, param, ctx)


class _DeliveryMode(ParamType):
    """1, 2, ``persistent`` or ``transient``: numbers as numbers, as Celery takes them."""

    name = "mode"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        return int(value) if isinstance(value, str) and value.isdigit() else value


MESSAGE_OPTIONS = (
    MessageOption("queue", "NAME", "Celery queue to send to"),
    MessageOption("exchange", "NAME", "Exchange to publish to"),
    MessageOption("routing_key", "KEY", "Routing key of the message"),
    MessageOption("priority", "N", "Message priority, 0 to 255 (the broker's meaning)",
                  click.INT),
    MessageOption("expires", "DURATION",
                  "A run not started this long after it is sent is revoked", DurationParam()),
    MessageOption("countdown", "DURATION", "The worker starts a run this long after it is sent",
                  DurationParam()),
    MessageOption("time_limit", "DURATION", "Hard time limit of a run", DurationParam()),
    MessageOption("soft_time_limit", "DURATION", "Soft time limit of a run", DurationParam()),
    MessageOption("serializer", "NAME", "Serializer of the arguments (json, pickle, …)"),
    MessageOption("compression", "NAME", "Compression of the message (zlib, bzip2, …)"),
    MessageOption("headers", "JSON", "Extra message headers, a JSON object",
                  JSONParam(dict, '\'{"tenant": "acme"}\'')),
    MessageOption("shadow", "NAME", "Task name shown in logs and monitors instead"),
    MessageOption("ignore_result", "BOOL", "Do not store the run's result (true or false)",
                  click.BOOL),
    MessageOption("delivery_mode", "MODE", "persistent (2) or transient (1)", _DeliveryMode()),
)

#: The option an operator types for each key of a schedule's ``options``, as problems name it.
OPTION_FLAGS = {f"options.{option.key}": option.flag for option in MESSAGE_OPTIONS}


def message_options(*, editing: bool) -> Callable[[F], F]:
    """The options of ``add`` (``editing=False``) or ``edit``."""
    removal = f" ({REMOVED!r} removes it)." if editing else "."
    options = [click.option(option.flag, f"message_{option.key}", metavar=option.metavar,
                            type=Removable(option.kind) if editing else option.kind,
                            help=option.help + removal)
               for option in MESSAGE_OPTIONS]

    def apply(f: F) -> F:
        for option in reversed(options):
            f = option(f)
        return f

    return apply


def options_changes(given: Mapping[str, Any], current: Schedule | None) -> dict[str, Any]:
    """``{"options": …}``: the schedule's options once those given are applied to
    ``current``'s; empty when none is given."""
    changed = {option.key: given[f"message_{option.key}"] for option in MESSAGE_OPTIONS
               if given.get(f"message_{option.key}") is not None}
    if not changed:
        return {}
    options = dict(current.spec.options) if current is not None else {}
    for key, value in changed.items():
        if value == REMOVED:
            options.pop(key, None)
        else:
            options[key] = value
    return {"options": options}
