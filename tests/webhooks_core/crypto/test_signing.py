"""Signing outbound requests: both wire schemes, checked by code that is not ours.

The `t=,v1=` scheme is checked by an independent implementation of the recipe written
here; the Standard Webhooks headers by the `standardwebhooks` library itself.
"""

import base64
import hashlib
import hmac
import json
import re
import time

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from webhooks_core.crypto import signing

BODY = json.dumps(
    {
        "id": "0b0e7f0e-4a51-4bb4-9d8b-3e0f1c1d2e3f",
        "type": "invoice.paid",
        "version": 1,
        "occurred_at": "2026-04-15T10:12:34Z",
        "data": {"amount": 4200, "currency": "EUR", "note": "café ☕"},
    },
    separators=(",", ":"),
    ensure_ascii=False,
).encode("utf-8")
MSG_ID = "0b0e7f0e-4a51-4bb4-9d8b-3e0f1c1d2e3f"


def recipe_v1(secret: str, timestamp: int, body: bytes) -> str:
    """The recipe of docs/wire-format.md, written from the spec, not from our code."""
    message = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def parse_signature_header(header: str) -> tuple[int, list[str]]:
    timestamp: int | None = None
    signatures: list[str] = []
    for item in header.split(","):
        key, value = item.split("=", 1)
        if key == "t":
            timestamp = int(value)
        elif key == "v1":
            signatures.append(value)
    assert timestamp is not None, header
    return timestamp, signatures


# --- secrets --------------------------------------------------------------------------


def test_generate_secret_is_whsec_plus_base64_of_32_bytes() -> None:
    secret = signing.generate_secret()
    assert secret.startswith("whsec_")
    raw = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    assert len(raw) == 32


def test_generate_secret_is_random() -> None:
    assert len({signing.generate_secret() for _ in range(50)}) == 50


def test_standard_webhooks_key_is_the_decoded_part() -> None:
    raw = bytes(range(32))
    secret = "whsec_" + base64.b64encode(raw).decode()
    assert signing.standard_webhooks_key(secret) == raw


# --- X-Webhook-Signature (t=,v1=) ------------------------------------------------------


def test_v1_header_format_and_independent_verification() -> None:
    secret = signing.generate_secret()
    ts = int(time.time())
    headers = signing.signature_headers([secret], msg_id=MSG_ID, timestamp=ts, body=BODY)

    header = headers["X-Webhook-Signature"]
    assert re.fullmatch(r"t=\d+,v1=[0-9a-f]{64}", header), header
    parsed_ts, signatures = parse_signature_header(header)
    assert parsed_ts == ts
    assert signatures == [recipe_v1(secret, ts, BODY)]


def test_v1_has_one_signature_per_secret_in_order() -> None:
    old, new = signing.generate_secret(), signing.generate_secret()
    ts = 1_700_000_000
    headers = signing.signature_headers([new, old], msg_id=MSG_ID, timestamp=ts, body=BODY)

    parsed_ts, signatures = parse_signature_header(headers["X-Webhook-Signature"])
    assert parsed_ts == ts
    assert signatures == [recipe_v1(new, ts, BODY), recipe_v1(old, ts, BODY)]
    assert headers["X-Webhook-Signature"].count("v1=") == 2


def test_signing_needs_at_least_one_secret() -> None:
    with pytest.raises(ValueError, match="at least one secret"):
        signing.signature_headers([], msg_id=MSG_ID, timestamp=1, body=BODY)


def test_v1_signature_depends_on_the_exact_bytes() -> None:
    secret = signing.generate_secret()
    assert signing.sign_v1(secret, 1, BODY) != signing.sign_v1(secret, 1, BODY + b" ")
    assert signing.sign_v1(secret, 1, BODY) != signing.sign_v1(secret, 2, BODY)


# --- Standard Webhooks -----------------------------------------------------------------


def _standard_headers(secrets_: list[str], ts: int, body: bytes = BODY) -> dict[str, str]:
    signed = signing.signature_headers(secrets_, msg_id=MSG_ID, timestamp=ts, body=body)
    return {
        "webhook-id": MSG_ID,
        "webhook-timestamp": str(ts),
        "webhook-signature": signed["webhook-signature"],
    }


def test_standard_webhooks_library_verifies_our_headers() -> None:
    secret = signing.generate_secret()
    headers = _standard_headers([secret], int(time.time()))

    assert re.fullmatch(r"v1,[A-Za-z0-9+/]+=*", headers["webhook-signature"])
    payload = Webhook(secret).verify(BODY, headers)
    assert payload["type"] == "invoice.paid"


def test_standard_webhooks_with_two_secrets_each_verifies() -> None:
    old, new = signing.generate_secret(), signing.generate_secret()
    headers = _standard_headers([new, old], int(time.time()))

    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(old).verify(BODY, headers)
    Webhook(new).verify(BODY, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(signing.generate_secret()).verify(BODY, headers)


def test_standard_webhooks_rejects_tampered_body() -> None:
    secret = signing.generate_secret()
    headers = _standard_headers([secret], int(time.time()))
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY.replace(b"4200", b"4201"), headers)


def test_standard_webhooks_rejects_stale_timestamp() -> None:
    secret = signing.generate_secret()
    headers = _standard_headers([secret], int(time.time()) - 3600)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY, headers)


# --- verify_v1 (the receiver's side) ----------------------------------------------------


def test_verify_v1_accepts_a_good_signature() -> None:
    secret = signing.generate_secret()
    now = int(time.time())
    header = signing.signature_headers([secret], msg_id=MSG_ID, timestamp=now, body=BODY)[
        "X-Webhook-Signature"
    ]
    assert signing.verify_v1(secret, header, BODY, now=now)
    # Within the tolerance on either side.
    assert signing.verify_v1(secret, header, BODY, now=now + 299)
    assert signing.verify_v1(secret, header, BODY, now=now - 299)


def test_verify_v1_accepts_either_secret_during_rotation() -> None:
    old, new = signing.generate_secret(), signing.generate_secret()
    now = 1_700_000_000
    header = f"t={now},v1={recipe_v1(new, now, BODY)},v1={recipe_v1(old, now, BODY)}"
    assert signing.verify_v1(old, header, BODY, now=now)
    assert signing.verify_v1(new, header, BODY, now=now)


def test_verify_v1_rejects_tampered_body() -> None:
    secret = signing.generate_secret()
    now = 1_700_000_000
    header = f"t={now},v1={recipe_v1(secret, now, BODY)}"
    assert not signing.verify_v1(secret, header, BODY + b"\n", now=now)
    assert not signing.verify_v1(secret, header, BODY.replace(b"4200", b"1"), now=now)


def test_verify_v1_rejects_stale_and_future_timestamps() -> None:
    secret = signing.generate_secret()
    ts = 1_700_000_000
    header = f"t={ts},v1={recipe_v1(secret, ts, BODY)}"
    assert not signing.verify_v1(secret, header, BODY, now=ts + 301)
    assert not signing.verify_v1(secret, header, BODY, now=ts - 301)
    assert signing.verify_v1(secret, header, BODY, now=ts + 301, tolerance_seconds=600)


def test_verify_v1_rejects_wrong_secret() -> None:
    secret = signing.generate_secret()
    now = 1_700_000_000
    header = f"t={now},v1={recipe_v1(secret, now, BODY)}"
    assert not signing.verify_v1(signing.generate_secret(), header, BODY, now=now)


def test_verify_v1_rejects_a_signature_over_another_timestamp() -> None:
    secret = signing.generate_secret()
    now = 1_700_000_000
    # The attacker replays an old signature with a fresh timestamp.
    header = f"t={now},v1={recipe_v1(secret, now - 1000, BODY)}"
    assert not signing.verify_v1(secret, header, BODY, now=now)


@pytest.mark.parametrize(
    "header",
    [
        "",
        "garbage",
        "v1=abc",
        "t=,v1=abc",
        "t=abc,v1=abc",
        "t=-5,v1=abc",
        "t=²,v1=abc",  # a Unicode digit that int() refuses
        "t=\u0661\u0667" + "\u0660" * 8 + ",v1=abc",  # Arabic-Indic digits
        "t=1700000000",
        "t=1700000000,v1=",
        "t=1700000000,v1=é",  # non-ASCII signature
        "t=1700000000,v1=\x00",
        "t=99999999999999999999999999999,v1=abc",
    ],
)
def test_verify_v1_rejects_malformed_headers_without_raising(header: str) -> None:
    assert signing.verify_v1(signing.generate_secret(), header, BODY, now=1_700_000_000) is False


# --- secrets without base64 padding, empty secrets ---------------------------------------

UNPADDED = "whsec_enp6enp6enp6enp6enp6enp6enp6enp6enp6enp6eno"


def test_an_unpadded_secret_signs_as_the_standard_webhooks_library_does() -> None:
    from datetime import UTC, datetime

    ts = int(time.time())
    ours = signing.sign_standard(UNPADDED, MSG_ID, ts, BODY)
    theirs = Webhook(UNPADDED).sign(MSG_ID, datetime.fromtimestamp(ts, tz=UTC), BODY.decode())
    assert ours == theirs
    assert signing.standard_webhooks_key(UNPADDED) == b"zzz" * 10 + b"zz"
    Webhook(UNPADDED).verify(BODY, _standard_headers([UNPADDED], ts))


@pytest.mark.parametrize("secret", ["", "whsec_", "whsec_====", "whsec_a", "whsec_ab!d"])
def test_an_empty_or_broken_standard_secret_is_refused_never_an_empty_key(secret: str) -> None:
    with pytest.raises(ValueError, match=r"empty|base64"):
        signing.standard_webhooks_key(secret)
    with pytest.raises(ValueError, match=r"empty|base64"):
        signing.sign_standard(secret, MSG_ID, 1, BODY)


def test_an_empty_secret_never_signs_v1() -> None:
    with pytest.raises(ValueError, match="empty"):
        signing.sign_v1("", 1, BODY)
    with pytest.raises(ValueError, match="empty"):
        signing.signature_headers([""], msg_id=MSG_ID, timestamp=1, body=BODY)


# --- v1a (ed25519) and the published vectors ------------------------------------------

VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TS = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_PRIVATE = (
    "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg=="
)
VECTOR_PUBLIC = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4="
VECTOR_V1A = (
    "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg=="
)


def test_published_v1a_vector() -> None:
    assert signing.sign_v1a(VECTOR_PRIVATE, VECTOR_ID, VECTOR_TS, VECTOR_BODY) == VECTOR_V1A
    assert signing.public_key_of(VECTOR_PRIVATE) == VECTOR_PUBLIC
    assert signing.verify_v1a(VECTOR_PUBLIC, VECTOR_ID, VECTOR_TS, VECTOR_BODY, VECTOR_V1A)


def test_published_v1_vector() -> None:
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    expected = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    assert signing.sign_standard(secret, VECTOR_ID, VECTOR_TS, VECTOR_BODY) == expected


def test_v1a_verification_refuses_any_change() -> None:
    verify = signing.verify_v1a
    assert not verify(VECTOR_PUBLIC, VECTOR_ID, VECTOR_TS, VECTOR_BODY + b" ", VECTOR_V1A)
    assert not verify(VECTOR_PUBLIC, VECTOR_ID, VECTOR_TS + 1, VECTOR_BODY, VECTOR_V1A)
    assert not verify(VECTOR_PUBLIC, "msg_other", VECTOR_TS, VECTOR_BODY, VECTOR_V1A)
    _, other_public = signing.generate_key_pair()
    assert not verify(other_public, VECTOR_ID, VECTOR_TS, VECTOR_BODY, VECTOR_V1A)
    for garbage in ("v1a,", "v1a,not base64!", "v1a,AAAA", "v1," + VECTOR_V1A[4:], ""):
        assert not verify(VECTOR_PUBLIC, VECTOR_ID, VECTOR_TS, VECTOR_BODY, garbage)
    assert not verify("whpk_short", VECTOR_ID, VECTOR_TS, VECTOR_BODY, VECTOR_V1A)


def test_generated_key_pairs_follow_the_svix_encoding() -> None:
    private, public = signing.generate_key_pair()
    raw = base64.b64decode(private.removeprefix("whsk_"), validate=True)
    assert len(raw) == 64
    assert base64.b64decode(public.removeprefix("whpk_"), validate=True) == raw[32:]
    assert signing.public_key_of(private) == public
    entry = signing.sign_v1a(private, MSG_ID, 1700000000, BODY)
    assert signing.verify_v1a(public, MSG_ID, 1700000000, BODY, entry)
    assert private != signing.generate_key_pair()[0]


@pytest.mark.parametrize(
    "bad",
    [
        "whpk_" + VECTOR_PRIVATE.removeprefix("whsk_"),  # wrong prefix
        "whsk_not-base64",
        "whsk_" + base64.b64encode(b"x" * 16).decode(),  # wrong length
        "whsk_" + base64.b64encode(b"x" * 32 + b"y" * 32).decode(),  # halves do not match
    ],
)
def test_malformed_private_keys_are_refused(bad: str) -> None:
    with pytest.raises(signing.InvalidKey) as error:
        signing.public_key_of(bad)
    assert bad.split("_", 1)[1] not in str(error.value)


def test_check_public_key() -> None:
    signing.check_public_key(VECTOR_PUBLIC)
    for bad in (VECTOR_PRIVATE, "whpk_", "whpk_AAAA", "whsec_" + VECTOR_PUBLIC[5:]):
        with pytest.raises(signing.InvalidKey):
            signing.check_public_key(bad)


@pytest.mark.parametrize(
    ("scheme", "versions"),
    [("v1", ["v1", "v1"]), ("v1a", ["v1a"]), ("v1,v1a", ["v1", "v1", "v1a"])],
)
def test_signature_headers_per_scheme(scheme: str, versions: list[str]) -> None:
    secrets_ = [signing.generate_secret(), signing.generate_secret()]
    private, public = signing.generate_key_pair()
    ts = int(time.time())
    headers = signing.signature_headers(
        secrets_, msg_id=MSG_ID, timestamp=ts, body=BODY, scheme=scheme, private_keys=[private]
    )
    entries = headers["webhook-signature"].split(" ")
    assert [entry.split(",", 1)[0] for entry in entries] == versions
    # The classic header is HMAC whatever the scheme.
    assert parse_signature_header(headers["X-Webhook-Signature"])[1] == [
        recipe_v1(s, ts, BODY) for s in secrets_
    ]
    for entry in entries:
        if entry.startswith("v1a,"):
            assert signing.verify_v1a(public, MSG_ID, ts, BODY, entry)
    if "v1" in versions:
        # The standardwebhooks library skips the v1a entry and verifies the v1 one.
        std = {
            "webhook-id": MSG_ID,
            "webhook-timestamp": str(ts),
            "webhook-signature": headers["webhook-signature"],
        }
        Webhook(secrets_[1]).verify(BODY, std)


def test_v1a_without_a_key_or_an_unknown_scheme_is_refused() -> None:
    secret = signing.generate_secret()
    with pytest.raises(ValueError, match="private key"):
        signing.signature_headers([secret], msg_id=MSG_ID, timestamp=1, body=BODY, scheme="v1a")
    with pytest.raises(ValueError, match="unknown signature scheme"):
        signing.signature_headers([secret], msg_id=MSG_ID, timestamp=1, body=BODY, scheme="v2")
