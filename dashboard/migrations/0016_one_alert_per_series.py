from django.db import migrations, models
from django.db.models import Count

# Issue 30: an alert belonged to one run's Result, so every run of a commit (a pull
# request's, then CI's, a retry) raised the same alert again, and a new one undid the
# triage of the old. An alert is now one per series, commit and kind: the duplicates are
# merged here, and 0017 adds the constraint (in a transaction of its own: PostgreSQL alters
# no table with the merge's foreign key checks still pending).

#: What tells one alert from another from now on.
KEY = (
    "commit_id", "model_id", "strategy_id", "board_id", "toolchain_id", "shape_label", "kind"
)


def merge_duplicates(apps, schema_editor):
    """Of each series, commit and kind alerted more than once, keep one alert: the one a
    maintainer triaged last (else the first raised, whose links others may hold), with the
    newest figure measured (the highest Result) and the one it replaced, when they differ."""
    Alert = apps.get_model("dashboard", "Alert")
    alerts = Alert.objects.using(schema_editor.connection.alias)
    duplicated = alerts.values(*KEY).annotate(count=Count("id")).filter(count__gt=1).order_by()
    for key in duplicated:
        del key["count"]
        group = list(alerts.filter(**key).order_by("id"))
        triaged = [alert for alert in group if alert.state != "new"]
        keep = max(triaged, key=lambda a: (a.updated_at, a.id)) if triaged else group[0]
        newest = max(group, key=lambda a: (a.result_id, a.id))
        fields = {"created_at": min(alert.created_at for alert in group)}
        if newest.value != keep.value:
            fields.update(
                previous_value=keep.value, value=newest.value, remeasured_at=newest.created_at,
                result_id=newest.result_id, run_id=newest.run_id, baseline_id=newest.baseline_id,
                baseline_value=newest.baseline_value, p_value=newest.p_value,
            )
        # An update, not a save: the merge is no triage, so ``updated_at`` stays.
        alerts.filter(pk=keep.pk).update(**fields)
        alerts.filter(pk__in=[alert.pk for alert in group if alert.pk != keep.pk]).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0015_shape_axis'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='alert',
            name='unique_alert_per_result',
        ),
        migrations.AddField(
            model_name='alert',
            name='previous_value',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='alert',
            name='remeasured_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(merge_duplicates, migrations.RunPython.noop),
    ]
