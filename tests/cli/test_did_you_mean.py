"""A schedule name not found is answered with the closest stored names, found by a bounded
look-up of names sharing a prefix with it (never a read of every schedule)."""

from __future__ import annotations

from typing import Any

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.cli import suggest
from goatbeat_celery.testing import MemoryStore

from .conftest import Cli


def test_a_misspelt_name_is_answered_with_the_closest_ones(cli: Cli) -> None:
    for name in ("daily-report", "weekly-report", "cleanup"):
        cli.ok("add", name, "proj.tasks.x", "--every", "1h")

    shown = cli.fails("show", "daily-reprot")
    paused = cli.fails("pause", "Daily-report")
    history = cli.fails("history", "weekly-rep")
    nothing = cli.fails("remove", "zzz", "--yes")

    assert "no schedule named 'daily-reprot' (did you mean 'daily-report'?)" in shown.output
    assert "(did you mean 'daily-report'?)" in paused.output
    assert "(did you mean 'weekly-report'?)" in history.output
    assert "did you mean" not in nothing.output
    assert "shows the schedules" in nothing.output


@pytest.mark.parametrize(("name", "expected"), [
    ("daily-reprot", ["daily-", "d", "D"]),
    ("X", ["X", "x"]),
    ("7", ["7"]),
])
def test_the_prefixes_looked_up_are_few_and_longest_first(name: str,
                                                          expected: list[str]) -> None:
    assert suggest.prefixes(name) == expected


def test_a_suggestion_reads_a_bounded_number_of_rows_among_many() -> None:
    schedules = Schedules(MemoryStore())
    for number in range(2 * suggest.NAMES_PER_LOOKUP):
        schedules.create(f"job-{number:04d}", "proj.tasks.x", every=60)
    calls: list[dict[str, Any]] = []
    listed = schedules.list

    def counted(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return listed(**kwargs)

    schedules.list = counted  # type: ignore[method-assign]

    # Among the names the look-up read, which are not all of them.
    assert suggest.close_names(schedules, "job-0042x")[0] == "job-0042"
    assert suggest.close_names(schedules, "nothing-like-it") == []
    assert 0 < len(calls) <= 2 * suggest.LOOKUPS
    assert all(call["limit"] == suggest.NAMES_PER_LOOKUP for call in calls)
