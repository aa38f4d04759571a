"""The HTTP API's tokens on every store: a token round-trips with its scopes and prefix and is
found by its secret's digest only; names are unique, revoked ones too; revoking keeps the row
and its first instant; the secret itself is stored nowhere."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from goatbeat_celery.core.types.errors import ConfigurationError, ScheduleConflict, TokenNotFound
from goatbeat_celery.core.types.tokens import Scope
from goatbeat_celery.store.sql import SQLStore
from goatbeat_celery.tokens import Tokens

from .conftest import Store


def test_a_token_is_found_by_its_secret_with_its_scopes_and_prefix(store: Store) -> None:
    tokens = Tokens(store)
    made, secret = tokens.create("ci", scopes="read,run", prefix="team-a-")

    found = tokens.verify(secret)

    assert found == made
    assert found is not None and found.scopes == {Scope.READ, Scope.RUN}
    assert found.prefix == "team-a-" and found.created_at is not None
    assert tokens.verify(secret + "x") is None
    assert tokens.verify("gbt_" + "A" * 43) is None


def test_a_token_name_is_taken_once_even_after_revoking(store: Store) -> None:
    tokens = Tokens(store)
    tokens.create("ci", scopes=["read"])
    tokens.revoke("ci")

    with pytest.raises(ScheduleConflict, match="a token named 'ci' already exists"):
        tokens.create("ci", scopes=["read"])


def test_a_revoked_token_is_refused_and_stays_listed(store: Store) -> None:
    tokens = Tokens(store)
    _, secret = tokens.create("old", scopes="read")
    tokens.create("new", scopes="write")

    first = tokens.revoke("old")
    again = tokens.revoke("old")

    assert tokens.verify(secret) is None
    assert first.revoked_at is not None and again.revoked_at == first.revoked_at
    assert [(t.name, t.revoked_at is not None) for t in tokens.list()] == [
        ("new", False), ("old", True)]
    with pytest.raises(TokenNotFound):
        tokens.revoke("missing")


def test_bad_names_scopes_and_prefixes_are_all_reported_and_nothing_is_stored(
        store: Store) -> None:
    with pytest.raises(ConfigurationError) as refused:
        Tokens(store).create(" ci", scopes="read,admin", prefix="")

    assert {p.field for p in refused.value.details} == {"name", "scopes", "prefix"}
    assert store.list_tokens() == []


def test_only_the_secret_s_digest_is_stored(store: Store) -> None:
    _, secret = Tokens(store).create("ci", scopes="read")
    if isinstance(store, SQLStore):
        with store._engine.connect() as conn:
            rows = [tuple(map(str, row)) for row in conn.execute(sa.text(
                "SELECT * FROM goatbeat_api_token"))]
    else:
        rows = [tuple(map(str, (*vars(token).values(), digest)))
                for token, digest in store._tokens.values()]  # type: ignore[attr-defined]
    assert rows and not any(secret in value or secret[4:] in value
                            for row in rows for value in row)
