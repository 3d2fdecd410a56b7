"""The provider schemes without Django: each provider's SDK agrees with our recipe, malformed
headers are told apart from bad signatures, and secrets that could never verify are refused.
"""

import base64
import json
import time
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paddle_billing.Notifications import Secret
from paddle_billing.Notifications.PaddleSignature import PaddleSignature
from paddle_billing.Notifications.Verifier import Verifier as PaddleVerifier
from sendgrid.helpers.eventwebhook import EventWebhook
from slack_sdk.signature import SignatureVerifier
from square.utils.webhooks_helper import verify_signature as square_verify
from twilio.request_validator import RequestValidator

from receivers.schemes import (
    SCHEMES,
    Headers,
    MalformedHeader,
    SignatureMismatch,
    TimestampOutOfWindow,
    verify,
)
from receivers.schemes.base import MalformedEnvelope, VerificationError, parse_json_array
from tests.receivers.providers import BY_NAME, Signed, twilio_json_request
from webhooks_core.crypto import signing

HMAC_SCHEMES = ["slack", "twilio", "shopify", "paddle", "square"]
URL = "https://hooks.example.com/receivers/provider/"


def check(scheme: str, signed: Signed, secrets: list[str], url: str = URL, now: float = 0) -> None:
    verify(
        SCHEMES[scheme],
        Headers(signed.headers),
        signed.body,
        secrets,
        now=now or time.time(),
        tolerance_seconds=300,
        url=f"{url}?{signed.query}" if signed.query else url,
    )


# --- the providers' SDKs agree ------------------------------------------------------------


def test_slack_sdk_signature_verifies_and_the_sdk_accepts_what_we_check() -> None:
    provider = BY_NAME["slack"]
    key = provider.new_key()
    signed = provider.request(key, "Ev08MFMKH6", url=URL)
    check("slack", signed, [key.secret])
    assert SignatureVerifier(key.secret).is_valid(
        body=signed.body.decode(),
        timestamp=signed.headers["X-Slack-Request-Timestamp"],
        signature=signed.headers["X-Slack-Signature"],
    )


def test_twilio_sdk_form_and_json_signatures_verify() -> None:
    provider = BY_NAME["twilio"]
    key = provider.new_key()
    form = provider.request(key, "idem-1", url=URL)
    check("twilio", form, [key.secret])
    # The SDK's own validator accepts the same request.
    assert RequestValidator(key.secret).validate(
        URL, dict(parse_qsl(form.body.decode())), form.headers["X-Twilio-Signature"]
    )

    body = json.dumps({"type": "x.y", "amount": "500"}).encode()
    signed = twilio_json_request(key.secret, URL, body, "idem-2")
    check("twilio", signed, [key.secret])
    assert RequestValidator(key.secret).validate(
        f"{URL}?{signed.query}", body.decode(), signed.headers["X-Twilio-Signature"]
    )


def test_twilio_repeated_form_fields_are_signed_as_the_sdk_does() -> None:
    key = BY_NAME["twilio"].new_key()
    body = urlencode([("To", "+1"), ("Media", "b"), ("Media", "a"), ("Empty", "")]).encode()
    params: dict[str, Any] = {"To": ["+1"], "Media": ["b", "a"], "Empty": [""]}

    class MultiDict(dict[str, Any]):
        def getall(self, name: str) -> list[str]:
            values: list[str] = self[name]
            return values

    signature = RequestValidator(key.secret).compute_signature(URL, MultiDict(params))
    signed = Signed(body=body, headers={"X-Twilio-Signature": signature})
    check("twilio", signed, [key.secret])


def test_paddle_sdk_verifies_our_recipe_with_one_and_with_several_secrets() -> None:
    provider = BY_NAME["paddle"]
    key, other = provider.new_key(), provider.new_key()
    signed = provider.request(key, "evt_01h8bkrfe7w1vwf8xmytwn51e7", url=URL)
    header = signed.headers["Paddle-Signature"]
    check("paddle", signed, [other.secret, key.secret])

    assert PaddleSignature().verify(header, signed.body.decode(), Secret(key.secret))
    assert not PaddleSignature().verify(header, signed.body.decode(), Secret(other.secret))

    class Request:
        headers = {"Paddle-Signature": header}
        body = signed.body

    assert PaddleVerifier(maximum_variance=300).verify(
        Request(),
        [Secret(other.secret), Secret(key.secret)],
    )


def test_square_sdk_verifies_our_recipe() -> None:
    provider = BY_NAME["square"]
    key = provider.new_key()
    signed = provider.request(key, "6a8f5f28-54a1-4eb0-a98a-3111513fd4fc", url=URL)
    check("square", signed, [key.secret])
    assert square_verify(
        request_body=signed.body.decode(),
        signature_header=signed.headers["x-square-hmacsha256-signature"],
        signature_key=key.secret,
        notification_url=URL,
    )
    with pytest.raises(SignatureMismatch):
        check("square", signed, [key.secret], url=URL + "other")


def test_sendgrid_sdk_verifies_our_recipe_with_the_key_as_sendgrid_shows_it() -> None:
    provider = BY_NAME["sendgrid"]
    key = provider.new_key()
    signed = provider.request(key, "sg-1", url=URL)
    check("sendgrid", signed, [key.secret])
    webhook = EventWebhook(public_key=key.secret)  # the SDK takes the same base64 DER text
    assert webhook.verify_signature(
        signed.body.decode(),
        signed.headers["X-Twilio-Email-Event-Webhook-Signature"],
        signed.headers["X-Twilio-Email-Event-Webhook-Timestamp"],
    )


def test_shopify_recipe_is_base64_hmac_sha256_of_the_body() -> None:
    provider = BY_NAME["shopify"]
    key = provider.new_key()
    signed = provider.request(key, "w1", url=URL)
    check("shopify", signed, [key.secret])
    expected = SCHEMES["shopify"].expected_signature(key.secret, None, signed.body)  # type: ignore[arg-type]
    assert expected == signed.headers["X-Shopify-Hmac-Sha256"]


@pytest.mark.parametrize("scheme", ["slack", "paddle", "sendgrid"])
def test_signed_time_outside_the_window_is_a_replay(scheme: str) -> None:
    provider = BY_NAME[scheme]
    key = provider.new_key()
    signed = provider.request(key, "evt-old", url=URL, ts=int(time.time()) - 301)
    with pytest.raises(TimestampOutOfWindow):
        check(scheme, signed, [key.secret])


# --- malformed headers (400) versus bad signatures (401) ----------------------------------


@pytest.mark.parametrize(
    ("scheme", "headers"),
    [
        ("slack", {"X-Slack-Signature": "v0=abc"}),
        ("slack", {"X-Slack-Signature": "v0=" + "g" * 64}),
        ("slack", {"X-Slack-Signature": "a" * 64}),
        ("slack", {"X-Slack-Signature": "v0=" + "a" * 64, "X-Slack-Request-Timestamp": "12:00"}),
        ("twilio", {"X-Twilio-Signature": "YWJj"}),  # base64, but 3 bytes
        ("twilio", {"X-Twilio-Signature": "é"}),
        ("shopify", {"X-Shopify-Hmac-Sha256": "not base64!"}),
        ("square", {"x-square-hmacsha256-signature": base64.b64encode(b"x" * 20).decode()}),
        ("paddle", {"Paddle-Signature": "h1=" + "a" * 64}),  # no ts
        ("paddle", {"Paddle-Signature": "ts=1671552777"}),  # no h1
        ("paddle", {"Paddle-Signature": "ts=soon;h1=" + "a" * 64}),
        ("paddle", {"Paddle-Signature": "ts=1671552777;h1=xyz"}),
        ("paddle", {"Paddle-Signature": "ts=1671552777,h1=" + "a" * 64}),
        ("sendgrid", {"X-Twilio-Email-Event-Webhook-Signature": "***"}),
        ("sendgrid", {"X-Twilio-Email-Event-Webhook-Signature": "A" * 200}),
        ("sendgrid", {"X-Twilio-Email-Event-Webhook-Timestamp": "-5"}),
    ],
)
def test_malformed_headers_are_named(scheme: str, headers: dict[str, str]) -> None:
    with pytest.raises(MalformedHeader) as raised:
        SCHEMES[scheme].signed_parts(Headers(headers))
    malformed = list(headers)[-1]  # the last header given is the malformed one
    assert malformed.lower() in str(raised.value).lower()


@pytest.mark.parametrize("scheme", [*HMAC_SCHEMES, "sendgrid"])
def test_no_signature_header_is_a_mismatch(scheme: str) -> None:
    provider = BY_NAME[scheme]
    key = provider.new_key()
    signed = provider.request(key, "evt", url=URL)
    unsigned = signed.with_headers(**{provider.signature_header: None})
    with pytest.raises(SignatureMismatch):
        check(scheme, unsigned, [key.secret])


def test_paddle_unknown_signature_versions_are_skipped() -> None:
    provider = BY_NAME["paddle"]
    key = provider.new_key()
    signed = provider.request(key, "evt", url=URL)
    header = signed.headers["Paddle-Signature"] + ";h2=" + "b" * 64
    check("paddle", signed.with_headers(**{"Paddle-Signature": header}), [key.secret])


def test_sendgrid_signature_of_another_timestamp_fails() -> None:
    provider = BY_NAME["sendgrid"]
    key = provider.new_key()
    signed = provider.request(key, "sg", url=URL)
    moved = str(int(signed.headers["X-Twilio-Email-Event-Webhook-Timestamp"]) + 1)
    with pytest.raises(SignatureMismatch):
        check(
            "sendgrid",
            signed.with_headers(**{"X-Twilio-Email-Event-Webhook-Timestamp": moved}),
            [key.secret],
        )


# --- secrets that could never verify ------------------------------------------------------


@pytest.mark.parametrize("scheme", HMAC_SCHEMES)
def test_hmac_schemes_refuse_our_public_key_as_a_secret(scheme: str) -> None:
    _, public = signing.generate_key_pair()
    problem = SCHEMES[scheme].secret_problem(public)
    assert problem is not None
    assert "whpk_" in problem
    assert "public key" in problem


@pytest.mark.parametrize("scheme", HMAC_SCHEMES)
def test_hmac_schemes_refuse_our_private_key_as_a_secret(scheme: str) -> None:
    private, _ = signing.generate_key_pair()
    assert "whsk_" in (SCHEMES[scheme].secret_problem(private) or "")


@pytest.mark.parametrize("scheme", HMAC_SCHEMES)
@pytest.mark.parametrize(
    "secret",
    [
        "8f742231b10e8888abcd99yyyzzz85a5",
        "pdl_ntfset_01gkpjp8bkm3tm53kdgkx6sms7_6h3qd3uFSi",
        "a b ü",
    ],
)
def test_hmac_schemes_take_any_text_the_provider_shows(scheme: str, secret: str) -> None:
    assert SCHEMES[scheme].secret_problem(secret) is None


def _der_b64(public: Any) -> str:
    der = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(der).decode()


@pytest.mark.parametrize(
    "secret",
    [
        signing.generate_secret(),
        signing.generate_key_pair()[1],
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE",  # a truncated P-256 key
        _der_b64(ec.generate_private_key(ec.SECP384R1()).public_key()),
        _der_b64(ed25519.Ed25519PrivateKey.generate().public_key()),
    ],
)
def test_sendgrid_refuses_anything_but_a_p256_public_key(secret: str) -> None:
    assert "P-256" in (SCHEMES["sendgrid"].secret_problem(secret) or "")


def test_sendgrid_takes_the_key_as_sendgrid_shows_it() -> None:
    key = BY_NAME["sendgrid"].new_key()
    assert SCHEMES["sendgrid"].secret_problem(key.secret) is None


# --- a JSON array, item by item, with each item's bytes -----------------------------------


def test_array_items_keep_their_exact_bytes() -> None:
    body = b' \r\n[ {"a": "],[\\"}"} ,\n{"b":[1, {"c": 2}]}\t]\n'
    items = parse_json_array(body)
    assert [item for item, _ in items] == [{"a": '],["}'}, {"b": [1, {"c": 2}]}]
    assert [raw for _, raw in items] == [b'{"a": "],[\\"}"}', b'{"b":[1, {"c": 2}]}']


def test_array_items_keep_non_ascii_bytes() -> None:
    body = '[{"name":"Jürgen ✓"},{"x":"\\u00fc"}]'.encode()
    assert [raw for _, raw in parse_json_array(body)] == [
        '{"name":"Jürgen ✓"}'.encode(),
        b'{"x":"\\u00fc"}',
    ]


@pytest.mark.parametrize(
    "body",
    [b"", b"[", b"{}", b"[1]", b'[{"a": NaN}]', b'[{"a": 1e999}]', b'[{"a": "\\u0000"}]', b"\xff"],
)
def test_array_bodies_that_cannot_be_stored_are_malformed(body: bytes) -> None:
    with pytest.raises(MalformedEnvelope):
        parse_json_array(body)


def test_an_array_nested_too_deep_is_malformed() -> None:
    with pytest.raises(MalformedEnvelope, match="nested"):
        parse_json_array(b"[" + b'{"a":' * 300 + b"1" + b"}" * 300 + b"]")


# --- whatever a caller sends: a verdict, never an unexpected exception --------------------


header_text = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=80
) | st.sampled_from(["v0=", "ts=1;h1=", "ts=;h1=aa", "=", ";;", "YWJj", "A" * 28 + "="])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scheme=st.sampled_from([*HMAC_SCHEMES, "sendgrid"]),
    values=st.lists(header_text, min_size=3, max_size=3),
    body=st.binary(max_size=200) | st.sampled_from([b"[]", b"{}", b"[{}]", b'[{"a":1}]']),
    query=st.sampled_from(["", "bodySHA256=00", "bodySHA256=%ff", "a=b&a=c"]),
)
def test_any_request_is_verified_or_refused_cleanly(
    scheme: str, values: list[str], body: bytes, query: str
) -> None:
    provider = BY_NAME[scheme]
    key = provider.new_key()
    names = [provider.signature_header, *provider.malformed, "X-Slack-Request-Timestamp"]
    headers = Headers(dict(zip(names, values, strict=False)))
    url = f"{URL}?{query}" if query else URL
    try:
        verified = verify(
            SCHEMES[scheme],
            headers,
            body,
            [key.secret],
            now=time.time(),
            tolerance_seconds=300,
            url=url,
        )
    except (VerificationError, MalformedEnvelope):
        return
    # Only a signature made with the key could get here, and none was.
    raise AssertionError(f"verified without a signature: {verified}")


@settings(max_examples=150, deadline=None)
@given(
    scheme=st.sampled_from([*HMAC_SCHEMES, "sendgrid"]),
    body=st.binary(max_size=300)
    | st.sampled_from(
        [
            b'{"event_id": 1, "type": "x"}',
            b'[{"sg_event_id": "a", "event": null}]',
            b'{"type": "url_verification", "challenge": ["x"]}',
            b"MessageSid=SM1&MessageStatus=%FF%FE",
            b"EventType=&CallSid=CA1",
        ]
    ),
    content_type=st.sampled_from(["application/json", "application/x-www-form-urlencoded", ""]),
)
def test_any_authenticated_body_gives_envelopes_or_a_400(
    scheme: str, body: bytes, content_type: str
) -> None:
    """After the signature: events, a challenge, or MalformedEnvelope (a 400), nothing else."""
    instance = SCHEMES[scheme]
    headers = Headers({"Content-Type": content_type, "X-Shopify-Topic": "orders/create"})
    parts = instance.signed_parts(Headers({}))
    try:
        if instance.challenge(headers, body, parts) is None:
            envelopes = instance.envelopes(headers, body, parts)
            assert envelopes
            assert all(e.event_id and e.type for e in envelopes)
    except MalformedEnvelope:
        pass
