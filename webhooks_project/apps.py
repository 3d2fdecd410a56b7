from django.apps import AppConfig


class WebhooksProjectConfig(AppConfig):
    name = "webhooks_project"
    verbose_name = "Webhooks platform"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
