"""A run's traceback (goatbeat's migration 0017 adds the column and the indexes of the runs
page; Django only records the field, as for every column of these unmanaged models)."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("goatbeat", "0004_alerts")]

    operations = [
        migrations.AddField(
            model_name="execution", name="run_traceback",
            field=models.TextField(null=True, verbose_name="run traceback"),
        ),
    ]
