"""The lease rows: grants, releases and their inspection."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from goatbeat_celery.core.protocols import LeaseManager
from goatbeat_celery.core.rules.fence import grant_lease, released_by, session_watched
from goatbeat_celery.core.types.lease import LeaseGrant, LeaseInfo
from goatbeat_celery.store.schema import lease_table, utc_from_db
from goatbeat_celery.store.sql.base import SQLStoreBase

L = lease_table


class SQLLeases(SQLStoreBase, LeaseManager):
    """The :class:`~goatbeat_celery.core.protocols.LeaseManager` part."""

    #: Whether this store asked for a lease: a replica's, whose reads of live leases held by
    #: others start watching their holders' sessions (a command's reads watch nothing).
    _watching = False

    def acquire(self, name: str, holder: str, ttl: timedelta) -> LeaseGrant | None:
        self._watching = True
        with self._write("acquire lease") as txn:
            conn = txn.conn
            # A placeholder row (no holder, token 0) makes the first grant token 1 and gives
            # the row lock below something to lock.
            self._insert_new(conn, L, {"name": name, "holder": None, "token": 0},
                             conflict=[L.c.name])
            row = conn.execute(
                sa.select(L, self._now_sql().label("now")).where(L.c.name == name)
                .with_for_update()
            ).one()
            sessions, watched = self._sessions, session_watched(name)
            write = grant_lease(name, holder, ttl, row=row, now=row.now,
                                session_gone=(lambda found: sessions.gone(name, found.token))
                                if watched else None)
            if write is None:
                if watched:
                    sessions.watch(name, row.token)
                return None
            grant = write.grant
            if watched and grant.changed_holder:
                # Before the commit: no standby may read the new token while its lock is free.
                sessions.hold(name, grant.token)
                # The standbys look again and watch the new holder (a sharded one would only
                # at its next look, leaving a crash meanwhile to the clock).
                txn.announce = True
            conn.execute(
                sa.update(L).where(L.c.name == name).values(
                    holder=holder, token=grant.token, expires_at=grant.expires_at,
                    acquired_at=write.acquired_at, previous_holder=write.previous_holder,
                    changed_at=write.changed_at,
                )
            )
        return grant

    def acquire_many(self, names: Sequence[str], holder: str,
                     ttl: timedelta) -> list[LeaseGrant | None]:
        return [self.acquire(name, holder, ttl) for name in names]

    def acquire_watching(self, names: Sequence[str], holder: str, ttl: timedelta,
                         prefix: str, kept: Collection[str] = ()
                         ) -> tuple[list[LeaseGrant | None], bool]:
        grants = self.acquire_many(names, holder, ttl)
        with self._read("look for lease rows to forget") as conn:
            # One more than those kept, at most: then one at least is not kept.
            stale = conn.execute(
                stale_names_like(self._now_sql()).limit(len(kept) + 1),
                {"pattern": prefix_pattern(prefix)}).scalars().all()
        return grants, any(name not in kept for name in stale)

    def release(self, grant: LeaseGrant) -> bool:
        release = released_by(grant.holder, self._now_sql())
        with self._write("release lease") as txn:
            result = txn.conn.execute(
                sa.update(L)
                .where(L.c.name == grant.name, L.c.holder == grant.holder,
                       L.c.token == grant.token)
                .values(holder=None, expires_at=None,
                        previous_holder=release.previous_holder,
                        changed_at=release.changed_at)
            )
            released = result.rowcount == 1
            txn.announce = released
        if released:
            self._sessions.drop(grant.name, grant.token)
        return released

    def list_leases(self, prefix: str) -> list[LeaseInfo]:
        with self._read("list leases") as conn:
            rows = conn.execute(leases_named_like(self._now_sql()),
                                {"pattern": prefix_pattern(prefix)}).all()
        return [self._with_session(lease_info(row)) for row in rows]

    def forget(self, name: str) -> bool:
        with self._write("forget lease") as txn:
            result = txn.conn.execute(
                sa.delete(L).where(L.c.name == name, not_live(self._now_sql())))
            return result.rowcount == 1

    def inspect(self, name: str) -> LeaseInfo | None:
        with self._read("inspect lease") as conn:
            row = conn.execute(
                sa.select(L, self._now_sql().label("now")).where(L.c.name == name)
            ).one_or_none()
        return None if row is None else self._with_session(lease_info(row))

    def _with_session(self, info: LeaseInfo) -> LeaseInfo:
        """``info`` marked :attr:`~LeaseInfo.session_gone` when this store knows its holder's
        session ended (a standby's evidence, read without a round trip)."""
        if not info.held or not session_watched(info.name):
            return info
        if self._sessions.known_gone(info.name, info.token):
            return replace(info, session_gone=True)
        if self._watching:
            # A sharded standby reads the shards it may take, and asks only for free ones:
            # their holders are watched from here (none of this replica's own).
            self._sessions.watch(info.name, info.token)
        return info


#: The escape character of the lease-name LIKE patterns. Not a backslash: SQLAlchemy 2.0
#: renders ``escape="\\"`` as ``ESCAPE '\\\\'``, a two-character string PostgreSQL refuses.
LIKE_ESCAPE = "/"


def leases_named_like(now: sa.ColumnElement[Any]) -> sa.Select[Any]:
    """The lease rows whose names match the LIKE pattern bound as ``pattern``
    (:func:`prefix_pattern`), by name, each with the store's clock ``now`` (:func:`lease_info`
    reads a row)."""
    return (sa.select(L, now.label("now"))
            .where(L.c.name.like(sa.bindparam("pattern"), escape=LIKE_ESCAPE)).order_by(L.c.name))


def not_live(now: sa.ColumnElement[Any]) -> sa.ColumnElement[bool]:
    """core.types.lease.lease_live, negated, in the database's clock ``now``: a lease row no
    one holds, which anyone may take or forget."""
    return sa.or_(L.c.holder.is_(None), L.c.expires_at.is_(None), L.c.expires_at <= now)


def stale_names_like(now: sa.ColumnElement[Any],
                     *also: sa.ColumnElement[bool]) -> sa.Select[Any]:
    """The names of the lease rows whose names match the LIKE pattern bound as ``pattern``
    (:func:`prefix_pattern`) that are not live at ``now`` (:meth:`SQLLeases.forget` would
    delete them), and meet the conditions ``also``."""
    return sa.select(L.c.name).where(
        L.c.name.like(sa.bindparam("pattern"), escape=LIKE_ESCAPE), not_live(now), *also)


def prefix_pattern(prefix: str) -> str:
    """The LIKE pattern of :func:`leases_named_like` for the names that begin with ``prefix``."""
    escaped = "".join(LIKE_ESCAPE + char if char in "%_" + LIKE_ESCAPE else char
                      for char in prefix)
    return escaped + "%"


def lease_info(row: Sequence[Any]) -> LeaseInfo:
    """A lease row: the table's columns in order, then the store's clock."""
    name, holder, token, acquired_at, expires_at, previous_holder, changed_at, now = row
    store_now = utc_from_db(now)
    assert store_now is not None  # the clock is never null
    return LeaseInfo(name=name, holder=holder, token=token,
                     acquired_at=utc_from_db(acquired_at), expires_at=utc_from_db(expires_at),
                     store_now=store_now, previous_holder=previous_holder,
                     changed_at=utc_from_db(changed_at))
