"""While PostgreSQL is unreachable every page answers 503 + Retry-After as JSON, never a 500.

The outage is injected with Django's own `execute_wrapper`: every query this connection
makes fails the way psycopg fails when the server is gone. The real outage (a private
cluster stopped mid-run) is in tests/faults/test_postgres_restart.py.
"""

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection
from django.test import Client

from deliveries.models import ApiToken, Event
from receivers import services as receiver_services
from webhooks_core.crypto import signing

pytestmark = pytest.mark.django_db


def _refuse(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    raise OperationalError("connection to server at 127.0.0.1 failed: Connection refused")


def assert_unavailable(response: Any) -> None:
    assert response.status_code == 503, response.content[:300]
    assert response["Retry-After"].isdigit()
    assert response["Content-Type"].startswith("application/json")
    assert "detail" in response.json()
    assert b"Traceback" not in response.content
    assert b"Connection refused" not in response.content


def test_api_read_and_write_answer_503(client: Client) -> None:
    _, token = ApiToken.issue("outage")
    auth = {"Authorization": f"Bearer {token}"}
    with connection.execute_wrapper(_refuse):
        assert_unavailable(client.get("/api/v1/endpoints", headers=auth))
        assert_unavailable(
            client.post(
                "/api/v1/events",
                data={"type": "order.created", "data": {"n": 1}},
                content_type="application/json",
                headers=auth,
            )
        )
    assert not Event.objects.exists()


def test_receiver_url_answers_503(client: Client) -> None:
    receiver_services.source_create(slug="outage", scheme="ours", secret=signing.generate_secret())
    with connection.execute_wrapper(_refuse):
        response = client.post("/receivers/outage/", data=b"{}", content_type="application/json")
    assert response.status_code == 503
    assert response["Retry-After"].isdigit()


def test_admin_answers_503_instead_of_500(client: Client) -> None:
    admin = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw-Long-enough-1")
    client.force_login(admin)
    with connection.execute_wrapper(_refuse):
        assert_unavailable(client.get("/admin/deliveries/delivery/"))
