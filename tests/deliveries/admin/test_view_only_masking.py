"""View-only staff read no credential in a URL: not an endpoint's (query values), not its
OAuth2 token URL's."""

import re

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from deliveries.models import Attempt, Delivery, DeliveryStatus
from tests.deliveries.admin.helpers import event_at, hours_ago, staff_in
from tests.fixtures import logged_in, new_endpoint

pytestmark = pytest.mark.django_db

ADMIN = "/admin/deliveries"
SECRETS = ("url-s3cret-token", "token-url-s3cret-key")


def made() -> tuple[str, int]:
    ep = new_endpoint(
        "https://receiver.example.com/hook?token=url-s3cret-token",
        auth={
            "type": "oauth2_client_credentials",
            "token_url": "https://auth.example.com/token?key=token-url-s3cret-key",
            "client_id": "client-1",
            "client_secret": "client-s3cret",
        },
    )
    event = event_at("invoice.paid", hours_ago(1))
    delivery = Delivery.objects.create(
        event=event,
        endpoint=ep,
        status=DeliveryStatus.DEAD_LETTERED,
        attempts=1,
        last_error="HTTP 500",
        completed_at=timezone.now(),
    )
    Attempt.objects.create(
        delivery=delivery, number=1, started_at=timezone.now(), duration_ms=3, error="HTTP 500"
    )
    return str(ep.pk), delivery.pk


def pages(pk: str, delivery: int) -> list[str]:
    return [
        f"{ADMIN}/endpoint/",
        f"{ADMIN}/endpoint/{pk}/change/",
        f"{ADMIN}/delivery/",
        f"{ADMIN}/delivery/{delivery}/change/",
        f"{ADMIN}/deadletter/",
        f"{ADMIN}/deadletter/{delivery}/change/",
    ]


def test_view_only_staff_see_urls_masked() -> None:
    pk, delivery = made()
    viewer = logged_in(staff_in("viewers"))
    for path in pages(pk, delivery):
        page = viewer.get(path)
        assert page.status_code == 200, path
        text = page.content.decode()
        for secret in SECRETS:
            assert secret not in text, (path, secret)
    listing = viewer.get(f"{ADMIN}/endpoint/").content.decode()
    # Recognisable all the same: host, path and the query's names stay.
    assert "https://receiver.example.com/hook?token=***" in listing
    change = viewer.get(f"{ADMIN}/endpoint/{pk}/change/").content.decode()
    assert "https://auth.example.com/token?key=***" in change


def test_who_may_change_the_endpoint_sees_it_whole() -> None:
    pk, _ = made()
    operator = logged_in(User.objects.create_superuser("root", "root@example.com", "pw"))
    change = operator.get(f"{ADMIN}/endpoint/{pk}/change/").content.decode()
    assert re.search(r'value="https://receiver\.example\.com/hook\?token=url-s3cret-token"', change)
    assert "token-url-s3cret-key" in change


def test_view_only_staff_cannot_spell_a_masked_value_out_by_searching() -> None:
    pk, delivery = made()
    viewer = logged_in(staff_in("viewers"))
    for path in ("endpoint", "delivery", "deadletter"):
        found = viewer.get(f"{ADMIN}/{path}/", {"q": "url-s3cret"}).content.decode()
        assert f"/{pk}/change/" not in found, path
        assert f"/{path}/{delivery}/change/" not in found, path
    operator = logged_in(User.objects.create_superuser("root", "root@example.com", "pw"))
    found = operator.get(f"{ADMIN}/endpoint/", {"q": "url-s3cret"}).content.decode()
    assert f"/{pk}/change/" in found
