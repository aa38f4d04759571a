"""migrate and check, on databases of their own (empty, migrated, or from a newer version)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from goatbeat_celery.migrations import MIGRATE_COMMAND, VERSION_TABLE, head_revision
from goatbeat_celery.store.schema import metadata

from .conftest import Cli


def fix(cli: Cli) -> str:
    """The command that migrates ``cli``'s database, naming its app as given with -A."""
    return f"celery -A {cli.module} goatbeat migrate"


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _checks(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in document["checks"]}


def _check_json(cli: Cli, exit_code: int) -> dict[str, Any]:
    result = cli("check", "--json")
    assert result.exit_code == exit_code, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


# -- migrate --------------------------------------------------------------------------------
def test_migrate_brings_an_empty_database_to_head(cli_for: Any, fresh_database_url: str) -> None:
    cli: Cli = cli_for(fresh_database_url)

    report = cli.json("migrate")

    assert report == {"database": report["database"], "from": None, "to": head_revision(),
                      "head": head_revision(), "upgraded": True, "broker_queues": []}
    assert set(metadata.tables) | {VERSION_TABLE} <= _tables(fresh_database_url)


def test_migrate_declares_the_queues_of_a_database_broker_so_a_worker_and_beat_start_together(
    cli_for: Any, fresh_database_url: str, tmp_path: Path
) -> None:
    broker = f"sqlite:///{tmp_path / 'broker.sqlite3'}"
    cli: Cli = cli_for(fresh_database_url, broker_url=f"sqla+{broker}",
                       task_default_queue="reports")

    first = cli.ok("migrate").stdout
    report = cli.json("migrate")

    assert "the database broker's queues declared (reports)" in first
    assert report["broker_queues"] == ["reports"]
    engine = sa.create_engine(broker, poolclass=sa.NullPool)
    try:
        with engine.connect() as connection:
            names = connection.execute(sa.text("SELECT name FROM kombu_queue")).scalars().all()
    finally:
        engine.dispose()
    assert names == ["reports"]  # declared once, found the second time


def test_migrate_twice_has_nothing_to_do_the_second_time(
    cli_for: Any, fresh_database_url: str
) -> None:
    cli: Cli = cli_for(fresh_database_url)
    first = cli.ok("migrate").stdout

    second = cli.ok("migrate").stdout

    assert f"upgraded from base (no tables) to {head_revision()} (head)" in first
    assert f"already at revision {head_revision()} (head); nothing to do" in second


def test_migrate_shows_the_database_url_masked(cli_for: Any, fresh_database_url: str) -> None:
    with_password = fresh_database_url.replace("postgres@", "postgres:s3cret@", 1)
    assert "s3cret" in with_password  # trust authentication ignores the password
    cli: Cli = cli_for(with_password)

    result = cli.ok("migrate")

    assert "postgres:***@" in result.stdout and "s3cret" not in result.output


def test_migrate_refuses_a_database_migrated_by_a_newer_version(
    cli_for: Any, fresh_database_url: str
) -> None:
    cli: Cli = cli_for(fresh_database_url)
    cli.ok("migrate")
    _stamp(fresh_database_url, "ffff_from_the_future")

    result = cli.fails("migrate")

    assert "ffff_from_the_future" in result.stderr
    assert "upgrade goatbeat_celery" in result.stderr
    assert _revision(fresh_database_url) == "ffff_from_the_future"


def test_migrate_creates_a_sqlite_file(cli_for: Any, tmp_path: Path) -> None:
    path = tmp_path / "beat.sqlite3"
    cli: Cli = cli_for(f"sqlite:///{path}")

    report = cli.json("migrate")

    assert path.exists() and report["to"] == head_revision()


def test_migrate_refuses_the_memory_store(cli_for: Any) -> None:
    cli: Cli = cli_for("memory://")

    result = cli.fails("migrate")

    assert "no schema to migrate" in result.stderr


# -- check ----------------------------------------------------------------------------------
def test_check_on_a_schema_behind_fails_and_names_the_migrate_command(
    cli_for: Any, fresh_database_url: str
) -> None:
    cli: Cli = cli_for(fresh_database_url, goatbeat_track_runs=True)

    result = cli.fails("check")

    assert fix(cli) in result.stdout and MIGRATE_COMMAND not in result.stdout
    document = _check_json(cli, exit_code=1)
    checks = _checks(document)
    assert document["ok"] is False
    assert [c["status"] for c in document["checks"]] == ["ok", "ok", "ok", "fail", "skip", "ok"]
    assert checks["grants"]["detail"] == "the schema is not at this version's revision yet"
    assert fix(cli) in checks["schema"]["detail"]


def test_commands_on_a_schema_behind_name_the_migrate_command(
    cli_for: Any, fresh_database_url: str
) -> None:
    cli: Cli = cli_for(fresh_database_url)

    result = cli.fails("list")

    assert fix(cli) in result.stderr and MIGRATE_COMMAND not in result.stderr


def test_check_passes_once_migrated(cli_for: Any, fresh_database_url: str) -> None:
    cli: Cli = cli_for(fresh_database_url, goatbeat_track_runs=True, beat_schedule={
        "tick": {"task": "proj.tick", "schedule": 30},
    })
    cli.ok("migrate")

    output = cli.ok("check").stdout

    assert output.splitlines()[-1] == "all checks passed"
    checks = _checks(_check_json(cli, exit_code=0))
    assert {name: c["status"] for name, c in checks.items()} == {
        "settings": "ok", "beat_schedule": "ok", "database": "ok", "schema": "ok",
        "failover": "ok", "grants": "ok", "leases": "ok", "broker": "ok"}
    assert checks["beat_schedule"]["detail"] == "1 valid entry"
    assert head_revision() in checks["schema"]["detail"]


def test_check_lists_every_settings_and_beat_schedule_problem(cli: Cli) -> None:
    cli.configure(goatbeat_lease_ttl=5, goatbeat_lease_renew_interval=10,
                  goatbeat_batch_size=0, beat_schedule={
                      "no-task": {"schedule": 30},
                      "negative": {"task": "proj.tick", "schedule": -5},
                      "fine": {"task": "proj.tick", "schedule": 30},
                  })

    document = _check_json(cli, exit_code=1)

    checks = _checks(document)
    settings = checks["settings"]["detail"]
    assert "goatbeat_lease_renew_interval" in settings and "goatbeat_batch_size" in settings
    entries = checks["beat_schedule"]["detail"]
    assert "beat_schedule['no-task']" in entries and "beat_schedule['negative']" in entries
    assert "'fine'" not in entries
    assert (checks["database"]["status"], checks["schema"]["status"]) == ("skip", "skip")


def test_check_reports_beat_schedule_problems_with_valid_settings(cli: Cli) -> None:
    cli.configure(beat_schedule={"bad": {"task": "proj.tick", "schedule": 30,
                                         "goatbeat": {"misfire_policy": "often"}}})

    result = cli.fails("check")

    assert "FAIL  beat_schedule" in result.stdout
    assert "misfire_policy" in result.stdout
    assert "ok    database" in result.stdout and "ok    schema" in result.stdout


def test_check_on_an_unreachable_database_fails_with_its_url_masked(cli_for: Any) -> None:
    cli: Cli = cli_for("postgresql://beat:hunter2@127.0.0.1:1/app")

    result = cli.fails("check")

    checks = _checks(_check_json(cli, exit_code=1))
    assert checks["database"]["status"] == "fail"
    assert "beat:***@127.0.0.1:1/app" in checks["database"]["detail"]
    assert checks["schema"]["status"] == "skip"
    assert "hunter2" not in result.output


def test_check_refuses_the_memory_store(cli_for: Any) -> None:
    checks = _checks(_check_json(cli_for("memory://"), exit_code=1))

    assert checks["database"]["status"] == "fail"
    assert "inside one process" in checks["database"]["detail"]


def test_check_reports_a_missing_sqlite_file_without_creating_it(
    cli_for: Any, tmp_path: Path
) -> None:
    path = tmp_path / "missing.sqlite3"
    cli: Cli = cli_for(f"sqlite:///{path}")

    checks = _checks(_check_json(cli, exit_code=1))

    assert checks["database"]["status"] == "fail"
    assert str(path) in checks["database"]["detail"]
    assert not path.exists()


def test_check_reports_a_schema_from_a_newer_version(
    cli_for: Any, fresh_database_url: str
) -> None:
    cli: Cli = cli_for(fresh_database_url)
    cli.ok("migrate")
    _stamp(fresh_database_url, "ffff_from_the_future")

    checks = _checks(_check_json(cli, exit_code=1))

    assert checks["schema"]["status"] == "fail"
    assert "upgrade goatbeat_celery" in checks["schema"]["detail"]


# -- helpers --------------------------------------------------------------------------------
def _stamp(url: str, revision: str) -> None:
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = :revision"),
                               {"revision": revision})
    finally:
        engine.dispose()


def _revision(url: str) -> str:
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with engine.connect() as connection:
            return str(connection.execute(
                sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar_one())
    finally:
        engine.dispose()


def test_check_warns_of_goatbeat_options_beside_task_which_celerys_scheduler_refuses(
        cli: Cli) -> None:
    cli.configure(beat_schedule={
        "old": {"task": "proj.tick", "schedule": 60, "goatbeat": {"jitter": 5}},
        "new": {"task": "proj.tick", "schedule": 60, "options": {"goatbeat": {"jitter": 5}}},
    })

    checks = _checks(cli.json("check"))

    assert checks["beat_schedule"]["status"] == "warn"
    assert checks["beat_schedule"]["detail"] == (
        "- beat_schedule['old'].goatbeat: deprecated; move it into the entry's options "
        "(options={'goatbeat': {...}}) so that Celery's own schedulers start with the same "
        "beat_schedule")
