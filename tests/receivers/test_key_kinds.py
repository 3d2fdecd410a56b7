"""A `whpk_` public key is never an HMAC secret.

Anyone can read a public key, so an HMAC scheme keyed with one accepts signatures anyone
can make. Every HMAC scheme (ours, stripe, github, and any added later: the rule lives in
`receivers.schemes.base`) refuses one with a 400 and a clear message, and a change of a
source's scheme re-validates every unexpired secret.
"""

import json
import time
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from receivers import schemes, services
from receivers.models import InboxEvent, Source, SourceSecret
from receivers.schemes.base import Headers, Scheme, SignedParts
from tests.receivers.conftest import post
from tests.receivers.helpers import ours_event, sign_github, sign_stripe_lib
from webhooks_core.crypto import signing

pytestmark = pytest.mark.django_db

HMAC_SCHEMES = ["ours", "stripe", "github"]
_, PUBLIC = signing.generate_key_pair()


@pytest.mark.parametrize("scheme", HMAC_SCHEMES)
def test_the_api_refuses_a_public_key_as_an_hmac_secret(api: APIClient, scheme: str) -> None:
    response = api.post(
        "/api/v1/sources",
        data=json.dumps({"slug": "src", "scheme": scheme, "secret": PUBLIC}),
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    message = " ".join(response.json()["secret"])
    assert "public key" in message
    assert "forge" in message
    assert PUBLIC not in response.content.decode()
    assert not Source.objects.exists()


def test_a_standard_source_still_takes_a_public_key(api: APIClient) -> None:
    response = api.post(
        "/api/v1/sources",
        data=json.dumps({"slug": "svix", "scheme": "standard", "secret": PUBLIC}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content


@pytest.mark.parametrize("scheme", HMAC_SCHEMES)
def test_rotation_and_the_admin_refuse_one_too(staff: Client, scheme: str) -> None:
    source, _ = services.source_create(slug="src", scheme=scheme, secret="provider-secret")
    with pytest.raises(services.InvalidSecret, match="public key"):
        services.source_rotate_secret(source=source, secret=PUBLIC)
    page = staff.post(
        f"/admin/receivers/source/{source.pk}/rotate-secret/",
        {"secret": PUBLIC, "grace_hours": "1"},
    )
    assert page.status_code == 200
    assert "public key" in page.content.decode()
    assert source.secrets.count() == 1


class LaterHmacScheme(Scheme):
    """A scheme added later that forgets to call super().secret_problem()."""

    name: ClassVar[str] = "later"

    def signed_parts(self, headers: Headers) -> SignedParts:
        return SignedParts(candidates=[headers.get("X-Sig")], timestamp=None)

    def expected_signature(self, secret: str, parts: SignedParts, body: bytes) -> str | None:
        import hashlib
        import hmac

        return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()

    def secret_problem(self, secret: str) -> str | None:
        return None

    has_timestamp = False


def test_a_scheme_added_later_inherits_the_rule() -> None:
    later = LaterHmacScheme()
    assert "public key" in (schemes.secret_refusal(later, PUBLIC) or "")
    # Even a public key stored past the services never verifies an HMAC.
    import hashlib
    import hmac

    body = b"{}"
    forged = hmac.new(PUBLIC.encode(), body, hashlib.sha256).hexdigest()
    with pytest.raises(schemes.SignatureMismatch):
        schemes.verify(
            later, Headers({"X-Sig": forged}), body, [PUBLIC], now=0, tolerance_seconds=1
        )


@pytest.mark.parametrize("scheme", HMAC_SCHEMES)
def test_a_public_key_stored_before_the_fix_verifies_nothing(client: Client, scheme: str) -> None:
    source, _ = services.source_create(slug="old", scheme=scheme, secret="provider-secret")
    stored = SourceSecret(source=source)
    stored.value = PUBLIC  # written before the services refused it
    stored.save()
    body = ours_event()
    now = int(time.time())
    headers: dict[str, Any] = {
        "ours": lambda: {"X-Webhook-Signature": f"t={now},v1={signing.sign_v1(PUBLIC, now, body)}"},
        "stripe": lambda: sign_stripe_lib(PUBLIC, body),
        "github": lambda: sign_github(PUBLIC, body),
    }[scheme]()
    response = post(client, source.slug, body, headers)
    assert response.status_code == 401
    assert not InboxEvent.objects.exists()
    # And `manage.py check --database default` names it.
    from receivers.checks import check_sources_can_verify

    warnings = check_sources_can_verify(None, databases=["default"])
    assert [w.id for w in warnings] == ["receivers.W005"]
    assert stored.fingerprint in warnings[0].msg


def test_a_scheme_change_re_validates_every_unexpired_secret(staff: Client) -> None:
    source, _ = services.source_create(slug="svix", scheme="standard", secret=PUBLIC)
    with pytest.raises(services.SourceInvalid) as refused:
        services.source_update(source=source, scheme="ours")
    message = " ".join(refused.value.errors["scheme"])
    assert "public key" in message
    assert source.secrets.get().fingerprint in message
    source.refresh_from_db()
    assert source.scheme == "standard"

    # The admin's change form says the same.
    form = {
        "slug": "svix",
        "scheme": "stripe",
        "description": "",
        "enabled": "on",
        "tolerance_seconds": "300",
        "max_body_bytes": str(256 * 1024),
        "expected_account": "",
        "expected_mode": "",
        "api_base_url": "",
        "api_token": "",
        "secrets-TOTAL_FORMS": "0",
        "secrets-INITIAL_FORMS": "0",
        "secrets-MIN_NUM_FORMS": "0",
        "secrets-MAX_NUM_FORMS": "1000",
    }
    page = staff.post(f"/admin/receivers/source/{source.pk}/change/", form)
    assert page.status_code == 200
    assert "public key" in page.content.decode()
    source.refresh_from_db()
    assert source.scheme == "standard"

    # Given with the new scheme's secret, the change goes through and the key stops at once.
    changed = services.source_update(source=source, scheme="ours", secret="whsec_new-one")
    assert changed.scheme == "ours"
    usable = [
        s.value
        for s in changed.secrets.unexpired(__import__("django.utils.timezone").utils.timezone.now())
    ]
    assert usable == ["whsec_new-one"]


def test_an_expired_public_key_does_not_block_a_scheme_change() -> None:
    source, _ = services.source_create(slug="svix", scheme="standard", secret=PUBLIC)
    services.source_rotate_secret(source=source, secret=signing.generate_secret(), grace_seconds=0)
    source.secrets.filter(expires_at__isnull=False).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert services.source_update(source=source, scheme="ours").scheme == "ours"
