"""The provider schemes under the screening and key-kind rules.

The six provider schemes go through the same `schemes.screen` as the first four: a signed
time outside the window, a missing signature or timestamp and too many candidates are
refused before any key touches the body, and a header not in the provider's format is
still a `MalformedHeader` (400, naming it), also before any cryptography. A `whpk_` public
key is refused by the one rule in `schemes.base` and never verifies, whichever scheme.
"""

import time
from typing import Any

import pytest

from receivers import schemes
from receivers.schemes import (
    MAX_SIGNATURES,
    SCHEMES,
    Headers,
    MalformedHeader,
    MalformedSignature,
    SignatureMismatch,
    TimestampOutOfWindow,
    TooManySignatures,
    screen,
    verify,
)
from receivers.schemes.base import common_secret_problem
from tests.receivers.providers import BY_NAME, PROVIDERS, paddle_header
from webhooks_core.crypto import signing

URL = "https://hooks.example.com/receivers/provider/"
TIMED = [p.scheme for p in PROVIDERS if p.signs_time]
HMAC_PROVIDERS = ["slack", "twilio", "shopify", "paddle", "square"]
_, PUBLIC = signing.generate_key_pair()


def counting(monkeypatch: pytest.MonkeyPatch, scheme: str) -> list[str]:
    """Every secret a scheme's signature check is given (none: no cryptography ran)."""
    calls: list[str] = []
    scheme_class = type(SCHEMES[scheme])
    original = scheme_class.signature_matches

    def spy(self: Any, secret: str, parts: Any, body: bytes) -> bool:
        calls.append(secret)
        return original(self, secret, parts, body)

    monkeypatch.setattr(scheme_class, "signature_matches", spy)
    return calls


def test_the_providers_that_sign_a_time_are_the_ones_with_a_window() -> None:
    assert sorted(TIMED) == ["paddle", "sendgrid", "slack"]
    assert sorted(p.scheme for p in PROVIDERS if SCHEMES[p.scheme].has_timestamp) == sorted(TIMED)


@pytest.mark.parametrize("scheme", TIMED)
def test_a_stale_provider_request_costs_no_cryptography(
    scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = BY_NAME[scheme]
    key = provider.new_key()
    signed = provider.request(key, "evt-stale", url=URL, ts=int(time.time()) - 3600)
    calls = counting(monkeypatch, scheme)
    with pytest.raises(TimestampOutOfWindow):
        verify(
            SCHEMES[scheme],
            Headers(signed.headers),
            signed.body,
            [key.secret],
            now=time.time(),
            tolerance_seconds=300,
            url=URL,
        )
    assert calls == []
    # The same request, fresh, is verified (once per secret).
    fresh = provider.request(key, "evt-fresh", url=URL)
    verify(
        SCHEMES[scheme],
        Headers(fresh.headers),
        fresh.body,
        [key.secret],
        now=time.time(),
        tolerance_seconds=300,
        url=URL,
    )
    assert calls == [key.secret]


@pytest.mark.parametrize("provider", PROVIDERS, ids=str)
def test_a_missing_signature_is_refused_before_any_cryptography(
    provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = provider.new_key()
    signed = provider.request(key, "evt", url=URL).with_headers(**{provider.signature_header: None})
    calls = counting(monkeypatch, provider.scheme)
    with pytest.raises(MalformedSignature):  # a SignatureMismatch: 401
        verify(
            SCHEMES[provider.scheme],
            Headers(signed.headers),
            signed.body,
            [key.secret],
            now=time.time(),
            tolerance_seconds=300,
            url=URL,
        )
    assert calls == []


@pytest.mark.parametrize("scheme", ["slack", "sendgrid"])
def test_a_missing_timestamp_is_refused_before_any_cryptography(
    scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = BY_NAME[scheme]
    key = provider.new_key()
    signed = provider.request(key, "evt", url=URL)
    stamp = next(name for name in signed.headers if name.lower().endswith("timestamp"))
    calls = counting(monkeypatch, scheme)
    with pytest.raises(MalformedSignature):
        verify(
            SCHEMES[scheme],
            Headers(signed.with_headers(**{stamp: None}).headers),
            signed.body,
            [key.secret],
            now=time.time(),
            tolerance_seconds=300,
        )
    assert calls == []


@pytest.mark.parametrize("provider", PROVIDERS, ids=str)
def test_a_malformed_provider_header_is_named_by_the_screen(provider: Any) -> None:
    key = provider.new_key()
    signed = provider.request(key, "evt", url=URL).with_headers(**provider.malformed)
    with pytest.raises(MalformedHeader) as raised:
        screen(
            SCHEMES[provider.scheme],
            Headers(signed.headers),
            now=time.time(),
            tolerance_seconds=300,
        )
    [header] = provider.malformed
    assert header.lower() in str(raised.value).lower()


def test_paddle_signatures_are_capped_like_every_scheme_s(monkeypatch: pytest.MonkeyPatch) -> None:
    provider = BY_NAME["paddle"]
    keys = [provider.new_key() for _ in range(MAX_SIGNATURES)]
    signed = provider.request(keys[0], "evt", url=URL)
    ts = int(time.time())
    calls = counting(monkeypatch, "paddle")

    # A rotation's worth (up to the cap) verifies.
    at_cap = {"Paddle-Signature": paddle_header(keys, signed.body, ts)}
    verify(
        SCHEMES["paddle"],
        Headers(at_cap),
        signed.body,
        [keys[-1].secret],
        now=ts,
        tolerance_seconds=300,
    )

    # One more is refused unread, even when the entries are not hex at all.
    calls.clear()
    over = paddle_header([*keys, provider.new_key()], signed.body, ts)
    garbage = f"ts={ts};" + ";".join(["h1=zz"] * (MAX_SIGNATURES + 1))
    for header in (over, garbage):
        with pytest.raises(TooManySignatures):
            verify(
                SCHEMES["paddle"],
                Headers({"Paddle-Signature": header}),
                signed.body,
                [keys[0].secret],
                now=ts,
                tolerance_seconds=300,
            )
    assert calls == []


@pytest.mark.parametrize("scheme", [p.scheme for p in PROVIDERS])
def test_every_provider_scheme_refuses_a_public_key_by_the_shared_rule(scheme: str) -> None:
    instance = SCHEMES[scheme]
    assert not instance.accepts_public_keys
    shared = common_secret_problem(instance, PUBLIC)
    assert shared is not None
    assert "public key" in shared
    assert "forge" in shared
    # One rule: the scheme's own check and the services' give the same answer.
    assert instance.secret_problem(PUBLIC) == shared
    assert schemes.secret_refusal(instance, PUBLIC) == shared


@pytest.mark.parametrize("scheme", HMAC_PROVIDERS)
def test_a_public_key_stored_past_the_rule_verifies_no_provider_request(scheme: str) -> None:
    provider = BY_NAME[scheme]
    # Signed with the public key as the HMAC key, as anyone reading it could.
    from tests.receivers.providers import Key

    signed = provider.request(Key(secret=PUBLIC, signer=PUBLIC), "evt", url=URL)
    with pytest.raises(SignatureMismatch):
        verify(
            SCHEMES[scheme],
            Headers(signed.headers),
            signed.body,
            [PUBLIC],
            now=time.time(),
            tolerance_seconds=300,
            url=f"{URL}?{signed.query}" if signed.query else URL,
        )
    # And a real secret beside it still verifies.
    key = provider.new_key()
    good = provider.request(key, "evt", url=URL)
    verify(
        SCHEMES[scheme],
        Headers(good.headers),
        good.body,
        [PUBLIC, key.secret],
        now=time.time(),
        tolerance_seconds=300,
        url=f"{URL}?{good.query}" if good.query else URL,
    )


@pytest.mark.parametrize("scheme", HMAC_PROVIDERS)
def test_the_provider_hmac_schemes_still_refuse_a_private_key(scheme: str) -> None:
    private, _ = signing.generate_key_pair()
    problem = schemes.secret_refusal(SCHEMES[scheme], private)
    assert problem is not None
    assert "whsk_" in problem
