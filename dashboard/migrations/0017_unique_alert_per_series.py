from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0016_one_alert_per_series'),
    ]

    operations = [
        migrations.AddConstraint(
            model_name='alert',
            constraint=models.UniqueConstraint(
                fields=(
                    'commit', 'model', 'strategy', 'board', 'toolchain', 'shape_label', 'kind'
                ),
                name='unique_alert_per_series_commit_kind',
            ),
        ),
    ]
