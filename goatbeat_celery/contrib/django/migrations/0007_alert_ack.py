"""Acknowledged and silenced alerts (goatbeat's migration 0019 adds the columns; Django only
records the fields, as for every column of these unmanaged models)."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("goatbeat", "0006_rotation")]

    operations = [
        migrations.AddField(model_name="alert", name="acknowledged_at",
                            field=models.DateTimeField("acknowledged", null=True)),
        migrations.AddField(model_name="alert", name="acknowledged_by",
                            field=models.TextField("acknowledged by", null=True)),
        migrations.AddField(model_name="alert", name="ack_note",
                            field=models.TextField("acknowledgement note", null=True)),
        migrations.AddField(model_name="alert", name="silenced_until",
                            field=models.DateTimeField("silenced until", null=True)),
        migrations.AddField(model_name="alert", name="silenced_by",
                            field=models.TextField("silenced by", null=True)),
    ]
