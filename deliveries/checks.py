"""System checks of the sending side's settings."""

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import Error, Tags, register

from . import conf
from .ssrf import parse_networks


@register(Tags.security)
def check_allowed_networks(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[Error]:
    errors = []
    current = conf.health()
    # WEBHOOKS_ALLOWED_NETWORKS is the shared core's (webhooks_core/checks.py).
    for name, networks in (("WEBHOOKS_PORTAL_ALLOWED_NETWORKS", current.portal_allowed_networks),):
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
