"""Whatever text an operator gives an instant option of the CLI (``add``/``edit`` ``--at``,
``--start-at``, ``--end-at``, ``pause --until``, ``backfill --from``/``--to``), it is accepted
or refused cleanly: a usage error naming the option (exit 2), or a problem goatbeat reports
naming it (exit 1), never a traceback. Hypothesis properties, first on the option type alone
(many examples, in-process), then through ``celery -A … goatbeat`` on PostgreSQL."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import click
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from goatbeat_celery.cli.options import ClearableInstantParam, InstantParam
from goatbeat_celery.core.rules.validation import EARLIEST_INSTANT, INSTANT_RANGE, LATEST_INSTANT
from tests.cli.conftest import Cli, write_app
from tests.conftest import STORE_TABLES

pytestmark = pytest.mark.slow

UTC = timezone.utc
USAGE = 2

#: Offsets a datetime may carry: whole minutes, seconds and microseconds, up to a day.
offsets = st.timedeltas(min_value=-timedelta(hours=23, minutes=59, seconds=59),
                        max_value=timedelta(hours=23, minutes=59, seconds=59)).map(timezone)
zones = st.one_of(st.none(), st.just(UTC), offsets, st.timezones())
#: Every datetime a Python datetime holds, naive or in any zone, written as people write them.
instants = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59),
                        timezones=zones)
written = st.one_of(
    instants.map(lambda d: d.isoformat()),
    instants.map(lambda d: d.isoformat(sep=" ", timespec="minutes")),
    instants.map(lambda d: d.isoformat(timespec="seconds").replace("+00:00", "Z")),
    instants.map(lambda d: d.isoformat().lower()),
)
#: ISO-8601-looking text with any digits: months 13, hours 24, offsets of 99 hours, ...
shaped = st.from_regex(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?)?"
                       r"([Zz]|[+-]\d{2}(:?\d{2}(:\d{2}(\.\d{1,6})?)?)?)?", fullmatch=True)
#: Anything at all, control characters and NUL included.
anything = st.text(max_size=40)
instant_text = st.one_of(written, written, shaped, anything,
                         st.sampled_from(["", " ", "Z", "none", "9999-12-31T23:59:59.999999Z",
                                          "0001-01-01T00:00:00Z", "9999-03-01T00:00:00Z",
                                          "0001-01-01T00:00:00+23:59", "9000-01-01T00:00:00Z",
                                          "9000-01-01T00:00:00.000001Z", "1970-01-01T00:00:00Z",
                                          "1969-12-31T23:59:59.999999Z", "2026-02-30T00:00:00Z",
                                          "2026-01-01T00:00:00+24:00", "2026-01-01T24:00:00Z"]))


#: Instants found to raise (OverflowError) before the range was enforced, tried every run.
EDGES = ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "9999-03-01T00:00:00Z",
         "9999-12-31T23:00:00-05:00")


@settings(max_examples=1500, deadline=None)
@given(text=instant_text, clearable=st.booleans())
@example(text=EDGES[0], clearable=False)
@example(text=EDGES[1], clearable=True)
def test_the_instant_option_type_accepts_an_instant_in_range_or_refuses_with_a_usage_error(
        text: str, clearable: bool) -> None:
    kind = ClearableInstantParam() if clearable else InstantParam()
    option = click.Option(["--start-at"], type=kind)
    try:
        value = kind.convert(text, option, None)
    except click.BadParameter as exc:
        assert exc.exit_code == USAGE
        assert exc.param is option  # click names it: "Invalid value for '--start-at'"
        assert exc.message
        return
    if value == "none":
        assert clearable and text.strip().lower() == "none"
        return
    assert isinstance(value, datetime) and value.utcoffset() is not None
    assert EARLIEST_INSTANT <= value <= LATEST_INSTANT


# -- through the command line --------------------------------------------------------------
@pytest.fixture(scope="module")
def cli(pg_url: str, pg_tables_engine: sa.Engine,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    """The CLI on the session database, emptied once: examples of a test share its rows (a
    schedule an example created stays for the next, as it would for an operator)."""
    with pg_tables_engine.begin() as connection:
        connection.execute(sa.text(f"TRUNCATE {', '.join(STORE_TABLES)}"))
    directory: Path = tmp_path_factory.mktemp("cli-instants")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.syspath_prepend(str(directory))
        built = Cli(module=write_app(directory), directory=directory, monkeypatch=monkeypatch)
        built.configure(goatbeat_database_url=pg_url)
        built.ok("add", "poll", "feeds.poll", "--every", "60")
        # A decade apart: a backfill over any range holds a few occurrences at most.
        built.ok("add", "decade", "feeds.poll", "--every", "3650d")
        yield built
        for module in (built.module, *built.modules):
            sys.modules.pop(module, None)


#: Each instant option, in a command it is given to (the instant goes last, as ``--opt=TEXT``).
COMMANDS = {
    "add --start-at": ("add", "{name}", "feeds.poll", "--every", "60", "--start-at"),
    "add --end-at": ("add", "{name}", "feeds.poll", "--cron", "0 7 * * *", "--end-at"),
    "add --at": ("add", "{name}", "feeds.poll", "--at"),
    "edit --start-at": ("edit", "poll", "--start-at"),
    "edit --end-at": ("edit", "poll", "--end-at"),
    "pause --until": ("pause", "poll", "--until"),
    "backfill --from": ("backfill", "decade", "--to", "2026-01-01T00:00:00Z", "--dry-run",
                        "--from"),
    "backfill --to": ("backfill", "decade", "--from", "1970-01-01T00:00:00Z", "--dry-run",
                      "--to"),
}
#: How goatbeat names each option in a problem it reports (exit 1): the option itself.
NAMED = {"--from": ("--from", "--to"), "--to": ("--to", "--from")}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=instant_text)
@example(text=EDGES[0])
@example(text=EDGES[1])
@example(text=EDGES[2])
@example(text=EDGES[3])
def test_any_text_given_to_an_instant_option_is_accepted_or_refused_naming_the_option(
        cli: Cli, command: str, text: str) -> None:
    *words, option = COMMANDS[command]
    name = f"p-{uuid.uuid4().hex[:12]}"  # a new one each time, shrinking included
    args = [word.format(name=name) for word in words]

    # catch_exceptions=False: a traceback fails the test with the exception itself.
    result = cli(*args, f"{option}={text}")

    if result.exit_code == 0:
        return
    assert result.exit_code in (1, USAGE), (result.exit_code, result.output)
    assert isinstance(result.exception, SystemExit), result.exception
    if result.exit_code == USAGE:
        assert f"Invalid value for '{option}'" in result.stderr, result.stderr
        if "out of range" in result.stderr:
            assert INSTANT_RANGE in result.stderr
        return
    # A problem goatbeat reports about an instant it accepted: in the past, before the start.
    assert result.stderr.startswith("Error: "), result.stderr
    assert any(named in result.stderr for named in NAMED.get(option, (option,))), result.stderr
    assert "Traceback" not in result.output
