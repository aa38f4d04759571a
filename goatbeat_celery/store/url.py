"""Database URLs: which backend a URL names, its normal form, and how to show it safely."""

from __future__ import annotations

import enum
import os
import re
from urllib.parse import unquote_plus

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
    """``url`` with every password replaced by ``***``, for banners, logs and errors.

    Both places a password can be given are masked: before the host (``user:secret@host``) and
    as a query parameter (``?password=secret``, any position, any case). The text is masked as
    written, so a URL that does not parse is masked too, and nothing else in it changes.
    """
    if isinstance(url, URL):
        return _mask_query(url.render_as_string(hide_password=True))
    return _mask_query(_mask_userinfo(url))


#: Query parameters that carry a secret (libpq's ``password`` and ``sslpassword``).
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})

# ``scheme://user:password@rest``, read as SQLAlchemy reads it: the user name stops at ``:`` or
# ``/``, the password runs to the first ``@``.
_USERINFO = re.compile(r"(?P<head>[^:/?#]+://[^:/]*:)(?P<password>[^@]*)@(?P<rest>.*)", re.S)
# Where the host ends, for a password whose own ``@`` was not percent-encoded.
_HOST_END = re.compile(r"[/?]")
# One ``key=value`` of a query; ``;`` is split on too, so masking errs on the side of more.
_QUERY_PARAMETER = re.compile(r"(?P<lead>[?&;])(?P<key>[^=&;]*)=(?P<value>[^&;]*)")


def _mask_userinfo(url: str) -> str:
    match = _USERINFO.match(url)
    if match is None:
        return url
    rest = match["rest"]
    # SQLAlchemy ends the password at its first "@"; an unencoded "@" in the password leaves
    # the remainder in front of the host, so mask up to the host's own "@".
    host_end = _HOST_END.search(rest)
    host = rest if host_end is None else rest[:host_end.start()]
    if "@" in host:
        rest = rest[host.rindex("@") + 1:]
    return f"{match['head']}***@{rest}"


def _mask_query(url: str) -> str:
    def masked(match: re.Match[str]) -> str:
        # Keys are compared as the driver receives them: decoded, whatever their case.
        if unquote_plus(match["key"]).strip().lower() in _SECRET_PARAMETERS:
            return f"{match['lead']}{match['key']}=***"
        return match[0]

    if "?" not in url:
        return url
    head, sep, query = url.partition("?")
    return head + _QUERY_PARAMETER.sub(masked, sep + query)


def sqlite_path(url: str) -> str:
    """The absolute path of a SQLite URL's file (a relative one starts from the working
    directory), for messages that tell an operator which file is used."""
    database = make_url(url).database or ""
    return os.path.abspath(database)
