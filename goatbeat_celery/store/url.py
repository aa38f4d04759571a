"""Database URLs: which backend a URL names, its normal form, and how to show it safely."""

from __future__ import annotations

import enum

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from goatbeat_celery.core.errors import ConfigurationError

#: Accepted schemes, as listed in error messages.
ACCEPTED_SCHEMES = (
    "memory://",
    "sqlite:///path/to/file.db",
    "postgresql://",
    "postgresql+psycopg://",
    "postgres://",
)

_POSTGRES_SCHEMES = frozenset({"postgresql", "postgresql+psycopg", "postgres", "postgres+psycopg"})
_SQLITE_SCHEMES = frozenset({"sqlite", "sqlite+pysqlite"})


class Backend(str, enum.Enum):
    MEMORY = "memory"
    SQLITE = "sqlite"
    POSTGRES = "postgres"


def _scheme(url: str) -> str:
    head, sep, _ = url.partition("://")
    return head.lower() if sep else ""


def _unknown(url: str, reason: str | None = None) -> ConfigurationError:
    accepted = ", ".join(ACCEPTED_SCHEMES)
    detail = f" ({reason})" if reason else ""
    return ConfigurationError(
        [f"database_url: cannot use {mask_url(url)!r}{detail}; accepted schemes: {accepted}"]
    )


def backend_of(url: str) -> Backend:
    """Which store ``url`` names; an unknown scheme is a ConfigurationError."""
    if not isinstance(url, str):
        raise ConfigurationError([f"database_url: expected a string, got {type(url).__name__}"])
    scheme = _scheme(url)
    if scheme == "memory":
        return Backend.MEMORY
    if scheme in _SQLITE_SCHEMES:
        return Backend.SQLITE
    if scheme in _POSTGRES_SCHEMES:
        return Backend.POSTGRES
    raise _unknown(url)


def normalise_url(url: str | URL) -> URL:
    """The SQLAlchemy URL to connect with: PostgreSQL always through psycopg 3."""
    if isinstance(url, URL):
        parsed = url
    else:
        backend = backend_of(url)
        if backend is Backend.MEMORY:
            raise _unknown(url, "the memory store has no database to connect to")
        try:
            parsed = make_url(url)
        except (ArgumentError, ValueError) as exc:
            raise _unknown(url, str(exc)) from exc
    if parsed.get_backend_name() in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+psycopg")
    return parsed


def mask_url(url: str | URL) -> str:
    """``url`` with its password replaced by ``***``, for banners, logs and errors."""
    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return _mask_by_hand(url)
    if parsed.password is None:
        return url
    return parsed.render_as_string(hide_password=True)


def _mask_by_hand(url: str) -> str:
    # Unparseable URLs still must not leak a password in an error message.
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"
