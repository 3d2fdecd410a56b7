"""The pipeline's verification step, for every scheme, with no Django and no database."""

import time
import uuid

import pytest

from receivers.schemes import (
    SCHEMES,
    Headers,
    MalformedEnvelope,
    SignatureMismatch,
    TimestampOutOfWindow,
    verify,
)
from tests.receivers.helpers import (
    body_of,
    ours_event,
    sign_github,
    sign_ours,
    sign_standard_lib,
    sign_stripe_lib,
)
from webhooks_core.crypto.signing import generate_secret

SECRET = generate_secret()
OTHER = generate_secret()


def signed(scheme: str, body: bytes, secret: str = SECRET, ts: int | None = None) -> Headers:
    if scheme == "ours":
        return Headers(sign_ours([secret], body, ts))
    if scheme == "standard":
        return Headers(sign_standard_lib(secret, body, "msg_1", ts))
    if scheme == "stripe":
        return Headers(sign_stripe_lib(secret, body, ts))
    return Headers(sign_github(secret, body))


def check(scheme: str, headers: Headers, body: bytes, secrets: list[str], now: float = 0) -> None:
    verify(
        SCHEMES[scheme],
        headers,
        body,
        secrets,
        now=now or time.time(),
        tolerance_seconds=300,
    )


@pytest.mark.parametrize("scheme", ["ours", "standard", "stripe", "github"])
def test_valid_signature_passes(scheme: str) -> None:
    body = ours_event()
    check(scheme, signed(scheme, body), body, [SECRET])


@pytest.mark.parametrize("scheme", ["ours", "standard", "stripe", "github"])
def test_one_changed_byte_fails(scheme: str) -> None:
    body = ours_event(data={"amount": 500})
    headers = signed(scheme, body)
    tampered = body.replace(b"500", b"900")
    with pytest.raises(SignatureMismatch):
        check(scheme, headers, tampered, [SECRET])


@pytest.mark.parametrize("scheme", ["ours", "standard", "stripe", "github"])
def test_wrong_secret_and_no_secret_fail(scheme: str) -> None:
    body = ours_event()
    with pytest.raises(SignatureMismatch):
        check(scheme, signed(scheme, body), body, [OTHER])
    with pytest.raises(SignatureMismatch):
        check(scheme, signed(scheme, body), body, [])


@pytest.mark.parametrize("scheme", ["ours", "standard", "stripe", "github"])
def test_any_active_secret_verifies(scheme: str) -> None:
    body = ours_event()
    check(scheme, signed(scheme, body, secret=SECRET), body, [OTHER, SECRET])


@pytest.mark.parametrize("scheme", ["ours", "standard", "stripe"])
def test_stale_timestamp_is_a_replay(scheme: str) -> None:
    body = ours_event()
    old = int(time.time()) - 3600
    with pytest.raises(TimestampOutOfWindow):
        check(scheme, signed(scheme, body, ts=old), body, [SECRET])


@pytest.mark.parametrize("scheme", ["ours", "standard", "stripe"])
def test_stale_timestamp_is_refused_before_any_signature_is_computed(
    scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The window comes before the cryptography, so a stale forged
    # request costs nothing. (The view answers 401 to both, so the caller learns nothing.)
    body = ours_event()
    old = int(time.time()) - 3600
    scheme_class = type(SCHEMES[scheme])
    computed: list[str] = []
    original = scheme_class.signature_matches

    def counting(self: object, secret: str, parts: object, body: bytes) -> bool:
        computed.append(secret)
        return original(self, secret, parts, body)  # type: ignore[arg-type]

    monkeypatch.setattr(scheme_class, "signature_matches", counting)
    with pytest.raises(TimestampOutOfWindow):
        check(scheme, signed(scheme, body, secret=OTHER, ts=old), body, [SECRET])
    assert computed == []


def test_ours_accepts_several_v1_signatures_as_our_sender_sends_during_rotation() -> None:
    body = ours_event()
    headers = Headers(sign_ours([OTHER, SECRET], body))
    check("ours", headers, body, [SECRET])


def test_ours_rejects_a_timestamp_that_is_not_ascii_digits() -> None:
    body = ours_event()
    headers = sign_ours([SECRET], body)
    headers["X-Webhook-Signature"] = headers["X-Webhook-Signature"].replace("t=", "t=²", 1)
    with pytest.raises(SignatureMismatch):
        check("ours", Headers(headers), body, [SECRET])


def test_standard_accepts_svix_header_names() -> None:
    body = ours_event()
    headers = Headers(sign_standard_lib(SECRET, body, "msg_1", prefix="svix"))
    check("standard", headers, body, [SECRET])


def test_standard_signature_is_bound_to_the_message_id() -> None:
    body = ours_event()
    headers = sign_standard_lib(SECRET, body, "msg_1")
    headers["webhook-id"] = "msg_2"
    with pytest.raises(SignatureMismatch):
        check("standard", Headers(headers), body, [SECRET])


def test_standard_ignores_a_secret_that_is_not_base64() -> None:
    body = ours_event()
    check("standard", signed("standard", body), body, ["whsec_not base64!", SECRET])


def test_github_has_no_timestamp_window() -> None:
    body = ours_event()
    check("github", signed("github", body), body, [SECRET], now=time.time() + 10 * 86400)


# --- envelopes ---------------------------------------------------------------------------


def test_ours_envelope() -> None:
    event_id = str(uuid.uuid4())
    body = ours_event("invoice.paid", {"x": 1}, event_id=event_id, future_field=True)
    scheme = SCHEMES["ours"]
    headers = Headers(sign_ours([SECRET], body))
    envelope = scheme.envelope(headers, body, scheme.signed_parts(headers))
    assert (envelope.event_id, envelope.type) == (event_id, "invoice.paid")
    assert envelope.provider_timestamp is not None
    assert envelope.provider_timestamp.isoformat() == "2026-04-15T10:12:34+00:00"
    assert envelope.payload["future_field"] is True


def test_standard_envelope_takes_the_id_from_the_header() -> None:
    body = body_of({"type": "invoice.paid", "timestamp": "2026-04-15T10:12:34Z", "data": {}})
    scheme = SCHEMES["standard"]
    headers = Headers(sign_standard_lib(SECRET, body, "msg_42"))
    envelope = scheme.envelope(headers, body, scheme.signed_parts(headers))
    assert (envelope.event_id, envelope.type) == ("msg_42", "invoice.paid")


def test_stripe_envelope_carries_mode_and_account() -> None:
    body = body_of(
        {
            "id": "evt_1",
            "type": "payment_intent.succeeded",
            "created": 1791270000,
            "livemode": False,
            "account": "acct_1",
            "data": {"object": {}},
        }
    )
    scheme = SCHEMES["stripe"]
    headers = Headers(sign_stripe_lib(SECRET, body))
    envelope = scheme.envelope(headers, body, scheme.signed_parts(headers))
    assert (envelope.event_id, envelope.mode, envelope.account) == ("evt_1", "test", "acct_1")
    assert envelope.provider_timestamp is not None


def test_github_envelope_type_includes_the_action() -> None:
    body = body_of({"action": "opened", "number": 1})
    scheme = SCHEMES["github"]
    headers = Headers(sign_github(SECRET, body, event="pull_request", delivery="d-1"))
    envelope = scheme.envelope(headers, body, scheme.signed_parts(headers))
    assert (envelope.event_id, envelope.type) == ("d-1", "pull_request.opened")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"type": "a.b"}', "'id'"),
        (b'{"id": "e1"}', "'type'"),
        (b'{"id": "", "type": "a.b"}', "'id'"),
        (b'{"id": "' + b"x" * 300 + b'", "type": "a.b"}', "longer"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_malformed_envelopes(body: bytes, message: str) -> None:
    scheme = SCHEMES["ours"]
    headers = Headers(sign_ours([SECRET], body))
    with pytest.raises(MalformedEnvelope, match=message):
        scheme.envelope(headers, body, scheme.signed_parts(headers))


def test_standard_verifies_a_secret_without_base64_padding() -> None:
    # As shown by some providers; both reference libraries accept it.
    unpadded = "whsec_enp6enp6enp6enp6enp6enp6enp6enp6enp6enp6eno"
    body = ours_event()
    check("standard", signed("standard", body, secret=unpadded), body, [unpadded])
    assert SCHEMES["standard"].secret_problem(unpadded) is None


@pytest.mark.parametrize("scheme", ["ours", "standard", "stripe", "github"])
def test_an_empty_secret_never_verifies(scheme: str) -> None:
    # An empty HMAC key is a signature anyone can compute: it must not count as a secret.
    import hashlib
    import hmac

    body = ours_event()
    ts = int(time.time())
    forged = hmac.new(b"", f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
    headers = {
        "ours": {"X-Webhook-Signature": f"t={ts},v1={forged}"},
        "stripe": {"Stripe-Signature": f"t={ts},v1={forged}"},
        "github": {
            "X-Hub-Signature-256": "sha256=" + hmac.new(b"", body, hashlib.sha256).hexdigest()
        },
        "standard": {"webhook-id": "m", "webhook-timestamp": str(ts), "webhook-signature": "v1,"},
    }[scheme]
    with pytest.raises(SignatureMismatch):
        check(scheme, Headers(headers), body, [""])
    assert SCHEMES[scheme].secret_problem("") is not None
