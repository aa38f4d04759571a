"""Fixtures shared by every test layer: a throwaway PostgreSQL database for the session, and
one on MySQL / MariaDB.

PostgreSQL is required: when the server in ``GOATBEAT_TEST_PG_URL`` cannot be reached, every
test that needs it fails with a message saying so. It is never skipped, so a CI run without a
database cannot pass by accident. The same holds for MySQL or MariaDB
(``GOATBEAT_TEST_MYSQL_URL``) and the tests that use it.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url

if TYPE_CHECKING:
    from goatbeat_celery.store import Store

pytest_plugins = ("celery.contrib.pytest",)

DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DEFAULT_MYSQL_URL = "mysql+pymysql://root@127.0.0.1:3306/test"
#: The tables the store owns; emptied between tests instead of recreating the database.
STORE_TABLES = ("goatbeat_execution", "goatbeat_schedule", "goatbeat_lease", "goatbeat_backfill",
                "goatbeat_calendar", "goatbeat_schedule_tag", "goatbeat_alert", "goatbeat_outbox",
                "goatbeat_audit", "goatbeat_api_token")


@pytest.fixture(autouse=True)
def _root_level_kept() -> Iterator[None]:
    """Celery's in-process test worker sets the root logger to its own level (ERROR) and
    leaves it there: put it back, so that a later test in the same process still sees the
    warnings it asserts on."""
    level = logging.root.level
    yield
    logging.root.setLevel(level)


@pytest.fixture(autouse=True)
def _shared_tasks_kept_to_their_test() -> Iterator[None]:
    """Tasks a test defines stay with that test.

    ``@app.task`` shares each task with every app finalized later in the process, so a task a
    docs example names ``reports.build`` would reach the next test's app, and an app that
    already has another task under that name warns (an error here). Celery keeps those
    registrations in one private set; each test gets it back as it found it.
    """
    from celery import _state
    from celery.contrib.testing import tasks  # noqa: F401  (celery.ping, shared by design)

    before = set(_state._on_app_finalizers)
    yield
    _state._on_app_finalizers.intersection_update(before)


def stop_process(process: subprocess.Popen[Any], timeout: float) -> None:
    """SIGTERM to ``process`` if it still runs, SIGKILL if it has not exited ``timeout``
    seconds later."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def stop_process_groups(processes: Iterable[subprocess.Popen[Any]], timeout: float) -> None:
    """SIGTERM to the process group of each process started with ``start_new_session`` (the
    command and what it started), SIGKILL to a group whose leader still runs after
    ``timeout`` seconds."""
    processes = list(processes)
    for process in processes:
        if process.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _admin_engine(url: URL) -> sa.Engine:
    # CREATE/DROP DATABASE cannot run inside a transaction block.
    return sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool,
                            connect_args={"connect_timeout": 5})


def _reachable_server(variable: str, default: str, server: str) -> URL:
    """The server URL ``variable`` gives (or ``default``), failing the test when ``server``
    cannot be reached there: a test that needs a service fails without it, never skips."""
    url = make_url(os.environ.get(variable, default))
    engine = _admin_engine(url)
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT 1"))
    except sa.exc.SQLAlchemyError as exc:
        pytest.fail(
            f"{server} is required but unreachable at "
            f"{url.render_as_string(hide_password=True)} (set {variable}): {exc}",
            pytrace=False,
        )
    finally:
        engine.dispose()
    return url


def _tables_engine(url: str) -> Iterator[sa.Engine]:
    """A small engine on the database at ``url``, for emptying and inspecting tables."""
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def pg_server_url() -> URL:
    """The PostgreSQL server the tests may use (its ``test`` database), checked reachable."""
    return _reachable_server("GOATBEAT_TEST_PG_URL", DEFAULT_PG_URL, "PostgreSQL")


@pytest.fixture(scope="session")
def pg_url(pg_server_url: URL) -> Iterator[str]:
    """URL of a fresh database for this test session, migrated to the latest schema.

    Created as ``goatbeat_test_<pid>`` and dropped at the end of the session.
    """
    with migrated_database(pg_server_url, f"goatbeat_test_{os.getpid()}") as url:
        yield url


#: Per server kind: how a database is dropped, and created (PostgreSQL's as a copy of a
#: template when one is given).
_DROP = {"postgresql": 'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
         "mysql": "DROP DATABASE IF EXISTS `{name}`"}
_CREATE = {"postgresql": 'CREATE DATABASE "{name}"{copy}',
           "mysql": "CREATE DATABASE `{name}` CHARACTER SET utf8mb4"}
_DROP["mariadb"], _CREATE["mariadb"] = _DROP["mysql"], _CREATE["mysql"]


def _recreate(server_url: URL, name: str, template: str | None = None) -> None:
    """Create database ``name`` (dropping a leftover of that name), a copy of ``template`` when
    given (PostgreSQL only)."""
    kind = server_url.get_backend_name()
    copy = f' TEMPLATE "{template}"' if template else ""
    admin = _admin_engine(server_url)
    with admin.connect() as connection:
        connection.execute(sa.text(_DROP[kind].format(name=name)))
        connection.execute(sa.text(_CREATE[kind].format(name=name, copy=copy)))
    admin.dispose()


def _drop(server_url: URL, name: str) -> None:
    admin = _admin_engine(server_url)
    with admin.connect() as connection:
        connection.execute(sa.text(_DROP[server_url.get_backend_name()].format(name=name)))
    admin.dispose()


@contextmanager
def empty_database(server_url: URL, name: str, *, template: str | None = None
                   ) -> Iterator[str]:
    """Create database ``name`` (a copy of ``template`` when given), yield its URL, and drop it
    afterwards."""
    _recreate(server_url, name, template)
    try:
        yield server_url.set(database=name).render_as_string(hide_password=False)
    finally:
        _drop(server_url, name)


#: Per server: the name of this process's migrated template database (see
#: :func:`migrated_database`), dropped when the session ends.
_TEMPLATES: dict[str, str] = {}


def _template_for(server_url: URL) -> str:
    """This process's template database on ``server_url``: an empty database migrated once, so
    that each further migrated database is a copy instead of a run of every migration."""
    from goatbeat_celery.store import upgrade_schema

    key = server_url.render_as_string(hide_password=False)
    if key not in _TEMPLATES:
        name = f"goatbeat_tpl_{os.getpid()}"
        _recreate(server_url, name)
        upgrade_schema(server_url.set(database=name).render_as_string(hide_password=False))
        _TEMPLATES[key] = name
    return _TEMPLATES[key]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a parallel run, give each worker its share of the slow tests (marker ``slow``) at
    the start of its share of the run. pytest-xdist's worksteal hands each worker an equal
    contiguous slice of this order and an idle worker steals from the back of the longest
    queue; in file order, one worker started with most slow tests and the run ended waiting
    for it."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    if workers < 2:
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    quick = [item for item in items if not item.get_closest_marker("slow")]
    ordered: list[pytest.Item] = []
    taken = 0
    for worker in range(workers):
        mine = slow[worker::workers]
        # worksteal's slice for this worker: items [len * w // n, len * (w + 1) // n).
        size = len(items) * (worker + 1) // workers - len(items) * worker // workers
        count = max(0, size - len(mine)) if worker < workers - 1 else len(quick) - taken
        ordered += mine + quick[taken:taken + count]
        taken += count
    assert len(ordered) == len(items)
    items[:] = ordered


#: The system scenarios' figures (their ``figures`` user property), shown after the run.
_FIGURES: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "teardown":
        _FIGURES.extend(str(value) for name, value in report.user_properties
                        if name == "figures")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _FIGURES:
        terminalreporter.section("fault scenario figures")
        for line in _FIGURES:
            terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session) -> None:
    for key, name in _TEMPLATES.items():
        _drop(make_url(key), name)
    _TEMPLATES.clear()


@contextmanager
def migrated_database(server_url: URL, name: str) -> Iterator[str]:
    """A new database ``name`` at the latest schema, dropped afterwards.

    It is a copy of a template migrated once per process (``CREATE DATABASE … TEMPLATE``);
    tests/conformance/test_migrations.py checks the migrations themselves on empty databases.
    """
    with empty_database(server_url, name, template=_template_for(server_url)) as url:
        yield url


@pytest.fixture(scope="session")
def pg_tables_engine(pg_url: str) -> Iterator[sa.Engine]:
    """A small engine on the session database, for emptying and inspecting tables."""
    yield from _tables_engine(pg_url)


@pytest.fixture
def pg_empty_url(pg_url: str, pg_tables_engine: sa.Engine) -> str:
    """The session database URL with the store's tables emptied for this test (DELETE: on a
    handful of rows it cost PostgreSQL 6 ms of CPU, TRUNCATE 73, which gives every table and
    index a new file; the tables have no foreign keys, so the order does not matter)."""
    with pg_tables_engine.begin() as connection:
        for table in STORE_TABLES:
            connection.execute(sa.text(f"DELETE FROM {table}"))
    return pg_url


@pytest.fixture(scope="session")
def mysql_server_url() -> URL:
    """The MySQL or MariaDB server the tests may use, checked reachable."""
    return _reachable_server("GOATBEAT_TEST_MYSQL_URL", DEFAULT_MYSQL_URL, "MySQL or MariaDB")


@pytest.fixture(scope="session")
def mysql_url(mysql_server_url: URL) -> Iterator[str]:
    """URL of a fresh MySQL database for this test session (``goatbeat_test_<pid>``), migrated
    to the latest schema, dropped at the end of the session."""
    from goatbeat_celery.store import upgrade_schema

    with empty_database(mysql_server_url, f"goatbeat_test_{os.getpid()}") as url:
        upgrade_schema(url)
        yield url


@pytest.fixture(scope="session")
def mysql_tables_engine(mysql_url: str) -> Iterator[sa.Engine]:
    """A small engine on the MySQL session database, for emptying and inspecting tables."""
    yield from _tables_engine(mysql_url)


@pytest.fixture
def mysql_empty_url(mysql_url: str, mysql_tables_engine: sa.Engine) -> str:
    """The MySQL session database URL with the store's tables emptied for this test (DELETE:
    TRUNCATE is DDL there, slower on a handful of rows)."""
    with mysql_tables_engine.begin() as connection:
        for table in STORE_TABLES:
            connection.execute(sa.text(f"DELETE FROM {table}"))
    return mysql_url


@pytest.fixture
def pg_store(pg_empty_url: str) -> Iterator[Store]:
    """A store on the session database, emptied for this test, opened as beat would."""
    from goatbeat_celery.store import open_store

    store = open_store(pg_empty_url)
    yield store
    store.close()


#: Debian's chromium, which the browser tests drive through Playwright (scripts/browser.sh
#: installs it; Playwright cannot download a browser of its own here).
CHROMIUM = os.environ.get("GOATBEAT_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--no-first-run"]


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless chromium driven by Playwright (a ``playwright.sync_api.Browser``). A missing
    chromium fails the test: browser tests are never skipped."""
    from playwright.sync_api import sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"chromium is required at {CHROMIUM} for the browser tests; "
                    "run scripts/browser.sh to install it", pytrace=False)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=CHROMIUM_ARGS)
        yield browser
        browser.close()
