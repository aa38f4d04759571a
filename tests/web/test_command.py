"""``celery -A proj goatbeat web``: where it may listen, and that it serves the dashboard."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx2

from tests.web.conftest import TOKEN, free_port


def test_a_reachable_address_without_a_token_is_refused(cli_for: Any, pg_empty_url: str,
                                                        monkeypatch: Any) -> None:
    monkeypatch.delenv("GOATBEAT_WEB_TOKEN", raising=False)
    result = cli_for(pg_empty_url).fails("web", "--bind", "0.0.0.0:8765")
    assert "refusing to listen on 0.0.0.0" in result.output
    assert "GOATBEAT_WEB_TOKEN" in result.output


def test_a_short_token_is_refused(cli_for: Any, pg_empty_url: str, monkeypatch: Any) -> None:
    monkeypatch.setenv("GOATBEAT_WEB_TOKEN", "short")
    result = cli_for(pg_empty_url).fails("web", "--bind", "0.0.0.0:8765")
    assert "at least 16 characters" in result.output


def test_an_unreadable_bind_is_a_usage_error(cli_for: Any, pg_empty_url: str) -> None:
    result = cli_for(pg_empty_url).fails("web", "--bind", "127.0.0.1:http", exit_code=2)
    assert "--bind" in result.output


def test_an_option_it_does_not_take_points_at_bind(cli_for: Any, pg_empty_url: str) -> None:
    cli = cli_for(pg_empty_url)
    for option in ("--port", "--host"):
        result = cli.fails("web", option, "9000", exit_code=2)
        assert "No such option" in result.output and option in result.output
        assert "The address to listen on is given as --bind HOST:PORT" in result.output


@contextlib.contextmanager
def serving(cli: Any, environment: dict[str, str],
            *options: str) -> Iterator[tuple[str, list[str]]]:
    """``goatbeat web`` in a process of its own on a free loopback port: yields its URL once
    it answers, and a list that holds its output once it has stopped."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", cli.module, "goatbeat", "web", "--bind",
         f"127.0.0.1:{port}", *options], cwd=cli.directory, env=environment,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    output: list[str] = []
    try:
        # Celery and uvicorn start in a second or two; 20 s covers a busy 2-core machine.
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx2.get(f"{url}/login")
                break
            except httpx2.TransportError:
                assert process.poll() is None, process.communicate()[0]
                assert time.monotonic() < deadline, "the web command did not answer"
                time.sleep(0.2)
        yield url, output
    finally:
        process.terminate()
        output.append(process.communicate(timeout=20)[0])


def test_the_command_serves_the_dashboard_with_its_token(cli_for: Any,
                                                         pg_empty_url: str) -> None:
    cli = cli_for(pg_empty_url)
    cli.ok("add", "tick", "proj.tasks.tick", "--every", "60")
    environment = {**cli.environment(), "GOATBEAT_WEB_TOKEN": TOKEN}
    with serving(cli, environment) as (url, output):
        response = httpx2.get(f"{url}/schedules", headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 200
        assert "tick" in response.text
        unauthenticated = httpx2.get(f"{url}/", follow_redirects=False)
        assert unauthenticated.status_code == 303
    assert "goatbeat web on http://127.0.0.1:" in output[0]
    assert "token required" in output[0]


def test_without_a_token_the_command_answers_only_its_own_names(cli_for: Any,
                                                                 pg_empty_url: str,
                                                                 monkeypatch: Any) -> None:
    monkeypatch.delenv("GOATBEAT_WEB_TOKEN", raising=False)
    cli = cli_for(pg_empty_url)
    cli.ok("add", "tick", "proj.tasks.tick", "--every", "60")
    environment = {k: v for k, v in cli.environment().items() if k != "GOATBEAT_WEB_TOKEN"}
    with serving(cli, environment, "--allowed-host", "beat.tunnel.internal") as (url, output):
        port = url.rsplit(":", 1)[1]
        for host, status in ((f"127.0.0.1:{port}", 200), (f"localhost:{port}", 200),
                             (f"beat.tunnel.internal:{port}", 200),
                             (f"rebind.attacker.example:{port}", 400)):
            response = httpx2.get(f"{url}/schedules", headers={"Host": host})
            assert response.status_code == status, host
            assert ("tick" in response.text) is (status == 200)
    assert "no token: this host only" in output[0]
