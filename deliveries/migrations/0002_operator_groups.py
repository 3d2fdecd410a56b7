"""The two operator groups of the admin console: "operators" act, "viewers" only look.

Permissions are normally created after all migrations (post_migrate), so they are created
here first. "Reveal endpoint secrets" is in neither group: grant it to a person on purpose.
"""

from django.apps import apps as installed
from django.contrib.auth.management import create_permissions
from django.db import migrations

VIEW_MODELS = {
    "deliveries": ["endpoint", "event", "delivery", "deadletter", "attempt", "replay"],
    "receivers": ["source", "inboxevent"],
}
OPERATOR_PERMISSIONS = {
    "deliveries": [
        "change_endpoint",
        "change_delivery",
        "change_deadletter",
        "suspend_resume_endpoint",
        "rotate_endpoint_secret",
        "send_test_event",
        "run_replay",
    ],
}


def _ensure_permissions(apps):
    for app_config in apps.get_app_configs():
        # Historical app configs have no models module; create_permissions skips those.
        had = getattr(app_config, "models_module", None)
        app_config.models_module = had or True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = had


def _permissions(apps, codenames_by_app):
    Permission = apps.get_model("auth", "Permission")
    found = []
    for app_label, codenames in codenames_by_app.items():
        found += list(
            Permission.objects.filter(content_type__app_label=app_label, codename__in=codenames)
        )
    return found


def create_groups(apps, schema_editor):
    _ensure_permissions(apps)
    Group = apps.get_model("auth", "Group")
    view = {app: [f"view_{model}" for model in models] for app, models in VIEW_MODELS.items()}
    viewers, _ = Group.objects.get_or_create(name="viewers")
    viewers.permissions.add(*_permissions(apps, view))
    operators, _ = Group.objects.get_or_create(name="operators")
    operators.permissions.add(*_permissions(apps, view), *_permissions(apps, OPERATOR_PERMISSIONS))


def remove_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=["viewers", "operators"]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("deliveries", "0001_initial"),
        # The receiving side's view permissions, where it is installed (a host may send only).
        *([("receivers", "0001_initial")] if installed.is_installed("receivers") else []),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
