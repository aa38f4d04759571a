"""Django for these tests only: configured from tests/django/testproj/settings.py when the
first test here runs, and taken down again after the last, so that the tests of other
directories (which import Celery apps and Django models of their own) never see these settings.

Each test module gets a fresh PostgreSQL database (goatbeat's schema migrated, then Django's
``migrate``); the Django connection is pointed at it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.engine import URL

from tests.conftest import migrated_database


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
