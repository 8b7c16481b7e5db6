"""A micro board's RAM as a column of its own, so its trend and alerts read it like planned
bytes; filled from what older micro Results kept in ``details["board"]``."""

from django.db import migrations, models

def fill_board_ram(apps, schema_editor):
    # Only the series that gain a figure are summarised again, and their models' trend
    # snapshots dropped: pages build a trend per request until `manage.py
    # summarise_series` (or the model's next result) stores it again.
    from dashboard.actions.results import board_ram_from
    from dashboard.trends import series_points

    Result = apps.get_model("dashboard", "Result")
    Series = apps.get_model("dashboard", "Series")
    TrendSnapshot = apps.get_model("dashboard", "TrendSnapshot")
    alias = schema_editor.connection.alias
    keys = set()
    micro = Result.objects.using(alias).filter(board__kind="micro").only(
        "id", "details", "status", "model_id", "strategy_id", "board_id", "toolchain_id",
        "shape_label",
    )
    for result in micro.iterator(chunk_size=500):
        ram = board_ram_from((result.details or {}).get("board"))
        if ram is None:
            continue
        Result.objects.using(alias).filter(pk=result.pk).update(board_ram_bytes=ram)
        if result.status == "ok":
            keys.add((result.model_id, result.strategy_id, result.board_id,
                      result.toolchain_id, result.shape_label))
    for key in sorted(keys):
        summary = series_points(key, using=alias)
        Series.objects.using(alias).filter(
            model_id=key[0], strategy_id=key[1], board_id=key[2], toolchain_id=key[3],
            shape_label=key[4],
        ).update(points=summary.points)
    TrendSnapshot.objects.using(alias).filter(model_id__in={key[0] for key in keys}).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0022_pullrequest_closed_at'),
    ]

    operations = [
        migrations.AddField(
            model_name='result',
            name='board_ram_bytes',
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='alert',
            name='kind',
            field=models.CharField(choices=[('bytes', 'Planned bytes'), ('latency', 'Latency'), ('ram', 'Board RAM')], max_length=20),
        ),
        migrations.RemoveIndex(
            model_name='result',
            name='result_trend',
        ),
        migrations.AddIndex(
            model_name='result',
            index=models.Index(condition=models.Q(('status', 'ok')), fields=['model', 'board', 'strategy', 'toolchain', 'shape_label', 'commit'], include=('run', 'planned_bytes', 'intermediate_bytes', 'measured_peak_bytes', 'lower_bound_bytes', 'latency_median_ms', 'board_ram_bytes'), name='result_trend'),
        ),
        migrations.RunPython(fill_board_ram, migrations.RunPython.noop),
    ]
