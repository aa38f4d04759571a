"""The dashboard on the session's PostgreSQL database: through Starlette's TestClient (HTTP
level) and through a real server on a loopback port (for the browser tests)."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
import sqlalchemy as sa
import uvicorn
from celery import Celery
from starlette.testclient import TestClient

from goatbeat_celery.api import Schedules
from goatbeat_celery.web import WebSettings, create_app
from goatbeat_celery.web.security import CSRF_COOKIE, CSRF_FIELD
from tests.web.api_client import Api

TOKEN = "s3cret-token-for-the-tests-0123456789"
_CSRF_INPUT = re.compile(rf'name="{CSRF_FIELD}" value="([^"]+)"')


def celery_app(database_url: str, **conf: Any) -> Celery:
    app = Celery("webproj", broker="memory://", set_as_current=False)
    app.conf.update(goatbeat_database_url=database_url, timezone="Europe/Paris", **conf)
    return app


@pytest.fixture
def schedules(pg_empty_url: str) -> Iterator[Schedules]:
    """The API on the emptied session database, as the ``web`` command opens it."""
    opened = Schedules.from_app(celery_app(pg_empty_url))
    yield opened
    opened.close()


@pytest.fixture
def tables(pg_tables_engine: sa.Engine) -> sa.Engine:
    """An engine for writing rows by hand (as an operator editing the table would)."""
    return pg_tables_engine


class Browser(TestClient):
    """A TestClient that fills in the CSRF field of a form the way a browser posts it."""

    def csrf(self) -> str:
        if CSRF_COOKIE not in self.cookies:
            self.get("/login")
        return str(self.cookies[CSRF_COOKIE])

    def submit(self, path: str, **fields: str) -> Any:
        return self.post(path, data={CSRF_FIELD: self.csrf(), **fields}, follow_redirects=False)


def form_token(html: str) -> str:
    found = _CSRF_INPUT.search(html)
    assert found, "no CSRF field on the page"
    return found.group(1)


@pytest.fixture
def client(schedules: Schedules) -> Iterator[Browser]:
    with Browser(create_app(schedules), base_url="http://127.0.0.1") as browser:
        yield browser


@pytest.fixture
def make_client(schedules: Schedules) -> Iterator[Any]:
    made: list[Browser] = []

    def build(settings: WebSettings, **kwargs: Any) -> Browser:
        kwargs.setdefault("base_url", "http://127.0.0.1")
        browser = Browser(create_app(schedules, settings), **kwargs)
        browser.__enter__()
        made.append(browser)
        return browser

    yield build
    for browser in made:
        browser.__exit__(None, None, None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    url: str
    schedules: Schedules


def serve(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a thread on a free loopback port; yield its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="goatbeat-web-test", daemon=True)
    thread.start()
    # Starting takes well under a second; 10 s covers a busy 2-core CI machine.
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def server(schedules: Schedules) -> Iterator[Server]:
    """The dashboard, token-protected, served on a loopback port."""
    for url in serve(create_app(schedules, WebSettings(token=TOKEN))):
        yield Server(url, schedules)


@contextlib.contextmanager
def serving(cli: Any, environment: dict[str, str],
            *options: str) -> Iterator[tuple[str, list[str], int]]:
    """``goatbeat web`` in a process of its own on a free loopback port: yields its URL once
    it answers, a list that holds its output once it has stopped, and its process id."""
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
        yield url, output, process.pid
    finally:
        process.terminate()
        output.append(process.communicate(timeout=20)[0])


# The CLI's fixtures, for the `web` command's tests.
from tests.cli.conftest import cli_for as cli_for  # noqa: E402


@pytest.fixture
def api(schedules: Schedules) -> Iterator[Api]:
    """The HTTP API of a dashboard over ``schedules``, called as a client would."""
    with TestClient(create_app(schedules), base_url="http://127.0.0.1") as client:
        yield Api(client, schedules)


@pytest.fixture
def auth(api: Api) -> dict[str, str]:
    return api.token()
