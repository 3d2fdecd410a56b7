"""Standard Webhooks sources verifying asymmetric v1a (ed25519) entries with whpk_ keys."""

import pytest

from receivers.schemes import SCHEMES, Headers, SignatureMismatch, TimestampOutOfWindow, verify
from webhooks_core.crypto import signing

# The published test vector (Svix / Standard Webhooks).
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TS = 1614265330
BODY = b'{"test": 2432232314}'
PUBLIC = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4="
V1A = "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg=="
V1_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
V1 = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
STANDARD = SCHEMES["standard"]


def headers(signature: str, *, msg_id: str = MSG_ID, prefix: str = "webhook") -> Headers:
    return Headers(
        {
            f"{prefix}-id": msg_id,
            f"{prefix}-timestamp": str(TS),
            f"{prefix}-signature": signature,
        }
    )


def check(h: Headers, secrets: list[str], body: bytes = BODY) -> int:
    return verify(STANDARD, h, body, secrets, now=TS + 10, tolerance_seconds=300).secret_index


@pytest.mark.parametrize("prefix", ["webhook", "svix"])
def test_the_published_v1a_vector_verifies_with_the_public_key(prefix: str) -> None:
    assert check(headers(V1A, prefix=prefix), [PUBLIC]) == 0


def test_every_unexpired_key_is_tried() -> None:
    _, other = signing.generate_key_pair()
    assert check(headers(V1A), [other, PUBLIC]) == 1
    # A source migrating from HMAC to ed25519 holds both kinds.
    assert check(headers(f"{V1} {V1A}"), [PUBLIC, V1_SECRET]) == 0
    assert check(headers(f"{V1A} {V1}"), [signing.generate_secret(), V1_SECRET]) == 1


@pytest.mark.parametrize(
    ("signature", "body", "msg_id"),
    [
        (V1A, BODY + b" ", MSG_ID),
        (V1A, BODY, "msg_other"),
        ("v1a,AAAA", BODY, MSG_ID),
        ("v1a," + "A" * 88, BODY, MSG_ID),
        ("v1a,not base64", BODY, MSG_ID),
        ("v1," + V1A.removeprefix("v1a,"), BODY, MSG_ID),  # a v1a signature labelled v1
        ("v2," + V1A.removeprefix("v1a,"), BODY, MSG_ID),
        ("", BODY, MSG_ID),
    ],
)
def test_anything_else_is_refused(signature: str, body: bytes, msg_id: str) -> None:
    with pytest.raises(SignatureMismatch):
        check(headers(signature, msg_id=msg_id), [PUBLIC], body)


def test_a_public_key_does_not_accept_an_hmac_signature_nor_the_reverse() -> None:
    with pytest.raises(SignatureMismatch):
        check(headers(V1), [PUBLIC])
    with pytest.raises(SignatureMismatch):
        check(headers(V1A), [V1_SECRET])


def test_a_stale_v1a_request_is_a_replay() -> None:
    with pytest.raises(TimestampOutOfWindow):
        verify(STANDARD, headers(V1A), BODY, [PUBLIC], now=TS + 301, tolerance_seconds=300)


def test_public_keys_are_checked_when_configured() -> None:
    assert STANDARD.secret_problem(PUBLIC) is None
    assert "bytes" in (STANDARD.secret_problem("whpk_AAAA") or "")
    assert "base64" in (STANDARD.secret_problem("whpk_not base64") or "")
    private, _ = signing.generate_key_pair()
    assert "public key" in (STANDARD.secret_problem(private) or "")
