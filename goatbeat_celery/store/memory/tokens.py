"""The memory store's API tokens."""

from __future__ import annotations

from dataclasses import replace

from goatbeat_celery.core.protocols import TokenStore
from goatbeat_celery.core.types.errors import ScheduleConflict, TokenNotFound
from goatbeat_celery.core.types.tokens import ApiToken
from goatbeat_celery.store.memory.base import MemoryStoreBase


class MemoryTokens(MemoryStoreBase, TokenStore):
    """API tokens, stored with their secrets' digests."""

    def create_token(self, token: ApiToken, digest: str) -> ApiToken:
        with self._lock:
            if token.name in self._tokens:
                raise ScheduleConflict.taken("token", token.name)
            stored = replace(token, created_at=self.now(), revoked_at=None)
            self._tokens[token.name] = (stored, digest)
        return stored

    def token_by_digest(self, digest: str) -> ApiToken | None:
        with self._lock:
            return next((token for token, kept in self._tokens.values() if kept == digest),
                        None)

    def list_tokens(self) -> list[ApiToken]:
        with self._lock:
            return [token for _, (token, _) in sorted(self._tokens.items())]

    def revoke_token(self, name: str) -> ApiToken:
        with self._lock:
            if name not in self._tokens:
                raise TokenNotFound(name)
            token, digest = self._tokens[name]
            if token.revoked_at is None:
                token = replace(token, revoked_at=self.now())
                self._tokens[name] = (token, digest)
            return token
