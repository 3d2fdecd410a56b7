"""Settings, read from the environment (12-factor) with django-environ.

With no ``DATABASE_URL`` and no ``CELERY_BROKER_URL`` the project runs on an embedded
default: SQLite and Celery's in-process ``memory://`` broker, so ``make run`` works on a
machine with no servers. Every variable is listed in the README's configuration table.
"""

from pathlib import Path

import environ

from deliveries.conf import SETTINGS as DELIVERIES_SETTINGS
from receivers.conf import SETTINGS as RECEIVERS_SETTINGS
from webhooks_core.conf import SETTINGS as CORE_SETTINGS
from webhooks_core.conf import Setting
from webhooks_core.runtime.cooperative import patched
from webhooks_project.keys import INSECURE_DEFAULT_SECRET_KEY, refuse_unsafe_keys

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

env = environ.Env()
# A local .env is a convenience for development; the real environment always wins.
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

# The embedded default (no DATABASE_URL) is a development set-up, so DEBUG defaults on
# there; a deployment always sets DATABASE_URL and gets DEBUG off unless it asks.
DEBUG = env.bool("DEBUG", default="DATABASE_URL" not in env)
# INSECURE_DEFAULT_SECRET_KEY (webhooks_project/keys.py) serves only with DEBUG on.
SECRET_KEY = env.str("SECRET_KEY", default=INSECURE_DEFAULT_SECRET_KEY if DEBUG else "")
# Rotation: the old key goes here for as long as what it signed should stay valid.
SECRET_KEY_FALLBACKS = env.list("SECRET_KEY_FALLBACKS", default=[])
if not DEBUG:
    # Any process (gunicorn, Celery, manage.py, the image's CMD) stops here, listing every
    # problem, rather than serve with a missing, shipped or weak key.
    refuse_unsafe_keys(
        secret_key=SECRET_KEY,
        fallbacks=SECRET_KEY_FALLBACKS,
        encryption_key=env.str("WEBHOOKS_ENCRYPTION_KEY", default=""),
    )
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
    "webhooks_core",
    "deliveries",
    "receivers",
    # The examples: a shop that emits events, and payments fed by received webhooks.
    "examples.demo_shop.apps.DemoShopConfig",
    "examples.payments.apps.PaymentsConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # NUL in a query parameter or an unknown charset: 400, not a 500
    # (webhooks_core/web/middleware.py).
    "webhooks_core.web.middleware.BadRequestMiddleware",
    # A database outage is a 503 with Retry-After, not a 500 (webhooks_core/db/unavailable.py).
    "webhooks_core.db.unavailable.DatabaseUnavailableMiddleware",
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
# psycopg's prepare_threshold: any number lets PostgreSQL prepare our own statements on hot
# paths (an owner's lease, claim and look: webhooks_core/db/sql.py), on their first run; "none"
# prepares nothing (a transaction-mode PgBouncer older than 1.21 cannot keep prepared
# statements). The ORM's statements bind on the client and are never prepared.
DATABASE_PREPARE_THRESHOLD = env.str("DATABASE_PREPARE_THRESHOLD", default="5")
if USES_POSTGRES and DATABASE_PREPARE_THRESHOLD.strip().lower() != "none":
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = int(
        DATABASE_PREPARE_THRESHOLD
    )


def _runs_on_greenlets() -> bool:
    return patched("threading")


# The web process runs on gevent (Procfile): Django keeps a connection per thread, and there
# a "thread" is one request, so persistent connections would pile up until PostgreSQL
# refuses more. A pool shared by the process's greenlets bounds them instead; a request
# waits up to DATABASE_POOL_TIMEOUT for a free connection, then answers 503.
# The same holds for the gevent delivery worker (Procfile), whose tasks also give their
# connection back while their requests are out. DATABASE_POOL_MAX_SIZE > 0 turns the pool
# on in any process; 0 turns it off.
DATABASE_POOL_MAX_SIZE = env.int(
    "DATABASE_POOL_MAX_SIZE", default=10 if _runs_on_greenlets() else 0
)
if USES_POSTGRES and DATABASE_POOL_MAX_SIZE:
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps them open
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": DATABASE_POOL_MAX_SIZE,
        "timeout": env.float("DATABASE_POOL_TIMEOUT", default=10.0),
    }
    # Django's backend but for one thing: a pooled connection is checked by its socket,
    # not by an empty query per checkout (a round trip per owner's round; see
    # webhooks_core/db/postgresql/base.py). CONN_HEALTH_CHECKS on brings the query back.
    DATABASES["default"]["ENGINE"] = "webhooks_core.db.postgresql"
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.bool(
        "DATABASE_POOL_CHECK_BY_QUERY", default=False
    )

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
# With DEBUG off, plain http is redirected to https and browsers are told to keep to https
# (HSTS). Turn them off with SECURE_SSL_REDIRECT=false / SECURE_HSTS_SECONDS=0 behind a
# TLS-terminating proxy that does both itself, or on a plain-http test stack.
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
# Probes from inside the deployment (load balancer, container health checks) speak plain
# http to the process; they carry no credentials.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)

# --- Celery ---------------------------------------------------------------------------
# Settings with the CELERY_ prefix are read by webhooks_project/celery.py.
EMBEDDED_BROKER_URL = "memory://"
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=EMBEDDED_BROKER_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# One (disabled) result backend for the process: otherwise Celery builds one per thread,
# which in the gevent delivery worker means per task.
CELERY_RESULT_BACKEND_THREAD_SAFE = True
EMBEDDED_MODE = CELERY_BROKER_URL.startswith("memory://")

# At-least-once: the apps' tasks carry acks_late and reject_on_worker_lost themselves
# (webhooks_core/runtime/tasking.py); a worker should not hold messages it is not working on.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=60)
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=90)
# Task events feed Flower's task pages; the delivery worker runs without them (see the
# Procfile): publishing two events per task costs it CPU for no reader. Its heartbeats,
# which Flower shows worker health from, go out either way.
CELERY_WORKER_SEND_TASK_EVENTS = env.bool("CELERY_WORKER_SEND_TASK_EVENTS", default=True)
# A worker thread keeps its database connection between tasks: reconnecting for every task
# cost more than a batch of deliveries. Before each task, connections that are broken or
# older than CONN_MAX_AGE are still dropped (see celery.py); 0 closes after every task.
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)
if DATABASES["default"].get("OPTIONS", {}).get("pool"):
    # Pooled: every task gives its connection back (cheap), for the next task to take.
    CELERY_DB_REUSE_MAX = 0
# Publishing happens after commit; if the broker is unreachable, give up quickly: the row
# is already safe in the database and the sweeper dispatches it again later.
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
    # A gevent worker busy with hundreds of tasks may not read a reply for seconds; a read
    # that times out after Redis popped a message (BRPOP) loses that message until the
    # sweeper dispatches it again, so the delivery worker sets a longer one
    # (`DELIVERY_BROKER_SOCKET_TIMEOUT` in the Procfile).
    "socket_timeout": env.float("CELERY_BROKER_SOCKET_TIMEOUT", default=5.0),
    # Kombu's Redis connections per process (default 10): on gevent hundreds of tasks ack
    # at once, and an ack that finds no free connection fails ("Too many connections"),
    # leaving its message to come back after the visibility timeout.
    "max_connections": 1000 if _runs_on_greenlets() else 10,
    "socket_connect_timeout": 5,
}

# The apps' tasks name their own queues; this deployment's own task (the heartbeat) goes
# to the maintenance queue, which every worker of the Procfile consumes.
CELERY_TASK_DEFAULT_QUEUE = "webhooks.maintenance"
# The apps add their periodic tasks (sweepers, purge, reconciliation) themselves.
CELERY_BEAT_SCHEDULE = {
    "worker-heartbeat": {
        "task": "webhooks_project.tasks.heartbeat",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
}

# --- Flower ---------------------------------------------------------------------------
FLOWER_BASIC_AUTH = env.str("FLOWER_BASIC_AUTH", default="")

# --- Django REST framework ------------------------------------------------------------
# None: the API's views fix their own authentication, pagination, errors and schema.

# --- Logging --------------------------------------------------------------------------
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Portal link tokens never reach a log line (webhooks_project/accesslog.py; gunicorn's
    # access log is masked by its logger class there).
    "filters": {"redact_tokens": {"()": "webhooks_project.accesslog.RedactTokens"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "django.server": {
            "()": "django.utils.log.ServerFormatter",
            "format": "[{server_time}] {message}",
            "style": "{",
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["redact_tokens"],
        },
        # runserver's request lines (`make run`), as Django's default, masked.
        "django.server": {
            "class": "logging.StreamHandler",
            "formatter": "django.server",
            "filters": ["redact_tokens"],
        },
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        # Django's defaults give "django" a console handler of its own (DEBUG only) that
        # would print unmasked; here its records go to the root's handler alone.
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.server": {"handlers": ["django.server"], "level": "INFO", "propagate": False},
    },
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

# --- Observability --------------------------------------------------------------------
# Event data offloaded to storage (WEBHOOKS_PAYLOAD_OFFLOAD_BYTES) goes to STORAGES["default"]:
# the file system under MEDIA_ROOT (never served over HTTP here); point it at a
# django-storages backend in production.
MEDIA_ROOT = env.path("MEDIA_ROOT", default=str(VAR_DIR / "media"))


# --- The apps' settings (WEBHOOKS_*, RECEIVERS_*, METRICS_*) -----------------------------
# Their defaults live in the apps' registries (deliveries/conf.py, receivers/conf.py,
# webhooks_core/conf.py); this deployment sets from the environment those it finds there.
def _from_env(setting: Setting) -> object:
    if isinstance(setting.default, bool):
        return env.bool(setting.name)
    if isinstance(setting.default, int):
        return env.int(setting.name)
    if isinstance(setting.default, float):
        return env.float(setting.name)
    if isinstance(setting.default, tuple | list):
        return env.list(setting.name)
    return env.str(setting.name)


for _setting in (*CORE_SETTINGS, *DELIVERIES_SETTINGS, *RECEIVERS_SETTINGS):
    if _setting.name in env:
        globals()[_setting.name] = _from_env(_setting)
