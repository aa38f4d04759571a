"""mask_url: no password survives, wherever the URL gives it, and nothing else changes."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import URL, make_url

from goatbeat_celery.store import mask_url

SECRET = "s3cret"


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://beat:s3cret@db:5432/app", "postgresql://beat:***@db:5432/app"),
    ("postgresql://beat@db/app?password=s3cret", "postgresql://beat@db/app?password=***"),
    ("postgresql://db/app?sslmode=require&password=s3cret&application_name=beat",
     "postgresql://db/app?sslmode=require&password=***&application_name=beat"),
    ("postgresql://db/app?sslmode=require&password=s3cret",
     "postgresql://db/app?sslmode=require&password=***"),
    ("postgresql://db/app?PassWord=s3cret", "postgresql://db/app?PassWord=***"),
    ("postgresql://db/app?PASSWORD=s3cret", "postgresql://db/app?PASSWORD=***"),
    ("postgresql://db/app?pass%77ord=s3cret", "postgresql://db/app?pass%77ord=***"),
    ("postgresql://db/app?sslpassword=s3cret", "postgresql://db/app?sslpassword=***"),
    ("postgresql://db/app?password=", "postgresql://db/app?password=***"),
    ("postgresql://beat:one@db/app?password=s3cret&password=two",
     "postgresql://beat:***@db/app?password=***&password=***"),
], ids=["userinfo", "query-first", "query-middle", "query-last", "mixed-case-key",
        "upper-case-key", "encoded-key", "sslpassword", "empty-value", "everywhere"])
def test_every_password_is_masked_and_the_rest_is_kept(url: str, shown: str) -> None:
    assert mask_url(url) == shown


@pytest.mark.parametrize("url", [
    "postgres://beat@db/app",
    "postgresql://db/app?sslmode=require&application_name=password",
    "postgresql://db/app?passwords_file=/etc/x&user=password",
    "sqlite:////var/lib/goatbeat/beat.db",
    "sqlite:///relative/beat.db?mode=ro",
    "memory://",
    "not a url at all",
], ids=["no-password", "password-as-a-value", "key-containing-password", "sqlite-absolute",
        "sqlite-query", "memory", "not-a-url"])
def test_a_url_without_a_password_is_shown_as_given(url: str) -> None:
    assert mask_url(url) == url


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://beat:s3cret@db:notaport/app", "postgresql://beat:***@db:notaport/app"),
    ("postgresql://beat@db:notaport/app?password=s3cret",
     "postgresql://beat@db:notaport/app?password=***"),
    ("postgresql://db:notaport/app?sslmode=require&PASSWORD=s3cret",
     "postgresql://db:notaport/app?sslmode=require&PASSWORD=***"),
    ("postgresql://beat:s3cret@db:notaport/app?Password=s3cret",
     "postgresql://beat:***@db:notaport/app?Password=***"),
], ids=["userinfo", "query", "query-later-any-case", "both"])
def test_a_url_that_does_not_parse_is_masked_too(url: str, shown: str) -> None:
    with pytest.raises(ValueError):
        make_url(url)  # the port is no number

    assert mask_url(url) == shown


@pytest.mark.parametrize("password", ["p@ss", "a@b@s3cret", "pa/ss?x", "s3cret?password=1"])
def test_a_password_with_unencoded_separators_is_masked_whole(password: str) -> None:
    masked = mask_url(f"postgresql://beat:{password}@db:5432/app")

    assert masked == "postgresql://beat:***@db:5432/app"


def test_a_percent_encoded_password_is_masked_whole() -> None:
    assert mask_url("postgresql://beat:s3%40cr%2Fet@db/app") == "postgresql://beat:***@db/app"


def test_a_sqlalchemy_url_object_is_masked_in_userinfo_and_query() -> None:
    url = URL.create("postgresql+psycopg", username="beat", password=SECRET, host="db",
                     database="app", query={"password": SECRET, "sslmode": "require"})

    masked = mask_url(url)

    assert SECRET not in masked
    assert masked.startswith("postgresql+psycopg://beat:***@db/app?")
    assert make_url(masked).query == {"password": "***", "sslmode": "require"}


def test_a_masked_url_is_masked_again_unchanged() -> None:
    once = mask_url("postgresql://beat:s3cret@db/app?password=s3cret")

    assert mask_url(once) == once
