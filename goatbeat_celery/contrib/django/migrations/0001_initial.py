"""goatbeat's tables as unmanaged models: Django records them and never creates, alters or
writes them (goatbeat's own migrations do)."""

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
            ],
            options={
                "db_table": "goatbeat_schedule",
                "ordering": ["name"],
                "managed": False,
            },
        ),
    ]
