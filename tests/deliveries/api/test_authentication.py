"""The HTTP API v1: bearer tokens (no token, a bad, revoked or good one, the command)."""

import hashlib
import uuid
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from deliveries.models import (
    ApiToken,
)
from tests.deliveries.api.helpers import (
    API,
    body,
)

pytestmark = pytest.mark.django_db


# --- authentication ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", f"{API}/endpoints"),
        ("post", f"{API}/endpoints"),
        ("get", f"{API}/deliveries"),
        ("post", f"{API}/events"),
        ("get", f"{API}/events/{uuid.uuid4()}"),
    ],
)
def test_no_token_is_401(anon: APIClient, method: str, path: str) -> None:
    response = getattr(anon, method)(path)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert "detail" in body(response)


@pytest.mark.parametrize(
    "header",
    [
        "Bearer whk_not-a-real-token",
        "Bearer ",
        "Bearer",
        "Token whk_whatever",
        "Basic dXNlcjpwYXNz",
        "bearer \u00e9\u00e8",
    ],
)
def test_bad_token_is_401(anon: APIClient, header: str) -> None:
    anon.credentials(HTTP_AUTHORIZATION=header)
    response = anon.get(f"{API}/endpoints")
    assert response.status_code == 401


def test_good_token_is_accepted_case_insensitive_keyword(anon: APIClient, token: str) -> None:
    anon.credentials(HTTP_AUTHORIZATION=f"bearer {token}")
    assert anon.get(f"{API}/endpoints").status_code == 200


def test_revoked_token_is_401(api: APIClient, token: str) -> None:
    assert api.get(f"{API}/endpoints").status_code == 200
    ApiToken.objects.update(revoked_at=timezone.now())
    assert api.get(f"{API}/endpoints").status_code == 401


def test_token_is_stored_hashed_and_last_use_recorded(api: APIClient, token: str) -> None:
    row = ApiToken.objects.get()
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in (row.token_hash, row.token_prefix)
    assert row.last_used_at is None
    api.get(f"{API}/endpoints")
    row.refresh_from_db()
    assert row.last_used_at is not None


def test_create_api_token_command_prints_a_working_token(anon: APIClient) -> None:
    out, err = StringIO(), StringIO()
    call_command("create_api_token", "billing-service", stdout=out, stderr=err)

    lines = out.getvalue().splitlines()
    assert lines, "nothing printed on stdout"
    plain = lines[-1]
    assert plain == plain.strip()
    assert " " not in plain
    assert plain.startswith("whk_")
    assert ApiToken.objects.get().name == "billing-service"

    anon.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    assert anon.get(f"{API}/endpoints").status_code == 200
