"""The HTTP API's tokens: made, listed and revoked here (``celery -A proj goatbeat token``),
checked by the API on every request.

>>> tokens = Tokens(store)
>>> token, secret = tokens.create("ci", scopes="read,write", prefix="team-a-")
>>> tokens.verify(secret).name
'ci'

The secret is returned once, by :meth:`Tokens.create`: only its digest is stored, so a lost
secret is replaced by a new token, never recovered.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, cast

from goatbeat_celery.core.protocols import TokenStore
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.tokens import (
    SECRET_PREFIX,
    ApiToken,
    new_secret,
    read_scopes,
    secret_digest,
    token_problems,
)

if TYPE_CHECKING:
    from goatbeat_celery.api import Schedules

#: Longer than any secret this module makes: anything longer is refused unread.
MAX_SECRET_LENGTH = 200


class Tokens:
    """The API tokens of one store."""

    def __init__(self, store: TokenStore) -> None:
        self.store = store

    @classmethod
    def of(cls, schedules: Schedules) -> Tokens:
        """The tokens of ``schedules``' store (:func:`~goatbeat_celery.store.open_store`
        returns one object that is the schedule store and the token store too)."""
        return cls(cast(TokenStore, schedules.store))

    def create(self, name: str, *, scopes: object,
               prefix: str | None = None) -> tuple[ApiToken, str]:
        """A new token and its secret (shown once). ``scopes``: ``"read,write"`` or a list of
        ``read``, ``write``, ``run``; ``prefix``: only schedules (and calendars, backfills)
        whose name starts with it. Every problem is reported at once (ConfigurationError);
        ScheduleConflict when the name is taken, by a revoked token too."""
        problems: builtins.list[Problem] = token_problems(name, prefix)
        chosen = read_scopes(scopes, "scopes", problems)
        if problems:
            raise ConfigurationError(problems, subject=f"token {name!r}")
        secret = new_secret()
        token = self.store.create_token(ApiToken(name=name, scopes=chosen, prefix=prefix),
                                        secret_digest(secret))
        return token, secret

    def verify(self, secret: str) -> ApiToken | None:
        """The live token ``secret`` belongs to; None for an unknown or revoked one."""
        if not secret.startswith(SECRET_PREFIX) or len(secret) > MAX_SECRET_LENGTH:
            return None
        token = self.store.token_by_digest(secret_digest(secret))
        return token if token is not None and token.revoked_at is None else None

    def list(self) -> builtins.list[ApiToken]:
        """Every token by name, revoked ones included."""
        return self.store.list_tokens()

    def revoke(self, name: str) -> ApiToken:
        """Refuse ``name``'s secret from now on (TokenNotFound for a typo). Its name stays
        taken: changes recorded against it keep meaning one holder."""
        return self.store.revoke_token(name)
