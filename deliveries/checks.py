"""System checks of the sending side's settings."""

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import Error, Tags, register

from deliveries import conf
from deliveries.destinations.http_client import egress_proxy
from webhooks_core.check_ids import check_id
from webhooks_core.egress.ssrf import parse_networks


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
                    id=check_id("webhooks.E013"),
                )
            )
    return errors


@register(Tags.security)
def check_egress_proxy(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[Error]:
    url = conf.get().egress_proxy_url
    problem = egress_proxy.proxy_problem(url) if url else None
    if problem is None:
        return []
    return [
        Error(
            f"WEBHOOKS_EGRESS_PROXY_URL is invalid: {problem}.",
            hint="e.g. http://proxy.internal:4750 (user:password@ optional).",
            id=check_id("webhooks.E012"),
        )
    ]


@register(Tags.security)
def check_validation_origin(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[Error]:
    """The handshake needs an origin; the portal's default makes every tenant's endpoint
    use it, so an undeterminable one is refused at start-up then (the API and the admin
    refuse `validation: cloudevents` with a 400 without one)."""
    from deliveries.endpoints.validation_rules import origin_problem

    current = conf.validation()
    errors = []
    if current.portal_default not in ("none", "cloudevents"):
        errors.append(
            Error(
                "WEBHOOKS_PORTAL_ENDPOINT_VALIDATION must be 'none' or 'cloudevents', not "
                f"{current.portal_default!r}.",
                id=check_id("webhooks.E031"),
            )
        )
    problem = origin_problem(current.origin)
    if problem and (current.portal_default == "cloudevents" or current.origin):
        errors.append(
            Error(
                f"The CloudEvents handshake has {problem}.",
                hint="WEBHOOKS_VALIDATION_ORIGIN=hooks.example.com (a host name).",
                id=check_id("webhooks.E030"),
            )
        )
    return errors
