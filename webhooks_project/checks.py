"""System checks that refuse unsafe production settings.

They run with every management command and at server start; with DEBUG off an error stops
`migrate`, `runserver` and gunicorn's preload alike.
"""

import ipaddress
from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import Error, Tags, Warning, register


@register(Tags.security, deploy=False)
def check_production_settings(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[Error | Warning]:
    if settings.DEBUG:
        return []
    problems: list[Error | Warning] = []
    if settings.SECRET_KEY == settings.INSECURE_DEFAULT_SECRET_KEY or len(settings.SECRET_KEY) < 32:
        problems.append(
            Error(
                "SECRET_KEY is the built-in development key or shorter than 32 characters.",
                hint="Set SECRET_KEY in the environment, or DEBUG=true for local development.",
                id="webhooks.E001",
            )
        )
    if not settings.WEBHOOKS_ENCRYPTION_KEY:
        problems.append(
            Error(
                "WEBHOOKS_ENCRYPTION_KEY is not set; endpoint secrets would be encrypted "
                "with a key derived from SECRET_KEY.",
                hint="Generate one with `python manage.py generate_encryption_key`.",
                id="webhooks.E002",
            )
        )
    if "*" in settings.ALLOWED_HOSTS:
        problems.append(
            Warning(
                "ALLOWED_HOSTS contains '*'.",
                hint="List the host names this deployment answers to.",
                id="webhooks.W001",
            )
        )
    return problems


@register(Tags.security, deploy=True)
def check_debug_off_in_deployment(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[Error]:
    # `manage.py check --deploy` runs in the Procfile's release phase: a deployment with
    # DEBUG on never gets as far as migrating.
    if settings.DEBUG:
        return [
            Error(
                "DEBUG is on in a deployment.",
                hint="Unset DEBUG (or set DEBUG=false) in production.",
                id="webhooks.E003",
            )
        ]
    return []


@register(Tags.security)
def check_allowed_networks(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[Error]:
    from deliveries.ssrf import parse_networks

    try:
        parse_networks(settings.WEBHOOKS_ALLOWED_NETWORKS)
    except ValueError as exc:
        return [
            Error(
                f"WEBHOOKS_ALLOWED_NETWORKS: {exc}.",
                hint="A comma-separated list of CIDRs, e.g. 10.20.0.0/16,fd00::/8.",
                id="webhooks.E010",
            )
        ]
    return []


@register(Tags.security)
def check_metrics_access(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[Error]:
    # A typo in the allow-list must stop the start, not turn every scrape into a 500.
    problems = []
    for entry in settings.METRICS_ALLOWED_IPS:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            problems.append(
                Error(
                    f"METRICS_ALLOWED_IPS contains {entry!r}, which is no IP address or network.",
                    hint="Comma-separated addresses or CIDR networks, e.g. 10.0.0.0/8,127.0.0.1.",
                    id="webhooks.E011",
                )
            )
    return problems
