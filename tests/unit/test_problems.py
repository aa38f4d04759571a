"""Problems as data: read from the text a check writes, and written back unchanged."""

from __future__ import annotations

import pytest

from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem


@pytest.mark.parametrize("text", [
    "task: must be a registered task name, got ''",
    "schedule 'poll': options.queue: contains control characters (U+0007); use printable "
    "characters only",
    "schedule 'aaaaaaaa...: every: must be >= 1s, got 0s",
    "cron expression: expected 5 fields",
    "beat_schedule['x'].goatbeat.offset: expected seconds",
    "calendar 'holidays': dates: '2026-13-01' is not a date: give YYYY-MM-DD",
    "range: more than 10 occurrences; split it",
    "no field here at all",
    "x: trailing separator; ",
])
def test_a_problem_read_from_its_text_gives_the_text_back(text: str) -> None:
    assert str(Problem.read(text)) == text


def test_the_parts_of_a_problem_are_read_apart() -> None:
    problem = Problem.read("schedule 'poll': options.queue: contains control characters; use "
                           "printable characters only")

    assert problem == Problem(field="options.queue", message="contains control characters",
                              hint="use printable characters only", subject="schedule 'poll'")
    assert (problem.root, problem.detail) == ("options", "queue")
    assert problem.text == ("options.queue: contains control characters; use printable "
                            "characters only")


def test_the_error_carries_the_problems_and_reads_as_before() -> None:
    error = ConfigurationError([Problem("every", "must be >= 1s, got 0s"),
                                "task: must be a registered task name, got ''"],
                               subject="schedule 'x'")

    assert [p.field for p in error.details] == ["every", "task"]
    assert error.problems == ("every: must be >= 1s, got 0s",
                              "task: must be a registered task name, got ''")
    assert str(error) == ("invalid schedule 'x' (2 problems):\n"
                          "  - every: must be >= 1s, got 0s\n"
                          "  - task: must be a registered task name, got ''")
