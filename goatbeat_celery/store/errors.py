"""Driver errors mapped to goatbeat's exception tree at the store's edge."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy.exc as sa_exc

from goatbeat_celery.core.types.errors import (
    GoatbeatError,
    StoreDenied,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
)


class Unverified(StoreError):
    """What the connected user holds cannot be read entirely (on MySQL, a role's grants
    hidden from it): nothing is reported missing, nor everything held."""


#: SQLSTATE classes that mean the database refused what was asked of it (bad data, a value
#: too large for an index, a missing privilege), not that it is unavailable: retrying the same
#: statement fails the same way, so the caller must not wait for the database to come back.
_REFUSED_CLASSES = frozenset({"22", "23", "42", "54"})


#: insufficient_privilege: a GRANT is missing.
_DENIED = "42501"


def is_denied(exc: BaseException) -> bool:
    """True for a refusal for want of a privilege: a missing GRANT on PostgreSQL, a SQLite
    file this process may not write."""
    orig = getattr(exc, "orig", exc)
    if getattr(orig, "sqlstate", None) == _DENIED:
        return True
    return isinstance(orig, sqlite3.OperationalError) and "readonly database" in str(orig)


#: query_canceled: PostgreSQL cancelled the statement at its statement_timeout. (MySQL's
#: timeout is the client's read timeout: a lost connection, as in an outage.)
_TIMED_OUT = "57014"


def is_timeout(exc: BaseException) -> bool:
    """True for a statement PostgreSQL cancelled at its statement timeout."""
    return getattr(getattr(exc, "orig", exc), "sqlstate", None) == _TIMED_OUT


def is_unavailable(exc: BaseException) -> bool:
    """True for errors that mean "the database cannot be used right now, retry later"."""
    if is_denied(exc):
        return False
    sqlstate = getattr(getattr(exc, "orig", exc), "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate[:2] in _REFUSED_CLASSES:
        return False
    if isinstance(exc, sa_exc.DBAPIError):
        return exc.connection_invalidated or isinstance(
            exc, (sa_exc.OperationalError, sa_exc.InterfaceError)
        )
    # Waiting too long for a pooled connection, or a driver error raised outside SQLAlchemy.
    if isinstance(exc, sa_exc.TimeoutError):
        return True
    try:
        import psycopg
    except ImportError:  # pragma: no cover - SQLite-only installations
        return False
    return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))


@contextmanager
def translated(what: str, where: str) -> Iterator[None]:
    """Re-raise driver errors met while doing ``what`` on ``where`` (a masked URL) as
    StoreUnavailable or StoreError; goatbeat's own errors pass through unchanged."""
    try:
        yield
    except GoatbeatError:
        raise
    except sa_exc.StatementError as exc:
        # A bind processor refusing a value (a naive datetime) arrives wrapped by SQLAlchemy.
        if isinstance(exc.orig, GoatbeatError):
            raise exc.orig from None
        raise _wrapped(exc, what, where) from exc
    except _driver_errors() as exc:
        raise _wrapped(exc, what, where) from exc


def _wrapped(exc: BaseException, what: str, where: str) -> StoreError:
    if is_timeout(exc):
        return StoreTimeout(f"{what}: database {where} cancelled the statement at the "
                            f"statement timeout (goatbeat_statement_timeout): "
                            f"{_reason(exc)}")
    if is_unavailable(exc):
        return StoreUnavailable(f"{what}: database {where} unavailable: {_reason(exc)}")
    if is_denied(exc):
        return StoreDenied(f"{what}: database {where} refused: {_reason(exc)}")
    return StoreError(f"{what}: database {where} failed: {_reason(exc)}")


def _driver_errors() -> tuple[type[Exception], ...]:
    errors: list[type[Exception]] = [sa_exc.SQLAlchemyError, sqlite3.Error]
    try:
        import psycopg
    except ImportError:  # pragma: no cover - SQLite-only installations
        return tuple(errors)
    errors.append(psycopg.Error)
    return tuple(errors)


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
