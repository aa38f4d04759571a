"""Problems as data: made where they are found, written as text only where they are shown."""

from __future__ import annotations

from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem


def test_a_problem_is_written_as_its_field_its_message_and_its_fix() -> None:
    problem = Problem("options.queue", "contains control characters",
                      "use printable characters only").about("schedule 'poll'")

    assert (problem.root, problem.detail) == ("options", "queue")
    assert problem.text == ("options.queue: contains control characters; use printable "
                            "characters only")
    assert str(problem) == f"schedule 'poll': {problem.text}"
    assert (Problem("tags[0]", "empty").root, Problem("tags[0]", "empty").detail) == ("tags", "")


def test_the_fields_a_problem_mentions_are_named_by_each_face() -> None:
    problem = Problem("offset", "give either {offset} or {jitter}, not both",
                      "remove {jitter}", mentions=("offset", "jitter"))

    assert str(problem) == "offset: give either offset or jitter, not both; remove jitter"
    assert problem.said({"offset": "--offset", "jitter": "--jitter"}) == (
        "give either --offset or --jitter, not both; remove --jitter")
    assert problem.message_as({"jitter": "Jitter"}) == "give either offset or Jitter, not both"


def test_braces_in_a_problem_that_mentions_no_field_are_kept() -> None:
    assert str(Problem("kwargs", "got {'a': 1}")) == "kwargs: got {'a': 1}"


def test_the_error_carries_the_problems_and_reads_as_before() -> None:
    error = ConfigurationError([Problem("every", "must be >= 1s, got 0s"),
                                Problem("task", "must be a registered task name, got ''")],
                               subject="schedule 'x'")

    assert [p.field for p in error.details] == ["every", "task"]
    assert error.problems == ("every: must be >= 1s, got 0s",
                              "task: must be a registered task name, got ''")
    assert str(error) == ("invalid schedule 'x' (2 problems):\n"
                          "  - every: must be >= 1s, got 0s\n"
                          "  - task: must be a registered task name, got ''")
