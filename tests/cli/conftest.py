"""Run ``celery -A <app> goatbeat …`` as an operator would, against PostgreSQL.

Commands go through Celery's real top-level ``celery`` command, so the ``celery.commands``
entry point that plugs ``goatbeat`` in is exercised too. The app is a small module written to
the test's directory; its ``app.conf`` comes from an environment variable holding JSON, and the
module is imported afresh on every invocation, so a test can change settings between commands.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from celery.bin.celery import celery
from click.testing import CliRunner, Result
from sqlalchemy.engine import URL

from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.lease import LeaseGrant
from goatbeat_celery.core.types.set_aside import SetAside
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec, TriggerSpec
from goatbeat_celery.store import Store
from goatbeat_celery.store.schema import SCHEDULE_TABLE
from tests.conftest import empty_database

CONF_VARIABLE = "GOATBEAT_CLI_TEST_CONF"
APP_MODULE = '''\
"""A Celery app whose configuration comes from the environment (written by tests/cli)."""
import json
import os

from celery import Celery

app = Celery("cliproj", broker="memory://", set_as_current=False)
app.conf.update(json.loads(os.environ["{variable}"]))
'''


@dataclass
class Cli:
    """``celery -A <module> goatbeat …`` with the app's conf kept in ``conf``."""

    module: str
    directory: Path
    monkeypatch: pytest.MonkeyPatch
    conf: dict[str, Any] = field(default_factory=dict)
    #: Other modules of the test's directory (task modules) imported afresh on each command.
    modules: list[str] = field(default_factory=list)

    def configure(self, **values: Any) -> None:
        """Change ``app.conf`` for the following commands."""
        self.conf.update(values)
        self.monkeypatch.setenv(CONF_VARIABLE, json.dumps(self.conf))

    def __call__(self, *args: str, input: str | None = None) -> Result:
        for module in (self.module, *self.modules):  # the conf may have changed
            sys.modules.pop(module, None)
        return CliRunner().invoke(celery, ["-A", self.module, "goatbeat", *args], input=input,
                                  catch_exceptions=False)

    def ok(self, *args: str, input: str | None = None) -> Result:
        """Run a command that must succeed."""
        result = self(*args, input=input)
        assert result.exit_code == 0, (result.exit_code, result.output)
        return result

    def json(self, *args: str) -> Any:
        """Run a command with ``--json`` that must succeed; its parsed output."""
        return json.loads(self.ok(*args, "--json").stdout)

    def fails(self, *args: str, exit_code: int = 1) -> Result:
        """Run a command that must fail with ``exit_code``."""
        result = self(*args)
        assert result.exit_code == exit_code, (result.exit_code, result.output)
        return result

    def environment(self) -> dict[str, str]:
        """Environment for running the same app in a subprocess."""
        return {**os.environ, CONF_VARIABLE: json.dumps(self.conf)}


def write_app(directory: Path) -> str:
    module = f"cliproj_{uuid.uuid4().hex[:10]}"
    (directory / f"{module}.py").write_text(APP_MODULE.format(variable=CONF_VARIABLE))
    return module


@pytest.fixture
def cli_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Build a :class:`Cli` on a given database URL (and other conf)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    # Tables fit COLUMNS when set: the tests' own shell must not choose their width.
    monkeypatch.delenv("COLUMNS", raising=False)
    made: list[Cli] = []

    def build(database_url: str, **conf: Any) -> Cli:
        cli = Cli(module=write_app(tmp_path), directory=tmp_path, monkeypatch=monkeypatch)
        cli.configure(goatbeat_database_url=database_url, **conf)
        made.append(cli)
        return cli

    yield build
    for cli in made:
        for module in (cli.module, *cli.modules):
            sys.modules.pop(module, None)


@pytest.fixture
def cli(cli_for: Any, pg_empty_url: str) -> Cli:
    """The CLI on the migrated session database, emptied for this test."""
    built: Cli = cli_for(pg_empty_url)
    return built


@pytest.fixture
def store(pg_store: Store) -> Store:
    """The same database as the CLI sees, opened as beat would (to arrange and to verify)."""
    return pg_store


@pytest.fixture
def fresh_database_url(pg_server_url: URL) -> Iterator[str]:
    """An empty database of its own (no goatbeat tables), dropped afterwards."""
    with empty_database(pg_server_url, f"goatbeat_cli_{uuid.uuid4().hex[:10]}") as url:
        yield url


def instant(text: str | None) -> datetime | None:
    """An ISO-8601 instant from ``--json`` output, checked to be UTC."""
    if text is None:
        return None
    parsed = datetime.fromisoformat(text)
    assert parsed.utcoffset() == timedelta(0), f"{text} is not in UTC"
    return parsed.astimezone(UTC)


def config_schedule(store: Store, name: str, every: float = 60) -> None:
    """A schedule as config sync would have stored it (source ``config``)."""
    spec = ScheduleSpec(name=name, task="proj.tasks.tick", source=ScheduleSource.CONFIG,
                        trigger=TriggerSpec(kind="interval", params={"every": every}))
    next_at = store.now() + timedelta(seconds=every)
    store.create_schedule(spec, next_occurrence_at=next_at, next_run_at=next_at)


def table_instant(value: datetime | None) -> str:
    """An instant as the tables print it: UTC, to the millisecond when it has a fraction."""
    assert value is not None
    text = value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond // 1000:03d}"
    return text + "Z"


def table_rows(output: str) -> list[dict[str, str]]:
    """Parse a human table: column starts come from the header line."""
    header, *lines = [line for line in output.splitlines() if line.strip()]
    names: list[str] = []
    starts: list[int] = []
    position = 0
    for part in header.split("  "):
        if part.strip():
            starts.append(header.index(part.strip(), position))
            names.append(part.strip())
            position = starts[-1] + len(part.strip())
    rows = []
    for line in lines:
        bounds = [*starts[1:], None]
        rows.append({name: line[start:end].strip()
                     for name, start, end in zip(names, starts, bounds, strict=True)})
    return rows


def field_lines(output: str) -> dict[str, str]:
    """Parse ``label  value`` lines (labels may contain single spaces)."""
    pairs = {}
    for line in output.splitlines():
        label, sep, value = line.partition("  ")
        if sep:
            pairs[label.strip()] = value.strip()
    return pairs


def field_values(output: str) -> dict[str, list[str]]:
    """Parse ``label  value`` lines, a value's continuation lines (indented) joining its list."""
    pairs: dict[str, list[str]] = {}
    label = ""
    for line in output.splitlines():
        head, sep, value = line.partition("  ")
        if not sep:
            continue
        if head.strip():
            label = head.strip()
            pairs[label] = [value.strip()]
        else:
            pairs[label].append(value.strip())
    return pairs


#: Column values of a valid row, as the text PostgreSQL reads for each column's type.
_ROW_DEFAULTS: dict[str, Any] = {
    "task": "proj.tasks.tick", "args": "[]", "kwargs": "{}", "options": "{}",
    "trigger": '{"kind": "interval", "every": 60}', "timezone": None, "misfire_policy": None,
    "misfire_grace_seconds": None, "max_catchup": None, "offset_seconds": None,
    "jitter_seconds": None, "enabled": True, "source": "api", "spec_hash": "written by hand",
    "total_runs": 0, "total_missed": 0, "version": 1,
}
_ROW_CASTS = {"args": "jsonb", "kwargs": "jsonb", "options": "jsonb", "trigger": "jsonb",
              "misfire_grace_seconds": "double precision", "offset_seconds": "double precision",
              "jitter_seconds": "double precision"}


def insert_row(engine: sa.Engine, name: str, **columns: Any) -> None:
    """A schedule row written with raw SQL, as an operator editing the table by hand would:
    ``columns`` replace a valid row's values, given as text cast to the column's type (so
    ``args="5"`` stores the JSON number 5 and ``misfire_grace_seconds="NaN"`` a NaN). Its next
    run is a minute away."""
    values = {**_ROW_DEFAULTS, **columns, "name": name}
    names = list(values)
    placeholders = [f"CAST(:{column} AS {_ROW_CASTS[column]})" if column in _ROW_CASTS
                    else f":{column}" for column in names]
    with engine.begin() as connection:
        connection.execute(sa.text(
            f"INSERT INTO {SCHEDULE_TABLE} ({', '.join(names)}, next_occurrence_at, "
            f"next_run_at, created_at, updated_at) VALUES ({', '.join(placeholders)}, "
            "now() + interval '60 seconds', now() + interval '60 seconds', now(), now())"
        ), values)


def leader(store: Store) -> LeaseGrant:
    """The default lease, taken as a beat replica takes it."""
    grant = store.acquire("default", "replica-a", timedelta(seconds=30))
    assert grant is not None
    return grant


def set_aside(store: Store, name: str, reason: str, *, retry_in: float = 30,
              times: int = 1) -> None:
    """Set ``name`` aside ``times`` times in a row, as the leader does."""
    grant = leader(store)
    for _ in range(times):
        retry_at = store.now() + timedelta(seconds=retry_in)
        entry = SetAside(schedule_name=name, version=None, reason=reason, retry_at=retry_at)
        assert name in store.set_aside([entry], lease=grant)
