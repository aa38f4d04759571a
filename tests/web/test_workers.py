"""Workers and queues: the ``/workers`` page, a run sent and never started on its page, and a
run revoked from its page, against a real prefork worker on Redis (a queue and a remote-control
exchange of each test's own, so no other worker on the same Redis answers)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import redis
from celery import Celery
from celery.result import AsyncResult
from playwright.sync_api import Browser as Chromium
from playwright.sync_api import expect

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.types.audit import AuditAction
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.web import WebSettings, create_app
from tests.web.conftest import TOKEN, Browser, serve
from tests.web.layout import layout_problems, photograph

REDIS_URL = os.environ.get("GOATBEAT_TEST_REDIS_URL", "redis://127.0.0.1:6379")
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Broker:
    """The tests' Celery app on Redis: its queue, the queue no worker consumes, and the
    remote-control exchange of this test only."""

    app: Celery
    queue: str
    idle_queue: str
    control: str


@dataclass
class Worker:
    name: str
    process: subprocess.Popen[bytes]


@pytest.fixture
def broker(pg_empty_url: str) -> Iterator[Broker]:
    run = uuid.uuid4().hex[:10]
    app = Celery("workerproj", broker=REDIS_URL, backend=REDIS_URL, set_as_current=False)
    control = f"gbw-control-{run}"
    app.conf.update(goatbeat_database_url=pg_empty_url, timezone="Europe/Paris",
                    control_exchange=control)
    yield Broker(app, f"gbw-{run}", f"gbw-idle-{run}", control)
    client = redis.Redis.from_url(REDIS_URL)
    client.delete(f"gbw-{run}", f"gbw-idle-{run}")
    client.close()


@pytest.fixture
def schedules(broker: Broker) -> Iterator[Schedules]:
    opened = Schedules.from_app(broker.app)
    yield opened
    opened.close()


@pytest.fixture
def client(schedules: Schedules) -> Iterator[Browser]:
    with Browser(create_app(schedules), base_url="http://127.0.0.1") as browser:
        yield browser


@pytest.fixture
def worker(broker: Broker, tmp_path: Path) -> Iterator[Worker]:
    """A prefork worker (one process) consuming the test's queue, once it answers a ping."""
    node = broker.queue
    name = f"{node}@{socket.gethostname()}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GOATBEAT_WORKERS_BROKER": REDIS_URL,
           "GOATBEAT_WORKERS_CONTROL": broker.control}
    with (tmp_path / "worker.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.web.workerproj", "worker", "-Q",
             broker.queue, "-P", "prefork", "-c", "1", "-n", f"{node}@%h", "--without-gossip",
             "--without-mingle", "--without-heartbeat", "-l", "info"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        # A worker answers within a few seconds; 30 s covers a busy shared machine.
        deadline = time.monotonic() + 30
        while not broker.app.control.ping(destination=[name], timeout=0.5):
            assert process.poll() is None, (tmp_path / "worker.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
        yield Worker(name, process)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the worker and its pool: its own group only
        process.wait(timeout=20)


def row(page: str, queue: str) -> str:
    found = re.search(rf'<tr data-queue="{re.escape(queue)}">(.*?)</tr>', page, re.S)
    assert found, f"no row of {queue} on the page"
    return found.group(1)


def cells(html: str) -> list[str]:
    return [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", cell)).strip()
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", html, re.S)]


def sent(schedules: Schedules, broker: Broker, name: str, queue: str,
         seconds: float) -> Execution:
    """A run of ``name`` sent to ``queue`` as beat sends it: its key is the task id."""
    execution = schedules.run_now(name)
    broker.app.send_task("workerproj.slow", args=[seconds], task_id=execution.key, queue=queue)
    schedules.store.mark_submitted([execution.key])
    return execution


def test_the_workers_page_shows_the_worker_its_pool_and_its_queue(
        client: Browser, broker: Broker, worker: Worker, schedules: Schedules) -> None:
    schedules.create("billing", "workerproj.slow", every=3600, args=[0],
                     options={"queue": broker.idle_queue})

    page = client.get("/workers")

    assert page.status_code == 200
    workers = re.search(r'<table class="rows" id="workers">(.*?)</table>', page.text, re.S)
    assert workers is not None
    assert cells(workers.group(1))[:3] == [worker.name, "prefork × 1", broker.queue]
    # Redis: the depth is the list's length, the consumers the broker cannot tell.
    assert cells(row(page.text, broker.queue))[:5] == [broker.queue, "0", "unknown",
                                                       worker.name, "0"]
    assert cells(row(page.text, broker.idle_queue))[:5] == [broker.idle_queue, "0", "unknown",
                                                            "none answered", "1"]


def test_with_no_worker_the_page_says_none_answered(client: Browser) -> None:
    page = client.get("/workers")

    assert page.status_code == 200
    assert "No worker answered in 1 s" in page.text
    assert 'data-queue="celery"' in page.text  # the default queue, declared by the app


def test_without_a_celery_app_the_page_says_so(schedules: Schedules) -> None:
    bare = Schedules(schedules.store, config=schedules.config)  # not opened from an app

    with Browser(create_app(bare), base_url="http://127.0.0.1") as client:
        page = client.get("/workers")

    assert page.status_code == 200
    assert "given no Celery app" in page.text


def test_a_run_sent_and_never_started_shows_its_queue_and_that_nobody_consumes_it(
        client: Browser, broker: Broker, worker: Worker, schedules: Schedules) -> None:
    schedules.create("stuck", "workerproj.slow", every=3600, args=[0],
                     options={"queue": broker.idle_queue})
    execution = sent(schedules, broker, "stuck", broker.idle_queue, 0)

    page = client.get("/run", params={"key": execution.key}).text

    card = re.search(r'<section class="cards"(?: data-live)? id="run-queue">(.*?)</section>',
                     page, re.S)
    assert card is not None, "no queue card on the page of a run sent and never started"
    assert broker.idle_queue in card.group(1)
    assert re.search(r'id="queue-depth">1<', card.group(1))
    assert 'id="queue-consumers" class="">unknown<' in card.group(1)
    assert "none of the 1 that answered" in card.group(1)
    assert 'href="/workers"' in card.group(1)


def test_a_started_run_shows_no_queue_card(client: Browser, broker: Broker,
                                           schedules: Schedules) -> None:
    schedules.create("never-sent", "workerproj.slow", every=3600, args=[0])
    execution = schedules.run_now("never-sent")  # claimed, not yet sent

    page = client.get("/run", params={"key": execution.key}).text

    assert 'id="run-queue"' not in page
    assert 'id="revoke"' in page  # in flight: it can be revoked


def test_revoke_with_terminate_stops_a_running_task_and_is_audited(
        client: Browser, broker: Broker, worker: Worker, schedules: Schedules) -> None:
    schedules.create("slow", "workerproj.slow", every=3600, args=[60],
                     options={"queue": broker.queue})
    execution = sent(schedules, broker, "slow", broker.queue, 60)
    inspect = broker.app.control.inspect(destination=[worker.name], timeout=1)
    deadline = time.monotonic() + 30
    while not any(task["id"] == execution.key
                  for task in (inspect.active() or {}).get(worker.name, [])):
        assert time.monotonic() < deadline, "the worker did not start the task"

    answer = client.submit("/run/revoke", key=execution.key, terminate="1", reason="stuck")

    assert answer.status_code == 303
    assert answer.headers["location"].endswith("notice=terminated")
    result = AsyncResult(execution.key, app=broker.app)
    deadline = time.monotonic() + 30
    while result.state != "REVOKED":
        assert time.monotonic() < deadline, f"the task is still {result.state}"
        time.sleep(0.1)
    assert worker.process.poll() is None  # the pool's process was stopped, not the worker
    [entry] = schedules.audit("slow", limit=1)
    assert entry.action is AuditAction.REVOKE
    assert dict(entry.changes) == {"run": (None, execution.key), "terminate": (None, True)}
    assert entry.reason == "stuck"
    assert "Revoke sent with terminate" in client.get(answer.headers["location"]).text


def test_a_read_only_dashboard_refuses_a_revoke_and_says_why(
        schedules: Schedules, broker: Broker) -> None:
    schedules.create("ro", "workerproj.slow", every=3600, args=[0])
    execution = schedules.run_now("ro")
    before = schedules.audit("ro")

    with Browser(create_app(schedules, WebSettings(read_only=True)),
                 base_url="http://127.0.0.1") as client:
        page = client.get("/run", params={"key": execution.key}).text
        answer = client.submit("/run/revoke", key=execution.key, terminate="1")

    assert 'id="revoke"' not in page and "This dashboard is read-only." in page
    assert answer.status_code == 403
    assert "started read-only; nothing was changed" in answer.text
    assert schedules.audit("ro") == before


def test_a_revoke_of_an_unknown_run_is_not_found(client: Browser) -> None:
    answer = client.submit("/run/revoke", key="nobody:2026-01-01T00:00:00+00:00")

    assert answer.status_code == 404
    assert "No such run" in answer.text


@pytest.mark.parametrize("width", [1280, 800])
def test_workers_and_a_waiting_run_in_the_browser(
        chromium: Chromium, schedules: Schedules, broker: Broker, worker: Worker,
        width: int) -> None:
    schedules.create("reports.stuck", "workerproj.slow", every=3600, args=[0],
                     options={"queue": broker.idle_queue})
    execution = sent(schedules, broker, "reports.stuck", broker.idle_queue, 0)
    context = chromium.new_context(viewport={"width": width, "height": 900})
    page: Any = context.new_page()
    page.set_default_timeout(10_000)
    try:
        for url in serve(create_app(schedules, WebSettings(token=TOKEN))):
            page.goto(url + "/workers")
            page.fill("#token", TOKEN)
            page.click("#sign-in")
            expect(page.locator("h1")).to_have_text("Workers and queues")
            expect(page.locator("#workers")).to_contain_text(worker.name)
            photograph(page, "workers")
            assert layout_problems(page) == []
            page.goto(url + "/run?" + urlencode({"key": execution.key}))
            expect(page.locator("#queue-depth")).to_have_text("1")
            photograph(page, "run-waiting")
            assert layout_problems(page) == []
            page.click("#run-queue >> text=Workers and queues")
            expect(page.locator("h1")).to_have_text("Workers and queues")
    finally:
        context.close()
