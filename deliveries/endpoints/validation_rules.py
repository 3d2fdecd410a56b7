"""The CloudEvents webhook validation handshake ("abuse protection"), as pure rules.
No Django, no I/O here: `endpoints.validation` sends the request and stores the verdict.

CloudEvents' HTTP webhook spec (section 4): before a sender delivers to a URL someone
registered, it asks the target with an ``OPTIONS`` request carrying
``WebHook-Request-Origin`` (who sends) and, optionally, ``WebHook-Request-Rate`` (requests
per minute). The target consents only by answering with ``WebHook-Allowed-Origin`` equal
to that origin or ``*``; it may grant a rate with ``WebHook-Allowed-Rate`` (``*``: no
limit). A status code alone is no consent: a server that answers every method with 200
never agreed to anything. Once consent is given, every delivery carries
``WebHook-Request-Origin`` with the same value.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

REQUEST_ORIGIN = "WebHook-Request-Origin"
REQUEST_RATE = "WebHook-Request-Rate"
ALLOWED_ORIGIN = "WebHook-Allowed-Origin"
ALLOWED_RATE = "WebHook-Allowed-Rate"

# Unanswered handshakes (the target down, a timeout, a 5xx or a 429) are tried again
# after this * 2**(tries-1) seconds, at most `cap`; after `MAX_TRIES` the endpoint is
# refused (an operator or the tenant asks again with the button).
MAX_TRIES = 10


@dataclass(frozen=True)
class Verdict:
    """What one handshake came to.

    ``consent``: deliveries may go. Otherwise ``retry`` says whether to ask again by
    ourselves (the target did not answer, or answered with a transient error) or wait for
    someone to ask again (the target answered and did not consent). ``allowed_rate`` is
    the granted requests per minute, None for no limit (``*`` or no header).
    """

    consent: bool
    reason: str
    retry: bool = False
    allowed_rate: int | None = None


def origin_from(configured: str, allowed_hosts: Iterable[str]) -> str:
    """Our origin: the setting if given, else the first of ``ALLOWED_HOSTS`` that names
    one host (not ``*`` nor a ``.example.com`` pattern); "" when none does."""
    if configured.strip():
        return configured.strip()
    for host in allowed_hosts:
        host = str(host).strip()
        if host and "*" not in host and not host.startswith("."):
            return host
    return ""


def origin_problem(origin: str) -> str | None:
    """Why an origin cannot go into a header (None when it can)."""
    if not origin:
        return "no origin: set WEBHOOKS_VALIDATION_ORIGIN or name a host in ALLOWED_HOSTS"
    if any(ord(char) < 33 or ord(char) > 126 for char in origin) or "," in origin:
        return "the origin must be a host name (printable ASCII, no spaces or commas)"
    return None


def requested_rate(per_second: int | None) -> int | None:
    """The ``WebHook-Request-Rate`` for an endpoint limited to ``per_second`` requests a
    second (None or 0: no limit, so no header)."""
    if not per_second or per_second <= 0:
        return None
    return per_second * 60


def request_headers(origin: str, rate_per_minute: int | None) -> dict[str, str]:
    headers = {REQUEST_ORIGIN: origin}
    if rate_per_minute:
        headers[REQUEST_RATE] = str(rate_per_minute)
    return headers


def _header(headers: Mapping[str, str], name: str) -> str | None:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value.strip()
    return None


def _rate(value: str | None) -> tuple[int | None, str | None]:
    """(granted requests per minute or None for no limit, problem or None)."""
    if value is None or value == "*":
        return None, None
    if value.isascii() and value.isdigit() and int(value) > 0:
        return int(value), None
    return None, f"{ALLOWED_RATE} must be * or a positive integer, not {value[:40]!r}"


def decide(
    *,
    origin: str,
    status_code: int | None,
    headers: Mapping[str, str],
    error: str = "",
) -> Verdict:
    """The verdict on a handshake's answer (``status_code`` None: no answer, ``error``
    says why)."""
    if status_code is None:
        return Verdict(False, f"no answer to OPTIONS: {error or 'no response'}", retry=True)
    allowed = _header(headers, ALLOWED_ORIGIN)
    if allowed is not None and (allowed == "*" or allowed.lower() == origin.lower()):
        rate, problem = _rate(_header(headers, ALLOWED_RATE))
        if problem:
            return Verdict(False, f"consent given but {problem}")
        return Verdict(True, "consented", allowed_rate=rate)
    transient = status_code >= 500 or status_code == 429
    if allowed is not None:
        reason = f"{ALLOWED_ORIGIN} is {allowed[:100]!r}, not our origin {origin!r} nor *"
    else:
        reason = f"HTTP {status_code} to OPTIONS without {ALLOWED_ORIGIN}: no consent"
    return Verdict(False, reason, retry=transient)


def retry_delay(tries: int, *, base: float, cap: float) -> float:
    """Seconds before the next automatic try after ``tries`` unanswered ones."""
    exponent = min(max(tries - 1, 0), 30)
    return float(min(base * 2**exponent, cap))


def effective_rate_per_minute(per_second: int | None, granted: int | None) -> int | None:
    """The stricter of the operator's limit (per second) and the target's grant (per
    minute), in requests per minute; None when neither limits."""
    limits = [n for n in (requested_rate(per_second), granted) if n]
    return min(limits) if limits else None
