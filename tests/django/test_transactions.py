"""``Schedules`` used from Django code inside ``transaction.atomic()`` commits or rolls back
with the block, as a django-celery-beat ``PeriodicTask`` did: the documented way
(``Schedules.from_app(app)``, docs/django.md), on the project's own PostgreSQL database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from goatbeat_celery import ScheduleConflict
from goatbeat_celery.api import Schedules


class Boom(Exception):
    pass


@pytest.fixture
def schedules(api: Schedules) -> Iterator[Schedules]:
    """Opened as docs/django.md opens it, from the project's Celery app."""
    from tests.django.testproj.celery import app

    with Schedules.from_app(app) as opened:
        yield opened


def committed(url: str, name: str) -> dict[str, object] | None:
    """The row of schedule ``name`` as committed: read on a connection of its own (every
    goatbeat store of this process joins the thread's atomic blocks)."""
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with engine.connect() as connection:
            row = connection.execute(sa.text(
                "SELECT task, enabled FROM goatbeat_schedule WHERE name = :name"),
                {"name": name}).mappings().one_or_none()
    finally:
        engine.dispose()
    return None if row is None else dict(row)


def exists(url: str, name: str) -> bool:
    return committed(url, name) is not None


def test_a_block_rolled_back_takes_its_schedules_with_it(api: Schedules, django_db: str,
                                                         schedules: Schedules) -> None:
    from django.contrib.auth.models import Group
    from django.db import transaction

    with pytest.raises(Boom), transaction.atomic():
        Group.objects.create(name="trial")
        schedules.create("trial-reminder", "proj.tasks.remind", cron="0 9 * * *")
        # Inside, the block sees its own change; nobody else does yet.
        assert schedules.get("trial-reminder").spec.task == "proj.tasks.remind"
        assert not exists(django_db, "trial-reminder")
        raise Boom
    assert not Group.objects.filter(name="trial").exists()
    assert not exists(django_db, "trial-reminder")
    assert api.audit("trial-reminder") == []


def test_a_block_committed_commits_them_and_wakes_the_leader(api: Schedules, django_db: str,
                                                             schedules: Schedules) -> None:
    from django.db import transaction

    api.create("kept", "proj.tasks.keep", every=60)
    api.store.wait(0)  # starts listening (the first wait returns at once)
    with transaction.atomic():
        schedules.create("trial-reminder", "proj.tasks.remind", cron="0 9 * * *")
        schedules.pause("kept", note="trial")
        # Announced on commit only: a replica waiting now hears nothing.
        assert not api.store.wait(0.2)
        assert committed(django_db, "kept") == {"task": "proj.tasks.keep", "enabled": True}
    assert exists(django_db, "trial-reminder")
    assert not api.get("kept").spec.enabled
    assert api.store.wait(5.0)  # NOTIFY delivered by Django's commit
    assert [entry.action.value for entry in api.audit("trial-reminder")] == ["create"]


def test_a_refused_change_undoes_only_itself(api: Schedules, django_db: str,
                                             schedules: Schedules) -> None:
    from django.contrib.auth.models import Group
    from django.db import transaction

    api.create("taken", "proj.tasks.keep", every=60)
    with transaction.atomic():
        schedules.create("first", "proj.tasks.one", every=60)
        with pytest.raises(ScheduleConflict):
            schedules.create("taken", "proj.tasks.two", every=60)
        # The block goes on: its connection is not left in a failed transaction.
        Group.objects.create(name="after-refusal")
        schedules.create("second", "proj.tasks.two", every=60)
    assert exists(django_db, "first") and exists(django_db, "second")
    assert api.get("taken").spec.task == "proj.tasks.keep"
    assert Group.objects.filter(name="after-refusal").exists()


def test_outside_a_block_each_change_commits_when_it_returns(api: Schedules, django_db: str,
                                                             schedules: Schedules) -> None:
    schedules.create("at-once", "proj.tasks.remind", every=60)
    assert exists(django_db, "at-once")


def test_the_projects_connection_keeps_its_own_settings(api: Schedules, django_db: str,
                                                        schedules: Schedules) -> None:
    from django.db import connection, transaction

    from goatbeat_celery.contrib.django.models import Schedule

    with transaction.atomic():
        schedules.create("typed", "proj.tasks.remind", every=60, kwargs={"a": 1})
        # Django reads goatbeat's JSON and instants with its own loaders, as before.
        row = Schedule.objects.get(pk="typed")
        assert row.kwargs == {"a": 1} and row.created_at.tzinfo is not None
    with connection.cursor() as cursor:
        cursor.execute("SELECT '{\"b\": 2}'::jsonb")
        assert cursor.fetchone()[0] == '{"b": 2}'  # Django's text loader, untouched
