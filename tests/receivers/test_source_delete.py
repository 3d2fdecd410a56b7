"""Deleting a source (``DELETE /api/v1/sources/{slug}`` and the admin's delete page), both
through ``services.source_delete``: the source, its secrets and its inbox rows go in one
transaction; unprocessed rows refuse it with 409 unless ``?force=true``; a request arriving
during the deletion is stored before it or not at all."""

import json
import threading
import time
import uuid
from typing import Any

import pytest
import requests
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from examples.payments.models import Order, Payment
from examples.providers import acme
from receivers import services
from receivers.models import InboxEvent, InboxStatus, Source, SourceSecret
from tests.conftest import wait_until
from tests.receivers.helpers import body_of, ours_event, sign_ours

API = "/api/v1"


def shop_source(slug: str = "shop") -> tuple[Source, str]:
    return services.source_create(slug=slug, scheme="ours")


def stored(source: Source, status: str) -> InboxEvent:
    now = timezone.now()
    event_id = str(uuid.uuid4())
    payload = {"id": event_id, "type": "payment.created", "data": {}}
    return InboxEvent.objects.create(
        source=source,
        event_id=event_id,
        type="payment.created",
        status=status,
        payload=payload,
        raw_body=body_of(payload),
        received_at=now,
        next_attempt_at=now,
    )


@pytest.mark.django_db
def test_delete_removes_the_source_its_secrets_and_finished_inbox_rows(api: APIClient) -> None:
    source, _ = shop_source()
    other, _ = shop_source("other")
    for status in (InboxStatus.PROCESSED, InboxStatus.IGNORED):
        stored(source, status)
    kept = stored(other, InboxStatus.RECEIVED)

    response = api.delete(f"{API}/sources/shop")

    assert response.status_code == 204, response.content
    assert response.content == b""
    assert not Source.objects.filter(slug="shop").exists()
    assert not SourceSecret.objects.filter(source_id=source.pk).exists()
    assert not InboxEvent.objects.filter(source_id=source.pk).exists()
    assert list(InboxEvent.objects.values_list("pk", flat=True)) == [kept.pk]
    assert api.get(f"{API}/sources/shop").status_code == 404
    assert api.delete(f"{API}/sources/shop").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize(
    "status",
    [InboxStatus.RECEIVED, InboxStatus.RETRYING, InboxStatus.PROCESSING, InboxStatus.FAILED],
)
def test_unprocessed_inbox_rows_refuse_the_delete_unless_forced(
    api: APIClient, status: str
) -> None:
    source, _ = shop_source()
    stored(source, InboxStatus.PROCESSED)
    pending = stored(source, status)

    refused = api.delete(f"{API}/sources/shop")

    assert refused.status_code == 409, refused.content
    assert "1 inbox event(s) not yet processed" in refused.json()["detail"]
    assert "force" in refused.json()["detail"]
    assert Source.objects.filter(pk=source.pk).exists()
    assert InboxEvent.objects.filter(source=source).count() == 2
    assert api.delete(f"{API}/sources/shop?force=false").status_code == 409

    forced = api.delete(f"{API}/sources/shop?force=true")

    assert forced.status_code == 204, forced.content
    assert not Source.objects.filter(pk=source.pk).exists()
    assert not InboxEvent.objects.filter(pk=pending.pk).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("query", ["force=maybe", "force=", "force=true&force=false", "x=1"])
def test_a_bad_force_or_unknown_parameter_is_400_and_deletes_nothing(
    api: APIClient, query: str
) -> None:
    shop_source()
    response = api.delete(f"{API}/sources/shop?{query}")
    if query == "x=1":
        # Unknown query parameters are ignored, as on every list of this API.
        assert response.status_code == 204
        return
    assert response.status_code == 400, response.content
    assert Source.objects.filter(slug="shop").exists()


@pytest.mark.django_db
def test_a_body_is_refused(api: APIClient) -> None:
    shop_source()
    response = api.delete(
        f"{API}/sources/shop", data=json.dumps({"force": True}), content_type="application/json"
    )
    assert response.status_code == 400
    assert Source.objects.filter(slug="shop").exists()


@pytest.mark.django_db
def test_delete_names_the_source_by_slug_and_get_still_takes_the_id(api: APIClient) -> None:
    source, _ = shop_source()
    assert api.get(f"{API}/sources/{source.pk}").json()["slug"] == "shop"
    assert api.get(f"{API}/sources/shop").json()["id"] == source.pk
    assert api.delete(f"{API}/sources/{source.pk}").status_code == 404
    assert api.delete(f"{API}/sources/nope").status_code == 404
    assert Source.objects.filter(pk=source.pk).exists()


@pytest.mark.django_db
def test_a_slug_of_digits_wins_over_an_id(api: APIClient) -> None:
    first, _ = shop_source("first")
    digits, _ = shop_source(str(first.pk))
    assert api.get(f"{API}/sources/{first.pk}").json()["id"] == digits.pk
    assert api.delete(f"{API}/sources/{first.pk}").status_code == 204
    assert Source.objects.filter(pk=first.pk).exists()
    assert not Source.objects.filter(pk=digits.pk).exists()


@pytest.mark.django_db
def test_without_a_token_it_is_401(api: APIClient) -> None:
    shop_source()
    assert APIClient().delete(f"{API}/sources/shop").status_code == 401
    assert Source.objects.filter(slug="shop").exists()


@pytest.mark.django_db
def test_host_rows_protecting_the_source_refuse_the_delete(api: APIClient) -> None:
    source, _ = shop_source()
    order = Order.objects.create(reference="ord_1", amount=100, currency="EUR")
    Payment.objects.create(
        source=source, provider_payment_id="pay_1", order=order, amount=100, currency="EUR"
    )
    stored(source, InboxStatus.PROCESSED)

    response = api.delete(f"{API}/sources/shop?force=true")

    assert response.status_code == 409, response.content
    assert "payments.Payment" in response.json()["detail"]
    # Nothing half done: the inbox rows deleted before the refusal are back.
    assert InboxEvent.objects.filter(source=source).count() == 1
    assert Source.objects.filter(pk=source.pk).exists()


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        (count,) = cursor.fetchone()
    return bool(count)


def ours_request(url: str, secret: str) -> tuple[bytes, dict[str, str]]:
    body = ours_event("payment.created")
    return body, sign_ours([secret], body)


def acme_batch(url: str, secret: str) -> tuple[bytes, dict[str, str]]:
    events = [{"id": f"evt_{n}", "type": "invoice.paid", "data": {}} for n in range(3)]
    body = json.dumps({"events": events}).encode()
    return body, {"Acme-Signature": acme.sign(secret, int(time.time()), url, body)}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["one event", "a batch"])
def test_a_request_arriving_during_the_delete_stores_nothing(
    live_server: Any, settings: Any, kind: str
) -> None:
    """The deletion holds the source's row until it commits; an arrival in between waits on
    its foreign key to that row, then fails as a whole (every event of a batch) and is
    answered 404."""
    settings.RECEIVERS_SCHEMES = ["examples.providers.acme.AcmeScheme"]
    if kind == "a batch":
        secret = "acme_sk_" + "s" * 24
        source, _ = services.source_create(slug="shop", scheme="acme", secret=secret)
        build = acme_batch
    else:
        source, secret = shop_source()
        build = ours_request
    deleted, commit = threading.Event(), threading.Event()
    problems: list[BaseException] = []

    def delete_and_hold() -> None:
        from django.db import transaction

        try:
            with transaction.atomic():  # the service's own transaction nests in this one
                services.source_delete(source_id=source.pk)
                deleted.set()
                if not commit.wait(timeout=30):
                    raise AssertionError("never told to commit")
        except BaseException as exc:
            problems.append(exc)
            deleted.set()
        finally:
            connection.close()

    deleter = threading.Thread(target=delete_and_hold)
    deleter.start()
    assert deleted.wait(timeout=30)
    assert not problems, problems

    url = f"{live_server.url}/receivers/shop/"
    body, signature = build(url, secret)
    answers: list[requests.Response] = []
    arrival = threading.Thread(
        target=lambda: answers.append(
            requests.post(
                url,
                data=body,
                headers={"Content-Type": "application/json", **signature},
                timeout=30,
            )
        )
    )
    arrival.start()
    wait_until(_waiting_on_a_lock, timeout=20, what="the arrival waiting on the source's row")
    commit.set()
    deleter.join(timeout=30)
    arrival.join(timeout=30)

    assert not problems, problems
    [answer] = answers
    assert answer.status_code == 404, answer.text
    assert not Source.objects.filter(pk=source.pk).exists()
    assert not InboxEvent.objects.exists()


# --- the admin's delete page -------------------------------------------------------------


def delete_url(source: Source) -> str:
    return f"/admin/receivers/source/{source.pk}/delete/"


@pytest.mark.django_db
def test_the_admin_confirms_with_counts_and_deletes_through_the_service(
    admin_client: Any,
) -> None:
    source, _ = shop_source()
    for _ in range(3):
        stored(source, InboxStatus.PROCESSED)

    page = admin_client.get(delete_url(source))

    assert page.status_code == 200
    text = page.content.decode()
    assert "3 inbox event(s), 0 of them not processed" in text
    assert "1 secret(s)" in text
    assert 'name="force"' not in text
    done = admin_client.post(delete_url(source), {"post": "yes"})
    assert done.status_code == 302
    assert not Source.objects.filter(pk=source.pk).exists()
    assert not InboxEvent.objects.exists()


@pytest.mark.django_db
def test_the_admin_needs_the_box_ticked_for_unprocessed_events(admin_client: Any) -> None:
    source, _ = shop_source()
    stored(source, InboxStatus.FAILED)

    page = " ".join(admin_client.get(delete_url(source)).content.decode().split())
    assert 'name="force"' in page
    assert "1 inbox event of this source is not processed yet" in page

    refused = admin_client.post(delete_url(source), {"post": "yes"}, follow=True)
    assert "not yet processed" in refused.content.decode()
    assert Source.objects.filter(pk=source.pk).exists()
    assert InboxEvent.objects.filter(source=source).count() == 1

    forced = admin_client.post(delete_url(source), {"post": "yes", "force": "on"})
    assert forced.status_code == 302
    assert not Source.objects.filter(pk=source.pk).exists()


@pytest.mark.django_db
def test_the_admin_shows_the_host_rows_that_protect_the_source(admin_client: Any) -> None:
    source, _ = shop_source()
    order = Order.objects.create(reference="ord_1", amount=100, currency="EUR")
    Payment.objects.create(
        source=source, provider_payment_id="pay_1", order=order, amount=100, currency="EUR"
    )
    page = admin_client.get(delete_url(source))
    assert "1 payments.Payment row(s)" in page.content.decode()
    admin_client.post(delete_url(source), {"post": "yes", "force": "on"})
    assert Source.objects.filter(pk=source.pk).exists()


@pytest.mark.django_db
def test_the_admin_has_no_bulk_delete_of_sources(admin_client: Any) -> None:
    shop_source()
    page = admin_client.get("/admin/receivers/source/")
    assert b"delete_selected" not in page.content
