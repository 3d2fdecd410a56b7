"""Idempotency keys are unique per tenant (so one tenant's key never hides another's
event): the events without a tenant are one scope of their own, each tenant another."""

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from deliveries import services
from deliveries.models import Event

pytestmark = pytest.mark.django_db


def emit(api: APIClient, tenant: str | None, key: str) -> Any:
    payload: dict[str, Any] = {"type": "invoice.paid", "data": {"n": 1}}
    if tenant is not None:
        payload["tenant"] = tenant
    return api.post(
        "/api/v1/events",
        data=json.dumps(payload),
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def test_the_same_key_for_two_tenants_makes_two_events(api: APIClient) -> None:
    acme = emit(api, "acme", "inv-42")
    globex = emit(api, "globex", "inv-42")
    assert acme.status_code == globex.status_code == 202
    assert acme.json()["id"] != globex.json()["id"]
    assert Event.objects.get(pk=globex.json()["id"]).tenant == "globex"
    # Within a tenant the key still deduplicates.
    again = emit(api, "globex", "inv-42")
    assert again.json()["id"] == globex.json()["id"]
    assert Event.objects.filter(idempotency_key="inv-42").count() == 2


def test_no_tenant_is_a_scope_of_its_own(api: APIClient) -> None:
    none_first = emit(api, None, "k-1")
    acme = emit(api, "acme", "k-1")
    none_again = emit(api, None, "k-1")
    assert none_first.json()["id"] == none_again.json()["id"]
    assert acme.json()["id"] != none_first.json()["id"]


def test_the_database_refuses_a_duplicate_key_within_a_scope() -> None:
    from django.db import IntegrityError, transaction

    first = services.emit("invoice.paid", {"n": 1}, idempotency_key="k", tenant="acme")
    duplicate = Event(
        type="invoice.paid", occurred_at=first.occurred_at, idempotency_key="k", tenant="acme"
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        duplicate.save()
    services.emit("invoice.paid", {"n": 1}, idempotency_key="k")
    loose = Event(type="invoice.paid", occurred_at=first.occurred_at, idempotency_key="k")
    with pytest.raises(IntegrityError), transaction.atomic():
        loose.save()
