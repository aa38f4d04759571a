"""Handing over from django-celery-beat: whether both schedulers could send the same task.

django-celery-beat's ``DatabaseScheduler`` sends every enabled periodic task; goatbeat's beat
sends every enabled schedule. A task enabled in both, once imported, is sent twice as soon as
both beats run. This module reads django-celery-beat's table (``django_celery_beat_periodictask``,
in goatbeat's database, where a Django project keeps both) beside goatbeat's schedules and
leases, and says:

* a *warning* for tasks enabled in both (nothing may run twice yet: django-celery-beat's beat
  may be stopped already), naming them and how to disable them;
* an *error* for those whose ``last_run_at`` is later than the moment goatbeat's running beat
  took its lease (a lease held now): a ``DatabaseScheduler`` still runs them while goatbeat
  does. Once goatbeat's beat is stopped (its lease released or expired), nothing is sent
  twice, and the warning remains.

The rule is written here once; ``celery goatbeat check`` and Django's system checks show it,
and the leading beat looks for the error itself (:class:`HandoverWatch`), off its scheduling
path, and logs it as a WARNING while it lasts. A rollback
(``goatbeat_export_django_celery_beat``) pauses goatbeat's schedules, which ends both messages.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import sqlalchemy as sa

from goatbeat_celery.core.protocols import LeaseManager, ScheduleReads, StoreConnection
from goatbeat_celery.core.types.errors import (
    GoatbeatError,
    ScheduleNotFound,
    StoreError,
    failure_reason,
)
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.display import when

logger = logging.getLogger(__name__)

#: django-celery-beat's table of periodic tasks.
PERIODIC_TASK_TABLE = "django_celery_beat_periodictask"
#: Names shown in a message before "and N more".
SHOWN = 5


@dataclass(frozen=True)
class SourceTask:
    """An enabled periodic task of django-celery-beat, as its table holds it."""

    name: str
    last_run_at: datetime | None


@dataclass(frozen=True)
class Overlap:
    """What running both schedulers would send twice."""

    #: Enabled in django-celery-beat and enabled in goatbeat, by name.
    both_enabled: tuple[str, ...]
    #: Of those, the ones django-celery-beat ran after goatbeat's beat took its lease.
    ran_since: tuple[SourceTask, ...]
    #: When goatbeat's running beat took its lease (the earliest of the leases held now, a
    #: sharded deployment holding several); None when no goatbeat beat holds one.
    lease_taken_at: datetime | None

    def warning(self) -> str | None:
        if not self.both_enabled:
            return None
        count = len(self.both_enabled)
        noun = "periodic task is" if count == 1 else "periodic tasks are"
        return (f"{count} django-celery-beat {noun} enabled and goatbeat has an enabled "
                f"schedule of the same name ({listed(self.both_enabled)}): a beat running "
                "django-celery-beat's DatabaseScheduler would send each of them a second "
                "time; disable them (`manage.py goatbeat_import_django_celery_beat "
                "--disable-source` does it for the tasks it imported) or pause goatbeat's")

    def error(self) -> str | None:
        if not self.ran_since or self.lease_taken_at is None:
            return None
        taken = self.lease_taken_at
        latest = max(self.ran_since, key=lambda task: task.last_run_at or taken)
        count = len(self.ran_since)
        noun = "periodic task" if count == 1 else "periodic tasks"
        return (f"django-celery-beat ran {count} {noun} after goatbeat's beat took its lease "
                f"at {when(self.lease_taken_at)} ({listed([t.name for t in self.ran_since])}; "
                f"{latest.name!r} at {when(latest.last_run_at)}): a DatabaseScheduler is still "
                "running and each of them is sent twice; stop every beat started with "
                "django_celery_beat.schedulers:DatabaseScheduler, then disable the tasks")


class _Store(StoreConnection, ScheduleReads, LeaseManager, Protocol):
    """What :func:`overlap` and the watch read: whether the table is there, schedules and
    leases."""


def listed(names: Sequence[str]) -> str:
    shown = ", ".join(repr(name) for name in names[:SHOWN])
    rest = len(names) - SHOWN
    return shown + (f" and {rest} more" if rest > 0 else "")


def read_source(engine: sa.Engine, ran_after: datetime | None = None) -> list[SourceTask]:
    """django-celery-beat's enabled periodic tasks, by name (those that ran after
    ``ran_after`` only, when given), from its table (the store found it: ``has_table``)."""
    table = sa.table(PERIODIC_TASK_TABLE, sa.column("name"), sa.column("enabled"),
                     sa.column("last_run_at"))
    query = (sa.select(table.c.name, table.c.last_run_at)
             .where(table.c.enabled == sa.true()).order_by(table.c.name))
    if ran_after is not None:
        query = query.where(table.c.last_run_at > ran_after)
    with engine.connect() as connection:
        rows = connection.execute(query).all()
    return [SourceTask(str(name), _aware(last)) for name, last in rows]


def _aware(value: object) -> datetime | None:
    # PostgreSQL gives aware datetimes; SQLite naive text in UTC (Django's USE_TZ storage).
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def overlap(store: _Store, tasks: Sequence[SourceTask], lease_name: str) -> Overlap:
    """Compare django-celery-beat's enabled ``tasks`` with goatbeat's schedules in ``store``
    and the leases named ``lease_name`` (and its shards)."""
    both: list[SourceTask] = []
    for task in tasks:
        try:
            schedule = store.get_schedule(task.name)
        except ScheduleNotFound:
            continue
        if schedule.spec.enabled:
            both.append(task)
    since = lease_taken_at(store, lease_name)
    ran = tuple(task for task in both if since is not None and task.last_run_at is not None
                and task.last_run_at > since)
    return Overlap(tuple(task.name for task in both), ran, since)


def lease_taken_at(store: LeaseManager, lease_name: str) -> datetime | None:
    """When goatbeat's running beat took the lease ``lease_name`` (the earliest of its
    shards' held now); None when no beat holds one."""
    taken = [info.acquired_at for info in store.list_leases(lease_name)
             if info.acquired_at is not None and info.held]
    return min(taken) if taken else None


def find_overlap(url: str, lease_name: str) -> Overlap | None:
    """:func:`overlap` on goatbeat's database ``url``; None when it holds no
    django-celery-beat table (nothing to compare)."""
    from goatbeat_celery.store import migration_engine, open_store
    from goatbeat_celery.store.url import Backend, backend_of

    if backend_of(url) is Backend.MEMORY:
        return None
    store = open_store(url, create_schema=False)
    try:
        if not store.has_table(PERIODIC_TASK_TABLE):
            return None
        engine = migration_engine(url)
        try:
            tasks = read_source(engine)
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"cannot read {PERIODIC_TASK_TABLE}: {failure_reason(exc)}") from exc
        finally:
            engine.dispose()
        return overlap(store, tasks, lease_name)
    finally:
        store.close()


#: How often the leader looks for django-celery-beat's scheduler running beside it, and how
#: often it repeats its warning while the same tasks are sent twice.
WATCH_EVERY = 60.0
WARN_EVERY = 600.0
#: How often it looks while the database holds no django-celery-beat table: only whether one
#: was made since (a look every minute cost an idle leader nearly what its renewals do).
ABSENT_EVERY = 600.0


class HandoverWatch:
    """The leading beat's look for django-celery-beat's ``DatabaseScheduler`` still sending
    what goatbeat sends (:meth:`Overlap.error`): a WARNING when first seen, when other tasks
    are concerned, and every :data:`WARN_EVERY` seconds while it lasts; an INFO line once it
    ended. Runs in a thread of its own (:meth:`start`), so that a slow read never delays a run;
    asks the store whether the table is there, and looks only every ``absent_every`` seconds
    while it is not; reads, on a connection of its own, only the periodic tasks that ran since
    the lease was taken, so that it costs little while django-celery-beat's beat is stopped."""

    def __init__(self, url: str, store: _Store, lease_name: str, *,
                 leading: Callable[[], bool], every: float = WATCH_EVERY,
                 warn_every: float = WARN_EVERY, absent_every: float = ABSENT_EVERY,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._url, self._store, self._lease_name = url, store, lease_name
        self._leading, self._every, self._warn_every = leading, every, warn_every
        self._absent_every = absent_every
        #: Whether the last look found no django-celery-beat table.
        self.table_absent = False
        self._monotonic = monotonic
        self._engine: sa.Engine | None = None
        self._warned: tuple[tuple[str, ...], float] | None = None
        self._failed_at: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def look(self) -> Overlap | None:
        """One look, logged as the class says; what was found (None: nothing to compare)."""
        # Asked on the store's open connections: a look while the table is absent (nearly
        # always) opens none, which costs more than the question.
        self.table_absent = not self._store.has_table(PERIODIC_TASK_TABLE)
        since = None if self.table_absent else lease_taken_at(self._store, self._lease_name)
        if since is None:
            return None
        if self._engine is None:
            from goatbeat_celery.store import reading_engine

            self._engine = reading_engine(self._url)
        tasks = read_source(self._engine, ran_after=since)
        found = None if not tasks else overlap(self._store, tasks, self._lease_name)
        message = None if found is None else found.error()
        if found is None or message is None:
            if self._warned is not None:
                self._warned = None
                logger.info("goatbeat: django-celery-beat no longer sends what goatbeat sends",
                            extra={"action": "double_scheduler_ended"})
            return found
        names = tuple(task.name for task in found.ran_since)
        now = self._monotonic()
        if (self._warned is None or self._warned[0] != names
                or now - self._warned[1] >= self._warn_every):
            self._warned = (names, now)
            logger.warning("goatbeat: %s", message, extra={"action": "double_scheduler"})
        return found

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="goatbeat-handover-watch",
                                        daemon=True)
        self._thread.start()

    def next_look_in(self) -> float:
        """Seconds from the end of a look to the next one."""
        return self._absent_every if self.table_absent else self._every

    def _run(self) -> None:
        while not self._stop.wait(self.next_look_in()):
            if not self._leading():
                continue
            try:
                self.look()
            except (GoatbeatError, sa.exc.SQLAlchemyError) as exc:
                # A look that fails is tried again and never stops beat; said as rarely as the
                # warning (a role without SELECT on django-celery-beat's table fails each).
                now = self._monotonic()
                if self._failed_at is None or now - self._failed_at >= self._warn_every:
                    self._failed_at = now
                    logger.warning("goatbeat: cannot look for django-celery-beat's scheduler: "
                                   "%s", failure_reason(exc),
                                   extra={"action": "double_scheduler_unknown"})

    def close(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=5.0)  # a look under way ends at its next statement
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.dispose()


def start_watch(url: str, store: _Store, lease_name: str, *,
                leading: Callable[[], bool]) -> HandoverWatch | None:
    """A started :class:`HandoverWatch` on goatbeat's database ``url``; None for the memory
    store, which no other scheduler can share."""
    from goatbeat_celery.store.url import Backend, backend_of

    if backend_of(url) is Backend.MEMORY:
        return None
    watch = HandoverWatch(url, store, lease_name, leading=leading, every=WATCH_EVERY,
                          absent_every=ABSENT_EVERY)
    watch.start()
    return watch
