"""What ``check`` tries beyond the schema, for what would break beat later: the privileges of
the role it connects as, replicas of another lease name on the same database, the broker.
``health`` uses the privilege check to say why a replica cannot lead."""

from __future__ import annotations

import os
from typing import Any

from goatbeat_celery.cli.check_result import Check, Outcome
from goatbeat_celery.core.links import doc
from goatbeat_celery.core.rules.shards import other_leases_problem
from goatbeat_celery.core.types.errors import GoatbeatError, StoreUnavailable
from goatbeat_celery.store.privileges import Missing, Role, Unverified, missing_privileges

#: The longest ``check`` waits for the broker to answer (seconds).
BROKER_TIMEOUT = 5.0


def missing_for(url: str, role: Role) -> list[Missing]:
    """What the role ``url`` connects as lacks of what ``role`` needs. Raises StoreError."""
    from goatbeat_celery.store import migration_engine

    engine = migration_engine(url)
    try:
        return missing_privileges(engine, role)
    finally:
        engine.dispose()


def database_checks(config: Any, role: str, *, reached: bool) -> list[Check]:
    """The privileges of ``role`` (``beat`` or ``worker``) and, once the checks before
    passed (``reached``), the other leases live on the database of ``config``."""
    url = config.database_url
    if not _grants_apply(url):
        return []  # the database check says why, or there is nothing to grant
    checks = [privileges_check(url, Role(role))]
    if reached and role == Role.BEAT.value:
        checks.append(leases_check(url, config.settings.lease_name))
    return checks


def privileges_check(url: str, role: Role) -> Check:
    """Every privilege ``role`` needs, asked of the database for the role ``url`` names."""
    name = "grants"
    try:
        missing = missing_for(url, role)
    except StoreUnavailable:
        return Check(name=name, outcome=Outcome.SKIP,
                     detail="the database cannot be reached")
    except Unverified as exc:
        return Check(name=name, outcome=Outcome.WARN, detail=(
            f"not verified: {exc}; {doc('deploying.md#mysql-and-mariadb')} lists the GRANTs "
            f"{role.value} needs"))
    except GoatbeatError as exc:
        return Check(name=name, outcome=Outcome.FAIL, detail=f"could not read them: {exc}")
    if any(problem.kind == "absent" for problem in missing):
        return Check(name=name, outcome=Outcome.SKIP,
                     detail="the schema is not at this version's revision yet")
    if not missing:
        sqlite = url.startswith("sqlite")
        return Check(name=name, outcome=Outcome.OK, detail=(
            "the database file and its directory are writable" if sqlite
            else f"the role has every privilege {role.value} needs"))
    lines = "\n".join(f"- {problem}" for problem in missing)
    lines = f"what {role.value} needs, and the role lacks:\n{lines}"
    fixes = "\n".join(f"    {problem.fix}" for problem in missing)
    cause = ("beat cannot lead: it would log permission denied at each attempt"
             if role is Role.BEAT else "workers cannot record their runs")
    how = ("Fix" if url.startswith("sqlite") else
           f"As the tables' owner or a superuser ({doc('deploying.md#least-privilege-roles')})")
    return Check(name=name, outcome=Outcome.FAIL, detail=f"{lines}\n{cause}. {how}:\n{fixes}")


def _grants_apply(url: str) -> bool:
    """Whether ``url`` names a database whose privileges can be read: PostgreSQL, MySQL /
    MariaDB, or a SQLite file that exists (reading one that does not would create it)."""
    from goatbeat_celery.store.url import Backend, backend_of, sqlite_path

    try:
        backend = backend_of(url)
    except GoatbeatError:
        return False
    return backend in (Backend.POSTGRES, Backend.MYSQL) or (
        backend is Backend.SQLITE and os.path.exists(sqlite_path(url)))


def denial(url: str) -> str | None:
    """Why beat, connecting with ``url``, cannot lead for want of a privilege (None: it has
    every one, or the database has no grants to read). Raises StoreUnavailable when the
    database cannot be reached."""
    if not _grants_apply(url):
        return None
    try:
        missing = missing_for(url, Role.BEAT)
    except StoreUnavailable:
        raise
    except Unverified:
        return None  # what a hidden role gives is unknown: the attempt itself will say
    except GoatbeatError as exc:
        return f"its privileges cannot be read: {exc}"
    missing = [problem for problem in missing if problem.kind != "absent"]  # for migrate
    if not missing:
        return None
    shown = "; ".join(str(problem) for problem in missing[:3])
    more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
    return (f"a privilege is missing, which no retry fixes: {shown}{more}; "
            "`celery goatbeat check` lists every GRANT")


def leases_check(url: str, lease_name: str) -> Check:
    """Whether replicas of another lease name are live on the same database."""
    from goatbeat_celery.store import open_store

    try:
        # A store of its own: every lease name's rows are checked, where Schedules.leases
        # reads this app's only.
        store = open_store(url)
        try:
            rows = store.list_leases("")
        finally:
            store.close()
    except GoatbeatError as exc:
        return Check(name="leases", outcome=Outcome.FAIL, detail=f"could not list them: {exc}")
    problem = other_leases_problem(rows, lease_name)
    if problem is not None:
        return Check(name="leases", outcome=Outcome.FAIL, detail=problem)
    return Check(name="leases", outcome=Outcome.OK,
                 detail=f"no lease but {lease_name!r} (and its shards) is live")


def broker_check(app: Any, warning: str | None = None) -> Check:
    """Whether the broker answers within :data:`BROKER_TIMEOUT`; one that does, with a
    ``warning`` about how beat uses it, warns."""
    connection = app.connection_for_write(connect_timeout=BROKER_TIMEOUT)
    # The password masked; kombu masks an absent one too, which would suggest there is one.
    shown = connection.as_uri(include_password=not connection.password)
    try:
        connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0.2,
                                     interval_max=0.2, timeout=BROKER_TIMEOUT)
    except Exception as exc:  # kombu and its transports raise many kinds; each means "down"
        text = str(exc).strip()
        reason = text.splitlines()[0] if text else type(exc).__name__
        also = "" if warning is None else f"\n{warning}"
        return Check(name="broker", outcome=Outcome.FAIL, detail=(
            f"{shown} cannot be reached within {BROKER_TIMEOUT:g}s: {reason}; beat would "
            f"keep every run claimed and unsent: start the broker or fix broker_url{also}"))
    finally:
        connection.release()
    if warning is not None:
        return Check(name="broker", outcome=Outcome.WARN, detail=warning)
    return Check(name="broker", outcome=Outcome.OK, detail=f"{shown} reachable")
