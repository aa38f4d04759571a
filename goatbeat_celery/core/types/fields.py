"""What every face needs to know of a schedule's plain fields (a duration, a count or a factor
a person types): how it is labelled and explained, where it is shown, which setting stands in
when it is unset, and how it is stored.

Each such field of :class:`~goatbeat_celery.core.types.spec.ScheduleSpec` carries its
:class:`FieldInfo` in its dataclass metadata (:func:`described`), and the command-line options,
the ``show`` lines and JSON, the Django form and admin, the dashboard's form, the row mapping
and the config entry keys are all made from
:data:`~goatbeat_celery.core.types.spec.PLAIN_FIELDS`: a new field of this kind is declared
once, beside its type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from dataclasses import fields as dataclass_fields
from typing import Any, Literal

Kind = Literal["duration", "count", "factor"]
Group = Literal["lateness", "policies", "controls", "alerts"]

_METADATA_KEY = "goatbeat"


@dataclass(frozen=True, kw_only=True)
class FieldInfo:
    """One plain field, as the faces present it.

    ``kind`` decides how it is typed (a duration: ``90s``, ``1h30m`` or seconds; a count: a
    whole number; a factor: a number) and stored (a duration in a ``<name>_seconds`` column of
    seconds, the others in a column of their own name). ``minimum``/``maximum`` bound what a
    form or an option accepts before the spec's own rule judges it. ``default`` names the
    :class:`~goatbeat_celery.core.types.settings.Settings` attribute that applies while the
    field is unset (None: unset means off). ``off`` says what ``0`` does on ``edit``, for a
    field that 0 turns back to unset (``"turns it off"``); None: 0 is a value like any other.
    """

    name: str = ""
    kind: Kind
    label: str
    help: str
    group: Group
    default: str | None = None
    minimum: float = 0
    maximum: float | None = None
    off: str | None = None
    #: What an unset field means where no setting stands in (``"2"``); None: the rule is off.
    unset: str | None = None

    @property
    def column(self) -> str:
        """The column of ``goatbeat_schedule`` (and of the Django model) holding it."""
        return f"{self.name}_seconds" if self.kind == "duration" else self.name

    @property
    def phrase(self) -> str:
        """The help text as a form's hint reads it: lower case, no full stop."""
        return self.help[0].lower() + self.help[1:].rstrip(".")

    @property
    def option(self) -> str:
        """The option of ``celery goatbeat add`` and ``edit`` that sets it."""
        return "--" + self.name.replace("_", "-")


def described(**info: Any) -> Mapping[str, FieldInfo]:
    """Dataclass field metadata declaring a plain field (the keywords of :class:`FieldInfo`,
    its name taken from the field)."""
    return {_METADATA_KEY: FieldInfo(**info)}


def plain_fields(cls: type) -> tuple[FieldInfo, ...]:
    """The plain fields of the dataclass ``cls``, in declaration order, named."""
    return tuple(replace(field.metadata[_METADATA_KEY], name=field.name)
                 for field in dataclass_fields(cls) if _METADATA_KEY in field.metadata)
