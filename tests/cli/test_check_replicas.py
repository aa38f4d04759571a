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
