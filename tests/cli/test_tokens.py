"""The HTTP API's tokens on the command line: token create prints the secret once (and list
never), scopes and prefix are kept, bad input is refused naming every problem, revoke refuses
the secret from then on."""

from __future__ import annotations

from goatbeat_celery.store import Store
from goatbeat_celery.tokens import Tokens

from .conftest import Cli, table_rows


def test_create_prints_the_secret_once_and_list_never(cli: Cli, store: Store) -> None:
    created = cli.ok("token", "create", "team-a", "--scope", "read,write",
                     "--prefix", "team-a-").output.splitlines()

    assert created[0] == "created token 'team-a' (read,write, names starting 'team-a-')"
    secret = created[1]
    found = Tokens(store).verify(secret)
    assert found is not None and found.prefix == "team-a-"
    listed = cli.ok("token", "list").output
    assert secret not in listed and secret not in str(cli.json("token", "list"))
    assert [(r["NAME"], r["SCOPES"], r["PREFIX"], r["REVOKED"]) for r in table_rows(listed)] == [
        ("team-a", "read,write", "team-a-", "-")]


def test_json_gives_the_secret_to_a_script(cli: Cli, store: Store) -> None:
    made = cli.json("token", "create", "ci", "--scope", "run")

    assert made["scopes"] == ["run"] and made["prefix"] is None
    assert Tokens(store).verify(made["secret"]) is not None


def test_bad_names_and_scopes_are_all_named_and_nothing_is_stored(cli: Cli,
                                                                  store: Store) -> None:
    refused = cli.fails("token", "create", " ci", "--scope", "read,admin")

    assert "name: remove the whitespace" in refused.output
    assert "scopes: unknown scope 'admin'" in refused.output
    assert store.list_tokens() == []
    assert "no tokens" in cli.ok("token", "list").output


def test_revoke_refuses_the_secret_and_keeps_the_name_taken(cli: Cli, store: Store) -> None:
    secret = cli.json("token", "create", "ci", "--scope", "read")["secret"]

    assert cli.ok("token", "revoke", "ci").output == "revoked token 'ci'\n"
    assert Tokens(store).verify(secret) is None
    assert "already exists" in cli.fails("token", "create", "ci", "--scope", "read").output
    assert "no API token named 'nope'" in cli.fails("token", "revoke", "nope").output
