"""The Django app: ``"goatbeat_celery.contrib.django"`` in INSTALLED_APPS."""

from __future__ import annotations

from django.apps import AppConfig


class GoatbeatConfig(AppConfig):
    name = "goatbeat_celery.contrib.django"
    label = "goatbeat"
    verbose_name = "Goatbeat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from goatbeat_celery.contrib.django import checks, transactions

        checks.register()
        # Schedules changed inside transaction.atomic() commit or roll back with it.
        transactions.register()
