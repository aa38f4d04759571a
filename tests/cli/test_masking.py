"""No command prints a database password, wherever the URL gives it: before the host
(``user:secret@host``) or as a query parameter (``?password=secret``, any position, any case).

The local PostgreSQL uses trust authentication, which ignores the password: the URLs here carry
made-up secrets and still connect.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from .conftest import Cli

USERINFO_SECRET = "userinfo-s3cret"
QUERY_SECRET = "query-s3cret"
SECRETS = (USERINFO_SECRET, QUERY_SECRET)


def with_passwords(url: str) -> str:
    """``url`` with a password before the host and another, which the driver uses, in the
    middle of its query."""
    parsed = make_url(url).set(password=USERINFO_SECRET)
    base = parsed.set(query={}).render_as_string(hide_password=False)
    return f"{base}?application_name=goatbeat-cli-test&password={QUERY_SECRET}&sslmode=disable"


def assert_no_secret(output: str) -> None:
    for secret in SECRETS:
        assert secret not in output, output
    assert "s3cret" not in output


@pytest.fixture
def secret_cli(cli_for: Any, pg_empty_url: str) -> Cli:
    """The CLI on the test database, through a URL holding two passwords."""
    built: Cli = cli_for(with_passwords(pg_empty_url))
    return built


def test_status_masks_both_passwords_in_text_and_json(secret_cli: Cli) -> None:
    text = secret_cli.ok("status")
    document = secret_cli.ok("status", "--json")

    for result in (text, document):
        assert_no_secret(result.output)
    database = json.loads(document.stdout)["database"]
    assert ":***@" in database and "&password=***&" in database
    assert "application_name=goatbeat-cli-test" in database


def test_check_masks_both_passwords_in_text_and_json(secret_cli: Cli) -> None:
    text = secret_cli.ok("check")
    document = secret_cli.ok("check", "--json")

    for result in (text, document):
        assert_no_secret(result.output)
    assert "password=***" in text.stdout
    details = {c["name"]: c["detail"] for c in json.loads(document.stdout)["checks"]}
    assert "password=***" in details["settings"] and "password=***" in details["database"]


def test_migrate_masks_both_passwords_in_text_and_json(
    cli_for: Any, fresh_database_url: str
) -> None:
    cli: Cli = cli_for(with_passwords(fresh_database_url))

    first = cli.ok("migrate")
    second = cli.ok("migrate", "--json")

    for result in (first, second):
        assert_no_secret(result.output)
    assert "password=***" in first.stdout
    assert "password=***" in json.loads(second.stdout)["database"]


@pytest.mark.parametrize("query", [
    f"?password={QUERY_SECRET}",
    f"?sslmode=disable&PassWord={QUERY_SECRET}",
    f"?application_name=x&PASSWORD={QUERY_SECRET}&sslmode=disable",
], ids=["first", "last-mixed-case", "middle-upper-case"])
@pytest.mark.parametrize("command", [("check",), ("check", "--json"), ("status",),
                                     ("status", "--json"), ("list",), ("migrate",),
                                     ("migrate", "--json")],
                         ids=" ".join)
def test_an_unreachable_database_fails_without_printing_a_query_password(
    cli_for: Any, query: str, command: tuple[str, ...]
) -> None:
    cli: Cli = cli_for(f"postgresql://beat:{USERINFO_SECRET}@127.0.0.1:1/app{query}")

    result = cli(*command)

    assert result.exit_code != 0
    assert_no_secret(result.output)
    assert "***" in result.output


def test_a_url_that_does_not_parse_is_reported_masked(cli_for: Any) -> None:
    cli: Cli = cli_for(f"postgresql://beat:{USERINFO_SECRET}@db:notaport/app"
                       f"?Password={QUERY_SECRET}")

    for command in (("check",), ("check", "--json"), ("status",), ("migrate",)):
        result = cli(*command)
        assert result.exit_code != 0
        assert_no_secret(result.output)
