"""API tokens stored hashed. The plain-text keys of DRF's authtoken table (the app is no longer
installed) are dropped with it, not carried over: whoever read the table had them. Sign in again
(`POST /api/auth/token/`) for a new token."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def drop_plain_text_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if "authtoken_token" in connection.introspection.table_names():
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE authtoken_token CASCADE")
            cursor.execute("DELETE FROM django_migrations WHERE app = 'authtoken'")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("prefix", models.CharField(db_index=True, max_length=8)),
                ("digest", models.CharField(max_length=64, unique=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("expires_at", models.DateTimeField()),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_tokens",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-id"],
            },
        ),
        migrations.RunPython(drop_plain_text_tokens, migrations.RunPython.noop),
    ]
