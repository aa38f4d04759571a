"""``celery -A proj goatbeat web``: where it may listen, and that it serves the dashboard."""

from __future__ import annotations

from typing import Any

import httpx2

from tests.web.conftest import TOKEN, serving


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


def test_the_command_serves_the_dashboard_with_its_token(cli_for: Any,
                                                         pg_empty_url: str) -> None:
    cli = cli_for(pg_empty_url)
    cli.ok("add", "tick", "proj.tasks.tick", "--every", "60")
    environment = {**cli.environment(), "GOATBEAT_WEB_TOKEN": TOKEN}
    with serving(cli, environment) as (url, output, _pid):
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
    with serving(cli, environment, "--allowed-host", "beat.tunnel.internal") as (url, output, _pid):
        port = url.rsplit(":", 1)[1]
        for host, status in ((f"127.0.0.1:{port}", 200), (f"localhost:{port}", 200),
                             (f"beat.tunnel.internal:{port}", 200),
                             (f"rebind.attacker.example:{port}", 400)):
            response = httpx2.get(f"{url}/schedules", headers={"Host": host})
            assert response.status_code == status, host
            assert ("tick" in response.text) is (status == 200)
    assert "no token: this host only" in output[0]
