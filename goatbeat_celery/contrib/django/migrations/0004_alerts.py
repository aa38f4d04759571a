"""Alerts: the schedule's own thresholds and the alert rows (goatbeat's migration 0016 adds
the columns and the table; Django only records them, as for every table of these unmanaged
models)."""

from __future__ import annotations

from django.db import migrations, models

from goatbeat_celery.core.rules.alerts import AlertRule, AlertState


class Migration(migrations.Migration):
    dependencies = [("goatbeat", "0003_run_resends")]

    operations = [
        migrations.AddField(model_name="schedule", name="alert_late_seconds",
                            field=models.FloatField(null=True)),
        migrations.AddField(model_name="schedule", name="alert_failures",
                            field=models.IntegerField(null=True)),
        migrations.AddField(model_name="schedule", name="max_runtime_seconds",
                            field=models.FloatField(null=True)),
        migrations.AddField(model_name="schedule", name="alert_silent_seconds",
                            field=models.FloatField(null=True)),
        migrations.AddField(model_name="schedule", name="alert_missed",
                            field=models.IntegerField(null=True)),
        migrations.AddField(model_name="schedule", name="alert_lost",
                            field=models.IntegerField(null=True)),
        migrations.CreateModel(
            name="Alert",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("schedule_name", models.TextField(verbose_name="schedule")),
                ("rule", models.CharField(
                    choices=[(rule.value, rule.value) for rule in AlertRule], max_length=16)),
                ("state", models.CharField(
                    choices=[(state.value, state.value) for state in AlertState],
                    max_length=16)),
                ("reason", models.TextField()),
                ("key", models.TextField(null=True, verbose_name="last run")),
                ("first_at", models.DateTimeField(verbose_name="first")),
                ("last_at", models.DateTimeField(verbose_name="last")),
                ("resolved_at", models.DateTimeField(null=True, verbose_name="resolved")),
                ("count", models.IntegerField()),
            ],
            options={"db_table": "goatbeat_alert", "ordering": ["-id"], "managed": False},
        ),
    ]
