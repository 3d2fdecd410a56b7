from django.apps import AppConfig


class PaymentsConfig(AppConfig):
    name = "examples.payments"
    label = "payments"
    verbose_name = "Payments (receiving example)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Its handlers (and its reconciler) register themselves on import; the reference
        # deployment also names the module in RECEIVERS_HANDLER_MODULES.
        from . import handlers  # noqa: F401
