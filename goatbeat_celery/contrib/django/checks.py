"""Django system checks: goatbeat's settings, where the admin reads from, and the schema.

Settings spelt like goatbeat's that goatbeat does not read (``GOATBEAT_DATABASE_URL`` without
the ``CELERY_`` prefix, ``CELERY_GOATBEAT_DATABASE_URLL``) are looked for by every
``manage.py check`` and ``runserver``: it needs Django's settings only. They are warnings
naming the spelling goatbeat reads: beat refuses to start on them, but the web process and
``manage.py migrate`` of the project's apps need not.

The other checks are registered with the ``database`` tag, so they connect only when Django
asks for database checks (``manage.py migrate``, ``manage.py check --database default``) and
never while a container image is built. The schema's are warnings: goatbeat's schema is
migrated by goatbeat's own command, on its own history, and must not stop ``manage.py
migrate`` of the project's apps.
"""

from __future__ import annotations

from typing import Any

from django.core import checks

from goatbeat_celery.core.links import doc
from goatbeat_celery.core.types.errors import ConfigurationError, GoatbeatError


def register() -> None:
    checks.register(setting_names_check)
    checks.register(goatbeat_checks, checks.Tags.database)


def setting_names_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A warning for each setting spelt like goatbeat's that goatbeat does not read."""
    return [checks.Warning(
        problem,
        hint="goatbeat reads its settings in a Django project as CELERY_GOATBEAT_<NAME> "
             f"({doc('django.md#settings-that-are-not-read')}); beat refuses to start while "
             "this one is set.",
        id="goatbeat.W004",
    ) for problem in stray_settings()]


def stray_settings() -> list[str]:
    """``"<SETTING>: unknown setting; did you mean <SPELLING>?"`` for each such setting."""
    from goatbeat_celery.config import stray_settings as strays
    from goatbeat_celery.contrib.django import integration

    return strays(integration.celery_app().conf.keys(), integration.NAMESPACE)


def goatbeat_checks(app_configs: Any = None, databases: Any = None,
                    **kwargs: Any) -> list[checks.CheckMessage]:
    if not databases:
        return []
    from goatbeat_celery.contrib.django import integration

    try:
        loaded = integration.goatbeat_config()
    except ConfigurationError as exc:
        # Misspelt names are goatbeat.W004's, from the check that runs without a database.
        reported = set(stray_settings())
        problems = [problem for problem in exc.problems if problem not in reported]
        if not problems:
            return []
        return [checks.Error(
            "goatbeat's settings are invalid: " + "; ".join(problems),
            hint=f"Fix the CELERY_GOATBEAT_* settings ({doc('configuration.md')}).",
            id="goatbeat.E001",
        )]
    found: list[checks.CheckMessage] = []
    url = loaded.config.database_url
    if integration.database_alias() is None:
        found.append(checks.Warning(
            f"goatbeat's database ({integration.masked_database_url()}) is none of DATABASES: "
            "the admin cannot list its schedules and executions.",
            hint="Add it to DATABASES under any alias; the admin reads from that alias.",
            id="goatbeat.W002",
        ))
    untracked = loaded.config.tracking_warning(
        lambda setting: f"{integration.NAMESPACE}_{setting.upper()}")
    if untracked is not None:
        found.append(checks.Info(
            untracked,
            hint="Call goatbeat_celery.track_runs(app) where the Celery app is made "
                 f"(proj/celery.py): beat and the workers import it ({doc('django.md')}).",
            id="goatbeat.I001",
        ))
    schema = schema_messages(url)
    found.extend(schema)
    if not schema:
        found.extend(handover_messages(url, loaded.config.settings.lease_name))
    return found


def handover_messages(url: str, lease_name: str) -> list[checks.CheckMessage]:
    """django-celery-beat's periodic tasks that goatbeat would send too (goatbeat_celery.
    handover, the rule ``celery goatbeat check`` shows as well)."""
    from goatbeat_celery.django_handover import find_overlap

    try:
        found = find_overlap(url, lease_name)
    except GoatbeatError as exc:
        return [checks.Warning(f"django-celery-beat's periodic tasks cannot be compared with "
                               f"goatbeat's schedules: {exc}", id="goatbeat.W006")]
    if found is None:
        return []
    error, warning = found.error(), found.warning()
    if error is not None:
        return [checks.Error(error, hint=f"{doc('migrating.md#switch-the-scheduler')}; silence "
                                         "with SILENCED_SYSTEM_CHECKS only once no "
                                         "DatabaseScheduler runs", id="goatbeat.E002")]
    if warning is not None:
        return [checks.Warning(warning, hint=doc("migrating.md#import"), id="goatbeat.W005")]
    return []


def schema_messages(url: str) -> list[checks.CheckMessage]:
    """A warning when goatbeat's schema is not at this version's revision."""
    from goatbeat_celery.migrations import head_revision
    from goatbeat_celery.store import migration_engine
    from goatbeat_celery.store.migrate import current_revision
    from goatbeat_celery.store.url import Backend, backend_of

    if backend_of(url) is Backend.MEMORY:
        return []
    engine = migration_engine(url)
    try:
        current = current_revision(engine)
    except GoatbeatError as exc:
        return [checks.Warning(f"goatbeat's database cannot be read: {exc}",
                               id="goatbeat.W003")]
    finally:
        engine.dispose()
    head = head_revision()
    if current == head:
        return []
    shown = "not created yet" if current is None else f"at {current}"
    return [checks.Warning(
        f"goatbeat's schema is {shown}; this version of goatbeat_celery needs {head}.",
        hint="Run `celery -A <your app> goatbeat migrate` (or `python manage.py "
             "goatbeat_migrate`) before starting beat; a SQLite store is migrated by beat "
             "itself when it starts.",
        id="goatbeat.W001",
    )]
