"""Seeding the demo for `make run`: an endpoint aimed at our own receiver, then some shop
activity, so a newcomer sees events flow, a few retries, and deliveries succeed."""

import logging
import random
import time

from django.db import transaction
from django.utils import timezone

from deliveries import services as sending
from deliveries.models import Endpoint, EndpointState
from receivers import services as receiving
from receivers.models import Source

from . import services
from .handlers import DEMO_SOURCE, DEMO_TENANTS

logger = logging.getLogger(__name__)

DEMO_DESCRIPTION = "Demo: the demo shop's events to our own receiver (created by `serve`)"


@transaction.atomic
def demo_setup(*, base_url: str) -> Endpoint:
    """Create (once) the demo endpoint and the receiving source sharing its secret."""
    url = f"{base_url.rstrip('/')}/demo/receiver/"
    endpoint = Endpoint.objects.filter(url=url, description=DEMO_DESCRIPTION).first()
    if endpoint is None:
        endpoint, secret = sending.endpoint_create(
            url=url,
            event_types=["shop.*"],
            description=DEMO_DESCRIPTION,
            ordered_delivery=True,
            backoff_base_seconds=2.0,
            backoff_max_seconds=10.0,
        )
    else:
        secret = endpoint.secrets.order_by("-created_at").first().value  # type: ignore[union-attr]
    _receive_with(slug=DEMO_SOURCE, secret=secret)
    if endpoint.state != EndpointState.ACTIVE:
        sending.endpoint_resume(endpoint_id=endpoint.pk)
    return endpoint


def demo_activity(*, orders: int = 3, pause_seconds: float = 1.0) -> None:
    """Place, pay and ship a few orders, and cancel one: about 4 events per order."""
    customers = ["ada@example.com", "grace@example.com", "alan@example.com"]
    placed = []
    for n in range(orders):
        order = services.order_place(
            customer_email=customers[n % len(customers)],
            amount_cents=random.randint(500, 20_000),  # noqa: S311  (demo data)
        )
        placed.append(order)
        time.sleep(pause_seconds)
    for order in placed:
        services.invoice_pay(invoice_id=order.invoice.pk)
        time.sleep(pause_seconds)
    for order in placed[:-1]:
        services.order_ship(order_id=order.pk)
    services.order_cancel(order_id=placed[-1].pk)
    logger.info("demo shop: %d orders placed, paid, shipped or cancelled", orders)


@transaction.atomic
def demo_tenants_setup(*, base_url: str) -> dict[str, Endpoint]:
    """One endpoint per demo tenant (once), each aimed at a receiving source of its own
    that shares its secret, so their portals show deliveries that succeed."""
    endpoints = {}
    for tenant in DEMO_TENANTS:
        slug = f"demo-{tenant}"
        url = f"{base_url.rstrip('/')}/receivers/{slug}/"
        endpoint = Endpoint.objects.filter(tenant=tenant, url=url).first()
        if endpoint is None:
            endpoint, secret = sending.endpoint_create(
                url=url,
                event_types=["shop.*"],
                tenant=tenant,
                description=f"{tenant}'s order system (demo)",
                backoff_base_seconds=2.0,
                backoff_max_seconds=10.0,
            )
        else:
            secret = endpoint.secrets.order_by("-created_at").first().value  # type: ignore[union-attr]
        _receive_with(slug=slug, secret=secret)
        endpoints[tenant] = endpoint
    return endpoints


def demo_tenant_activity() -> None:
    """A few events for each demo tenant (the catalogue's examples), for their portals."""
    from deliveries import catalogue

    for tenant in DEMO_TENANTS:
        for name in ("shop.order.created", "shop.invoice.paid"):
            event_type = catalogue.get(name)
            if event_type is not None:
                sending.emit(name, event_type.newest.example, tenant=tenant)


def demo_portal_link(*, base_url: str, tenant: str = DEMO_TENANTS[0]) -> str:
    """A one-time link into a demo tenant's portal, valid for a day."""
    from django.urls import reverse

    _, token = sending.portal_link_create(tenant=tenant, expires_in=86400, requested_via="make run")
    return f"{base_url.rstrip('/')}{reverse('webhooks_portal:open', args=[token])}"


def _receive_with(*, slug: str, secret: str) -> None:
    """Our own receiving source `slug`, verifying with the demo endpoint's `secret`."""
    source = Source.objects.filter(slug=slug).first()
    if source is None:
        receiving.source_create(slug=slug, scheme="ours", secret=secret)
    elif not any(s.value == secret for s in source.secrets.unexpired(timezone.now())):
        receiving.source_rotate_secret(source=source, secret=secret, grace_seconds=0)
