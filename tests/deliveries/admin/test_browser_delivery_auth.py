"""The admin's endpoint form with the delivery-auth fields, in a real headless
Chromium (Debian's `chromium`; skipped when it is missing). The screenshot lands in
var/screenshots/endpoint-delivery-auth.png."""

from typing import Any

import pytest
from django.contrib.auth.models import User

from deliveries import services
from tests.browser import require_chromium
from tests.deliveries.admin.browser import shot
from tests.deliveries.auth_peers import PKI

require_chromium()

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "br0wser-client-secret"


def test_the_endpoint_form_shows_the_auth_fields_and_no_secret(live_server: Any, page: Any) -> None:
    User.objects.create_superuser("operator", "op@example.com", "correct horse")
    pki = PKI.create()
    issued = pki.issue("sender", client=True)
    endpoint, _ = services.endpoint_create(
        url="https://1.1.1.1/hook",
        event_types=["invoice.*"],
        description="billing (OAuth2 + mTLS)",
        auth={
            "type": "oauth2_client_credentials",
            "token_url": "https://1.1.1.1/oauth/token",
            "client_id": "webhooks-sender",
            "client_secret": SECRET,
            "scope": "webhooks.write",
        },
        client_certificate=issued.certificate,
        client_key=issued.key,
        ca_certificates=pki.ca.certificate,
    )
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "correct horse")
    page.click('input[type="submit"]')
    page.wait_for_selector("#site-name")

    page.goto(f"{live_server.url}/admin/deliveries/endpoint/{endpoint.pk}/change/")
    page.wait_for_selector("#id_auth_type")
    assert page.input_value("#id_auth_type") == "oauth2_client_credentials"
    assert page.input_value("#id_oauth2_token_url") == "https://1.1.1.1/oauth/token"
    assert page.get_attribute("#id_oauth2_client_secret", "type") == "password"
    assert page.input_value("#id_oauth2_client_secret") == ""
    assert page.input_value("#id_client_key") == ""
    assert "BEGIN CERTIFICATE" in page.input_value("#id_client_certificate")
    html = page.content()
    assert SECRET not in html
    assert "PRIVATE KEY" not in html
    page.locator("#id_auth_type").scroll_into_view_if_needed()
    shot(page, "endpoint-delivery-auth")
