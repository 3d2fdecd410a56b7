"""System checks on stored sources: one that cannot verify anything is reported."""

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.utils import timezone

from receivers import services
from receivers.checks import check_sources_can_verify
from receivers.models import Source, SourceSecret

pytestmark = pytest.mark.django_db


def problems() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for message in check_sources_can_verify(None, databases=["default"]):
        found.setdefault(message.id or "", []).append(message.msg)
    return found


def test_configured_sources_pass() -> None:
    services.source_create(slug="shop", scheme="ours")
    Source.objects.create(slug="off", scheme="github", enabled=False)  # disabled: fine
    assert problems() == {}


def test_enabled_source_without_an_active_secret_is_reported() -> None:
    Source.objects.create(slug="bare", scheme="github")
    expired, _ = services.source_create(slug="expired", scheme="ours")
    expired.secrets.update(expires_at=timezone.now() - timedelta(seconds=1))

    found = problems()
    assert set(found) == {"receivers.W003"}
    assert len(found["receivers.W003"]) == 2
    assert any("'bare'" in msg for msg in found["receivers.W003"])
    assert any("/receivers/expired/" in msg for msg in found["receivers.W003"])


def test_a_source_whose_scheme_is_not_registered_is_reported(settings: Any) -> None:
    settings.RECEIVERS_SCHEMES = ["examples.providers.acme.AcmeScheme"]
    services.source_create(slug="acme", scheme="acme", secret="acme_sk_" + "x" * 24)
    services.source_create(slug="off", scheme="acme", secret="acme_sk_" + "y" * 24, enabled=False)
    assert problems() == {}

    settings.RECEIVERS_SCHEMES = []

    found = problems()
    assert set(found) == {"receivers.W006"}
    [message] = found["receivers.W006"]
    assert "'acme'" in message
    assert "503" in message


def test_secret_encrypted_with_a_lost_key_is_reported_without_revealing_it() -> None:
    source, secret = services.source_create(slug="shop", scheme="ours")
    foreign = Fernet(Fernet.generate_key()).encrypt(b"whsec_other").decode()
    SourceSecret.objects.filter(source=source).update(encrypted_value=foreign)

    found = problems()
    assert set(found) == {"receivers.W004"}
    [message] = found["receivers.W004"]
    assert "'shop'" in message
    assert secret not in message
    assert "whsec_other" not in message


def test_runs_only_when_databases_are_checked() -> None:
    Source.objects.create(slug="bare", scheme="github")
    assert check_sources_can_verify(None, databases=None) == []
    err = StringIO()
    call_command("check", "--tag", "database", "--database", "default", stderr=err)
    assert "receivers.W003" in err.getvalue()
    err = StringIO()
    call_command("check", "--tag", "database", stdout=StringIO(), stderr=err)
    assert "receivers.W003" not in err.getvalue()
