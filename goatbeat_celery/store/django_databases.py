"""Django's ``DATABASES`` entries as goatbeat database URLs.

A store concern (which URL names which database) that the configuration and goatbeat's Django
app (:mod:`goatbeat_celery.contrib.django`) both need, so it lives below both. Imports nothing
from Django at module level: :mod:`goatbeat_celery.config` calls :func:`default_database_url`
only once Django is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL

from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.store.url import normalise_url

APP_NAME = "goatbeat_celery.contrib.django"

_POSTGRES_ENGINES = frozenset({
    "django.db.backends.postgresql",
    "django.db.backends.postgresql_psycopg2",
    "django.contrib.gis.db.backends.postgis",
})
_MYSQL_ENGINES = frozenset({
    "django.db.backends.mysql",
    "django.contrib.gis.db.backends.mysql",
})
_SQLITE_ENGINES = frozenset({
    "django.db.backends.sqlite3",
    "django.contrib.gis.db.backends.spatialite",
})
#: libpq connection parameters Django passes on from ``OPTIONS``; the rest of ``OPTIONS``
#: (``pool``, ``isolation_level``, ``server_side_binding``, …) is Django's own.
_LIBPQ_OPTIONS = frozenset({
    "sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword", "sslcrl", "connect_timeout",
    "application_name", "options", "target_session_attrs", "service", "passfile", "gssencmode",
    "channel_binding", "keepalives", "keepalives_idle", "keepalives_interval",
    "keepalives_count",
})


class UnusableDatabase(ValueError):
    """A ``DATABASES`` entry goatbeat cannot store its schedules in; the message says why."""


def is_installed(installed_apps: Any) -> bool:
    """Whether INSTALLED_APPS names this app (its package or its AppConfig)."""
    return any(isinstance(entry, str) and (entry == APP_NAME or entry.startswith(APP_NAME + "."))
               for entry in installed_apps or ())


def url_for(entry: Mapping[str, Any]) -> str:
    """The SQLAlchemy URL of one ``DATABASES`` entry: ``postgresql+psycopg://…`` or
    ``mysql+pymysql://…`` (goatbeat's MySQL driver, whichever Django uses) with the user and
    password quoted, or ``sqlite:///<absolute path>``. Raises UnusableDatabase."""
    engine = str(entry.get("ENGINE") or "")
    if engine in _POSTGRES_ENGINES:
        return _postgres_url(entry).render_as_string(hide_password=False)
    if engine in _MYSQL_ENGINES:
        return _mysql_url(entry).render_as_string(hide_password=False)
    if engine in _SQLITE_ENGINES:
        name = entry.get("NAME")
        if not name or str(name) == ":memory:" or str(name).startswith("file:"):
            raise UnusableDatabase(
                f"the SQLite database {str(name or '')!r} is not a file goatbeat can open")
        return URL.create("sqlite", database=str(Path(name).resolve())).render_as_string()
    raise UnusableDatabase(
        f"its ENGINE {engine!r} is not PostgreSQL, MySQL or SQLite, the databases goatbeat "
        "supports")


def _postgres_url(entry: Mapping[str, Any]) -> URL:
    options = entry.get("OPTIONS") or {}
    query = {key: str(value) for key, value in options.items()
             if key in _LIBPQ_OPTIONS and value is not None}
    # A Unix socket directory: libpq takes it as the host parameter.
    return _entry_url("postgresql+psycopg", entry, query, socket_key="host")


def _mysql_url(entry: Mapping[str, Any]) -> URL:
    options = entry.get("OPTIONS") or {}
    if options.get("read_default_file"):
        # Django's MySQL driver reads the server, the user and the database from that file;
        # goatbeat's does not.
        raise UnusableDatabase(
            "its OPTIONS name a read_default_file, which goatbeat does not read")
    query = {key: str(options[key]) for key in ("charset", "unix_socket")
             if options.get(key) is not None}
    # Django's MySQL driver takes a socket path as HOST.
    return _entry_url("mysql+pymysql", entry, query, socket_key="unix_socket")


def _entry_url(drivername: str, entry: Mapping[str, Any], query: dict[str, str], *,
               socket_key: str) -> URL:
    """The URL of a DATABASES ``entry``; a HOST that is a path is a socket, given as the
    driver's ``socket_key`` query parameter."""
    host = str(entry.get("HOST") or "") or None
    if host is not None and host.startswith("/"):
        query[socket_key] = host
        host = None
    port = entry.get("PORT")
    return URL.create(
        drivername,
        username=str(entry.get("USER") or "") or None,
        password=str(entry.get("PASSWORD") or "") or None,
        host=host,
        port=int(port) if port not in (None, "") else None,
        database=str(entry.get("NAME") or "") or None,
        query=query,
    )


def default_database_url(problems: list[Problem]) -> str | None:
    """The URL of Django's default database when this app is installed and Django's settings
    can be read; None otherwise. A default database goatbeat cannot use is a problem rather
    than a quiet fallback to a local SQLite file (one leader per host)."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    if not settings.configured and not os.environ.get("DJANGO_SETTINGS_MODULE"):
        return None
    try:
        installed = settings.INSTALLED_APPS
        databases = settings.DATABASES
    except (ImproperlyConfigured, ImportError) as exc:
        problems.append(Problem("goatbeat_database_url", "not set, and Django's settings cannot "
                                f"be read to use its default database: {exc}"))
        return None
    if not is_installed(installed):
        return None
    entry = (databases or {}).get("default")
    if not entry:
        problems.append(Problem("goatbeat_database_url", "not set, and DATABASES has no "
                                "'default' database to use", "set CELERY_GOATBEAT_DATABASE_URL"))
        return None
    try:
        return url_for(entry)
    except UnusableDatabase as exc:
        problems.append(Problem("goatbeat_database_url", "not set, and Django's default "
                                f"database cannot be used: {exc}",
                                "set CELERY_GOATBEAT_DATABASE_URL"))
        return None


def same_database(left: str, right: str) -> bool:
    """Whether two URLs name the same database (driver, password and options aside)."""
    a, b = normalise_url(left), normalise_url(right)
    if a.get_backend_name() != b.get_backend_name():
        return False
    if a.get_backend_name() == "sqlite":
        return bool(a.database and b.database
                    and Path(a.database).resolve() == Path(b.database).resolve())
    port = 3306 if a.get_backend_name() in ("mysql", "mariadb") else 5432
    return ((a.host or "localhost", a.port or port, a.database, a.username)
            == (b.host or "localhost", b.port or port, b.database, b.username)
            and a.query.get("host") == b.query.get("host")
            and a.query.get("unix_socket") == b.query.get("unix_socket"))


def alias_for(url: str, databases: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The ``DATABASES`` alias naming the database ``url`` names, ``"default"`` first."""
    for alias in sorted(databases, key=lambda name: name != "default"):
        try:
            if same_database(url_for(databases[alias]), url):
                return alias
        except (UnusableDatabase, ConfigurationError):
            continue
    return None
