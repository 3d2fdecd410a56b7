"""Which configured secrets could never verify a request (pure: no database)."""

import pytest

from receivers.schemes import SCHEMES
from webhooks_core.crypto.signing import generate_secret


# A SendGrid source holds an ECDSA public key, never a shared secret: see
# tests/receivers/schemes/test_providers.py for what it accepts.
@pytest.mark.parametrize("scheme", sorted(set(SCHEMES) - {"sendgrid"}))
def test_generated_secrets_are_fine_everywhere(scheme: str) -> None:
    assert SCHEMES[scheme].secret_problem(generate_secret()) is None


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("secret", ["", "with\nnewline", "tab\there", "nul\x00", "\ud800"])
def test_unusable_secrets_are_named(scheme: str, secret: str) -> None:
    assert SCHEMES[scheme].secret_problem(secret)


@pytest.mark.parametrize("scheme", ["ours", "stripe", "github"])
def test_any_text_keys_an_hmac_for_the_hex_schemes(scheme: str) -> None:
    assert SCHEMES[scheme].secret_problem("a github secret with spaces ü") is None


@pytest.mark.parametrize("secret", ["whsec_not base64!", "whsec_", "whsec_abc", "plain words"])
def test_standard_webhooks_secrets_must_be_base64(secret: str) -> None:
    assert "base64" in (SCHEMES["standard"].secret_problem(secret) or "")


def test_standard_webhooks_secret_without_prefix_is_fine() -> None:
    assert SCHEMES["standard"].secret_problem(generate_secret().removeprefix("whsec_")) is None


def test_standard_webhooks_secret_without_padding_is_fine() -> None:
    # 32 bytes shown without the trailing "=", as some providers do.
    unpadded = "whsec_enp6enp6enp6enp6enp6enp6enp6enp6enp6enp6eno"
    assert SCHEMES["standard"].secret_problem(unpadded) is None
