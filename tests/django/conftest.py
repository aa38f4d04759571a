"""Django for these tests only: configured from tests/django/testproj/settings.py when the
first test here runs, and taken down again after the last, so that the tests of other
directories (which import Celery apps and Django models of their own) never see these settings.

Each test module gets a fresh PostgreSQL database (goatbeat's schema migrated, then Django's
``migrate``); the Django connection is pointed at it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import URL

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.types.set_aside import SetAside
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec, SyncEntry, TriggerSpec
from goatbeat_celery.store import open_store
from tests.conftest import migrated_database
from tests.django.processes import Project
from tests.system.conftest import redis_url  # noqa: F401  (a fixture, used below)


def _configure() -> None:
    import django
    from django.conf import settings

    from tests.django.testproj import settings as project

    settings.configure(**{key: getattr(project, key) for key in dir(project) if key.isupper()})
    django.setup()


def _unconfigure() -> None:
    """Undo settings.configure() and django.setup(), keeping the model classes Django has
    registered (their modules stay imported): a later settings.configure() then works."""
    from django.apps import apps
    from django.conf import settings
    from django.db import connections
    from django.utils.functional import empty

    connections.close_all()
    for name in ("_connections", "settings"):
        connections.__dict__.pop(name, None)
    from asgiref.local import Local

    connections._connections = Local(connections.thread_critical)
    apps.app_configs.clear()
    apps.apps_ready = apps.models_ready = apps.ready = apps.loading = False
    apps.clear_cache()
    settings._wrapped = empty


@pytest.fixture(scope="package", autouse=True)
def django_project() -> Iterator[None]:
    from django.conf import settings

    if settings.configured:
        pytest.fail("Django was configured before tests/django ran; these tests need their "
                    "own settings", pytrace=False)
    from django.test.utils import setup_test_environment, teardown_test_environment

    _configure()
    # Instrumented template rendering, so responses carry their context.
    setup_test_environment()
    try:
        yield
    finally:
        teardown_test_environment()
        _unconfigure()


@pytest.fixture(scope="module")
def django_db(request: pytest.FixtureRequest, pg_server_url: URL) -> Iterator[str]:
    """A fresh database for this module, with goatbeat's and Django's schemas; its URL."""
    from django.core.management import call_command
    from django.db import connections

    module = request.module.__name__.rsplit(".", 1)[-1]
    with migrated_database(pg_server_url, f"goatbeat_dj_{module}_{os.getpid()}") as url:
        connection = connections["default"]
        connection.close()
        original = connection.settings_dict["NAME"]
        connection.settings_dict["NAME"] = url.rsplit("/", 1)[-1]
        try:
            call_command("migrate", verbosity=0, interactive=False)
            yield url
        finally:
            connection.close()
            connection.settings_dict["NAME"] = original


@pytest.fixture(scope="module")
def superuser(django_db: str) -> Any:
    from django.contrib.auth.models import User

    return User.objects.create_superuser("admin", "admin@example.com", "pw")


@pytest.fixture
def client(superuser: Any) -> Any:
    """Django's test client, logged in as a superuser."""
    from django.test import Client

    client = Client()
    client.force_login(superuser)
    return client


@pytest.fixture
def api(django_db: str) -> Iterator[Schedules]:
    """The API on the module's database, with its schedules and history emptied first."""
    import sqlalchemy as sa

    engine = sa.create_engine(django_db, poolclass=sa.NullPool)
    with engine.begin() as connection:
        connection.execute(sa.text("TRUNCATE goatbeat_schedule, goatbeat_execution, "
                                   "goatbeat_lease, goatbeat_calendar, goatbeat_audit"))
    engine.dispose()
    with Schedules(open_store(django_db)) as schedules:
        yield schedules


def add_config_schedule(api: Schedules, name: str, task: str) -> None:
    """A schedule as beat's config sync stores it."""
    add_config_schedules(api, {name: task})


def add_config_schedules(api: Schedules, tasks: dict[str, str]) -> None:
    """The schedules of a beat_schedule (name: task) as beat's config sync stores them; one
    sync, which disables the config schedules it does not name."""
    grant = api.store.acquire("default", "tests", timedelta(seconds=30))  # type: ignore[attr-defined]
    now = api.store.now()
    api.store.sync_config([SyncEntry(spec=ScheduleSpec(
        name=name, task=task, source=ScheduleSource.CONFIG,
        trigger=TriggerSpec(kind="interval", params={"every": 60.0})),
        next_occurrence_at=now, next_run_at=now) for name, task in tasks.items()], lease=grant)


def set_aside(api: Schedules, name: str, reason: str) -> None:
    grant = api.store.acquire("default", "tests", timedelta(seconds=30))  # type: ignore[attr-defined]
    api.store.set_aside([SetAside(schedule_name=name, version=None, reason=reason)],
                        lease=grant)


@pytest.fixture(scope="module")
def live_server(django_db: str) -> Iterator[str]:
    """The test project served on a loopback port, static files included, as Django's
    ``StaticLiveServerTestCase`` serves it; its URL. Requests are handled in threads of this
    process, on the module's database."""
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.test.testcases import LiveServerThread

    thread = LiveServerThread("127.0.0.1", StaticFilesHandler)
    thread.daemon = True
    thread.start()
    # Binding takes milliseconds; 10 s covers a busy 2-core CI machine.
    assert thread.is_ready.wait(timeout=10), "the live server did not start"
    if thread.error is not None:
        raise thread.error
    try:
        yield f"http://127.0.0.1:{thread.port}"
    finally:
        thread.terminate()


@pytest.fixture
def project(api: Schedules, django_db: str, redis_url: str,  # noqa: F811
            tmp_path: Path) -> Iterator[Project]:
    """The test project's processes, on the module's database (goatbeat's tables emptied
    first) and Redis; each stopped at the end."""
    world = Project(workdir=tmp_path, database_url=django_db, redis_url=redis_url)
    try:
        yield world
    finally:
        world.stop_all()
