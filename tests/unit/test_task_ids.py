"""Task ids (= idempotency keys): safe as a file name and a backend key, readable, unchanged for
plain names."""

from __future__ import annotations

import unicodedata
from datetime import datetime, timedelta, timezone
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goatbeat_celery.core.rules.backfill import backfill_key
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.execution import idempotency_key, key_name, manual_key

AT = datetime(2026, 3, 29, 1, 0, tzinfo=timezone.utc)
UNSAFE = "/\\%"
MICRO = timedelta(microseconds=1)



@pytest.mark.parametrize("name", ["reports.nightly", "a:b", "émission du soir", "x-y_z.1",
                                  "with space", "日報", "a?b*c<d>|e\"f"])
def test_a_name_without_unsafe_characters_is_its_own_key_name(name: str) -> None:
    # Keys already stored (and claims in flight) keep their value.
    assert idempotency_key(name, AT) == f"{name}:{AT.isoformat()}"


@pytest.mark.parametrize(("name", "shown"), [
    ("reports/daily", "reports%2Fdaily"),
    ("a\\b", "a%5Cb"),
    ("50%", "50%25"),
    ("a%2Fb", "a%252Fb"),  # a name that looks encoded is not confused with one that was
    ("tab\there", "tab%09here"),
    ("nul\x00", "nul%00"),
    ("del\x7f", "del%7F"),
    ("c1\x85", "c1%C2%85"),
    ("café/é", "café%2Fé"),
])
def test_unsafe_characters_are_percent_encoded_in_every_kind_of_key(name: str,
                                                                     shown: str) -> None:
    assert idempotency_key(name, AT) == f"{shown}:{AT.isoformat()}"
    assert manual_key(name, AT) == f"{shown}:{AT.isoformat()}:manual"
    assert backfill_key(name, AT, 7) == f"{shown}:{AT.isoformat()}:backfill-7"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_a_key_name_holds_no_unsafe_character_and_reads_back_as_its_name(name: str) -> None:
    shown = key_name(name)
    assert not set(UNSAFE[:2]) & set(shown)
    assert not any(unicodedata.category(char) == "Cc" for char in shown)
    assert unquote(shown) == name  # one-to-one: two names never share a key


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cc",), blacklist_characters=UNSAFE),
               max_size=40))
def test_a_name_free_of_unsafe_characters_is_never_changed(name: str) -> None:
    assert key_name(name) == name


def test_each_key_carries_its_own_occurrence_in_utc() -> None:
    paris = timezone(timedelta(hours=1))

    keys = [idempotency_key("a", AT), idempotency_key("b", AT + timedelta(0)),
            idempotency_key("c", AT.astimezone(paris)), idempotency_key("d", AT + MICRO),
            idempotency_key("e", AT)]

    assert keys == ["a:2026-03-29T01:00:00+00:00", "b:2026-03-29T01:00:00+00:00",
                    "c:2026-03-29T01:00:00+00:00", "d:2026-03-29T01:00:00.000001+00:00",
                    "e:2026-03-29T01:00:00+00:00"]
    with pytest.raises(ConfigurationError, match="naive"):
        idempotency_key("f", AT.replace(tzinfo=None))
