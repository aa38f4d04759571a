"""The system check on goatbeat's schema and ``manage.py goatbeat_migrate``, on a database
whose goatbeat schema is taken back to base first."""

from __future__ import annotations

import io

from goatbeat_celery.migrations import head_revision
from goatbeat_celery.store import downgrade_schema, upgrade_schema


def messages(*, track_runs: bool = True) -> list[str]:
    """The database checks' messages, with the workers said to track runs unless told."""
    from django.test import override_settings

    from goatbeat_celery.contrib.django.checks import goatbeat_checks

    with override_settings(CELERY_GOATBEAT_TRACK_RUNS=track_runs):
        found = goatbeat_checks(databases=["default"])
    return [f"{m.id}: {m.msg} {m.hint or ''}" for m in found]


def test_workers_that_do_not_track_runs_are_noted_without_failing_the_check(
        django_db: str) -> None:
    from django.core import checks
    from django.test import override_settings

    from goatbeat_celery.contrib.django.checks import goatbeat_checks

    [note] = messages(track_runs=False)
    assert note.startswith(
        "goatbeat.I001: CELERY_GOATBEAT_TRACK_RUNS is off: the workers do not track runs, so "
        "each run's outcome is shown as unknown once 600s (CELERY_GOATBEAT_RUN_START_TIMEOUT) "
        "have passed after it was sent, and no run is judged lost or failed"), note
    assert "goatbeat_celery.track_runs(app)" in note
    with override_settings(CELERY_GOATBEAT_TRACK_RUNS=False):
        found = goatbeat_checks(databases=["default"])
    assert [m.level for m in found] == [checks.INFO]  # a note, never a warning or an error
    assert messages(track_runs=True) == []


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


def test_misspelt_settings_are_warned_of_without_a_database(django_db: str) -> None:
    """A goatbeat setting without the CELERY_ prefix, or misspelt behind it, is read by nobody:
    every `manage.py check` names it and the spelling goatbeat reads."""
    from django.core import checks
    from django.test import override_settings

    with override_settings(GOATBEAT_DATABASE_URL="postgresql://elsewhere/beat",
                           CELERY_GOATBEAT_LEASE_TL="30s"):
        found = checks.run_checks()  # no databases: what `manage.py check` runs
        with_database = messages()
    warnings = {m.msg: m for m in found if m.id == "goatbeat.W004"}
    assert set(warnings) == {
        "CELERY_GOATBEAT_LEASE_TL: unknown setting; did you mean CELERY_GOATBEAT_LEASE_TTL?",
        "GOATBEAT_DATABASE_URL: unknown setting; did you mean CELERY_GOATBEAT_DATABASE_URL?",
    }, found
    assert all(m.level == checks.WARNING for m in warnings.values())
    # The database checks do not repeat them as an error that would stop `manage.py migrate`.
    assert not [m for m in with_database if m.startswith("goatbeat.E001")], with_database
    assert not [m for m in checks.run_checks() if m.id == "goatbeat.W004"]


def test_invalid_settings_are_an_error_of_the_database_checks(django_db: str) -> None:
    from django.test import override_settings

    with override_settings(CELERY_GOATBEAT_LEASE_TTL="soon"):
        found = messages()
    assert any(m.startswith("goatbeat.E001") and "goatbeat_lease_ttl" in m for m in found), found
