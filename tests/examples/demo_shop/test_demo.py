"""The demo `make run` seeds: idempotent, and its events make the whole trip to our own
receiver (through the flaky door that fails some first tries)."""

from typing import Any

import pytest
from django.test import Client

from deliveries.models import Delivery, DeliveryStatus, Endpoint
from examples.demo_shop.demo import (
    demo_activity,
    demo_portal_link,
    demo_setup,
    demo_tenant_activity,
    demo_tenants_setup,
)
from receivers.models import InboxEvent, InboxStatus, Source
from tests.conftest import wait_until
from tests.deliveries.portal.helpers import open_with
from webhooks_project.management.commands.serve import Command as ServeCommand


@pytest.mark.django_db
def test_demo_setup_is_idempotent_and_shares_the_secret() -> None:
    first = demo_setup(base_url="http://127.0.0.1:8000")
    second = demo_setup(base_url="http://127.0.0.1:8000")

    assert first.pk == second.pk
    assert Endpoint.objects.count() == 1
    assert first.url == "http://127.0.0.1:8000/demo/receiver/"
    assert first.ordered_delivery
    assert first.version_pins["shop.order.created"] == 2
    [source] = Source.objects.all()
    [endpoint_secret] = first.secrets.all()
    assert [s.value for s in source.secrets.all()] == [endpoint_secret.value]


@pytest.mark.django_db(transaction=True)
@pytest.mark.urls("tests.examples.demo_shop.demo_urls")
def test_demo_events_reach_our_own_receiver(celery_worker: object, live_server: Any) -> None:
    demo_setup(base_url=live_server.url)

    demo_activity(orders=2, pause_seconds=0)

    # 2 created, 2 paid invoices, 2 updated (paid), 1 shipped, 1 deleted.
    def all_processed() -> bool:
        return InboxEvent.objects.filter(status=InboxStatus.PROCESSED).count() == 8

    def all_recorded_as_delivered() -> bool:
        # A batch records its deliveries once its last request is answered, which may be
        # after the receiver has processed the first ones.
        statuses = set(Delivery.objects.values_list("status", flat=True))
        return statuses == {DeliveryStatus.SUCCEEDED}

    wait_until(all_processed, timeout=90, what="the demo's eight events processed")
    wait_until(all_recorded_as_delivered, timeout=30, what="every delivery recorded")


def test_serve_seeds_the_demo_unless_told_not_to() -> None:
    parser = ServeCommand().create_parser("manage.py", "serve")
    assert parser.parse_args([]).no_demo is False
    assert parser.parse_args(["--no-demo"]).no_demo is True


def test_the_demo_door_refuses_too_few_first_tries_to_open_the_breaker() -> None:
    from uuid import uuid4

    from deliveries import conf
    from examples.demo_shop import views

    views._refused_once.clear()
    refused = sum(views._refuse_first_try(str(uuid4())) for _ in range(60))

    # Some, so that the demo shows a retry; fewer than half of the breaker's minimum
    # window, so that it cannot open and hold every demo delivery back.
    assert refused == views.MAX_REFUSALS
    assert refused * 2 < conf.health().breaker_min_attempts
    views._refused_once.clear()


@pytest.mark.django_db(transaction=True)
def test_demo_tenants_get_their_own_events_and_a_portal_link(
    celery_worker: object, live_server: Any
) -> None:
    first = demo_tenants_setup(base_url=live_server.url)
    again = demo_tenants_setup(base_url=live_server.url)
    assert {t: e.pk for t, e in first.items()} == {t: e.pk for t, e in again.items()}
    assert sorted(first) == ["acme", "globex"]

    demo_tenant_activity()

    def delivered() -> bool:
        return Delivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count() == 4

    wait_until(delivered, timeout=60, what="the tenants' four events delivered")
    for tenant, endpoint in first.items():
        sources = set(
            InboxEvent.objects.filter(
                event_id__in=[
                    str(pk)
                    for pk in Delivery.objects.filter(endpoint=endpoint).values_list(
                        "event_id", flat=True
                    )
                ]
            ).values_list("source__slug", flat=True)
        )
        assert sources == {f"demo-{tenant}"}

    link = demo_portal_link(base_url=live_server.url)
    client = Client()
    open_with(client, link.removeprefix(live_server.url))  # its page, then its button
    assert "acme" in client.get("/portal/").content.decode()
