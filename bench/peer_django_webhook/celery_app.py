"""The peer's Celery app: `celery -A bench.peer_django_webhook.celery_app worker`."""

import os

import django
from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.peer_django_webhook.settings")
# django-webhook's tasks bind to the current app when imported, so the app comes first.
app = Celery("peer")
app.config_from_object("django.conf:settings", namespace="CELERY")
django.setup()
app.autodiscover_tasks(["django_webhook"])
