from importlib import import_module

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class DeliveriesConfig(AppConfig):
    name = "deliveries"
    verbose_name = "Outbound webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core import checks as django_checks
        from django.db.models.signals import post_delete, post_save

        from deliveries import checks, conf, gauges, tasks  # noqa: F401
        from deliveries.models import Endpoint
        from deliveries.pipeline import fanout
        from deliveries.polling import records as polling_records
        from deliveries.portal.checks import check_tenant_resolver
        from webhooks_core import checks as core_checks  # noqa: F401  (registers the checks)
        from webhooks_core import conf as core_conf
        from webhooks_core.runtime import tasking
        from webhooks_core.web import metrics as core_metrics

        for changed in (post_save, post_delete):
            changed.connect(fanout.forget_many_endpoints, sender=Endpoint, weak=False)
        django_checks.register(check_tenant_resolver)
        core_conf.register(self.name, conf.SETTINGS)
        core_metrics.register_gauges(self.name, gauges.collector)
        core_metrics.register_gauges(f"{self.name}.polling", polling_records.collector)
        core_metrics.register_label_filter("endpoint", gauges.live_endpoints)

        # Event types are declared at import time: every installed app's `webhook_events`
        # module, then the modules listed in WEBHOOKS_EVENT_TYPE_MODULES.
        autodiscover_modules("webhook_events")
        for module in conf.get().event_type_modules:
            import_module(module)
        tasking.install_on_current_app()
