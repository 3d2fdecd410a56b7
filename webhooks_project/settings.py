"""Settings, read from the environment (12-factor) with django-environ.

With no ``DATABASE_URL`` and no ``CELERY_BROKER_URL`` the project runs on an embedded
default: SQLite and Celery's in-process ``memory://`` broker, so ``make run`` works on a
machine with no servers. Every variable is listed in the README's configuration table.
"""

import sys
from pathlib import Path

import django_stubs_ext
import environ

# Lets Django's generic classes be subscripted at run time (ModelAdmin[Endpoint]).
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

env = environ.Env()
# A local .env is a convenience for development; the real environment always wins.
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

# Used only when DEBUG is on; the `webhooks.E001` system check refuses it otherwise.
INSECURE_DEFAULT_SECRET_KEY = "django-insecure-dev-only-do-not-use-in-production"  # noqa: S105

# The embedded default (no DATABASE_URL) is a development set-up, so DEBUG defaults on
# there; a deployment always sets DATABASE_URL and gets DEBUG off unless it asks.
DEBUG = env.bool("DEBUG", default="DATABASE_URL" not in env)
SECRET_KEY = env.str("SECRET_KEY", default=INSECURE_DEFAULT_SECRET_KEY)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "webhooks_project.apps.WebhooksProjectConfig",
    "deliveries.apps.DeliveriesConfig",
    "receivers.apps.ReceiversConfig",
    "demo_shop.apps.DemoShopConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # NUL in a query parameter or an unknown charset: 400, not a 500 (deliveries/middleware.py).
    "deliveries.middleware.BadRequestMiddleware",
    # A database outage is a 503 with Retry-After, not a 500 (webhooks_project/unavailable.py).
    "webhooks_project.unavailable.DatabaseUnavailableMiddleware",
    # Serves the admin's static files under gunicorn, without a separate web server.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "webhooks_project.urls"
WSGI_APPLICATION = "webhooks_project.wsgi.application"
ASGI_APPLICATION = "webhooks_project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------
EMBEDDED_DATABASE_URL = f"sqlite:///{VAR_DIR / 'db.sqlite3'}"
DATABASES = {"default": env.db_url("DATABASE_URL", default=EMBEDDED_DATABASE_URL)}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default shares one file between the web thread and the in-process
    # worker; wait for the lock instead of failing at once.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    # Writers take the lock when their transaction begins, so they queue on the timeout
    # above instead of failing with "database is locked" when a read turns into a write.
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    VAR_DIR.mkdir(exist_ok=True)
USES_POSTGRES = DATABASES["default"]["ENGINE"].startswith("django.db.backends.postgresql")


def _runs_on_greenlets() -> bool:
    # gevent.monkey is imported by whoever patched (gunicorn's gevent worker); checking
    # sys.modules first keeps every other process from importing gevent at all.
    monkey = sys.modules.get("gevent.monkey")
    return bool(monkey is not None and monkey.is_module_patched("threading"))


# The web process runs on gevent (Procfile): Django keeps a connection per thread, and there
# a "thread" is one request, so persistent connections would pile up until PostgreSQL
# refuses more. A pool shared by the process's greenlets bounds them instead; a request
# waits up to DATABASE_POOL_TIMEOUT for a free connection, then answers 503.
if USES_POSTGRES and _runs_on_greenlets():
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps them open
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": env.int("DATABASE_POOL_MAX_SIZE", default=10),
        "timeout": env.float("DATABASE_POOL_TIMEOUT", default=10.0),
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=str(VAR_DIR / "static"))
# Without `collectstatic` (development, tests) WhiteNoise finds the files in the apps.
WHITENOISE_USE_FINDERS = True

EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="webhooks@localhost")

# --- Security (production) ------------------------------------------------------------
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)

# --- Celery ---------------------------------------------------------------------------
# Settings with the CELERY_ prefix are read by webhooks_project/celery.py.
EMBEDDED_BROKER_URL = "memory://"
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=EMBEDDED_BROKER_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
EMBEDDED_MODE = CELERY_BROKER_URL.startswith("memory://")

# At-least-once: a task is acknowledged only after it ran, and a task whose worker died
# is given back to the broker. Every task is idempotent (it claims a row first).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=60)
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=90)
CELERY_WORKER_SEND_TASK_EVENTS = True
# A worker thread keeps its database connection between tasks: reconnecting for every task
# cost more than a batch of deliveries. Before each task, connections that are broken or
# older than CONN_MAX_AGE are still dropped (see celery.py); 0 closes after every task.
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)
# Publishing happens after commit; if the broker is unreachable, give up quickly: the row
# is already safe in the database and the sweeper enqueues it later.
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.5,
}
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]

# Redis redelivers an unacknowledged message (including one waiting for its countdown)
# after visibility_timeout. Countdowns never exceed WEBHOOKS_MAX_COUNTDOWN_SECONDS, far
# below this, so a retry waiting in a worker is never delivered twice by the broker.
CELERY_BROKER_VISIBILITY_TIMEOUT = env.int("CELERY_BROKER_VISIBILITY_TIMEOUT", default=3600)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": CELERY_BROKER_VISIBILITY_TIMEOUT,
    "socket_timeout": 5,
    "socket_connect_timeout": 5,
}

QUEUE_FANOUT = "webhooks.fanout"
QUEUE_DELIVERY = "webhooks.delivery"
QUEUE_INBOX = "webhooks.inbox"
QUEUE_MAINTENANCE = "webhooks.maintenance"
CELERY_TASK_DEFAULT_QUEUE = QUEUE_MAINTENANCE
CELERY_TASK_ROUTES = {
    "deliveries.tasks.fan_out_event": {"queue": QUEUE_FANOUT},
    "deliveries.tasks.fan_out_events": {"queue": QUEUE_FANOUT},
    "deliveries.tasks.deliver": {"queue": QUEUE_DELIVERY},
    "deliveries.tasks.deliver_batch": {"queue": QUEUE_DELIVERY},
    "receivers.tasks.*": {"queue": QUEUE_INBOX},
}
WEBHOOKS_SWEEP_INTERVAL_SECONDS = env.float("WEBHOOKS_SWEEP_INTERVAL_SECONDS", default=15.0)
CELERY_BEAT_SCHEDULE = {
    "deliveries-sweep": {
        "task": "deliveries.tasks.sweep",
        "schedule": WEBHOOKS_SWEEP_INTERVAL_SECONDS,
        "options": {"expires": WEBHOOKS_SWEEP_INTERVAL_SECONDS},
    },
    "worker-heartbeat": {
        "task": "webhooks_project.tasks.heartbeat",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
}

# --- Flower ---------------------------------------------------------------------------
FLOWER_BASIC_AUTH = env.str("FLOWER_BASIC_AUTH", default="")

# --- Django REST framework ------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["deliveries.api.authentication.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "deliveries.api.pagination.NextLinkPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "deliveries.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Reliable webhooks API",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
}

# --- Logging --------------------------------------------------------------------------
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}
# Structured logs (webhooks_project/logs.py): JSON lines in production, readable in DEBUG.
LOG_FORMAT = env.str("LOG_FORMAT", default="console" if DEBUG else "json")
LOGGING["formatters"]["structured"] = {  # type: ignore[index]
    "()": "webhooks_project.logs.build_formatter",
    "renderer": LOG_FORMAT,
}
LOGGING["handlers"]["console"]["formatter"] = "structured"  # type: ignore[index]
# Workers log through the same configuration instead of Celery replacing the root logger.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# --- Observability (issue 8): /metrics, retention -------------------------------------
# /metrics answers a bearer token or a client address in the allow-list (IPs or CIDRs).
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
METRICS_ALLOWED_IPS = env.list("METRICS_ALLOWED_IPS", default=[])
WEBHOOKS_EVENT_RETENTION_DAYS = env.int("WEBHOOKS_EVENT_RETENTION_DAYS", default=30)
WEBHOOKS_ATTEMPT_RETENTION_DAYS = env.int("WEBHOOKS_ATTEMPT_RETENTION_DAYS", default=30)
WEBHOOKS_PURGE_BATCH_SIZE = env.int("WEBHOOKS_PURGE_BATCH_SIZE", default=1000)
WEBHOOKS_PURGE_INTERVAL_SECONDS = env.float("WEBHOOKS_PURGE_INTERVAL_SECONDS", default=600.0)
# Event data whose compact JSON is larger than this many bytes is written through Django's
# storage API (STORAGES[WEBHOOKS_PAYLOAD_STORAGE]); the row keeps a reference and a hash.
WEBHOOKS_PAYLOAD_OFFLOAD_BYTES = env.int("WEBHOOKS_PAYLOAD_OFFLOAD_BYTES", default=65536)
WEBHOOKS_PAYLOAD_STORAGE = env.str("WEBHOOKS_PAYLOAD_STORAGE", default="default")
# The "default" storage is the file system under MEDIA_ROOT (never served over HTTP here);
# point STORAGES["default"] at a django-storages backend in production.
MEDIA_ROOT = env.path("MEDIA_ROOT", default=str(VAR_DIR / "media"))
CELERY_BEAT_SCHEDULE["deliveries-purge"] = {
    "task": "deliveries.tasks.purge",
    "schedule": WEBHOOKS_PURGE_INTERVAL_SECONDS,
    "options": {"expires": WEBHOOKS_PURGE_INTERVAL_SECONDS},
}

# --- Webhooks (sending side); read through deliveries/conf.py --------------------------
WEBHOOKS_ENCRYPTION_KEY = env.str("WEBHOOKS_ENCRYPTION_KEY", default="")
WEBHOOKS_MAX_COUNTDOWN_SECONDS = env.float("WEBHOOKS_MAX_COUNTDOWN_SECONDS", default=60.0)
WEBHOOKS_LEASE_SECONDS = env.float("WEBHOOKS_LEASE_SECONDS", default=120.0)
WEBHOOKS_DELIVERY_BATCH_SIZE = env.int("WEBHOOKS_DELIVERY_BATCH_SIZE", default=50)
WEBHOOKS_DELIVERY_BATCH_SECONDS = env.float("WEBHOOKS_DELIVERY_BATCH_SECONDS", default=5.0)
WEBHOOKS_FANOUT_GRACE_SECONDS = env.float("WEBHOOKS_FANOUT_GRACE_SECONDS", default=30.0)
WEBHOOKS_REQUEUE_GRACE_SECONDS = env.float("WEBHOOKS_REQUEUE_GRACE_SECONDS", default=120.0)
WEBHOOKS_SWEEP_BATCH_SIZE = env.int("WEBHOOKS_SWEEP_BATCH_SIZE", default=500)
# Operator console (issue 5): events per replay batch; stalled replays resume with the sweeps.
WEBHOOKS_REPLAY_BATCH_SIZE = env.int("WEBHOOKS_REPLAY_BATCH_SIZE", default=500)
CELERY_BEAT_SCHEDULE["deliveries-resume-stalled-replays"] = {
    "task": "deliveries.tasks.resume_stalled_replays",
    "schedule": WEBHOOKS_SWEEP_INTERVAL_SECONDS,
    "options": {"expires": WEBHOOKS_SWEEP_INTERVAL_SECONDS},
}

# Event-type catalogue: emit() refuses types nobody declared (off: they pass unchecked).
WEBHOOKS_REQUIRE_DECLARED_TYPES = env.bool("WEBHOOKS_REQUIRE_DECLARED_TYPES", default=True)
# Modules declaring event types, besides every installed app's `webhook_events` module.
WEBHOOKS_EVENT_TYPE_MODULES = env.list("WEBHOOKS_EVENT_TYPE_MODULES", default=[])

# --- Webhooks: endpoint health and isolation; read through deliveries/conf.py ---------
# SSRF guard: only public addresses, plus these networks (the embedded demo allows loopback).
WEBHOOKS_ALLOWED_NETWORKS = env.list(
    "WEBHOOKS_ALLOWED_NETWORKS", default=["127.0.0.0/8", "::1"] if DEBUG else []
)
WEBHOOKS_REQUIRE_HTTPS = env.bool("WEBHOOKS_REQUIRE_HTTPS", default=not DEBUG)
WEBHOOKS_SUSPEND_AFTER_FAILURES = env.int("WEBHOOKS_SUSPEND_AFTER_FAILURES", default=20)
WEBHOOKS_SUSPEND_WINDOW_SECONDS = env.float("WEBHOOKS_SUSPEND_WINDOW_SECONDS", default=3600.0)
WEBHOOKS_BREAKER_ERROR_RATE = env.float("WEBHOOKS_BREAKER_ERROR_RATE", default=0.5)
WEBHOOKS_BREAKER_MIN_ATTEMPTS = env.int("WEBHOOKS_BREAKER_MIN_ATTEMPTS", default=10)
WEBHOOKS_BREAKER_WINDOW_SECONDS = env.float("WEBHOOKS_BREAKER_WINDOW_SECONDS", default=300.0)
WEBHOOKS_BREAKER_COOLDOWN_SECONDS = env.float("WEBHOOKS_BREAKER_COOLDOWN_SECONDS", default=30.0)
WEBHOOKS_BREAKER_RAMP_SECONDS = env.float("WEBHOOKS_BREAKER_RAMP_SECONDS", default=60.0)
WEBHOOKS_ENDPOINT_MAX_IN_FLIGHT = env.int("WEBHOOKS_ENDPOINT_MAX_IN_FLIGHT", default=4)
WEBHOOKS_ENDPOINT_RATE_LIMIT = env.int("WEBHOOKS_ENDPOINT_RATE_LIMIT", default=0)
WEBHOOKS_GLOBAL_RATE_LIMIT = env.int("WEBHOOKS_GLOBAL_RATE_LIMIT", default=0)
WEBHOOKS_DEFER_SECONDS = env.float("WEBHOOKS_DEFER_SECONDS", default=1.0)
# Shared counters (in-flight slots, rate limits, breaker windows); the broker's Redis by
# default, in-process memory when there is no Redis (embedded mode: one process).
WEBHOOKS_HEALTH_REDIS_URL = env.str(
    "WEBHOOKS_HEALTH_REDIS_URL",
    default=CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else "",
)

# --- Webhooks (receiving side); read through receivers/conf.py -------------------------
RECEIVERS_MAX_ATTEMPTS = env.int("RECEIVERS_MAX_ATTEMPTS", default=10)
RECEIVERS_BACKOFF_BASE_SECONDS = env.float("RECEIVERS_BACKOFF_BASE_SECONDS", default=10.0)
RECEIVERS_BACKOFF_MAX_SECONDS = env.float("RECEIVERS_BACKOFF_MAX_SECONDS", default=3600.0)
RECEIVERS_LEASE_SECONDS = env.float("RECEIVERS_LEASE_SECONDS", default=300.0)
RECEIVERS_REQUEUE_GRACE_SECONDS = env.float("RECEIVERS_REQUEUE_GRACE_SECONDS", default=60.0)
RECEIVERS_BODY_RETENTION_DAYS = env.int("RECEIVERS_BODY_RETENTION_DAYS", default=30)
RECEIVERS_INBOX_RETENTION_DAYS = env.int("RECEIVERS_INBOX_RETENTION_DAYS", default=90)
RECEIVERS_ENQUEUE_BATCH_SIZE = env.int("RECEIVERS_ENQUEUE_BATCH_SIZE", default=20)
RECEIVERS_HANDLER_MODULES = env.list(
    "RECEIVERS_HANDLER_MODULES", default=["receivers.example.handlers"]
)
RECEIVERS_RECONCILE_INTERVAL_SECONDS = env.float(
    "RECEIVERS_RECONCILE_INTERVAL_SECONDS", default=300.0
)
CELERY_BEAT_SCHEDULE["receivers-sweep"] = {
    "task": "receivers.tasks.sweep",
    "schedule": WEBHOOKS_SWEEP_INTERVAL_SECONDS,
    "options": {"expires": WEBHOOKS_SWEEP_INTERVAL_SECONDS, "queue": QUEUE_MAINTENANCE},
}
CELERY_BEAT_SCHEDULE["receivers-reconcile"] = {
    "task": "receivers.tasks.reconcile_all",
    "schedule": RECEIVERS_RECONCILE_INTERVAL_SECONDS,
    "options": {"expires": RECEIVERS_RECONCILE_INTERVAL_SECONDS, "queue": QUEUE_MAINTENANCE},
}
