from django.apps import AppConfig


class WebhooksCoreConfig(AppConfig):
    """The ground floor both sides stand on: API tokens, the audit log, the settings
    registry, the system checks and the operational views. A host installs it beside
    ``deliveries``, ``receivers`` or both."""

    name = "webhooks_core"
    verbose_name = "Webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from webhooks_core.runtime import tasking

        tasking.install_on_current_app()
