"""How values are read from the driver: loaders that never fail a whole result on one value,
and the conversion of due rows read on the driver's cursor."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import psycopg
from psycopg.abc import Buffer
from psycopg.adapt import Loader

from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.store.schema import (
    UNREADABLE_INSTANT,
    Seconds,
    UTCDateTime,
    schedule_table,
    seconds_to_timedelta,
    utc_from_db,
)

# Positions, in a row of the due statement (clock, earliest due, then the schedule's columns in
# table order), of the values SQLAlchemy's column types would convert.
_DUE_INSTANTS = (0, 1) + tuple(
    2 + index for index, column in enumerate(schedule_table.c)
    if isinstance(column.type, UTCDateTime))
_DUE_DURATIONS = tuple(
    2 + index for index, column in enumerate(schedule_table.c) if isinstance(column.type, Seconds))


#: Durations read so far, by their stored seconds: most rows share a few values (a grace, a
#: deadline), and building a timedelta costs more than finding it. Bounded; timedeltas are
#: immutable, so rows may share them.
_DURATIONS: dict[float, Any] = {}
_DURATIONS_KEPT = 1024


def _converted_due_row(row: Sequence[Any]) -> list[Any]:
    values = list(row)
    for index in _DUE_INSTANTS:
        value = values[index]
        # The session's zone is UTC: most instants come as they must be (utc_from_db's
        # first case, without the call).
        if value is not None and (type(value) is not datetime or value.tzinfo is not UTC):
            values[index] = utc_from_db(value)
    durations = _DURATIONS
    for index in _DUE_DURATIONS:
        value = values[index]
        if value is not None:
            duration = durations.get(value) if type(value) is float else None
            if duration is None:
                duration = seconds_to_timedelta(value)
                if type(value) is float and type(duration) is timedelta:
                    if len(durations) >= _DURATIONS_KEPT:
                        durations.clear()
                    durations[value] = duration
            values[index] = duration
    return values


class _LockedRow(NamedTuple):
    """A schedule row a claim locked, with what a dispatch carries (``execution_rows._dispatch``
    reads it by name)."""

    name: str
    version: int
    task: Any
    args: Any
    kwargs: Any
    options: Any
    trigger: Any
    total_runs: Any
    rotate: Any = None
    rotate_handover: Any = None

    @classmethod
    def of(cls, schedule: Schedule, total_runs: Any) -> _LockedRow:
        """The row of ``schedule`` as the due read decoded it: the same values at the same
        version, without reading and decoding its JSON again."""
        spec = schedule.spec
        trigger = spec.trigger
        # By position, in the fields' order: a named tuple binds keywords at some cost, and
        # this runs for every claimed row.
        return cls(spec.name, schedule.row_version, spec.task, spec.args, spec.kwargs,
                   spec.options, {"kind": trigger.kind, **trigger.params}, total_runs,
                   list(spec.rotate) if spec.rotate else None, spec.rotate_handover)


#: The driver's own (compiled, where available) loader of text ``timestamptz`` values.
_TIMESTAMPTZ_LOADER: type[Loader] = psycopg.adapters.get_loader(  # type: ignore[assignment]
    psycopg.postgres.types["timestamptz"].oid, psycopg.pq.Format.TEXT)


def fast_instants(cursor: psycopg.Cursor[Any]) -> None:
    """Read ``cursor``'s ``timestamptz`` values with the driver's own loader: a value it
    cannot read fails the fetch (psycopg.DataError) instead of reading as UNREADABLE_INSTANT,
    so the caller must be ready to read again with the connection's loaders."""
    cursor.adapters.register_loader("timestamptz", _TIMESTAMPTZ_LOADER)


class _InstantLoader(Loader):
    """``timestamptz`` values; ``infinity`` or a year Python cannot hold (written by hand) reads
    as UNREADABLE_INSTANT instead of failing the whole result, so one row cannot stop a read.

    Wraps the driver's loader (compiled classes cannot be subclassed) and pays one Python call
    per value only."""

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        self._load = _TIMESTAMPTZ_LOADER(oid, context).load

    def load(self, data: Buffer) -> datetime | Any:
        try:
            return self._load(data)
        except psycopg.DataError:
            return UNREADABLE_INSTANT


#: Small flat JSON objects and arrays parsed so far, by their text: schedules that share a
#: trigger (thousands of "every 60 s") share its text, and a copy costs less than a parse.
#: Only values holding scalars are kept, so that a shallow copy is a fresh value. Bounded.
_PARSED: dict[bytes, dict[str, Any] | list[Any]] = {}
_PARSED_KEPT = 512
_PARSED_LONGEST = 256
_SCALARS = (str, int, float, bool, type(None))


class _JSONLoader(Loader):
    """Text-format json/jsonb values. Most schedules have empty kwargs and options: those skip
    the parser, and the rest skip the encoding detection ``json.loads(bytes)`` does."""

    def load(self, data: Buffer) -> Any:
        if data == b"{}":
            return {}
        if data == b"[]":
            return []
        raw = bytes(data)
        known = _PARSED.get(raw)
        if known is not None:
            return known.copy()
        text = raw.decode()
        try:
            value = json.loads(text)
        except (RecursionError, ValueError):
            # Valid JSONB that Python will not read (nested too deeply, an integer of thousands
            # of digits): the text itself, which the reader names as damage, rather than a
            # failed read of every row.
            return text
        if len(raw) <= _PARSED_LONGEST and _flat(value):
            if len(_PARSED) >= _PARSED_KEPT:
                _PARSED.clear()
            _PARSED[raw] = value.copy()
        return value


def _flat(value: Any) -> bool:
    """Whether ``value`` is a JSON object or array of scalars only."""
    if type(value) is dict:
        return all(type(item) in _SCALARS for item in value.values())
    if type(value) is list:
        return all(type(item) in _SCALARS for item in value)
    return False
