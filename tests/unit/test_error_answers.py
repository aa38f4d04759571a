"""Each face answers goatbeat's errors from one table by kind: the HTTP API with a status, the
CLI with an exit status and a message; every kind has an answer in both."""

from __future__ import annotations

import click
import pytest

from goatbeat_celery.cli.context import ANSWERS as CLI_ANSWERS
from goatbeat_celery.cli.context import EX_UNAVAILABLE, reported
from goatbeat_celery.core.types.errors import (
    BackfillNotFound,
    CalendarInUse,
    CalendarNotFound,
    ConfigurationError,
    ErrorKind,
    GoatbeatError,
    LeaseLost,
    ScheduleConflict,
    ScheduleNotFound,
    SchemaOutOfDate,
    StoreDenied,
    StoreTimeout,
    StoreUnavailable,
    TokenNotFound,
)
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.web.api.answers import translated

ERRORS: list[tuple[GoatbeatError, int, int]] = [
    # the error, the API's status, the CLI's exit status
    (ConfigurationError([Problem("every", "must be positive")]), 422, 1),
    (ScheduleNotFound("poll"), 404, 1),
    (CalendarNotFound("holidays"), 404, 1),
    (BackfillNotFound(3), 404, 1),
    (TokenNotFound("ci"), 404, 1),
    (ScheduleConflict.taken("schedule", "poll"), 409, 1),
    (CalendarInUse("holidays", ["poll"]), 409, 1),
    (StoreUnavailable("connection refused"), 503, EX_UNAVAILABLE),
    (StoreTimeout("cancelled at the statement timeout"), 503, EX_UNAVAILABLE),
    (StoreDenied("permission denied"), 500, 1),
    (SchemaOutOfDate("run the migrations"), 500, 1),
    (LeaseLost("fenced"), 500, 1),
]


def test_the_cli_has_an_answer_for_every_kind() -> None:
    assert set(CLI_ANSWERS) == set(ErrorKind)


@pytest.mark.parametrize(("error", "status", "exit_code"), ERRORS,
                         ids=[type(error).__name__ for error, _, _ in ERRORS])
def test_each_error_is_answered_by_its_kind(error: GoatbeatError, status: int,
                                            exit_code: int) -> None:
    assert translated(error).status == status
    with pytest.raises(click.ClickException) as caught, reported():
        raise error
    assert caught.value.exit_code == exit_code


def test_an_invalid_request_answers_every_problem_by_its_field() -> None:
    answer = translated(ConfigurationError([Problem("every", "must be positive"),
                                            Problem("task", "is required")],
                                           subject="schedule 'poll'"))

    assert answer.detail == "invalid schedule 'poll'; nothing was changed"
    assert [problem.field for problem in answer.problems] == ["every", "task"]


@pytest.mark.parametrize(("error", "hint"), [
    (ScheduleNotFound("poll"), "`celery -A <your app> goatbeat list` shows the schedules"),
    (CalendarNotFound("holidays"),
     "`celery -A <your app> goatbeat calendar list` shows the calendars"),
    (BackfillNotFound(3), "`celery -A <your app> goatbeat backfills` shows the backfills"),
    (TokenNotFound("ci"), "`celery -A <your app> goatbeat token list` shows the tokens"),
])
def test_the_cli_says_which_command_lists_what_was_not_found(error: GoatbeatError,
                                                              hint: str) -> None:
    with pytest.raises(click.ClickException) as caught, reported():
        raise error

    assert caught.value.message == f"{error}; {hint}"


def test_the_cli_names_each_field_and_each_field_mentioned_by_its_option() -> None:
    error = ConfigurationError([
        Problem("offset", "give either {offset} or {jitter}, not both",
                mentions=("offset", "jitter")).about("schedule 'poll'"),
        Problem("args", "expected a JSON array, found 5"),
        Problem("", "schedule 'poll' cannot be read as stored", "edit it giving {args} anew",
                mentions=("args",)),
    ], subject="schedule 'poll'")

    with pytest.raises(click.ClickException) as typed, \
            reported(as_options=True, stored=[error.details[1]]):
        raise error
    with pytest.raises(click.ClickException) as plain, reported():
        raise error

    assert typed.value.message.splitlines()[1:] == [
        "  - --offset: give either --offset or --jitter, not both",
        "  - args: expected a JSON array, found 5",  # what the row holds, by its column
        "  - schedule 'poll' cannot be read as stored; edit it giving --args anew"]
    assert plain.value.message.splitlines()[1] == (
        "  - schedule 'poll': offset: give either offset or jitter, not both")
