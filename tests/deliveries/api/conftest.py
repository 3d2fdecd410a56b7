"""The API clients of the HTTP API's tests: with a token, and without.

The tests are plain ``django_db`` ones: nothing commits, so ``on_commit`` dispatches never
fire and no broker is needed. Delivery and Attempt rows are created directly where a test
needs them."""

import pytest
from rest_framework.test import APIClient

from deliveries.models import ApiToken


@pytest.fixture
def token() -> str:
    _, plain = ApiToken.issue("tests")
    return plain


@pytest.fixture
def anon() -> APIClient:
    return APIClient()


@pytest.fixture
def api(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client
