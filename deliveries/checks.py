"""System checks of the sending side's settings."""

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import Error, Tags, register

from . import conf, egress
from .ssrf import parse_networks


@register(Tags.security)
def check_allowed_networks(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[Error]:
    errors = []
    current = conf.health()
    for name, networks in (
        ("WEBHOOKS_ALLOWED_NETWORKS", current.allowed_networks),
        ("WEBHOOKS_PORTAL_ALLOWED_NETWORKS", current.portal_allowed_networks),
    ):
        try:
            parse_networks(networks)
        except ValueError as exc:
            errors.append(
                Error(
                    f"{name} is invalid: {exc}.",
                    hint="A comma-separated list of CIDRs, e.g. 10.20.0.0/16,fd00::/8.",
                    id="webhooks.E010",
                )
            )
    return errors


@register(Tags.security)
def check_egress_proxy(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[Error]:
    url = conf.get().egress_proxy_url
    problem = egress.proxy_problem(url) if url else None
    if problem is None:
        return []
    return [
        Error(
            f"WEBHOOKS_EGRESS_PROXY_URL is invalid: {problem}.",
            hint="e.g. http://proxy.internal:4750 (user:password@ optional).",
            id="webhooks.E012",
        )
    ]
