"""The operator groups read polls as they read attempts: "view poll record" for "viewers"
and "operators" (deliveries/migrations/0002_operator_groups.py made the groups)."""

import importlib

from django.db import migrations

VIEW = ["view_pollrecord"]


def grant(apps, schema_editor):
    # The permission is normally created after all migrations (post_migrate).
    importlib.import_module("deliveries.migrations.0002_operator_groups")._ensure_permissions(apps)
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    found = list(Permission.objects.filter(content_type__app_label="deliveries", codename__in=VIEW))
    for group in Group.objects.filter(name__in=["viewers", "operators"]):
        group.permissions.add(*found)


def revoke(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    found = list(Permission.objects.filter(content_type__app_label="deliveries", codename__in=VIEW))
    for group in Group.objects.filter(name__in=["viewers", "operators"]):
        group.permissions.remove(*found)


class Migration(migrations.Migration):
    dependencies = [("deliveries", "0003_pull_delivery")]

    operations = [migrations.RunPython(grant, revoke)]
