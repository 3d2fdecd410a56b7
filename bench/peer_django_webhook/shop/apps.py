import os

from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "bench.peer_django_webhook.shop"
    label = "shop"

    def ready(self) -> None:
        # The bench scales every retry policy down by the same factor (--retry-scale):
        # django-webhook retries after a fixed 60 s (`default_retry_delay`), 5 times.
        from django_webhook.tasks import fire_webhook

        scale = float(os.environ.get("PEER_RETRY_SCALE", "1"))
        fire_webhook.default_retry_delay = 60 * scale
