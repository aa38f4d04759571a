"""Database URLs: which backend a URL names, its normal form, and how to show it safely."""

from __future__ import annotations

import enum
import os
import re
from urllib.parse import unquote_plus

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem

#: Accepted schemes, as listed in error messages.
ACCEPTED_SCHEMES = (
    "memory://",
    "sqlite:///path/to/file.db",
    "postgresql://",
    "postgresql+psycopg://",
    "postgres://",
    "mysql+pymysql://",
    "mariadb+pymysql://",
)

#: Why a URL with a password does not parse, without quoting any of it.
_ENCODE_PASSWORD = ("it does not read as user:password@host:port/database; percent-encode "
                    "the password's special characters: @ as %40, : as %3A, / as %2F, ? as "
                    "%3F, # as %23, % as %25")

_POSTGRES_SCHEMES = frozenset({"postgresql", "postgresql+psycopg", "postgres", "postgres+psycopg"})
_SQLITE_SCHEMES = frozenset({"sqlite", "sqlite+pysqlite"})
_MYSQL_SCHEMES = frozenset({"mysql", "mysql+pymysql", "mariadb", "mariadb+pymysql"})


class Backend(str, enum.Enum):
    MEMORY = "memory"
    SQLITE = "sqlite"
    POSTGRES = "postgres"
    MYSQL = "mysql"


def _scheme(url: str) -> str:
    head, sep, _ = url.partition("://")
    return head.lower() if sep else ""


def _unknown(url: str, reason: str | None = None) -> ConfigurationError:
    accepted = ", ".join(ACCEPTED_SCHEMES)
    detail = f" ({reason})" if reason else ""
    return ConfigurationError([Problem("database_url", f"cannot use {mask_url(url)!r}{detail}",
                                       f"accepted schemes: {accepted}")])


def backend_of(url: str) -> Backend:
    """Which store ``url`` names; an unknown scheme is a ConfigurationError."""
    if not isinstance(url, str):
        raise ConfigurationError([Problem("database_url",
                                          f"expected a string, got {type(url).__name__}")])
    scheme = _scheme(url)
    if scheme == "memory":
        return Backend.MEMORY
    if scheme in _SQLITE_SCHEMES:
        return Backend.SQLITE
    if scheme in _POSTGRES_SCHEMES:
        return Backend.POSTGRES
    if scheme in _MYSQL_SCHEMES:
        return Backend.MYSQL
    raise _unknown(url)


def normalise_url(url: str | URL) -> URL:
    """The SQLAlchemy URL to connect with: PostgreSQL always through psycopg 3, MySQL and
    MariaDB through PyMySQL."""
    if isinstance(url, URL):
        parsed = url
    else:
        backend = backend_of(url)
        if backend is Backend.MEMORY:
            raise _unknown(url, "the memory store has no database to connect to")
        try:
            parsed = make_url(url)
        except (ArgumentError, ValueError) as exc:
            # The parser's words may quote a piece of the password (a port read from it).
            raise _unknown(url, _ENCODE_PASSWORD if _mask_userinfo(url) != url
                           else str(exc)) from exc
        if "@" in (parsed.host or ""):
            # SQLAlchemy ends the password at its first "@": the rest would be taken as a host.
            raise _unknown(url, _ENCODE_PASSWORD)
    if parsed.get_backend_name() in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() in ("mysql", "mariadb"):
        return parsed.set(drivername=f"{parsed.get_backend_name()}+pymysql")
    return parsed


def mask_url(url: str | URL) -> str:
    """``url`` with every password replaced by ``***``, for banners, logs and errors.

    Both places a password can be given are masked: before the host (``user:secret@host``) and
    as a query parameter (``?password=secret``, any position, any case). The text is masked as
    written, so a URL that does not parse is masked too, and nothing else in it changes.
    """
    if isinstance(url, URL):
        # A password's unencoded "@" was parsed into the host, which the rendering keeps.
        return _mask_query(_mask_userinfo(url.render_as_string(hide_password=True)))
    return _mask_query(_mask_userinfo(url))


#: Query parameters that carry a secret (libpq's ``password`` and ``sslpassword``).
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})

# Where a URL starts, in a URL or in the text of an error.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# A user name followed by the ``:`` that starts a password, read as SQLAlchemy reads it (up to
# ``:``), and not running past an ``@`` or into the next word.
_USER = re.compile(r"[^:/?#@\s]*:")
_SPACE = re.compile(r"\s")
# One ``key=value`` of a query; ``;`` is split on too, so masking errs on the side of more.
_QUERY_PARAMETER = re.compile(r"(?P<lead>[?&;])(?P<key>[^=&;]*)=(?P<value>[^&;]*)")


def _mask_userinfo(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@host`` in it masked."""
    parts: list[str] = []
    position = 0
    while (scheme := _SCHEME.search(text, position)) is not None:
        user = _USER.match(text, scheme.end())
        end = None if user is None else _password_end(text, user.end())
        if user is None or end is None:
            parts.append(text[position:scheme.end()])
            position = scheme.end()
            continue
        parts.append(text[position:user.end()] + "***")
        position = end  # at the "@" that ends the password
    parts.append(text[position:])
    return "".join(parts)


def _password_end(text: str, start: int) -> int | None:
    """Where the password starting at ``start`` ends: at the last ``@`` before the next URL
    of the text (one that starts after a space), else the last ``@`` of the text; None when
    there is none. A password's own ``@``, ``/``, ``?`` or ``#`` (not percent-encoded) then
    stays inside what is masked, whatever SQLAlchemy makes of it; an ``@`` in the text after
    the URL makes masking err on the side of more."""
    space = _SPACE.search(text, start)
    following = None if space is None else _SCHEME.search(text, space.end())
    bound = len(text) if following is None else following.start()
    end = text.rfind("@", start, bound)
    if end < 0:
        end = text.rfind("@", start)
    return None if end < 0 else end


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
