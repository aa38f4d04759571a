"""mask_url: no password survives, wherever the URL gives it, and nothing else changes."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.store import mask_url
from goatbeat_celery.store.url import normalise_url

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


@pytest.mark.parametrize("password", ["p@ss", "a@b@s3cret", "pa/ss?x", "s3cret?password=1",
                                      "x@y/z", "p#x@y?z", "ab:cd@ef"])
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


#: Passwords as people type them, with the characters a URL gives a meaning: every printable
#: character but whitespace, which a URL cannot hold.
PASSWORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zs", "Zl",
                                                                      "Zp")),
                    min_size=1, max_size=24)
#: What SQLAlchemy's and psycopg's errors say around a URL.
AROUND = [("{url}", "{url}"), ("could not connect to {url}: connection refused", None),
          ("cannot use '{url}' (bad port); accepted schemes: memory://, postgresql://", None),
          ("error: {url}", None), ("database_url={url}\n", None)]
MASKED = "postgresql://beat:***@db:5432/app"


@given(password=PASSWORDS)
@example(password="p@ss").via("an unencoded @")
@example(password="x@y/z@").via("an @ then a path")
@example(password="a://b@c").via("a scheme inside")
@example(password="%40%").via("percent signs")
@example(password="?password=#").via("a query inside")
def test_no_password_survives_masking_whatever_its_characters(password: str) -> None:
    url = f"postgresql://beat:{password}@db:5432/app"

    for text, _ in AROUND:
        assert mask_url(text.format(url=url)) == text.format(url=MASKED), text
    assert mask_url(f"{url}?sslmode=require") == f"{MASKED}?sslmode=require"


@given(password=st.text(min_size=1, max_size=24).filter(lambda text: text.strip() == text))
def test_a_password_with_spaces_is_masked_whole_too(password: str) -> None:
    # Text after a space can be the next URL of an error message: a password with a space and
    # then "x://" reads as two URLs, and is left out here.
    assume(not re.search(r"\s.*://", password))
    url = f"postgresql://beat:{password}@db:5432/app"

    assert mask_url(url) == MASKED
    assert mask_url(f"could not connect to {url}: refused") == (
        f"could not connect to {MASKED}: refused")


@given(password=PASSWORDS)
def test_the_parsed_url_of_any_password_is_masked_whole(password: str) -> None:
    url = f"postgresql://beat:{password}@db:5432/app"
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # masked as text, above
        assume(False)
    else:
        # SQLAlchemy may read another password from such a text ("beat:@/@db…" has an empty
        # one and a database named "@db:5432/app"): what is masked is the one it read.
        assume(parsed.password == password)
        assert mask_url(parsed) == MASKED


def test_several_urls_in_one_message_are_each_masked() -> None:
    text = ("from postgresql://a:p@ss@h1/db to postgresql://b:q@h2/db failed, "
            "see https://example.org/help")

    assert mask_url(text) == ("from postgresql://a:***@h1/db to postgresql://b:***@h2/db failed, "
                              "see https://example.org/help")


@pytest.mark.parametrize("url", ["postgresql://beat:zq@xj@db/app",
                                 "postgresql://beat:zq@xj:wv@db/app"])
def test_a_url_whose_password_needs_encoding_is_refused_without_quoting_it(url: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        normalise_url(url)

    (problem,) = refused.value.problems
    assert problem.startswith("database_url: cannot use 'postgresql://beat:***@db/app' (it does "
                              "not read as user:password@host:port/database; percent-encode "
                              "the password's special characters: @ as %40"), problem
    assert not re.search("zq|xj|wv", problem)
