from importlib import import_module

from django.apps import AppConfig


class ReceiversConfig(AppConfig):
    name = "receivers"
    verbose_name = "Inbound webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from receivers import checks, conf, gauges, tasks  # noqa: F401
        from webhooks_core import checks as core_checks  # noqa: F401  (registers the checks)
        from webhooks_core import conf as core_conf
        from webhooks_core.runtime import tasking
        from webhooks_core.web import metrics as core_metrics

        core_conf.register(self.name, conf.SETTINGS)
        core_metrics.register_gauges(self.name, gauges.collector)

        # Importing a handler module runs its @inbox_handler decorators.
        for module in conf.get().handler_modules:
            import_module(module)
        tasking.install_on_current_app()
