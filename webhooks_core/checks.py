"""System checks for settings a host must get right; registered by the apps' ``ready()``.

With DEBUG off an error stops ``migrate``, ``runserver`` and gunicorn's preload alike.
"""

import ipaddress
from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import Error, Tags, register

from webhooks_core import conf
from webhooks_core.check_ids import check_id
from webhooks_core.egress.ssrf import parse_networks


@register(Tags.security)
def check_encryption_key(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[Error]:
    if settings.DEBUG or conf.value("WEBHOOKS_ENCRYPTION_KEY"):
        return []
    return [
        Error(
            "WEBHOOKS_ENCRYPTION_KEY is not set; secrets at rest would be encrypted "
            "with a key derived from SECRET_KEY.",
            hint="Generate one with `python manage.py generate_encryption_key`.",
            id=check_id("webhooks.E002"),
        )
    ]


@register(Tags.security)
def check_metrics_access(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[Error]:
    # A typo in the allow-list must stop the start, not turn every scrape into a 500.
    problems = []
    for entry in conf.value("METRICS_ALLOWED_IPS"):
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            problems.append(
                Error(
                    f"METRICS_ALLOWED_IPS contains {entry!r}, which is no IP address or network.",
                    hint="Comma-separated addresses or CIDR networks, e.g. 10.0.0.0/8,127.0.0.1.",
                    id=check_id("webhooks.E011"),
                )
            )
    return problems


@register(Tags.security)
def check_allowed_networks(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[Error]:
    try:
        parse_networks(tuple(conf.value("WEBHOOKS_ALLOWED_NETWORKS")))
    except ValueError as exc:
        return [
            Error(
                f"WEBHOOKS_ALLOWED_NETWORKS is invalid: {exc}.",
                hint="A comma-separated list of CIDRs, e.g. 10.20.0.0/16,fd00::/8.",
                id=check_id("webhooks.E010"),
            )
        ]
    return []
