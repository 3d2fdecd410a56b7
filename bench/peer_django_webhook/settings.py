"""Settings of the peer project: its own PostgreSQL database and Redis database, from the
environment that `bench.peer_side` sets (PEER_DATABASE_URL, PEER_BROKER_URL)."""

import os
from urllib.parse import urlsplit

_db = urlsplit(os.environ.get("PEER_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/peer"))

SECRET_KEY = "peer-bench-" + "x" * 40
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_webhook",
    "bench.peer_django_webhook.shop",
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _db.path.lstrip("/"),
        "USER": _db.username or "postgres",
        "PASSWORD": _db.password or "",
        "HOST": _db.hostname or "127.0.0.1",
        "PORT": str(_db.port or 5432),
    }
}
# django-webhook sends a webhook on every save of these models (its documented setting).
DJANGO_WEBHOOK = {"MODELS": ["shop.Order"], "STORE_EVENTS": True, "USE_CACHE": True}

CELERY_BROKER_URL = os.environ.get("PEER_BROKER_URL", "redis://127.0.0.1:6379/5")
CELERY_TASK_DEFAULT_QUEUE = "peer.webhooks"
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 7200}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
LOGGING = {"version": 1, "root": {"level": "ERROR"}}
