"""goatbeat's Django migration against its models: the models are unmanaged, whose fields
Django's autodetector stops following once they are created (``makemigrations --check`` finds
nothing to do whatever changes), so the comparison is made here."""

from __future__ import annotations

from typing import Any

import pytest


def deconstructed(fields: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """Each field as Django writes it in a migration: its class path, arguments, keywords."""
    return {name: tuple(field.deconstruct()[1:]) for name, field in fields.items()}


@pytest.mark.parametrize("model", ["schedule", "execution", "alert"])
def test_the_migration_lists_every_field_of_the_model_as_models_py_has_it(model: str) -> None:
    from django.apps import apps
    from django.db.migrations.loader import MigrationLoader

    state = MigrationLoader(None, ignore_no_migrations=True).project_state()
    migrated = state.models[("goatbeat", model)]
    current = apps.get_model("goatbeat", model)
    fields = {field.name: field for field in current._meta.local_fields}
    assert deconstructed(dict(migrated.fields)) == deconstructed(fields)
    assert list(migrated.fields) == list(fields)  # in the order of models.py
    assert migrated.options["managed"] is False
    assert migrated.options["db_table"] == current._meta.db_table


def test_makemigrations_finds_nothing_to_add() -> None:
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("makemigrations", "goatbeat", check=True, dry_run=True, stdout=out)
    assert "No changes detected" in out.getvalue()
