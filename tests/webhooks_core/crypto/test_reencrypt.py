"""Rotating WEBHOOKS_ENCRYPTION_KEY (docs/security.md): new key first, `reencrypt_secrets`,
then the old key can go, and every secret at rest still decrypts."""

import io

import pytest
from django.core.management import CommandError, call_command
from pytest_django.fixtures import Settings

from deliveries import services
from deliveries.models import Endpoint
from receivers import services as receiving
from receivers.models import Source
from webhooks_core.crypto import encryption

pytestmark = pytest.mark.django_db


def test_rotation_reencrypts_every_secret_so_the_old_key_can_go(settings: Settings) -> None:
    old, new = encryption.generate_key(), encryption.generate_key()
    settings.WEBHOOKS_ENCRYPTION_KEY = old
    endpoint, signing_secret = services.endpoint_create(
        url="https://1.1.1.1/hook",
        event_types=["*"],
        custom_headers={"Authorization": "Bearer partner-token"},
    )
    source, source_secret = receiving.source_create(slug="shop", scheme="ours")

    settings.WEBHOOKS_ENCRYPTION_KEY = f"{new},{old}"
    out = io.StringIO()
    call_command("reencrypt_secrets", stdout=out)
    assert "deliveries.EndpointSecret: 1 re-encrypted" in out.getvalue()
    assert "deliveries.Endpoint: 1 re-encrypted" in out.getvalue()

    settings.WEBHOOKS_ENCRYPTION_KEY = new  # the old key is gone
    endpoint = Endpoint.objects.get(pk=endpoint.pk)
    assert endpoint.secrets.get().value == signing_secret
    assert endpoint.custom_headers_plain()["Authorization"] == "Bearer partner-token"
    assert Source.objects.get(pk=source.pk).secrets.get().value == source_secret
    assert "partner-token" not in out.getvalue()


def test_a_secret_no_key_decrypts_stops_the_command_with_a_hint(settings: Settings) -> None:
    settings.WEBHOOKS_ENCRYPTION_KEY = encryption.generate_key()
    services.endpoint_create(url="https://1.1.1.1/hook", event_types=["*"])
    settings.WEBHOOKS_ENCRYPTION_KEY = encryption.generate_key()
    with pytest.raises(CommandError, match="keep every old key"):
        call_command("reencrypt_secrets", stdout=io.StringIO())
