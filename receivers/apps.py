from importlib import import_module

from django.apps import AppConfig


class ReceiversConfig(AppConfig):
    name = "receivers"
    verbose_name = "Inbound webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks, conf  # noqa: F401 (importing registers the system checks)

        # Importing a handler module runs its @inbox_handler decorators.
        for module in conf.get().handler_modules:
            import_module(module)
