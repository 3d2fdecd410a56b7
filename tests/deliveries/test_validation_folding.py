"""Asking for the CloudEvents handshake again is folded: within
WEBHOOKS_VALIDATION_MIN_INTERVAL_SECONDS of the last ask, no second OPTIONS request goes
out (202 while the one asked for is pending, 429 with Retry-After once it ran), through
the API and the portal's button alike."""

from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from deliveries import services
from deliveries.models import ApiToken, Endpoint, ValidationState
from tests.conftest import wait_until
from tests.deliveries.portal.helpers import portal_client
from tests.fixtures import api_client
from tests.receiver import ReceivedRequest, Receiver, Reply

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = "hooks.test.example"


def consent(request: ReceivedRequest) -> Reply:
    return Reply(200, b"", {"WebHook-Allowed-Origin": ORIGIN, "Allow": "POST"})


def test_thirty_asks_send_one_options_request(
    celery_worker: object, receiver: Receiver, settings: SettingsWrapper
) -> None:
    settings.WEBHOOKS_VALIDATION_ORIGIN = ORIGIN
    receiver.options_handler = consent
    endpoint, _ = services.endpoint_create(
        url=receiver.url, event_types=["*"], validation="cloudevents", tenant="acme"
    )
    wait_until(
        lambda: Endpoint.objects.get(pk=endpoint.pk).validation_state == ValidationState.VALIDATED,
        what="the handshake at creation",
    )
    assert len(receiver.options) == 1
    _, plain = ApiToken.issue("tests")
    api = api_client(plain)
    portal = portal_client("acme")

    api_answers: list[Any] = []
    portal_notices: list[str] = []
    for n in range(30):
        if n % 3 == 2:
            page = portal.post(f"/portal/endpoints/{endpoint.pk}/validate")
            assert page.status_code == 302
            portal_notices.append(page["Location"])
        else:
            api_answers.append(api.post(f"/api/v1/endpoints/{endpoint.pk}/validate"))
    wait_until(
        lambda: (
            (e := Endpoint.objects.get(pk=endpoint.pk)).validation_checked_at is not None
            and e.validation_requested_at is not None
            and e.validation_checked_at > e.validation_requested_at
        ),
        what="the one handshake asked for",
    )
    assert len(receiver.options) == 2
    assert api_answers[0].status_code == 202
    assert {a.status_code for a in api_answers} <= {202, 429}
    assert all(a.has_header("Retry-After") for a in api_answers[1:])
    assert all("validation-recent" in notice for notice in portal_notices)

    # Once it ran, asking within the interval is a 429 naming when to ask again.
    again = api.post(f"/api/v1/endpoints/{endpoint.pk}/validate")
    assert again.status_code == 429
    assert 1 <= int(again["Retry-After"]) <= 30
    assert len(receiver.options) == 2
