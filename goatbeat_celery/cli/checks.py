"""``goatbeat check``: what a replica needs before it starts, each check reported on its own.

The settings and ``beat_schedule`` are validated as beat would validate them, the database is
reached with the configured URL, and its schema revision is compared with this version's.
Nothing is written: a SQLite file that does not exist is reported, not created. A SQLite store
is a warning, not a failure: it coordinates the replicas of one host only. So are workers that
do not track runs: beat works, and cannot tell how runs end.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from goatbeat_celery.cli.check_result import Check as Check  # re-exported: callers import it here
from goatbeat_celery.cli.check_result import Outcome as Outcome
from goatbeat_celery.core.rules.misfire import describe_grace
from goatbeat_celery.core.types.errors import ConfigurationError, GoatbeatError
from goatbeat_celery.display import command_line, human_duration, with_migrate_command


def run_checks(app: Any, *, app_given: str | None = None, role: str = "beat") -> list[Check]:
    """Every check, in order; later ones are skipped when what they need has failed.

    ``app_given`` is the ``-A`` value (None without one), for the commands messages suggest;
    ``role`` whose privileges are checked: ``beat`` (and the CLI) or ``worker``.
    """
    from goatbeat_celery import config as config_module
    from goatbeat_celery.cli import access
    from goatbeat_celery.store import mask_url

    checks: list[Check] = []
    config: Any = None
    try:
        config = config_module.load(app, with_schedules=False).config
        settings = config.settings
        checks.append(Check(name="settings", outcome=Outcome.OK, detail=(
            f"database {mask_url(config.database_url)}; lease {settings.lease_name!r} "
            f"{'' if settings.shards == 1 else f'in {settings.shards} shards '}"
            f"(ttl {human_duration(settings.lease_ttl)}, renewed every "
            f"{human_duration(settings.lease_renew_interval)}); misfire "
            f"{settings.misfire_policy.value} "
            f"({describe_grace(settings.misfire_grace, human_duration)})"
        )))
    except ConfigurationError as exc:
        checks.append(Check(name="settings", outcome=Outcome.FAIL, detail=_listed(exc.problems)))
    checks.append(_beat_schedule(app))
    if config is None:
        reason = "the settings are invalid"
        checks.append(Check(name="database", outcome=Outcome.SKIP, detail=reason))
        checks.append(Check(name="schema", outcome=Outcome.SKIP, detail=reason))
    else:
        checks.extend(_database(config.database_url, app_given))
        if not failed(checks):
            checks.append(failover_check(config))
        warning = config.store_warning()
        if warning is not None:
            checks.append(Check(name="replicas", outcome=Outcome.WARN, detail=warning))
        untracked = config.tracking_warning()
        if untracked is not None:
            checks.append(Check(name="runs", outcome=Outcome.WARN, detail=untracked))
        checks.extend(access.database_checks(config, role, reached=not failed(checks)))
        if not failed(checks):
            checks.extend(_handover(config.database_url, config.settings.lease_name))
    from goatbeat_celery.beat.scheduler import broker_warning

    checks.append(access.broker_check(app, broker_warning(app)))
    return checks


def _beat_schedule(app: Any) -> Check:
    from goatbeat_celery import config as config_module

    try:
        loaded = config_module.load(app)
    except ConfigurationError as exc:
        entries = [p for p in exc.problems if p.startswith("beat_schedule")]
        if entries:
            return Check(name="beat_schedule", outcome=Outcome.FAIL, detail=_listed(entries))
        count = len(app.conf.beat_schedule or {})
    else:
        count = len(loaded.schedules)
        settings = loaded.config.settings
        warnings = config_module.policy_warnings(loaded.schedules, settings,
                                                 settings.run_start_timeout)
        warnings += config_module.never_run_warnings(loaded, datetime.now(timezone.utc))
        warnings += config_module.legacy_entry_warnings(dict(app.conf.beat_schedule or {}))
        if warnings:
            return Check(name="beat_schedule", outcome=Outcome.WARN,
                         detail=_listed(warnings))
    noun = "entry" if count == 1 else "entries"
    return Check(name="beat_schedule", outcome=Outcome.OK, detail=f"{count} valid {noun}")


def _database(url: str, app_given: str | None) -> list[Check]:
    from goatbeat_celery.migrations import head_revision
    from goatbeat_celery.store import mask_url, migration_engine
    from goatbeat_celery.store.migrate import check_schema, current_revision
    from goatbeat_celery.store.url import Backend, backend_of

    unreachable = Check(name="schema", outcome=Outcome.SKIP,
                        detail="the database cannot be reached")
    try:
        backend = backend_of(url)
    except ConfigurationError as exc:
        return [Check(name="database", outcome=Outcome.FAIL, detail=_listed(exc.problems)),
                unreachable]
    if backend is Backend.MEMORY:
        return [Check(name="database", outcome=Outcome.FAIL, detail=(
            "memory:// keeps schedules inside one process, where neither beat replicas nor "
            "these commands can share them: set goatbeat_database_url to postgresql://… "
            "(or sqlite:///path on one host)")), unreachable]
    if backend is Backend.SQLITE:
        missing = missing_sqlite_problem(url, app_given)
        if missing is not None:
            return [Check(name="database", outcome=Outcome.FAIL, detail=missing), unreachable]
    try:
        engine = migration_engine(url)
    except ConfigurationError as exc:
        return [Check(name="database", outcome=Outcome.FAIL, detail=_listed(exc.problems)),
                unreachable]
    try:
        try:
            current = current_revision(engine)
        except GoatbeatError as exc:
            return [Check(name="database", outcome=Outcome.FAIL, detail=str(exc)), unreachable]
        reached = Check(name="database", outcome=Outcome.OK,
                        detail=f"{mask_url(url)} reachable")
        try:
            check_schema(engine)
        except GoatbeatError as exc:  # SchemaOutOfDate names the command that fixes it
            detail = with_migrate_command(str(exc), app_given)
            return [reached, Check(name="schema", outcome=Outcome.FAIL, detail=detail)]
        return [reached, Check(name="schema", outcome=Outcome.OK,
                               detail=f"at revision {current} (head {head_revision()})"
                               f"{_text_search(engine)}")]
    finally:
        engine.dispose()


def _text_search(engine: Any) -> str:
    """On PostgreSQL, whether the runs page's text search has its trigram indexes (migration
    0020 creates them where pg_trgm can be had)."""
    from goatbeat_celery.store.text_search import text_search_indexed

    if engine.dialect.name != "postgresql":
        return ""
    with engine.connect() as conn:
        if text_search_indexed(conn):
            return "; the runs page's text search has its trigram indexes (pg_trgm)"
    return ("; the runs page's text search has no trigram index (pg_trgm could not be "
            "created): it reads runs until a page fills; the upgrading guide's migration 0020 "
            "says how to add them")


def _handover(url: str, lease_name: str) -> list[Check]:
    """django-celery-beat's periodic tasks that goatbeat would also send (django_handover.py); no
    line when the database holds no django-celery-beat table."""
    from goatbeat_celery.django_handover import find_overlap

    try:
        found = find_overlap(url, lease_name)
    except GoatbeatError as exc:
        return [Check(name="django-celery-beat", outcome=Outcome.FAIL,
                      detail=f"its table cannot be compared with goatbeat's schedules: {exc}")]
    if found is None:
        return []
    error, warning = found.error(), found.warning()
    if error is not None:
        return [Check(name="django-celery-beat", outcome=Outcome.FAIL, detail=error)]
    if warning is not None:
        return [Check(name="django-celery-beat", outcome=Outcome.WARN, detail=warning)]
    return [Check(name="django-celery-beat", outcome=Outcome.OK,
                  detail="no enabled periodic task has an enabled goatbeat schedule of its name")]


def failover_check(config: Any) -> Check:
    """How a standby learns that the leader crashed (store.sessions): from its ended session
    (at once) or from its lease's expiry (the clock). The store is opened as a replica opens it,
    which on PostgreSQL also looks for a transaction-pooling proxy in between."""
    try:
        # The store itself is what is checked, so it is opened here, not read through Schedules.
        store = config.open_store()
    except GoatbeatError as exc:
        return Check(name="failover", outcome=Outcome.FAIL, detail=str(exc))
    try:
        path = store.failover_path()
    except GoatbeatError as exc:
        return Check(name="failover", outcome=Outcome.FAIL, detail=str(exc))
    finally:
        store.close()
    ttl = human_duration(config.settings.lease_ttl)
    if path.startswith("clock"):
        return Check(name="failover", outcome=Outcome.WARN, detail=(
            f"{path}: a crashed leader is replaced up to {ttl} (goatbeat_lease_ttl) after its "
            "last renewal"))
    return Check(name="failover", outcome=Outcome.OK, detail=(
        f"{path}; a frozen or cut-off leader is replaced when its lease expires ({ttl})"))


def missing_sqlite_problem(url: str, app_given: str | None) -> str | None:
    """Why the SQLite file ``url`` names cannot be used because it does not exist (None when
    it exists, or the URL names no file): which app's setting named it, and what to do.

    Opening a SQLite store creates its file, so commands that must not create one ask this
    first; only ``migrate`` creates a database.
    """
    from goatbeat_celery.config import DEFAULT_DATABASE_URL
    from goatbeat_celery.store import mask_url
    from goatbeat_celery.store.url import Backend, backend_of

    missing = _missing_sqlite_file(url) if backend_of(url) is Backend.SQLITE else None
    if missing is None:
        return None
    migrate_command = command_line(app_given, "migrate")
    unset = url == DEFAULT_DATABASE_URL
    if app_given is None:
        source = ("no -A given: Celery's default app sets no goatbeat_database_url, so the "
                  f"default {url} is used" if unset else
                  f"no -A given: Celery's default app has goatbeat_database_url {mask_url(url)}")
    else:
        source = (f"app {app_given!r} sets no goatbeat_database_url, so the default {url} is "
                  "used" if unset else
                  f"app {app_given!r} has goatbeat_database_url {mask_url(url)}")
    where = "" if Path(missing).is_absolute() else f" in {Path.cwd()}"
    advice = (f"pass your app with -A (`{command_line(None, '…')}`), and create its database "
              f"with `{migrate_command}` if it has none yet" if app_given is None else
              "check goatbeat_database_url (a relative path starts from the working "
              f"directory), or create the database with `{migrate_command}`")
    return (f"{source}, and the SQLite file {missing} does not exist{where}; nothing was "
            f"created: {advice}")


def _missing_sqlite_file(url: str) -> str | None:
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return None if Path(database).exists() else database


def _listed(problems: Sequence[str]) -> str:
    return "\n".join(f"- {problem}" for problem in problems)


def failed(checks: Sequence[Check]) -> list[Check]:
    return [check for check in checks if check.outcome is Outcome.FAIL]
