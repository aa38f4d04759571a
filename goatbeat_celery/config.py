"""Celery configuration → goatbeat settings and schedule specs.

Everything is validated before anything connects or writes: every problem of the settings and of
every ``beat_schedule`` entry is collected and raised in one ConfigurationError.
"""

from __future__ import annotations

import difflib
import fnmatch
import importlib
import numbers
import sys
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta
from typing import Any

from celery import schedules as celery_schedules
from celery.beat import BeatLazyFunc

from goatbeat_celery import celery_schedules as other_schedules
from goatbeat_celery import cron, rrule, solar, spec_input
from goatbeat_celery.core.links import doc
from goatbeat_celery.core.loop.observer import OccurrenceRecord
from goatbeat_celery.core.rules.controls import bounded_first
from goatbeat_celery.core.rules.defaults import own_or_default
from goatbeat_celery.core.rules.misfire import first_occurrence
from goatbeat_celery.core.rules.policies import GridAfter, OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.triggers import IntervalTrigger, Trigger, TriggerRegistry
from goatbeat_celery.core.rules.validation import MIN_EVERY, seconds_problem
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import to_timedelta
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec, TriggerSpec, quoted_name
from goatbeat_celery.hidden_settings import hide_secret_settings
from goatbeat_celery.settings import metrics
from goatbeat_celery.settings.webhooks import KEYS as WEBHOOK_KEYS
from goatbeat_celery.settings.webhooks import WebhookSettings, read_webhooks
from goatbeat_celery.store import Store, open_store
from goatbeat_celery.store.url import Backend, backend_of, sqlite_path

DEFAULT_DATABASE_URL = "sqlite:///goatbeat.sqlite3"
#: The longest the server lets a session sit idle inside a transaction (seconds).
IDLE_IN_TRANSACTION_MAX = 10.0
PREFIX = "goatbeat_"

#: ``goatbeat_<name>`` → the Settings field ``<name>``: every field is a setting.
_SETTINGS_KEYS = tuple(settings_field.name for settings_field in fields(Settings))
_OWN_KEYS = ("database_url", "allowed_tasks", "statement_timeout", "metrics_port",
             "metrics_address", "occurrence_hook", "session_locks", *WEBHOOK_KEYS)
#: Where the metrics exporter listens unless ``goatbeat_metrics_address`` says otherwise.
DEFAULT_METRICS_ADDRESS = "127.0.0.1"
_KNOWN = frozenset(PREFIX + key for key in (*_SETTINGS_KEYS, *_OWN_KEYS))
#: The key of an entry's options under which goatbeat's own options go.
OPTIONS_KEY = "goatbeat"
_ENTRY_KEYS = {"task", "schedule", "args", "kwargs", "options", "relative", "goatbeat"}
#: What an entry's ``goatbeat`` key may give: every spec field the entry does not give itself.
_GOATBEAT_ENTRY_KEYS = {
    *(key for key in spec_input.SPEC_FIELDS if key not in _ENTRY_KEYS), "timezone", "enabled",
}

#: ``goatbeat_occurrence_hook``: called with every submission attempt, its return value ignored.
OccurrenceHook = Callable[[OccurrenceRecord], object]


@dataclass(frozen=True, kw_only=True)
class GoatbeatConfig:
    """Everything goatbeat reads from ``app.conf``, validated."""

    database_url: str = DEFAULT_DATABASE_URL
    #: How the engine behaves (``goatbeat_lease_ttl``, ``goatbeat_misfire_policy``, ...).
    settings: Settings = field(default_factory=Settings)
    #: None (left out): schedules created through the database may send any task.
    allowed_tasks: tuple[str, ...] | None = None
    statement_timeout: float = 5.0
    metrics_port: int | None = None
    metrics_address: str = DEFAULT_METRICS_ADDRESS
    occurrence_hook: OccurrenceHook | None = None
    #: Where the outbox's events (alerts) are POSTed; None: nowhere (``goatbeat_webhooks``).
    webhooks: WebhookSettings | None = None
    #: Whether a standby learns of a crashed leader from its ended session (store.sessions):
    #: off behind a transaction-pooling proxy, where takeovers then wait for the clock.
    session_locks: bool = True

    @property
    def webhook_secret(self) -> str | None:
        """The secret webhooks sign with unless they give their own (never printed)."""
        return None if self.webhooks is None else self.webhooks.secret

    @property
    def webhook_timeout(self) -> float:
        return (self.webhooks or WebhookSettings(hooks=())).timeout.total_seconds()

    @property
    def webhook_retry_backoff(self) -> float:
        return (self.webhooks or WebhookSettings(hooks=())).retry_backoff.total_seconds()

    @property
    def webhook_retry_backoff_max(self) -> float:
        return (self.webhooks or WebhookSettings(hooks=())).retry_backoff_max.total_seconds()

    def open_store(self) -> Store:
        """Open the configured store, with the options its backend takes."""
        options: dict[str, Any] = {}
        if backend_of(self.database_url) is not Backend.MEMORY:
            options["session_locks"] = self.session_locks
        if backend_of(self.database_url) in (Backend.POSTGRES, Backend.MYSQL):
            options["statement_timeout"] = self.statement_timeout
            # A replica frozen inside a transaction (a pause, SIGSTOP) keeps the lease row
            # share-locked and so holds a takeover back until the server ends its session: end
            # it within one renew interval, by the time its lease would run out anyway.
            options["idle_in_transaction_timeout"] = min(
                IDLE_IN_TRANSACTION_MAX, self.settings.lease_renew_interval.total_seconds())
        return open_store(self.database_url, **options)

    def store_warning(self) -> str | None:
        """Why this store does not coordinate replicas on several hosts, if it does not."""
        if backend_of(self.database_url) is not Backend.SQLITE:
            return None
        left_out = ("goatbeat_database_url is not set: "
                    if self.database_url == DEFAULT_DATABASE_URL else "")
        path = sqlite_path(self.database_url)
        return (f"{left_out}schedules and the lease are kept in the SQLite file {path}, which "
                "coordinates the replicas of this host only: replicas on other hosts would "
                "each lead and send every task again. Set goatbeat_database_url to a "
                "PostgreSQL URL to run beat on several hosts.")

    def tracking_warning(self, spelt: Callable[[str], str] = str) -> str | None:
        """What an operator should know when the workers are not known to track runs, the
        settings named as ``spelt`` spells them (``goatbeat_track_runs`` by default)."""
        if self.settings.track_runs:
            return None
        timeout = self.settings.run_start_timeout.total_seconds()
        setting = spelt(PREFIX + "track_runs")
        return (f"{setting} is off: the workers do not track runs, so each run's outcome is "
                f"shown as unknown once {timeout:g}s ({spelt(PREFIX + 'run_start_timeout')}) "
                "have passed after it was sent, and no run is judged lost or failed, nor "
                "alerted on. Call goatbeat_celery.track_runs(app) in the app module (it sets "
                f"{setting}) to record what the workers do ({doc('run-tracking.md')}).")

    def task_allowed(self, task: str) -> bool:
        """Whether an API-created schedule may send ``task`` (all tasks when the setting is
        left out; an empty list is refused when the settings are read)."""
        return self.allowed_tasks is None or any(
            fnmatch.fnmatchcase(task, pattern) for pattern in self.allowed_tasks
        )


@dataclass(frozen=True, kw_only=True)
class LoadedConfig:
    """The validated config, the config schedules, and a registry that can build them."""

    config: GoatbeatConfig
    schedules: tuple[ScheduleSpec, ...]
    triggers: TriggerRegistry
    #: Celery ``BeatLazyFunc`` arguments of config entries, by entry name and position
    #: (``args.0``, ``kwargs.key``): stored as placeholders, called when a run is sent.
    lazy: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: The schedule objects of entries whose schedule is a class of its own, by entry name.
    objects: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class EntriesRead:
    """``beat_schedule``-shaped entries read: their specs, and what the specs refer to."""

    specs: tuple[ScheduleSpec, ...]
    objects: dict[str, Any]
    lazy: dict[str, dict[str, Any]]


def read_entries(entries: Mapping[Any, Any], zone: str, problems: list[Problem],
                 objects: Mapping[str, Any] | None = None) -> EntriesRead:
    """Config entries (``beat_schedule``'s, or given to the scheduler's ``add``) → specs;
    problems appended. Each entry's trigger is built once with the schedule objects of these
    entries and ``objects`` (those of the other entries kept), to report what cannot be."""
    specs: list[ScheduleSpec] = []
    found: dict[str, Any] = {}
    lazy: dict[str, dict[str, Any]] = {}
    for name, entry in sorted(entries.items(), key=lambda item: str(item[0])):
        spec = entry_to_spec(str(name), entry, zone, problems, found, lazy)
        if spec is not None:
            specs.append(spec)
    registry = other_schedules.register(base_registry(), {**(objects or {}), **found})
    for spec in specs:
        try:
            registry.build(spec.trigger)
        except ConfigurationError as exc:
            problems.extend(_below(f"beat_schedule[{spec.name!r}]", p) for p in exc.details)
    return EntriesRead(specs=tuple(specs), objects=found, lazy=lazy)


def load(app: Any, *, with_schedules: bool = True) -> LoadedConfig:
    """Read and validate ``app.conf``; raises ConfigurationError listing every problem."""
    hide_secret_settings()  # wherever goatbeat runs, Celery prints no webhook secret
    problems: list[Problem] = []
    config = read_settings(app.conf, problems, namespace=getattr(app, "namespace", None))
    read = EntriesRead(specs=(), objects={}, lazy={})
    if with_schedules:
        zone = default_timezone(app)
        # The app's zone is where every crontab entry without a zone of its own runs: an
        # unknown one is reported whether or not an entry needs it yet.
        problems.extend(cron.zone_problems(zone, "timezone"))
        read = read_entries(dict(app.conf.beat_schedule or {}), zone, problems)
    if problems:
        raise ConfigurationError(problems, subject="goatbeat configuration")
    return LoadedConfig(config=config, schedules=read.specs,
                        triggers=other_schedules.register(base_registry(), read.objects),
                        lazy=read.lazy, objects=read.objects)


def synced_schedules(app: Any, loaded: LoadedConfig) -> tuple[ScheduleSpec, ...]:
    """The schedules config sync writes: those of ``beat_schedule``, and Celery's own daily
    result cleanup as its default scheduler adds it (unless the entries name it, or the result
    backend expires results by itself)."""
    specs = loaded.schedules
    defaults = default_entries(app, {spec.name for spec in specs})
    return (*specs, *read_entries(defaults, default_timezone(app), []).specs)


def default_entries(app: Any, names: Collection[str]) -> dict[str, dict[str, Any]]:
    """The entries Celery's scheduler adds to those named ``names``
    (``Scheduler.install_default_entries``): its result cleanup, unless named already or the
    result backend expires results by itself."""
    if "celery.backend_cleanup" in names or not app.conf.result_expires \
            or app.backend.supports_autoexpire:
        return {}
    return {"celery.backend_cleanup": {
        "task": "celery.backend_cleanup", "schedule": celery_schedules.crontab("0", "4", "*"),
        "options": {"expires": 12 * 3600}}}


def base_registry() -> TriggerRegistry:
    """The trigger kinds every process knows: interval, once, cron, rrule and solar."""
    return solar.register(rrule.register(cron.register(TriggerRegistry.default())))


def default_timezone(app: Any) -> str:
    """The app's zone by IANA name (``timezone`` setting, else UTC)."""
    name = app.conf.timezone
    return str(name) if name else "UTC"


def read_settings(conf: Mapping[str, Any], problems: list[Problem], *,
                  namespace: str | None = None) -> GoatbeatConfig:
    """``goatbeat_*`` keys of ``conf`` → GoatbeatConfig; problems are appended, not raised.

    ``namespace`` is the app's config namespace (``CELERY`` in a Django project), under which
    the settings are also read as ``CELERY_GOATBEAT_<NAME>``."""
    problems.extend(stray_problems(conf.keys(), namespace))

    given: dict[str, Any] = {
        key: conf.get(PREFIX + key) for key in _SETTINGS_KEYS if conf.get(PREFIX + key) is not None
    }
    try:
        settings = Settings(**given)
    except ConfigurationError as exc:
        problems.extend(_below(PREFIX, p, dot="") for p in exc.details)
        settings = Settings()
    except TypeError as exc:  # a value of a type the dataclass cannot even compare
        problems.append(Problem(f"{PREFIX}settings", str(exc)))
        settings = Settings()

    url = conf.get(PREFIX + "database_url")
    if url is None:
        url = _django_database_url(problems) or DEFAULT_DATABASE_URL
    elif not isinstance(url, str):
        problems.append(Problem(f"{PREFIX}database_url",
                                f"expected a URL string, got {type(url).__name__}"))
        url = DEFAULT_DATABASE_URL
    elif not url.strip():
        # Fail closed: an empty URL (an unset environment variable, say) must not quietly
        # become a local file on every host, each one its own leader.
        problems.append(Problem(f"{PREFIX}database_url", "is empty",
                                "give the database URL (e.g. postgresql://user@host/db), or "
                                "leave the setting out to use the embedded SQLite store"))
        url = DEFAULT_DATABASE_URL

    allowed = _allowed_tasks(conf.get(PREFIX + "allowed_tasks"), problems)

    timeout = conf.get(PREFIX + "statement_timeout")
    # Left out: 5 s, or half the lease's local validity when that is shorter, so that no
    # statement can outlive the local deadline with a short lease either.
    validity = settings.local_validity.total_seconds()
    statement_timeout = min(5.0, validity / 2)
    if timeout is not None:
        seconds = to_timedelta(timeout, PREFIX + "statement_timeout", problems).total_seconds()
        if seconds <= 0:
            problems.append(Problem(f"{PREFIX}statement_timeout",
                                    f"must be positive, got {timeout!r}"))
        elif seconds >= validity:
            problems.append(Problem(
                f"{PREFIX}statement_timeout", f"{seconds}s must be below the lease's local "
                f"validity ({validity}s = ttl - renew interval)"))
        else:
            statement_timeout = seconds

    port = conf.get(PREFIX + "metrics_port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)
                             or not 0 <= port <= 65535):
        problems.append(Problem(f"{PREFIX}metrics_port",
                                f"expected a TCP port number, got {port!r}"))
        port = None
    if port is not None:
        problems.extend(metrics.client_problems())

    address = conf.get(PREFIX + "metrics_address")
    if address is None:
        address = DEFAULT_METRICS_ADDRESS
    elif not isinstance(address, str) or not address.strip() or any(
            char.isspace() for char in address):
        problems.append(Problem(f"{PREFIX}metrics_address", "expected an interface address "
                                f"such as 127.0.0.1 or 0.0.0.0, got {address!r}"))
        address = DEFAULT_METRICS_ADDRESS

    hook = load_hook(conf.get(PREFIX + "occurrence_hook"), PREFIX + "occurrence_hook", problems)
    hooks = read_webhooks(conf, problems)
    session_locks = conf.get(PREFIX + "session_locks", True)
    if not isinstance(session_locks, bool):
        problems.append(Problem(f"{PREFIX}session_locks",
                                f"expected True or False, got {session_locks!r} (False behind "
                                "a transaction-pooling proxy such as pgbouncer)"))
        session_locks = True

    return GoatbeatConfig(database_url=url, settings=settings, allowed_tasks=allowed,
                          statement_timeout=statement_timeout, metrics_port=port,
                          metrics_address=address, occurrence_hook=hook, webhooks=hooks,
                          session_locks=session_locks)


def load_hook(value: object, setting: str, problems: list[Problem]) -> OccurrenceHook | None:
    """A hook given as a callable or as ``"pkg.module:function"`` (or ``"pkg.module.function"``).

    Returns None and appends a problem naming ``setting`` when it cannot be loaded, so that it is
    reported with every other configuration problem.
    """
    if value is None:
        return None
    if callable(value):
        return value
    if not isinstance(value, str) or not value.strip():
        problems.append(Problem(setting, "expected a callable or a 'package.module:function' "
                                f"path, got {value!r}"))
        return None
    path = value.strip()
    module_name, sep, attribute = path.partition(":")
    if not sep:
        module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        problems.append(Problem(setting, f"{path!r} is not a 'package.module:function' path"))
        return None
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure of the user's module is a config problem
        problems.append(Problem(setting, f"cannot import {module_name!r} for {path!r}: "
                                f"{type(exc).__name__}: {exc}"))
        return None
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            problems.append(Problem(setting,
                                    f"module {module_name!r} has no attribute {attribute!r}"))
            return None
    if not callable(target):
        problems.append(Problem(setting, f"{path!r} is a {type(target).__name__}, not a "
                                "callable"))
        return None
    hook: OccurrenceHook = target
    return hook


def _django_database_url(problems: list[Problem]) -> str | None:
    """Django's default database, when goatbeat's Django app is installed (see
    goatbeat_celery.contrib.django); None in any process that has not loaded Django."""
    if "django" not in sys.modules:
        return None
    from goatbeat_celery.store.django_databases import default_database_url

    return default_database_url(problems)


def stray_settings(keys: Iterable[object], namespace: str | None) -> list[str]:
    """:func:`stray_problems` as text (what Django's system checks print)."""
    return [str(problem) for problem in stray_problems(keys, namespace)]


def stray_problems(keys: Iterable[object], namespace: str | None) -> list[Problem]:
    """A problem for every goatbeat-looking setting that goatbeat would not read, naming the
    spelling that it reads: a database URL set under a name nobody reads would otherwise leave
    every host on a local file of its own, each one leading.

    Read are ``goatbeat_<name>`` and, with a namespace, ``<NAMESPACE>_GOATBEAT_<NAME>``
    (``CELERY_GOATBEAT_DATABASE_URL`` next to ``config_from_object(..., namespace="CELERY")``).
    """
    names = sorted(key[len(PREFIX):] for key in _KNOWN)
    upper_prefix = f"{namespace.upper()}_{PREFIX.upper()}" if namespace else None
    found = []
    for key in sorted(k for k in keys if isinstance(k, str) and "goatbeat" in k.lower()):
        if key in _KNOWN or (upper_prefix and key.startswith(upper_prefix)
                             and key[len(upper_prefix):].lower() in names
                             and key == key.upper()):
            continue
        # What the key would mean with its namespace, prefix and case set aside.
        bare = key.lower()
        if namespace and bare.startswith(namespace.lower() + "_"):
            bare = bare[len(namespace) + 1:]
        bare = bare[bare.index("goatbeat") + len("goatbeat"):].lstrip("_")
        match = bare if bare in names else next(
            iter(difflib.get_close_matches(bare, names, n=1)), None)
        if match is None:
            found.append(Problem(key, "unknown setting", "the goatbeat settings are listed in "
                                 f"{doc('configuration.md#settings')}"))
            continue
        lower = key.startswith(PREFIX) or not upper_prefix
        spelling = PREFIX + match if lower else f"{upper_prefix}{match.upper()}"
        found.append(Problem(key, "unknown setting", f"did you mean {spelling}?"))
    return found


def _allowed_tasks(value: object, problems: list[Problem]) -> tuple[str, ...] | None:
    """``goatbeat_allowed_tasks``: None (left out) allows every task; an empty list is refused
    rather than read as "allow everything"."""
    if value is None:
        return None
    items = (value,) if isinstance(value, str) else value
    if not isinstance(items, (list, tuple, set, frozenset)) or not all(
            isinstance(item, str) and item.strip() for item in items):
        problems.append(Problem(f"{PREFIX}allowed_tasks", "expected a list of task names or "
                                f"patterns (e.g. ['proj.tasks.*']), got {value!r}"))
        return ()
    if not items:
        problems.append(Problem(f"{PREFIX}allowed_tasks", "is empty, which would allow no task",
                                "list the task names or patterns API schedules may send (e.g. "
                                "['proj.tasks.*']), ['*'] to allow every task, or leave the "
                                "setting out"))
        return ()
    return tuple(sorted(items)) if isinstance(items, (set, frozenset)) else tuple(items)


def entry_to_spec(
    name: str, entry: Any, default_zone: str, problems: list[Problem], objects: dict[str, Any],
    lazy: dict[str, dict[str, Any]] | None = None,
) -> ScheduleSpec | None:
    """One ``beat_schedule`` entry → a config ScheduleSpec, or None with problems appended."""
    where = f"beat_schedule[{name!r}]"
    if not isinstance(entry, Mapping):
        problems.append(Problem(where,
                                f"expected a dict with 'task' and 'schedule', got {entry!r}"))
        return None
    before = len(problems)
    for key in sorted(set(entry) - _ENTRY_KEYS):
        problems.append(Problem(f"{where}.{key}", "unknown key",
                                f"use one of {sorted(_ENTRY_KEYS)}"))
    options, own, own_where = _split_options(entry, where, problems)
    for key in sorted(set(own) - _GOATBEAT_ENTRY_KEYS):
        problems.append(Problem(f"{own_where}.{key}", "unknown option",
                                f"use one of {sorted(_GOATBEAT_ENTRY_KEYS)}"))

    zone = own.get("timezone", default_zone)
    if "timezone" in own and not isinstance(entry.get("schedule"), celery_schedules.crontab):
        # A crontab reports its zone's problems when it is built; any other schedule has no
        # use for one, and a zone given there is a mistake worth naming.
        problems.extend(cron.zone_problems(own["timezone"], f"{own_where}.timezone"))
        problems.append(Problem(f"{own_where}.timezone", "has no meaning for this schedule (a "
                                "zone applies to crontab schedules only)", "remove it"))
    trigger = _trigger_spec(name, entry.get("schedule"), str(zone), f"{where}.schedule",
                            problems, objects)
    args = entry.get("args") or ()
    if not isinstance(args, (list, tuple)):
        problems.append(Problem(f"{where}.args",
                                f"expected a list or tuple, got {type(args).__name__}"))
        args = ()
    kwargs = entry.get("kwargs") or {}
    if not isinstance(kwargs, Mapping):
        problems.append(Problem(f"{where}.kwargs",
                                f"expected a dict, got {type(kwargs).__name__}"))
        kwargs = {}
    args, kwargs = lazy_placeholders(name, args, kwargs, {} if lazy is None else lazy)
    expires = options.get("expires")
    if isinstance(expires, timedelta):
        options["expires"] = expires.total_seconds()
    elif isinstance(expires, datetime):
        problems.append(Problem(f"{where}.options.expires", "give seconds (a number or "
                                "timedelta)", "an absolute datetime would expire every later "
                                "run"))

    enabled = own.get("enabled", True)
    if not isinstance(enabled, bool):
        problems.append(Problem(f"{own_where}.enabled",
                                f"expected true or false, got {enabled!r}"))
        enabled = True
    # A task, args, kwargs or options under "goatbeat" is reported above; the entry's own win.
    found: list[Problem] = []
    fields = spec_input.spec_fields(own, found, label=lambda key: f"{own_where}.{key}",
                               text_instants=True)
    fields.update(task=entry.get("task") or "", args=tuple(args), kwargs=dict(kwargs),
                  options=options)
    spec = spec_input.checked_spec(fields, found, name=name, trigger=trigger, enabled=enabled,
                              source=ScheduleSource.CONFIG,
                              relabel=lambda spec_found: _relabel(spec_found, where),
                              options_label=f"{where}.options")
    problems.extend(found)
    return spec if len(problems) == before else None


def _split_options(entry: Mapping[str, Any], where: str, problems: list[Problem]
                   ) -> tuple[dict[str, Any], Mapping[str, Any], str]:
    """An entry's Celery options, its goatbeat options and where those were given.

    Goatbeat's options go under ``options["goatbeat"]``: Celery's own schedulers hand options
    to ``apply_async`` and django-celery-beat's drops keys it does not know, so the same
    ``beat_schedule`` starts under either (the way back needs no edit). They are taken out of
    the options goatbeat sends. The entry's top-level ``goatbeat`` key still works (see
    :func:`legacy_entry_warnings`)."""
    given = entry.get("options") or {}
    if not isinstance(given, Mapping):
        problems.append(Problem(f"{where}.options", "expected a dict of apply_async options, "
                                f"got {type(given).__name__}"))
        given = {}
    options = dict(given)
    nested, legacy = options.pop(OPTIONS_KEY, None), entry.get(OPTIONS_KEY)
    if nested is not None and legacy is not None:
        problems.append(Problem(f"{where}.goatbeat", "given here and in options['goatbeat']",
                                "keep options['goatbeat'] only"))
    own, own_where = ((nested, f"{where}.options.goatbeat") if nested is not None
                      else (legacy or {}, f"{where}.goatbeat"))
    if not isinstance(own, Mapping):
        problems.append(Problem(own_where, f"expected a dict of goatbeat options, got {own!r}"))
        own = {}
    return options, own, own_where


def legacy_entry_warnings(beat_schedule: Mapping[str, Any]) -> list[str]:
    """Entries that give goatbeat's options under a top-level ``goatbeat`` key: Celery's own
    ``ScheduleEntry`` refuses that key, so rolling back to Celery's scheduler would need an
    edit."""
    return [f"beat_schedule[{name!r}].goatbeat: deprecated; move it into the entry's options "
            "(options={'goatbeat': {...}}) so that Celery's own schedulers start with the same "
            "beat_schedule" for name, entry in sorted(beat_schedule.items())
            if isinstance(entry, Mapping) and OPTIONS_KEY in entry]


def policy_warnings(schedules: Iterable[ScheduleSpec], settings: Settings,
                    start_timeout: timedelta) -> list[str]:
    """Config schedules whose run policies wait for runs to finish (an overlap policy but
    ``allow``, fixed delay) while a run no worker reports on counts as unfinished for longer
    than their interval: ``start_timeout``, until the leader gives its outcome up as unknown.
    Without run tracking on the workers (``settings.track_runs``), such a schedule runs about
    once per ``start_timeout``."""
    found = []
    for spec in schedules:
        waits = [label for label, used in (
            (f"overlap {own_or_default(spec.overlap, settings.overlap_policy).value}",
             own_or_default(spec.overlap, settings.overlap_policy) is not OverlapPolicy.ALLOW),
            ("fixed delay", spec.mode is ScheduleMode.FIXED_DELAY)) if used]
        if not waits or not spec.enabled or settings.track_runs:
            continue
        every = spec.trigger.params.get("every") if spec.trigger.kind == "interval" else None
        if isinstance(every, (int, float)) and timedelta(seconds=every) >= start_timeout:
            continue
        found.append(
            f"schedule {quoted_name(spec.name)} uses {' and '.join(waits)}, which needs run "
            f"tracking on the workers (goatbeat_celery.track_runs): without it each run counts "
            f"as unfinished until its outcome is given up as unknown, "
            f"{start_timeout.total_seconds():g}s "
            f"(goatbeat_run_start_timeout) after it was sent, and the schedule runs at most "
            "that often")
    return found


def never_run_warnings(loaded: LoadedConfig, now: datetime) -> list[str]:
    """Enabled config entries that have no run after ``now``: a one-off whose instant has
    passed (django-celery-beat's ``clocked``, a schedule class of your own), or an ``end_at``
    already past. Such an entry is stored as any other, with no next run, and never runs:
    Celery users expect to hear of it, not to find out later."""
    found = []
    for spec in loaded.schedules:
        if not spec.enabled:
            continue
        where = f"beat_schedule[{spec.name!r}]"
        if spec.end_at is not None and spec.end_at <= now:
            found.append(f"{where}: its end_at {spec.end_at.isoformat()} has passed: it is "
                         "stored and never runs; remove the entry or move its end_at")
            continue
        try:
            _, run = bounded_first(_grid_after(loaded.triggers.build(spec.trigger),
                                               spec.effective_offset()), now, spec)
        # A schedule object of the user's may raise anything: the leader sets such an entry
        # aside with the error, which is said there.
        except Exception:  # noqa: BLE001
            continue
        if run is None:
            found.append(f"{where}: its schedule has no occurrence after now "
                         f"({now.isoformat(timespec='seconds')}; a one-off whose instant has "
                         "passed?): it is stored and never runs; remove the entry or give it a "
                         "later instant")
    return found


def _grid_after(trigger: Trigger, offset: timedelta) -> GridAfter:
    return lambda instant: first_occurrence(trigger, instant, offset)


#: The key of the JSON object stored in place of a lazy argument.
LAZY_MARKER = "__goatbeat_lazy__"


def lazy_placeholders(name: str, args: Any, kwargs: Any, lazy: dict[str, dict[str, Any]]
                      ) -> tuple[Any, Any]:
    """``args`` and ``kwargs`` with each top-level ``BeatLazyFunc`` (evaluated by Celery's beat
    just before sending) replaced by a placeholder, the functions kept in ``lazy``."""
    found: dict[str, Any] = {}
    if isinstance(args, (list, tuple)):
        args = [_placeholder(found, f"args.{index}", value) for index, value in enumerate(args)]
    if isinstance(kwargs, Mapping):
        kwargs = {key: _placeholder(found, f"kwargs.{key}", value)
                  for key, value in kwargs.items()}
    if found:
        lazy[name] = found
    return args, kwargs


def _placeholder(found: dict[str, Any], where: str, value: Any) -> Any:
    if isinstance(value, BeatLazyFunc):
        found[where] = value
        return {LAZY_MARKER: where}
    return value


def _below(where: str, problem: Problem, *, dot: str = ".") -> Problem:
    """``problem`` of a part of ``where``: its field (or, naming none, its text) put after
    ``where`` and ``dot``."""
    if problem.field and not problem.subject:
        return replace(problem, field=f"{where}{dot}{problem.field}")
    return Problem("", f"{where}{dot}{problem}")


def _at(where: str, problem: Problem) -> Problem:
    """``problem`` told of ``where``: ``where`` is its field, what it said its message."""
    return Problem(where, str(replace(problem, hint="")), problem.hint_as())


def _relabel(found: list[Problem], where: str) -> list[Problem]:
    # "schedule '<name>': field: message" -> "beat_schedule['<name>'].field: message"
    return [replace(p, field=f"{where}.{p.field}" if p.field else where, subject="")
            for p in found]


def _trigger_spec(name: str, schedule: Any, zone: str, where: str, problems: list[Problem],
                  objects: dict[str, Any]) -> TriggerSpec | None:
    """Convert every schedule form Celery users write into a stored trigger spec."""
    if schedule is None:
        problems.append(Problem(where, "missing", "give seconds, a timedelta, schedule(), "
                                "crontab() or another celery.schedules class"))
        return None
    if isinstance(schedule, celery_schedules.crontab):
        return _crontab_spec(schedule, zone, where, problems)
    if isinstance(schedule, celery_schedules.schedule) and type(schedule) is \
            celery_schedules.schedule:
        return _interval_spec(schedule.run_every, where, problems)
    if isinstance(schedule, (timedelta, numbers.Real)) and not isinstance(schedule, bool):
        return _interval_spec(schedule, where, problems)
    if hasattr(schedule, "remaining_estimate") and hasattr(schedule, "is_due"):
        objects[name] = schedule
        return other_schedules.CelerySchedule(name, schedule).to_spec()
    problems.append(Problem(where, f"unsupported schedule {schedule!r}", "give seconds, a "
                            "timedelta, schedule(), crontab() or a celery.schedules class"))
    return None


def _interval_spec(value: Any, where: str, problems: list[Problem]) -> TriggerSpec | None:
    # An int is judged as it is: one beyond a float's range is out of bounds, not an error.
    seconds = value if isinstance(value, (timedelta, int)) else float(value)
    problem = seconds_problem(seconds, where, minimum=MIN_EVERY)
    if problem is not None:
        problems.append(problem)
        return None
    return IntervalTrigger(to_timedelta(seconds, where)).to_spec()


def _crontab_spec(tab: Any, zone: str, where: str, problems: list[Problem]
                  ) -> TriggerSpec | None:
    fields = [_cron_field(getattr(tab, f"_orig_{part}"))
              for part in ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")]
    expression = " ".join(fields)
    try:
        # Celery's crontab matches day-of-month AND day-of-week; standard cron uses OR.
        trigger = cron.CronTrigger(expression, zone, day_or=False)
    except ConfigurationError as exc:
        problems.extend(_at(where, p) for p in exc.details)
        return None
    return trigger.to_spec()


def _cron_field(value: Any) -> str:
    if isinstance(value, (set, frozenset, list, tuple, range)):
        return ",".join(str(v) for v in sorted(value))
    return str(value).replace(" ", "")

