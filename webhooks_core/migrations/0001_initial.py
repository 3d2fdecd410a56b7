"""API tokens and the audit log, moved here from ``deliveries`` (whose 0020 forgets them).

A host that had ``deliveries`` keeps its rows: the tables are renamed in place (and their
content types follow, so permissions given to groups stay). Elsewhere they are created.
"""

import django.db.models.deletion
from django.conf import settings
from django.apps import apps as installed
from django.db import migrations, models

MOVED = ("AuditEntry", "ApiToken")  # the table with foreign keys first, when dropped


def _old_table(name):
    return f"deliveries_{name.lower()}"


def _retag_content_types(apps, schema_editor, old_label, new_label):
    try:
        content_type = apps.get_model("contenttypes", "ContentType")
    except LookupError:
        return
    if content_type._meta.db_table not in schema_editor.connection.introspection.table_names():
        return
    rows = content_type.objects.using(schema_editor.connection.alias)
    for name in MOVED:
        # Where the new label has one already (made after this migration by an app's own
        # migrations), the old one is stale: left for `remove_stale_contenttypes`.
        if not rows.filter(app_label=new_label, model=name.lower()).exists():
            rows.filter(app_label=old_label, model=name.lower()).update(app_label=new_label)


def adopt_or_create(apps, schema_editor):
    tables = set(schema_editor.connection.introspection.table_names())
    for name in reversed(MOVED):
        model = apps.get_model("webhooks_core", name)
        if _old_table(name) in tables:
            schema_editor.alter_db_table(model, _old_table(name), model._meta.db_table)
        else:
            schema_editor.create_model(model)
    _retag_content_types(apps, schema_editor, "deliveries", "webhooks_core")


def give_back_or_drop(apps, schema_editor):
    for name in MOVED:
        model = apps.get_model("webhooks_core", name)
        if installed.is_installed("deliveries"):
            schema_editor.alter_db_table(model, model._meta.db_table, _old_table(name))
        else:
            schema_editor.delete_model(model)
    if installed.is_installed("deliveries"):
        _retag_content_types(apps, schema_editor, "webhooks_core", "deliveries")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=200)),
                ('tenant', models.CharField(blank=True, help_text='Limit the token to this tenant (its endpoints, events, deliveries, replays and portal links); empty: every tenant and the receiving side.', max_length=100, null=True)),
                ('token_hash', models.CharField(editable=False, max_length=64, unique=True)),
                ('token_prefix', models.CharField(editable=False, max_length=16)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('last_used_at', models.DateTimeField(blank=True, editable=False, null=True)),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'verbose_name': 'API token',
                'ordering': ['-created_at'],
            },
        ),
        migrations.CreateModel(
            name='AuditEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('action', models.CharField(max_length=50)),
                ('actor', models.CharField(max_length=200)),
                ('tenant', models.CharField(blank=True, max_length=100, null=True)),
                ('target', models.CharField(blank=True, max_length=200)),
                ('counts', models.JSONField(blank=True, default=dict)),
                ('api_token', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='webhooks_core.apitoken')),
                ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'audit entry',
                'verbose_name_plural': 'audit log',
                'ordering': ['-at', '-id'],
            },
        ),
                ],
        ),
        migrations.RunPython(adopt_or_create, give_back_or_drop),
    ]
