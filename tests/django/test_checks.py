"""The system check on goatbeat's schema and ``manage.py goatbeat_migrate``, on a database
whose goatbeat schema is taken back to base first."""

from __future__ import annotations

import io

from goatbeat_celery.migrations import head_revision
from goatbeat_celery.store import downgrade_schema, upgrade_schema


def messages() -> list[str]:
    from goatbeat_celery.contrib.django.checks import goatbeat_checks

    return [f"{m.id}: {m.msg} {m.hint or ''}" for m in goatbeat_checks(databases=["default"])]


def test_a_schema_behind_is_reported_and_goatbeat_migrate_fixes_it(django_db: str) -> None:
    from django.core.management import call_command

    downgrade_schema(django_db, "base")
    [warning] = messages()
    assert warning.startswith("goatbeat.W001: goatbeat's schema is not created yet")
    assert "celery -A <your app> goatbeat migrate" in warning

    out = io.StringIO()
    call_command("goatbeat_migrate", stdout=out)
    assert f"base -> {head_revision()}" in out.getvalue()
    assert messages() == []


def test_the_checks_run_only_when_databases_are_checked(django_db: str) -> None:
    from goatbeat_celery.contrib.django.checks import goatbeat_checks

    downgrade_schema(django_db, "base")
    try:
        assert goatbeat_checks(databases=None) == []
    finally:
        upgrade_schema(django_db)


def test_a_goatbeat_database_outside_databases_is_reported(django_db: str, tmp_path) -> None:
    from django.test import override_settings

    with override_settings(CELERY_GOATBEAT_DATABASE_URL=f"sqlite:///{tmp_path / 'g.db'}"):
        found = messages()
    assert any(m.startswith("goatbeat.W002") for m in found), found
