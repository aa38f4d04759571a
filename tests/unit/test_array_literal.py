"""The PostgreSQL store binds arrays as one literal: each kind of value, quoting, NULL, and a
column whose rows all share one value (a claim's token, state and claim time)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from goatbeat_celery.store.postgres import array_literal

T = datetime(2026, 3, 29, 1, 30, tzinfo=timezone.utc)


@pytest.mark.parametrize(("values", "literal"), [
    ([], "{}"),
    ([None, None], "{NULL,NULL}"),
    (["a", None, 'say "hi" \\ bye'], '{"a",NULL,"say \\"hi\\" \\\\ bye"}'),
    ([1, None, 3], "{1,NULL,3}"),
    ([True, False, None], "{t,f,NULL}"),
    ([T, None, T + timedelta(seconds=1)],
     "{2026-03-29T01:30:00+00:00,NULL,2026-03-29T01:30:01+00:00}"),
])
def test_each_kind_of_value_is_written_as_postgresql_reads_it(values: list[object],
                                                              literal: str) -> None:
    assert array_literal(values) == literal  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [T, 7, "claimed", 'a"b', True])
def test_a_column_sharing_one_value_reads_as_that_value_in_every_row(value: object) -> None:
    one = array_literal([value])  # type: ignore[list-item]

    assert array_literal([value] * 3) == "{" + ",".join([one[1:-1]] * 3) + "}"  # type: ignore[list-item]


def test_values_equal_but_not_shared_are_each_written() -> None:
    later = T.astimezone(timezone(timedelta(hours=2)))

    assert array_literal([T, later]) == (
        "{2026-03-29T01:30:00+00:00,2026-03-29T03:30:00+02:00}")


def test_values_of_another_kind_are_refused() -> None:
    with pytest.raises(TypeError, match="float"):
        array_literal([1.5])  # type: ignore[list-item]


def test_a_run_of_equal_instants_in_one_zone_is_written_as_each_one() -> None:
    again = T + timedelta(0)
    later = T.astimezone(timezone(timedelta(hours=2)))

    assert array_literal([T, again, None, again, later, T]) == (
        "{2026-03-29T01:30:00+00:00,2026-03-29T01:30:00+00:00,NULL,"
        "2026-03-29T01:30:00+00:00,2026-03-29T03:30:00+02:00,2026-03-29T01:30:00+00:00}")
