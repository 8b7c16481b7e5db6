"""Toolchains: the TVM a Result was compiled with becomes part of its series."""

import dashboard.models
import django.db.models.deletion
from django.db import migrations, models


def fill_default_toolchain(apps, schema_editor):
    Toolchain = apps.get_model("dashboard", "Toolchain")
    Result = apps.get_model("dashboard", "Result")
    Alert = apps.get_model("dashboard", "Alert")
    if not Result.objects.exists():
        return
    default, _ = Toolchain.objects.get_or_create(spec="")
    Result.objects.filter(toolchain=None).update(toolchain=default)
    Alert.objects.filter(toolchain=None).update(toolchain=default)


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0006_encrypted_secrets'),
    ]

    operations = [
        migrations.CreateModel(
            name='Toolchain',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('spec', models.CharField(blank=True, help_text="A pip requirement, a wheel file or a TVM source folder; empty: the worker's own.", max_length=500, unique=True)),
                ('tvm_version', models.CharField(blank=True, max_length=100)),
                ('tvm_git_hash', models.CharField(blank=True, max_length=100)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['spec'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='result',
            name='unique_result_per_run',
        ),
        migrations.RemoveIndex(
            model_name='result',
            name='dashboard_r_model_i_fdbf2e_idx',
        ),
        migrations.RemoveIndex(
            model_name='result',
            name='result_trend',
        ),
        migrations.AddField(
            model_name='alert',
            name='toolchain',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='dashboard.toolchain'),
        ),
        migrations.AddField(
            model_name='result',
            name='toolchain',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='results', to='dashboard.toolchain'),
        ),
        # Rows recorded before toolchains existed were compiled in the worker's own environment.
        migrations.RunPython(fill_default_toolchain, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='alert',
            name='toolchain',
            field=models.ForeignKey(default=dashboard.models.default_toolchain, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='dashboard.toolchain'),
        ),
        migrations.AlterField(
            model_name='result',
            name='toolchain',
            field=models.ForeignKey(default=dashboard.models.default_toolchain, on_delete=django.db.models.deletion.PROTECT, related_name='results', to='dashboard.toolchain'),
        ),
        migrations.AddIndex(
            model_name='result',
            index=models.Index(fields=['model', 'strategy', 'board', 'toolchain', 'commit'], name='dashboard_r_model_i_d2162a_idx'),
        ),
        migrations.AddIndex(
            model_name='result',
            index=models.Index(condition=models.Q(('status', 'ok')), fields=['model', 'board', 'strategy', 'toolchain', 'commit'], include=('run', 'planned_bytes', 'intermediate_bytes', 'measured_peak_bytes', 'lower_bound_bytes', 'latency_median_ms'), name='result_trend'),
        ),
        migrations.AddConstraint(
            model_name='result',
            constraint=models.UniqueConstraint(fields=('run', 'model', 'strategy', 'board', 'toolchain'), name='unique_result_per_run'),
        ),
    ]
