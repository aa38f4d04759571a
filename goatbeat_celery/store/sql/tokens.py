"""The HTTP API's token rows."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from goatbeat_celery.core.protocols import TokenStore
from goatbeat_celery.core.types.errors import ScheduleConflict, TokenNotFound
from goatbeat_celery.core.types.tokens import ApiToken, Scope
from goatbeat_celery.store.schema import api_token_table
from goatbeat_celery.store.sql.base import SQLStoreBase

T = api_token_table


def _token(row: Any) -> ApiToken:
    # An unknown word (a row edited by hand) grants nothing rather than failing every request.
    scopes = frozenset(Scope(word) for word in str(row.scopes).split(",")
                       if word in Scope._value2member_map_)
    return ApiToken(name=row.name, scopes=scopes, prefix=row.prefix,
                    created_at=row.created_at, revoked_at=row.revoked_at)


class SQLTokens(SQLStoreBase, TokenStore):
    """API tokens, stored with their secrets' digests."""

    def create_token(self, token: ApiToken, digest: str) -> ApiToken:
        scopes = ",".join(sorted(scope.value for scope in token.scopes))
        with self._write("create API token") as txn:
            rows = self._insert_new(
                txn.conn, T, {"name": token.name, "digest": digest, "scopes": scopes,
                                  "prefix": token.prefix, "created_at": self._now_sql()},
                conflict=[T.c.name], returning=list(T.c))
            row = rows[0] if rows else None
            if row is None:
                raise ScheduleConflict.taken("token", token.name)
        return _token(row)

    def token_by_digest(self, digest: str) -> ApiToken | None:
        with self._read("read API token") as conn:
            row = conn.execute(sa.select(T).where(T.c.digest == digest)).one_or_none()
        return None if row is None else _token(row)

    def list_tokens(self) -> list[ApiToken]:
        with self._read("list API tokens") as conn:
            return [_token(row) for row in conn.execute(sa.select(T).order_by(T.c.name))]

    def revoke_token(self, name: str) -> ApiToken:
        with self._write("revoke API token") as txn:
            conn = txn.conn
            conn.execute(sa.update(T).where(T.c.name == name, T.c.revoked_at.is_(None))
                         .values(revoked_at=self._now_sql()))
            row = conn.execute(sa.select(T).where(T.c.name == name)).one_or_none()
        if row is None:
            raise TokenNotFound(name)
        return _token(row)
