from django.db import migrations

import dashboard.fields


def encrypt_existing(apps, schema_editor):
    # Values stored in clear before read back as they are; saving them again encrypts them.
    Repository = apps.get_model("dashboard", "Repository")
    for repository in Repository.objects.exclude(webhook_secret="", github_token=""):
        repository.save(update_fields=["webhook_secret", "github_token"])


class Migration(migrations.Migration):

    dependencies = [
        ("dashboard", "0005_maintainer_permission"),
    ]

    operations = [
        migrations.AlterField(
            model_name="repository",
            name="github_token",
            field=dashboard.fields.EncryptedTextField(blank=True),
        ),
        migrations.AlterField(
            model_name="repository",
            name="webhook_secret",
            field=dashboard.fields.EncryptedTextField(blank=True),
        ),
        migrations.RunPython(encrypt_existing, migrations.RunPython.noop),
    ]
