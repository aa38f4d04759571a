"""Django system checks: goatbeat's settings, where the admin reads from, and the schema.

Registered with the ``database`` tag, so they connect only when Django asks for database checks
(``manage.py migrate``, ``manage.py check --database default``) and never while a container
image is built. They are warnings: goatbeat's schema is migrated by goatbeat's own command, on
its own history, and must not stop ``manage.py migrate`` of the project's apps.
"""

from __future__ import annotations

from typing import Any

from django.core import checks

from goatbeat_celery.core.errors import ConfigurationError, GoatbeatError


def register() -> None:
    checks.register(goatbeat_checks, checks.Tags.database)


def goatbeat_checks(app_configs: Any = None, databases: Any = None,
                    **kwargs: Any) -> list[checks.CheckMessage]:
    if not databases:
        return []
    from goatbeat_celery.contrib.django import integration

    try:
        loaded = integration.goatbeat_config()
    except ConfigurationError as exc:
        return [checks.Error(
            "goatbeat's settings are invalid: " + "; ".join(exc.problems),
            hint="Fix the CELERY_GOATBEAT_* settings (docs/configuration.md).",
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
    found.extend(schema_messages(url))
    return found


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
