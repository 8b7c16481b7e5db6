# A Result records what its compile read of the checkout, for the compile cache.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("dashboard", "0017_unique_alert_per_series"),
    ]

    operations = [
        migrations.AddField(
            model_name="result",
            name="reads",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
