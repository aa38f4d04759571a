"""``check`` on a SQLite store warns, without failing, that it coordinates one host only; and,
where the workers do not track runs, that run outcomes are unknown. The replica tests say the
workers track runs, so that their warning is the only one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .conftest import Cli, field_lines


def test_check_on_sqlite_warns_that_it_serves_one_host(cli_for: Any, tmp_path: Path) -> None:
    path = tmp_path / "beat.db"
    cli: Cli = cli_for(f"sqlite:///{path}", goatbeat_track_runs=True)
    cli.ok("migrate")

    result = cli.ok("check")
    document = json.loads(cli.ok("check", "--json").stdout)

    lines = field_lines(result.stdout)
    assert lines["warn"].startswith("replicas")
    assert f"SQLite file {path}, which coordinates the replicas of this host only" \
        in result.stdout
    assert result.stdout.rstrip().endswith("all checks passed (1 warning)")
    (replicas,) = [c for c in document["checks"] if c["name"] == "replicas"]
    assert (replicas["name"], replicas["status"], replicas["ok"]) == ("replicas", "warn", True)
    assert "PostgreSQL URL to run beat on several hosts" in replicas["detail"]
    assert document["ok"] is True


def test_check_on_sqlite_with_no_url_set_says_so(cli_for: Any, tmp_path: Path,
                                                  monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    cli: Cli = cli_for("unused")
    cli.conf.pop("goatbeat_database_url")
    cli.configure(goatbeat_track_runs=True)
    cli.ok("migrate")

    (replicas,) = [c for c in json.loads(cli.ok("check", "--json").stdout)["checks"]
                   if c["name"] == "replicas"]
    detail = replicas["detail"]

    assert detail.startswith("goatbeat_database_url is not set: ")


def test_check_on_postgresql_has_no_such_warning(cli: Cli) -> None:
    cli.configure(goatbeat_track_runs=True)
    result = cli.ok("check")

    assert "warn" not in result.stdout and "replicas" not in result.stdout
    assert result.stdout.rstrip().endswith("all checks passed")


def test_check_warns_without_failing_when_the_workers_do_not_track_runs(cli: Cli) -> None:
    result = cli.ok("check")
    document = json.loads(cli.ok("check", "--json").stdout)

    assert field_lines(result.stdout)["warn"].startswith("runs")
    assert result.stdout.rstrip().endswith("all checks passed (1 warning)")
    (runs,) = [c for c in document["checks"] if c["name"] == "runs"]
    assert (runs["status"], runs["ok"], document["ok"]) == ("warn", True, True)
    assert runs["detail"].startswith(
        "goatbeat_track_runs is off: the workers do not track runs, so each run's outcome is "
        "shown as unknown once 600s (goatbeat_run_start_timeout) have passed")
    assert "goatbeat_celery.track_runs(app)" in runs["detail"]

    cli.configure(goatbeat_track_runs=True)
    assert "runs" not in [c["name"] for c in json.loads(
        cli.ok("check", "--json").stdout)["checks"]]


def test_check_warns_when_an_amqp_broker_is_told_not_to_confirm(cli: Cli) -> None:
    cli.conf["broker_url"] = "amqp://guest:guest@127.0.0.1:5672//"
    cli.conf["broker_transport_options"] = {"confirm_publish": False}
    cli.configure()

    document = json.loads(cli.ok("check", "--json").stdout)

    broker = document["checks"][-1]
    assert (broker["name"], broker["status"], broker["ok"]) == ("broker", "warn", True)
    assert "confirm_publish=False" in broker["detail"]


def test_check_names_the_shard_count_when_there_are_shards(cli: Cli) -> None:
    assert "lease 'default' (ttl" in cli.ok("check").output
    cli.configure(goatbeat_shards=4)
    assert "lease 'default' in 4 shards (ttl" in cli.ok("check").output


def failover(cli: Cli) -> dict[str, Any]:
    document = json.loads(cli.ok("check", "--json").stdout)
    (found,) = [c for c in document["checks"] if c["name"] == "failover"]
    return found  # type: ignore[no-any-return]


def test_check_says_a_crash_is_detected_from_the_leaders_session_on_postgresql(
        cli: Cli) -> None:
    cli.configure(goatbeat_track_runs=True)

    found = failover(cli)

    assert (found["status"], found["ok"]) == ("ok", True)
    assert found["detail"].startswith("session: a standby waits on the leader's advisory lock")
    assert "frozen or cut-off leader is replaced when its lease expires (30s)" in found["detail"]


def test_check_warns_that_the_clock_decides_when_session_locks_are_off(cli: Cli) -> None:
    cli.configure(goatbeat_track_runs=True, goatbeat_session_locks=False)

    found = failover(cli)

    assert (found["status"], found["ok"]) == ("warn", True)
    assert "goatbeat_session_locks is off" in found["detail"]
    assert found["detail"].startswith("clock: a standby takes over a crashed leader when its "
                                      "lease expires")


def test_check_says_a_crash_is_detected_from_a_file_lock_on_sqlite(cli_for: Any,
                                                                    tmp_path: Path) -> None:
    cli: Cli = cli_for(f"sqlite:///{tmp_path / 'beat.db'}", goatbeat_track_runs=True)
    cli.ok("migrate")

    found = failover(cli)

    assert found["status"] == "ok"
    assert found["detail"].startswith("file lock: a standby waits on the leader's lock")


def test_a_session_locks_setting_that_is_no_boolean_is_refused_naming_it(cli: Cli) -> None:
    cli.configure(goatbeat_session_locks="yes")

    result = cli("check", "--json")

    assert result.exit_code != 0
    (settings,) = [c for c in json.loads(result.stdout)["checks"] if c["name"] == "settings"]
    assert settings["status"] == "fail"
    assert "goatbeat_session_locks: expected True or False, got 'yes'" in settings["detail"]
