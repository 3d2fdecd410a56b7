"""The inbox's signed digest (issue 46): a nullable column (no rewrite: existing rows keep
NULL, which a unique constraint never compares) and UNIQUE(source, signed_digest).

On PostgreSQL the constraint's index is built CONCURRENTLY, then attached to the
constraint: a large inbox keeps taking webhooks while it builds (a plain ADD CONSTRAINT
would block every insert until the index is done). Hence a non-atomic migration."""

from django.db import migrations, models

NAME = "inbox_unique_source_signed_digest"
CONSTRAINT = models.UniqueConstraint(fields=("source", "signed_digest"), name=NAME)


def add_constraint(apps, schema_editor):
    model = apps.get_model("receivers", "InboxEvent")
    if schema_editor.connection.vendor != "postgresql":
        schema_editor.add_constraint(model, CONSTRAINT)
        return
    table = schema_editor.quote_name(model._meta.db_table)
    name = schema_editor.quote_name(NAME)
    # A build that failed half-way leaves an invalid index of this name: drop it first.
    schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
    schema_editor.execute(
        f"CREATE UNIQUE INDEX CONCURRENTLY {name} ON {table} (source_id, signed_digest)"
    )
    schema_editor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} UNIQUE USING INDEX {name}")


def drop_constraint(apps, schema_editor):
    schema_editor.remove_constraint(apps.get_model("receivers", "InboxEvent"), CONSTRAINT)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("receivers", "0003_alter_source_scheme"),
    ]

    operations = [
        migrations.AddField(
            model_name="inboxevent",
            name="signed_digest",
            field=models.CharField(blank=True, editable=False, max_length=64, null=True),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddConstraint(model_name="inboxevent", constraint=CONSTRAINT)
            ],
            database_operations=[migrations.RunPython(add_constraint, drop_constraint)],
        ),
    ]
