"""Generated documentation pages: the configuration reference and the OpenAPI schema.

    python -m webhooks_project.docsgen           # rewrite docs/configuration.md, docs/api/openapi.yaml
    python -m webhooks_project.docsgen --check   # exit 1 if a committed page differs (CI, tests)

The configuration reference is rendered from the apps' settings registries
(``deliveries.conf.SETTINGS``, ``receivers.conf.SETTINGS`` and ``webhooks_core.conf.SETTINGS``:
the ``Setting(name, default, doc)`` entries declared on the typed views the code reads), so a
setting's name, default and meaning are written once, beside the code that reads it. The reference deployment's own variables come
from ``webhooks_project/settings.py``: their names are read from its source, so a variable
added there without a line here stops the generator.

The schema is the one the server serves at ``GET /api/v1/schema``, taken from that view.
"""

import argparse
import ast
import importlib
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_SOURCE = ROOT / "webhooks_project" / "settings.py"
PROCFILE = ROOT / "Procfile"
CONFIGURATION_PAGE = ROOT / "docs" / "configuration.md"
SCHEMA_FILE = ROOT / "docs" / "api" / "openapi.yaml"

REGISTRIES = (
    ("Sending (`deliveries`)", "deliveries.conf"),
    ("Receiving (`receivers`)", "receivers.conf"),
    ("Shared (`webhooks_core`)", "webhooks_core.conf"),
)


# The reference deployment's own variables (webhooks_project/settings.py), besides the
# apps' settings above: name -> (default, meaning). The generator refuses to run when
# settings.py reads a variable missing here, or this lists one it no longer reads.
DEPLOYMENT: dict[str, tuple[str, str]] = {
    "DATABASE_URL": (
        "SQLite in `var/db.sqlite3`",
        "e.g. `postgres://user:pass@host:5432/db` (psycopg 3).",
    ),
    "DATABASE_CONN_MAX_AGE": (
        "`60`",
        "Seconds a database connection is reused (always 0 on SQLite; unused under gevent,"
        " where a pool keeps the connections).",
    ),
    "DATABASE_POOL_MAX_SIZE": (
        "`10` under gevent (the `web` and `delivery` processes), else `0`",
        "Connections in each process's psycopg pool (Django's `OPTIONS[\"pool\"]`), shared by its greenlets; a delivery task gives its connection back while its requests are out. `0`: no pool.",
    ),
    "DATABASE_POOL_TIMEOUT": (
        "`10.0`",
        "Seconds a request or task waits for a pooled connection (a request then answers 503; a task fails and its rows wait for the sweeper).",
    ),
    "DATABASE_POOL_CHECK_BY_QUERY": (
        "`false`",
        "With a pool: `true` has Django check every connection taken from it by an empty query (a round trip each time); `false` checks it by its socket, and runs the query only when the server has closed the connection or sent something (`webhooks_core.db.postgresql`; see [the delivery worker](operations/deployment.md#the-delivery-worker)).",
    ),
    "DATABASE_PREPARE_THRESHOLD": (
        "`5`",
        "PostgreSQL: psycopg's `prepare_threshold` (Django's `OPTIONS[\"prepare_threshold\"]`). Any number lets PostgreSQL prepare our own statements on hot paths (an owner's lease, claim and look; a fan-out's mark) on their first run once PostgreSQL has analysed the tables they read, once per connection; the ORM's statements are never prepared. `none`: nothing is prepared, for a transaction-mode PgBouncer older than 1.21, which cannot keep prepared statements.",
    ),
    "CELERY_BROKER_URL": ("`memory://` (in-process)", "e.g. `redis://host:6379/0`."),
    "CELERY_BROKER_VISIBILITY_TIMEOUT": (
        "`3600`",
        "Seconds before Redis redelivers an unacknowledged message; must exceed every countdown (`WEBHOOKS_MAX_COUNTDOWN_SECONDS`).",
    ),
    "CELERY_TASK_SOFT_TIME_LIMIT": ("`60`", "Soft time limit of a task, in seconds."),
    "CELERY_TASK_TIME_LIMIT": ("`90`", "Hard time limit of a task, in seconds."),
    "CELERY_BROKER_SOCKET_TIMEOUT": (
        "`5`",
        "Seconds before a read from the broker's Redis times out.",
    ),
    "CELERY_WORKER_SEND_TASK_EVENTS": (
        "`true`",
        "Workers publish task events (Flower's task pages); the `delivery` process runs without them (`DELIVERY_TASK_EVENTS`), its heartbeats still go out.",
    ),
    "CELERY_DB_REUSE_MAX": (
        "`1000`",
        "A worker thread keeps its database connection across this many tasks (one broken or older than `DATABASE_CONN_MAX_AGE` is still dropped before each task); `0` reconnects for every task.",
    ),
    "SECRET_KEY": (
        "a development key (DEBUG only)",
        "With DEBUG off every process refuses to start when it is missing, a placeholder this repository ships, or weak (under 50 characters or under 5 distinct ones); see [Security](security.md).",
    ),
    "SECRET_KEY_FALLBACKS": (
        "empty",
        "Comma-separated earlier keys that still verify what they signed, while you rotate `SECRET_KEY` (checked like it).",
    ),
    "SECURE_SSL_REDIRECT": (
        "on outside DEBUG",
        "Redirect plain http to https (`/healthz` and `/readyz` excepted); `false` behind a TLS proxy that redirects itself, or on a plain-http stack.",
    ),
    "SECURE_HSTS_SECONDS": (
        "`31536000` outside DEBUG, else `0`",
        "`Strict-Transport-Security` max-age on https responses; `0` sends none.",
    ),
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": ("`false`", "Add `includeSubDomains` to HSTS."),
    "SECURE_HSTS_PRELOAD": ("`false`", "Add `preload` to HSTS."),
    "DEBUG": (
        "on without `DATABASE_URL`, else off",
        "`check --deploy` refuses it (`webhooks.E003`).",
    ),
    "ALLOWED_HOSTS": ("`localhost,127.0.0.1,[::1]`", "Comma-separated host names."),
    "CSRF_TRUSTED_ORIGINS": ("empty", "Comma-separated origins, for the admin behind a proxy."),
    "SESSION_COOKIE_SECURE": ("on outside DEBUG", "Session cookie over HTTPS only."),
    "CSRF_COOKIE_SECURE": ("on outside DEBUG", "CSRF cookie over HTTPS only."),
    "STATIC_ROOT": (
        "`var/static`",
        "Where `collectstatic` puts the admin's static files (WhiteNoise serves them).",
    ),
    "MEDIA_ROOT": (
        "`var/media`",
        "Where the file-system storage writes (offloaded payloads under `webhook-payloads/`; never served over HTTP).",
    ),
    "EMAIL_BACKEND": (
        "console backend",
        "Django email backend for endpoint owners' notifications.",
    ),
    "DEFAULT_FROM_EMAIL": ("`webhooks@localhost`", "Sender of those notifications."),
    "FLOWER_BASIC_AUTH": (
        "none (the Procfile requires it)",
        "`user:password` for Flower (several comma-separated); Flower refuses to start without it, with a shipped password, or one under 12 characters.",
    ),
    "LOG_LEVEL": ("`INFO`", "Root log level."),
    "LOG_FORMAT": (
        "`json` (`console` in DEBUG)",
        "`json`: one JSON object per line; `console`: aligned `key=value` for people.",
    ),
}
# Read by other parts of the deployment than settings.py.
OTHER_VARIABLES: dict[str, tuple[str, str]] = {
    "PROMETHEUS_MULTIPROC_DIR": (
        "unset (one-process counters)",
        "An existing, writable directory shared by every web and worker process of the host; set it before they start, so `/metrics` adds up all their counters (read by prometheus-client).",
    ),
    "DJANGO_SUPERUSER_USERNAME": (
        "`admin`",
        "First superuser created by `make run` (`manage.py serve`).",
    ),
    "DJANGO_SUPERUSER_PASSWORD": ("generated, printed once", "Its password."),
}
# Variables the Procfile reads (`${NAME:-default}`).
PROCFILE_VARIABLES: dict[str, str] = {
    "PORT": "Port of the `web` process.",
    "WEB_CONCURRENCY": "gunicorn gevent worker processes of `web` (2): one core each at most, so "
    "the cores the web tier has ([scaling](operations/deployment.md#queues-and-scaling)).",
    "CELERY_CONCURRENCY": "Threads of the `worker` process.",
    "DELIVERY_CONCURRENCY": "Tasks the gevent `delivery` process runs at once.",
    "DELIVERY_BROKER_SOCKET_TIMEOUT": "`CELERY_BROKER_SOCKET_TIMEOUT` of the `delivery` process (30).",
    "DELIVERY_POOL_TIMEOUT": "`DATABASE_POOL_TIMEOUT` of the `delivery` process (60): an owner that cannot record its sent requests would send them again after its lease.",
    "DELIVERY_TASK_EVENTS": "`CELERY_WORKER_SEND_TASK_EVENTS` of the `delivery` process (false: two events per task were a sixth of its CPU).",
    "CELERY_BEAT_SCHEDULE_FILE": "Where `beat` keeps its schedule state.",
    "FLOWER_PORT": "Port of Flower.",
    "FLOWER_BASIC_AUTH": "`user:password` for Flower (required, 12+ character passwords).",
}


def _registry(module_name: str) -> Sequence[Any] | None:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            return None  # that package does not exist (yet)
        raise
    return tuple(module.SETTINGS)


def library_settings() -> list[tuple[str, Sequence[Any]]]:
    sections = []
    for title, module_name in REGISTRIES:
        entries = _registry(module_name)
        if entries:
            sections.append((title, entries))
    return sections


def _env_reads(source: str) -> dict[str, ast.expr | None]:
    """Variables settings.py reads from the environment, with their default expressions."""
    reads: dict[str, ast.expr | None] = {}
    # In source order (ast.walk goes breadth first).
    nodes = sorted(ast.walk(ast.parse(source)), key=lambda n: getattr(n, "lineno", 0))
    for node in nodes:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "env"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            reads[node.args[0].value] = default
        elif (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Constant)
            and isinstance(node.left.value, str)
            and any(isinstance(c, ast.Name) and c.id == "env" for c in node.comparators)
        ):
            reads.setdefault(node.left.value, None)
    return reads


def _settings_source() -> str:
    return SETTINGS_SOURCE.read_text()


def _procfile_reads(text: str) -> set[str]:
    return set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", text))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(value: object) -> str:
    if isinstance(value, list):
        value = tuple(value)
    text = repr(value)
    if " at 0x" in text:  # a function or an object: its address would change every run
        text = getattr(value, "__qualname__", type(value).__qualname__)
    return f"`{_cell(text)}`"


def _normalised(value: object) -> object:
    return tuple(value) if isinstance(value, list | tuple) else value


def render_configuration() -> str:
    sections = library_settings()
    library = {s.name: s for _, entries in sections for s in entries}
    reads = _env_reads(_settings_source())
    # settings.py reads every registry setting from the environment (its loop over
    # webhooks_core.conf.all_settings()), with the registry's default.
    for name in library:
        reads.setdefault(name, None)
    deployment_names = set(reads) - set(library)
    missing = sorted(deployment_names - set(DEPLOYMENT))
    stale = sorted(set(DEPLOYMENT) - deployment_names)
    if missing or stale:
        raise SystemExit(
            "webhooks_project/docsgen.py DEPLOYMENT is out of date with settings.py: "
            f"undocumented {missing}, no longer read {stale}"
        )
    procfile_missing = sorted(_procfile_reads(PROCFILE.read_text()) - set(PROCFILE_VARIABLES))
    if procfile_missing:
        raise SystemExit(f"webhooks_project/docsgen.py: undocumented Procfile {procfile_missing}")

    out = [
        "<!-- Generated by `python -m webhooks_project.docsgen` from the apps' settings",
        "     registries and webhooks_project/settings.py: edit those, not this page. -->",
        "# Configuration",
        "",
        "## Settings of the apps",
        "",
        "The `deliveries` and `receivers` apps read these Django settings, each with the",
        "default below when your settings module does not define it. In this repository's",
        "reference deployment each of them can be set as an environment variable of the same",
        "name (see [below](#reference-deployment)).",
        "",
    ]
    for title, entries in sections:
        out += [f"### {title}", "", "| setting | default | meaning |", "| --- | --- | --- |"]
        out += [f"| `{s.name}` | {_code(s.default)} | {_cell(s.doc)} |" for s in entries]
        out.append("")

    not_from_env = sorted(set(library) - set(reads))
    differing = []
    for name, expr in sorted(reads.items()):
        if name not in library or expr is None:
            continue
        try:
            value = ast.literal_eval(expr)
        except ValueError:
            differing.append((name, ast.unparse(expr)))
            continue
        if _normalised(value) != _normalised(library[name].default):
            differing.append((name, repr(value)))

    out += [
        "## Reference deployment",
        "",
        "`webhooks_project/settings.py` (what `make run`, the `Procfile` and",
        "`docker-compose.yml` run) reads everything from the environment (12-factor, with",
        "django-environ); a `.env` file in the project root is read too, and the real",
        "environment wins.",
        "",
    ]
    if differing:
        out += [
            "### Defaults it sets differently",
            "",
            "| setting | default there |",
            "| --- | --- |",
        ]
        out += [f"| `{name}` | `{_cell(expr)}` |" for name, expr in differing]
        out.append("")
    if not_from_env:
        out += [
            "Not read from the environment there: "
            + ", ".join(f"`{n}`" for n in not_from_env)
            + ".",
            "",
        ]
    out += [
        "### Its own variables",
        "",
        "| variable | default | meaning |",
        "| --- | --- | --- |",
    ]
    for name in sorted(DEPLOYMENT, key=list(reads).index):
        default, meaning = DEPLOYMENT[name]
        out.append(f"| `{name}` | {default} | {_cell(meaning)} |")
    for name, (default, meaning) in OTHER_VARIABLES.items():
        out.append(f"| `{name}` | {default} | {_cell(meaning)} |")
    out += [
        "",
        "### Process variables (`Procfile`)",
        "",
        "| variable | meaning |",
        "| --- | --- |",
    ]
    out += [f"| `{name}` | {_cell(text)} |" for name, text in PROCFILE_VARIABLES.items()]
    out.append("")
    return "\n".join(out)


def render_schema() -> str:
    from django.test import RequestFactory
    from django.urls import resolve

    path = "/api/v1/schema"
    request = RequestFactory().get(path, HTTP_ACCEPT="application/vnd.oai.openapi")
    response = resolve(path).func(request)
    response.render()
    return response.content.decode("utf-8")


def outputs() -> dict[Path, str]:
    return {CONFIGURATION_PAGE: render_configuration(), SCHEMA_FILE: render_schema()}


def stale_outputs(pages: dict[Path, str]) -> list[Path]:
    return [p for p, text in pages.items() if not p.exists() or p.read_text() != text]


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report stale pages")
    args = parser.parse_args(list(argv) if argv is not None else None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webhooks_project.settings")
    # Integer bounds in the schema come from the database backend: document the PostgreSQL
    # deployment's, as the server serves it there. Nothing connects to this URL.
    os.environ.setdefault("DATABASE_URL", "postgres://localhost/webhooks")
    import django

    django.setup()
    pages = outputs()
    stale = stale_outputs(pages)
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is out of date: run `make docs-gen`", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(pages[path])
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
