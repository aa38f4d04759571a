"""Rotation across clusters (goatbeat's migration 0018 adds the columns; Django only records
the fields, as for every column of these unmanaged models)."""

from __future__ import annotations

from django.db import migrations, models

import goatbeat_celery.contrib.django.models


class Migration(migrations.Migration):
    dependencies = [("goatbeat", "0005_run_traceback")]

    operations = [
        migrations.AddField(
            model_name="schedule", name="rotate",
            field=goatbeat_celery.contrib.django.models.StoredJSON(null=True),
        ),
        migrations.AddField(
            model_name="schedule", name="rotate_handover",
            field=models.BooleanField(null=True, verbose_name="rotation handover"),
        ),
        migrations.AddField(
            model_name="execution", name="cluster",
            field=models.TextField(null=True, verbose_name="sent to queue"),
        ),
    ]
