from django.apps import AppConfig


class WebhooksProjectConfig(AppConfig):
    name = "webhooks_project"
    verbose_name = "Webhooks platform"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib import admin

        from . import checks  # noqa: F401  (registers the system checks)

        # The admin index links to the dashboard (admin/dashboard/, see urls.py).
        admin.site.index_template = "deliveries/admin_index.html"
