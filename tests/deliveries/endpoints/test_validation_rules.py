"""The CloudEvents handshake's pure rules (deliveries/endpoints/validation_rules.py):
what is consent."""

import pytest

from deliveries.endpoints import validation_rules

ORIGIN = "hooks.example.com"


def decide(
    status: int | None, headers: dict[str, str], error: str = ""
) -> validation_rules.Verdict:
    return validation_rules.decide(origin=ORIGIN, status_code=status, headers=headers, error=error)


def test_our_origin_or_a_star_is_consent_whatever_the_case_of_the_header_names() -> None:
    assert decide(200, {"WebHook-Allowed-Origin": ORIGIN}).consent
    assert decide(204, {"webhook-allowed-origin": "*"}).consent
    assert decide(200, {"WEBHOOK-ALLOWED-ORIGIN": " HOOKS.example.com "}).consent


def test_a_status_code_alone_is_no_consent() -> None:
    verdict = decide(200, {"Allow": "POST, OPTIONS"})
    assert not verdict.consent
    assert not verdict.retry  # the target answered: it is not asked again by itself
    assert "without WebHook-Allowed-Origin" in verdict.reason


def test_another_origin_is_a_refusal() -> None:
    verdict = decide(200, {"WebHook-Allowed-Origin": "evil.example.com"})
    assert not verdict.consent
    assert not verdict.retry
    assert "evil.example.com" in verdict.reason


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_a_transient_answer_is_tried_again(status: int) -> None:
    verdict = decide(status, {})
    assert not verdict.consent
    assert verdict.retry


def test_no_answer_is_tried_again_and_says_why() -> None:
    verdict = decide(None, {}, error="ConnectionRefusedError: refused")
    assert not verdict.consent
    assert verdict.retry
    assert "ConnectionRefusedError" in verdict.reason


@pytest.mark.parametrize(
    ("value", "granted"), [(None, None), ("*", None), ("120", 120), (" 7 ", 7)]
)
def test_the_granted_rate(value: str | None, granted: int | None) -> None:
    headers = {"WebHook-Allowed-Origin": "*"}
    if value is not None:
        headers["WebHook-Allowed-Rate"] = value
    verdict = decide(200, headers)
    assert verdict.consent
    assert verdict.allowed_rate == granted


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "fast", "١٢"])
def test_a_malformed_rate_is_not_consent(value: str) -> None:
    verdict = decide(200, {"WebHook-Allowed-Origin": "*", "WebHook-Allowed-Rate": value})
    assert not verdict.consent
    assert not verdict.retry
    assert "WebHook-Allowed-Rate" in verdict.reason


def test_request_headers_ask_for_the_rate_per_minute_only_when_limited() -> None:
    assert validation_rules.request_headers(ORIGIN, validation_rules.requested_rate(5)) == {
        "WebHook-Request-Origin": ORIGIN,
        "WebHook-Request-Rate": "300",
    }
    assert validation_rules.request_headers(ORIGIN, validation_rules.requested_rate(0)) == {
        "WebHook-Request-Origin": ORIGIN
    }
    assert validation_rules.requested_rate(None) is None


def test_the_origin_is_the_setting_else_the_first_single_host() -> None:
    assert validation_rules.origin_from(" set.example ", ["a.example"]) == "set.example"
    assert validation_rules.origin_from("", ["*", ".example.com", "b.example", "c"]) == "b.example"
    assert validation_rules.origin_from("", ["*"]) == ""
    assert validation_rules.origin_problem("") is not None
    assert validation_rules.origin_problem("with space") is not None
    assert validation_rules.origin_problem("hooks.example.com") is None


def test_retry_delay_doubles_up_to_the_cap() -> None:
    delays = [validation_rules.retry_delay(n, base=30, cap=3600) for n in range(1, 10)]
    assert delays[:4] == [30, 60, 120, 240]
    assert max(delays) == 3600


def test_effective_rate_is_the_stricter() -> None:
    assert validation_rules.effective_rate_per_minute(5, 100) == 100
    assert validation_rules.effective_rate_per_minute(1, 100) == 60
    assert validation_rules.effective_rate_per_minute(None, None) is None
