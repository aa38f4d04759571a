"""The HTTP API's tokens."""

from __future__ import annotations

from typing import Protocol

from goatbeat_celery.core.types.tokens import ApiToken


class TokenStore(Protocol):
    """The HTTP API's tokens (:mod:`goatbeat_celery.core.types.tokens`): only a secret's
    digest is stored, never the secret. Driver errors surface as StoreError."""

    def create_token(self, token: ApiToken, digest: str) -> ApiToken:
        """Store ``token`` with its secret's ``digest``, created at the store's now; returns it
        as stored. ScheduleConflict when a token of that name exists (revoked ones too: a
        name recorded against past changes is never given to someone else)."""
        ...

    def token_by_digest(self, digest: str) -> ApiToken | None:
        """The token whose secret has ``digest`` (revoked or not), or None."""
        ...

    def list_tokens(self) -> list[ApiToken]:
        """Every token, revoked ones included, by name."""
        ...

    def revoke_token(self, name: str) -> ApiToken:
        """Mark the token ``name`` revoked at the store's now (once: revoking it again keeps
        the first instant) and return it. TokenNotFound when there is none."""
        ...
