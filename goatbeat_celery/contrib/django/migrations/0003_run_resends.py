"""A schedule's own resends (goatbeat's migration 0011 adds the column; Django only records the
field, as for every column of these unmanaged models)."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("goatbeat", "0002_spec_version")]

    operations = [
        migrations.AddField(
            model_name="schedule", name="run_resends", field=models.IntegerField(null=True),
        ),
    ]
