"""The schedule's definition version (goatbeat's migration 0009 adds the column; Django only
records the field, as for every column of these unmanaged models)."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("goatbeat", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="schedule", name="spec_version",
            field=models.BigIntegerField(default=1, verbose_name="version"),
        ),
    ]
