"""goatbeat's tables as unmanaged models: Django records them and never creates, alters or
writes them (goatbeat's own migrations do).

Every field of models.py is listed, as Django writes an unmanaged model's migration: the
autodetector does not follow an unmanaged model's fields after it is created, so a field added
to models.py is added here by hand (tests/django/test_migrations.py compares the two).
"""

from django.db import migrations, models

import goatbeat_celery.contrib.django.models


class Migration(migrations.Migration):
    initial = True

    dependencies: list[tuple[str, str]] = []

    operations = [
        migrations.CreateModel(
            name="Execution",
            fields=[
                ("key", models.TextField(primary_key=True, serialize=False)),
                ("schedule_name", models.TextField(verbose_name="schedule")),
                ("occurrence_at", models.DateTimeField(verbose_name="occurrence")),
                ("due_at", models.DateTimeField(verbose_name="due")),
                ("token", models.BigIntegerField()),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("claimed", "claimed"),
                            ("submitted", "submitted"),
                            ("abandoned", "abandoned"),
                            ("expired", "expired"),
                            ("held", "held"),
                            ("skipped", "skipped"),
                        ],
                        max_length=16,
                    ),
                ),
                ("claimed_at", models.DateTimeField(verbose_name="claimed")),
                ("submitted_at", models.DateTimeField(null=True, verbose_name="submitted")),
                ("attempts", models.IntegerField()),
                ("last_error", models.TextField(null=True)),
                ("missed", models.IntegerField()),
                ("manual", models.BooleanField(verbose_name="run now")),
                ("expires_at", models.DateTimeField(null=True)),
                (
                    "run_state",
                    models.CharField(
                        choices=[
                            ("running", "running"),
                            ("retrying", "retrying"),
                            ("succeeded", "succeeded"),
                            ("failed", "failed"),
                            ("revoked", "revoked"),
                            ("rejected", "rejected"),
                            ("lost", "lost"),
                            ("unknown", "unknown"),
                        ],
                        max_length=16,
                        null=True,
                        verbose_name="run",
                    ),
                ),
                ("run_id", models.TextField(null=True)),
                ("worker", models.TextField(null=True)),
                ("run_attempts", models.IntegerField(verbose_name="run attempts")),
                ("started_at", models.DateTimeField(null=True, verbose_name="started")),
                ("finished_at", models.DateTimeField(null=True, verbose_name="finished")),
                ("heartbeat_at", models.DateTimeField(null=True, verbose_name="last heartbeat")),
                ("runtime", models.FloatField(null=True, verbose_name="runtime (s)")),
                ("run_error", models.TextField(null=True, verbose_name="run error")),
            ],
            options={
                "db_table": "goatbeat_execution",
                "ordering": ["-occurrence_at", "key"],
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="Schedule",
            fields=[
                ("name", models.TextField(primary_key=True, serialize=False)),
                ("task", models.TextField()),
                ("args", goatbeat_celery.contrib.django.models.StoredJSON()),
                ("kwargs", goatbeat_celery.contrib.django.models.StoredJSON()),
                ("options", goatbeat_celery.contrib.django.models.StoredJSON()),
                ("trigger", goatbeat_celery.contrib.django.models.StoredJSON()),
                ("timezone", models.TextField(null=True)),
                ("misfire_policy", models.CharField(max_length=16, null=True)),
                ("misfire_grace_seconds", models.FloatField(null=True)),
                ("max_catchup", models.IntegerField(null=True)),
                ("offset_seconds", models.FloatField(null=True)),
                ("jitter_seconds", models.FloatField(null=True)),
                ("enabled", models.BooleanField()),
                (
                    "source",
                    models.CharField(
                        choices=[("config", "config"), ("api", "database")], max_length=16
                    ),
                ),
                ("spec_hash", models.CharField(max_length=64)),
                ("next_occurrence_at", models.DateTimeField(null=True)),
                ("next_run_at", models.DateTimeField(null=True, verbose_name="next run")),
                ("last_occurrence_at", models.DateTimeField(null=True, verbose_name="last run")),
                ("total_runs", models.BigIntegerField()),
                ("total_missed", models.BigIntegerField()),
                ("version", models.BigIntegerField()),
                ("created_at", models.DateTimeField()),
                ("updated_at", models.DateTimeField()),
                ("fault", models.TextField(null=True)),
                ("fault_at", models.DateTimeField(null=True)),
                ("faults", models.IntegerField()),
                ("starting_deadline_seconds", models.FloatField(null=True)),
                ("overlap", models.CharField(max_length=16, null=True)),
                ("mode", models.CharField(max_length=16, null=True)),
                ("failure_backoff_seconds", models.FloatField(null=True)),
                ("failure_backoff_factor", models.FloatField(null=True)),
                ("failure_backoff_max_seconds", models.FloatField(null=True)),
                ("pause_after_failures", models.IntegerField(null=True)),
                ("consecutive_failures", models.IntegerField(verbose_name="failures in a row")),
                ("paused_reason", models.TextField(null=True, verbose_name="pause reason")),
                ("total_skipped", models.BigIntegerField()),
                ("start_at", models.DateTimeField(null=True)),
                ("end_at", models.DateTimeField(null=True)),
                ("max_runs", models.IntegerField(null=True)),
                ("paused_until", models.DateTimeField(null=True, verbose_name="paused until")),
                ("description", models.TextField(null=True)),
                ("tags", goatbeat_celery.contrib.django.models.StoredJSON(null=True)),
                ("calendars", goatbeat_celery.contrib.django.models.StoredJSON(null=True)),
            ],
            options={
                "db_table": "goatbeat_schedule",
                "ordering": ["name"],
                "managed": False,
            },
        ),
    ]
