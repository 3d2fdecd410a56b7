from django.apps import AppConfig


class ReceiversConfig(AppConfig):
    name = "receivers"
    verbose_name = "Inbound webhooks"
    default_auto_field = "django.db.models.BigAutoField"
