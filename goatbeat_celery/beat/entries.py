"""What beat hands ``apply_entry`` for each claimed occurrence: a Celery ``ScheduleEntry``.

Tools that watch beat (Sentry Crons, ddtrace, a user's ``Scheduler`` subclass) wrap
``celery.beat.Scheduler.apply_entry`` and read the entry: its name, its options (Sentry adds its
check-in headers there) and its ``schedule``, a Celery schedule object they turn into a monitor
(a crontab's ``_orig_minute`` …, an interval's ``seconds``, the zone in ``tz``). Each entry here
is built from the claimed occurrence and the schedule's stored trigger, with the schedule object a
config entry gave, or for a schedule made through the API or CLI its Celery equivalent.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

from celery import beat
from celery import schedules as celery_schedules

from goatbeat_celery import cron

#: Celery schedule objects kept per schedule name and trigger; past this many, the cache starts
#: again (a crontab costs tens of microseconds to parse, a dict lookup far less).
SCHEDULE_CACHE_SIZE = 4096


class zoned_crontab(celery_schedules.crontab):  # type: ignore[misc]  # noqa: N801 - as Celery's
    """A Celery ``crontab`` evaluated in a zone of its own: its ``tz`` is that zone, not the
    app's, so a monitor that reads ``tz`` (Sentry Crons) sees the zone the schedule runs in."""

    def __init__(self, minute: Any = "*", hour: Any = "*", day_of_week: Any = "*",
                 day_of_month: Any = "*", month_of_year: Any = "*", *, zone: str = "UTC",
                 **kwargs: Any) -> None:
        super().__init__(minute=minute, hour=hour, day_of_week=day_of_week,
                         day_of_month=day_of_month, month_of_year=month_of_year, **kwargs)
        self.zone = zone
        self._zone = ZoneInfo(zone)

    @property
    def tz(self) -> ZoneInfo:
        return self._zone

    def __reduce__(self) -> Any:
        return (_rebuilt_crontab, (self._orig_minute, self._orig_hour, self._orig_day_of_week,
                                   self._orig_day_of_month, self._orig_month_of_year, self.zone))

    def __repr__(self) -> str:
        return f"<crontab: {super().__repr__()[10:-1]} in {self.zone}>"


def _rebuilt_crontab(minute: Any, hour: Any, day_of_week: Any, day_of_month: Any,
                     month_of_year: Any, zone: str) -> zoned_crontab:
    return zoned_crontab(minute, hour, day_of_week, day_of_month, month_of_year, zone=zone)


#: Seconds until a passed ``once`` is looked at again: never, in practice.
NEVER_CHECK_AGAIN = 10.0 ** 9


class once(celery_schedules.BaseSchedule):  # type: ignore[misc]  # noqa: N801 - as Celery's
    """A single instant (django-celery-beat calls it ``clocked``): due once it has passed."""

    def __init__(self, at: datetime, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.at = at

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        return self.at - datetime.now(timezone.utc)

    def is_due(self, last_run_at: datetime) -> Any:
        remaining = self.remaining_estimate(last_run_at).total_seconds()
        if remaining > 0:
            return celery_schedules.schedstate(is_due=False, next=remaining)
        # As django-celery-beat's clocked: due once the instant has passed, then not looked
        # at again (goatbeat itself runs it once, from its store).
        return celery_schedules.schedstate(is_due=True, next=NEVER_CHECK_AGAIN)

    def __reduce__(self) -> Any:
        return self.__class__, (self.at,)

    def __repr__(self) -> str:
        return f"<once: {self.at.isoformat()}>"


class GoatbeatEntry(beat.ScheduleEntry):  # type: ignore[misc]
    """One claimed occurrence as Celery's beat would hand it to ``apply_entry``.

    ``name``, ``task``, ``args``, ``kwargs``, ``options`` (goatbeat's headers and the starting
    deadline included), ``schedule``, ``last_run_at`` (the occurrence instant this run is for)
    and ``total_run_count`` (runs of the schedule claimed before this one, as the store read
    them; for a message sent again, ``goatbeat_send`` above 1, as the store reads them at that
    send, this run's claim included) are Celery's, and ``is_due()`` and ``next(entry)``
    answer as Celery's entry does;
    ``key``, ``occurrence_at``, ``token`` and ``manual`` are goatbeat's. What a hook changes in
    ``options`` (headers, a queue) reaches the message.
    """

    def __init__(self, *, app: Any, name: str, task: str, args: list[Any],
                 kwargs: dict[str, Any], options: dict[str, Any], schedule: Any,
                 total_run_count: int, key: str, occurrence_at: datetime, token: int,
                 manual: bool) -> None:
        # Not ScheduleEntry.__init__: the schedule is built already and last_run_at is known,
        # and this runs once per message.
        self.app = app
        self.name = name
        self.task = task
        self.args = args
        self.kwargs = kwargs
        self.options = options
        self.schedule = schedule
        self.last_run_at = occurrence_at
        self.total_run_count = total_run_count
        self.key = key
        self.occurrence_at = occurrence_at
        self.token = token
        self.manual = manual
        #: Set by the scheduler's apply_async: the publish's own error, or True once sent.
        self.error: BaseException | None = None
        self.sent = False
        #: How this batch publishes (producer options, the time left); set by the submitter.
        self.call: Mapping[str, Any] = {}
        self.own_headers: Mapping[str, Any] = {}
        self.batch: Any = None

    def _next_instance(self, last_run_at: datetime | None = None) -> beat.ScheduleEntry:
        """The entry of the schedule's run after this one, as Celery's ``next(entry)``: a plain
        ``ScheduleEntry`` with ``last_run_at`` this occurrence (or the instant given) and one
        run more. goatbeat's own headers stay with this run. The store advanced the schedule
        when it claimed this run, so nothing is advanced here, and sending the returned entry
        yourself would send a run goatbeat does not know of."""
        options = dict(self.options)
        headers = {key: value for key, value in (options.get("headers") or {}).items()
                   if key not in self.own_headers}
        if headers:
            options["headers"] = headers
        else:
            options.pop("headers", None)
        return beat.ScheduleEntry(
            name=self.name, task=self.task, last_run_at=last_run_at or self.occurrence_at,
            total_run_count=self.total_run_count + 1, schedule=self.schedule,
            args=list(self.args), kwargs=dict(self.kwargs), options=options, app=self.app)

    __next__ = next = _next_instance

    def is_due(self) -> Any:
        """Due, as every entry Celery's beat hands ``apply_entry`` is, with the seconds until
        the schedule's run after this one (Celery's ``schedstate``)."""
        if self.schedule is None:  # a trigger edited by hand: no Celery schedule to ask
            return celery_schedules.schedstate(is_due=True, next=NEVER_CHECK_AGAIN)
        _, seconds = self.schedule.is_due(self.occurrence_at)
        return celery_schedules.schedstate(is_due=True, next=seconds)

    def __reduce__(self) -> Any:
        return beat.ScheduleEntry, (self.name, self.task, self.last_run_at,
                                    self.total_run_count, self.schedule, self.args,
                                    self.kwargs, self.options)


class ScheduleObjects:
    """The Celery schedule object of each schedule, by name and stored trigger: the object a
    config entry of this app gave, or one built from the trigger."""

    def __init__(self, app: Any, entries: Mapping[str, Any] | None = None) -> None:
        self.app = app
        self._built: dict[Hashable, Any] = {}
        # The config entries (those the scheduler declares), else the app's beat_schedule read
        # at the first build: a burst of new schedules would otherwise copy it out of Celery's
        # settings once each.
        self._config: Mapping[str, Any] | None = entries
        #: The last trigger asked for without a config entry, and its object: the schedules
        #: of a burst mostly share one, compared here without writing it out as a key.
        self._last: tuple[Mapping[str, Any], Any] | None = None

    def get(self, name: str, trigger: Mapping[str, Any] | None) -> Any:
        if trigger is None:
            return None
        configured = name in self._entries()
        last = self._last
        if not configured and last is not None and last[0] == trigger:
            return last[1]
        # One object for every schedule with the same trigger and no config entry (thousands
        # of "every 60 s" share one); a config entry's own is kept by name.
        key: Hashable = repr(trigger)
        if configured:
            key = (name, key)
        found = self._built.get(key, _MISSING)
        if found is _MISSING:
            if len(self._built) >= SCHEDULE_CACHE_SIZE:
                self._built.clear()
            found = self._built[key] = self._build(name, trigger)
        if not configured:
            self._last = (dict(trigger), found)
        return found

    def _build(self, name: str, trigger: Mapping[str, Any]) -> Any:
        try:
            return celery_schedule(trigger, self.app, self._configured(name))
        except Exception:  # a trigger edited by hand: the entry carries no schedule
            return None

    def _entries(self) -> Mapping[str, Any]:
        if self._config is None:
            self._config = dict(self.app.conf.beat_schedule or {})
        return self._config

    def _configured(self, name: str) -> Any:
        """The schedule this app's ``beat_schedule`` gives ``name``, as Celery reads it."""
        entry = self._entries().get(name)
        if not isinstance(entry, Mapping) or entry.get("schedule") is None:
            return None
        return celery_schedules.maybe_schedule(entry["schedule"], app=self.app)


_MISSING = object()


def celery_schedule(trigger: Mapping[str, Any], app: Any, configured: Any = None) -> Any:
    """The Celery schedule object for a stored trigger.

    A config entry's own object is kept (a crontab gains the zone it runs in); a cron trigger
    becomes a ``crontab`` in its zone, an interval a ``schedule``, an instant a ``once``. A
    crontab built from an API cron expression whose day-of-month and day-of-week are both
    restricted matches either day, as standard cron does, where Celery's would need both.
    """
    kind = trigger.get("kind")
    if kind == "cron":
        zone = str(trigger.get("timezone") or "UTC")
        if isinstance(configured, celery_schedules.crontab):
            return zoned_crontab(configured._orig_minute, configured._orig_hour,
                                 configured._orig_day_of_week, configured._orig_day_of_month,
                                 configured._orig_month_of_year, zone=zone, app=app)
        expression = str(trigger["expression"]).strip()
        fields = cron.MACROS.get(expression.lower(), expression).split()
        minute, hour, day_of_month, month_of_year, day_of_week = fields
        return zoned_crontab(minute, hour, day_of_week, day_of_month, month_of_year, zone=zone,
                             app=app)
    if kind == "interval":
        if isinstance(configured, celery_schedules.schedule):
            return configured
        return celery_schedules.schedule(timedelta(seconds=float(trigger["every"])), app=app)
    if kind == "once":
        return once(datetime.fromisoformat(str(trigger["at"])), app=app)
    return configured
