"""API tokens and the audit log belong to ``webhooks_core`` now (its 0001 renamed the tables
or made them): this migration forgets them.

Where ``webhooks_core`` 0001 ran before this app's tables existed (a fresh install, or
``deliveries`` added to a host that only received), this app's migrations made empty
``deliveries_apitoken`` and ``deliveries_auditentry`` tables meanwhile: the portal links'
foreign key is pointed at the core's table and those two are dropped.
"""

import django.db.models.deletion
from django.db import migrations, models

LEFT_OVER = ("AuditEntry", "ApiToken")  # the table with foreign keys first


def _left_over(schema_editor):
    return "deliveries_apitoken" in schema_editor.connection.introspection.table_names()


class PointAtCoreTokens(migrations.AlterField):
    """The portal links' foreign key, moved to the core's table: the rename already
    moved it where the table was renamed; only where it was left over is it altered."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if _left_over(schema_editor):
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        # Undoing webhooks_core 0001 renames the table back; the key follows it.
        pass


def drop_left_over(apps, schema_editor):
    if _left_over(schema_editor):
        for name in LEFT_OVER:
            schema_editor.delete_model(apps.get_model("deliveries", name))


class Migration(migrations.Migration):

    dependencies = [
        ('deliveries', '0019_endpoint_broker_credentials'),
        ('webhooks_core', '0001_initial'),
    ]

    operations = [
        PointAtCoreTokens(
            model_name='portallink',
            name='api_token',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='webhooks_core.apitoken'),
        ),
        migrations.RunPython(drop_left_over, migrations.RunPython.noop),
        migrations.SeparateDatabaseAndState(state_operations=[
        migrations.RemoveField(
            model_name='auditentry',
            name='api_token',
        ),
        migrations.RemoveField(
            model_name='auditentry',
            name='user',
        ),
        migrations.DeleteModel(
            name='ApiToken',
        ),
        migrations.DeleteModel(
            name='AuditEntry',
        ),
            ]),
    ]
