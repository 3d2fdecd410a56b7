"""What a request's signature headers can cost before they are trusted.

The count, the form and the timestamp window of the signatures are checked before any key
touches the body (`schemes.screen`), so a flood of forged candidates costs no cryptography.
"""

import time
import uuid

import pytest

from receivers.schemes import (
    MAX_SIGNATURES,
    SCHEMES,
    Headers,
    MalformedSignature,
    TimestampOutOfWindow,
    TooManySignatures,
    screen,
    verify,
)
from tests.receivers.helpers import ours_event, sign_ours, sign_standard_lib, sign_stripe_lib
from webhooks_core.crypto import signing

PRIVATE, PUBLIC = signing.generate_key_pair()
FORGED_V1A = "v1a," + signing.sign_v1a(PRIVATE, "other", 1, b"x").removeprefix("v1a,")


def v1a_headers(body: bytes, entries: list[str], ts: int | None = None) -> dict[str, str]:
    return {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(int(time.time()) if ts is None else ts),
        "webhook-signature": " ".join(entries),
    }


def counting_verifications(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    original = signing.verify_v1a_message

    def spy(public_key: str, message: bytes, entry: str) -> bool:
        calls.append(entry)
        return original(public_key, message, entry)

    monkeypatch.setattr(signing, "verify_v1a_message", spy)
    return calls


def test_more_candidates_than_the_cap_are_refused_before_any_verification(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = counting_verifications(monkeypatch)
    body = ours_event()
    headers = Headers(v1a_headers(body, [FORGED_V1A] * (MAX_SIGNATURES + 1)))
    with pytest.raises(TooManySignatures):
        verify(SCHEMES["standard"], headers, body, [PUBLIC], now=time.time(), tolerance_seconds=300)
    assert calls == []


@pytest.mark.parametrize("scheme", ["ours", "stripe", "github"])
def test_the_cap_is_the_same_for_every_scheme(scheme: str) -> None:
    ts = int(time.time())
    many = ",".join(f"v1={'0' * 64}" for _ in range(MAX_SIGNATURES + 1))
    header = {
        "ours": {"X-Webhook-Signature": f"t={ts},{many}"},
        "stripe": {"Stripe-Signature": f"t={ts},{many}"},
        # GitHub sends one signature; a second line joined by the server is not one.
        "github": {"X-Hub-Signature-256": "sha256=" + "0" * 64},
    }[scheme]
    if scheme == "github":
        parts = screen(SCHEMES[scheme], Headers(header), now=ts, tolerance_seconds=300)
        assert len(parts.candidates) == 1
        return
    with pytest.raises(TooManySignatures):
        screen(SCHEMES[scheme], Headers(header), now=ts, tolerance_seconds=300)


def test_a_stale_v1a_request_costs_no_verification(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting_verifications(monkeypatch)
    body = ours_event()
    stale = int(time.time()) - 3600
    headers = Headers(v1a_headers(body, [FORGED_V1A], ts=stale))
    with pytest.raises(TimestampOutOfWindow):
        verify(SCHEMES["standard"], headers, body, [PUBLIC], now=time.time(), tolerance_seconds=300)
    assert calls == []


@pytest.mark.parametrize(
    "entries",
    [
        ["v1a,AAAA"],  # base64, but not 64 bytes
        ["v1a,not-base64!"],
        ["v1," + "A" * 10],  # a v1 that is not 32 bytes
        [FORGED_V1A, "v1a"],  # a version without a signature
    ],
)
def test_malformed_signatures_are_refused_before_any_verification(
    entries: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = counting_verifications(monkeypatch)
    body = ours_event()
    headers = Headers(v1a_headers(body, entries))
    with pytest.raises(MalformedSignature):
        verify(SCHEMES["standard"], headers, body, [PUBLIC], now=time.time(), tolerance_seconds=300)
    assert calls == []


def test_a_missing_message_id_is_refused_before_any_verification(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = counting_verifications(monkeypatch)
    body = ours_event()
    headers = v1a_headers(body, [FORGED_V1A])
    del headers["webhook-id"]
    with pytest.raises(MalformedSignature):
        verify(
            SCHEMES["standard"],
            Headers(headers),
            body,
            [PUBLIC],
            now=time.time(),
            tolerance_seconds=300,
        )
    assert calls == []


def test_an_entry_sent_twice_is_verified_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting_verifications(monkeypatch)
    body = ours_event()
    ts = int(time.time())
    good = signing.sign_v1a(PRIVATE, "msg_1", ts, body)
    headers = Headers(v1a_headers(body, [FORGED_V1A, FORGED_V1A, FORGED_V1A, good], ts=ts))
    verify(SCHEMES["standard"], headers, body, [PUBLIC], now=time.time(), tolerance_seconds=300)
    assert sorted(calls) == sorted([FORGED_V1A, good])


def test_header_lines_joined_with_commas_still_verify() -> None:
    # gunicorn joins repeated header lines with ",": "v1,a v1,b" + "v1a,c" -> "v1,a v1,b,v1a,c".
    body = ours_event()
    secret = signing.generate_secret()
    ts = int(time.time())
    lib = sign_standard_lib(secret, body, "msg_1", ts)
    v1a = signing.sign_v1a(PRIVATE, "msg_1", ts, body)
    joined = {**lib, "webhook-signature": f"{FORGED_V1A},{lib['webhook-signature']},{v1a}"}
    parts = screen(SCHEMES["standard"], Headers(joined), now=ts, tolerance_seconds=300)
    assert len(parts.candidates) == 3
    assert verify(
        SCHEMES["standard"], Headers(joined), body, [PUBLIC], now=ts, tolerance_seconds=300
    )
    assert verify(
        SCHEMES["standard"], Headers(joined), body, [secret], now=ts, tolerance_seconds=300
    )


@pytest.mark.parametrize("scheme", ["ours", "stripe", "standard"])
def test_a_rotation_s_signatures_fit_under_the_cap(scheme: str) -> None:
    body = ours_event(event_id=str(uuid.uuid4()))
    secrets = [signing.generate_secret() for _ in range(3)]
    if scheme == "ours":
        headers = sign_ours(secrets, body)
    elif scheme == "stripe":
        headers = sign_stripe_lib(secrets[0], body)
    else:
        ts = int(time.time())
        entries = [signing.sign_standard(s, "msg_1", ts, body) for s in secrets]
        headers = v1a_headers(body, [*entries, signing.sign_v1a(PRIVATE, "msg_1", ts, body)], ts)
    verify(
        SCHEMES[scheme],
        Headers(headers),
        body,
        [secrets[0]],
        now=time.time(),
        tolerance_seconds=300,
    )
