"""Series summaries and trend snapshots: what pages show, stored when Results are recorded."""

import django.db.models.deletion
from django.db import migrations, models


def summarise_existing_series(apps, schema_editor):
    # Each line's points and newest result, chosen by the same plain SQL recording a result
    # runs, so a database upgraded in place draws its charts at once. The overview cells
    # and trend snapshots are rendered by `manage.py summarise_series` (pages build them
    # per request until then).
    from dashboard.trends import series_points

    Result = apps.get_model("dashboard", "Result")
    Series = apps.get_model("dashboard", "Series")
    alias = schema_editor.connection.alias
    keys = (
        Result.objects.using(alias).filter(status="ok").order_by()
        .values_list("model_id", "strategy_id", "board_id", "toolchain_id").distinct()
    )
    for key in sorted(set(keys)):
        summary = series_points(key, using=alias, board_ram=False)
        Series.objects.using(alias).create(
            model_id=key[0], strategy_id=key[1], board_id=key[2], toolchain_id=key[3],
            points=summary.points, commits=summary.commits,
            latest_result_id=summary.latest_result_id,
        )


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0007_toolchain'),
    ]

    operations = [
        migrations.CreateModel(
            name='TrendSnapshot',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('body', models.TextField()),
                ('history', models.JSONField(default=dict)),
                ('history_html', models.TextField(blank=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('model', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='trend_snapshot', to='dashboard.model')),
            ],
        ),
        migrations.CreateModel(
            name='Series',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('commits', models.PositiveIntegerField(default=0)),
                ('points', models.JSONField(blank=True, default=list)),
                ('latest_html', models.TextField(blank=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('board', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='dashboard.board')),
                ('latest_result', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='dashboard.result')),
                ('model', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='series', to='dashboard.model')),
                ('strategy', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='dashboard.strategy')),
                ('toolchain', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='dashboard.toolchain')),
            ],
            options={
                'verbose_name_plural': 'series',
                'constraints': [models.UniqueConstraint(fields=('model', 'strategy', 'board', 'toolchain'), name='unique_series')],
            },
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['created_at', 'id'], name='run_chronological'),
        ),
        migrations.AlterField(
            model_name='alert',
            name='state',
            field=models.CharField(choices=[('new', 'New'), ('acknowledged', 'Acknowledged'), ('intended', 'Intended change'), ('invalid', 'Invalid'), ('fixed', 'Fixed')], default='new', max_length=20),
        ),
        migrations.RunPython(summarise_existing_series, migrations.RunPython.noop),
    ]
