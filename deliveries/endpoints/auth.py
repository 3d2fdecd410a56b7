"""An endpoint's delivery auth: OAuth2 client credentials (``auth``) and mutual TLS
(``client_certificate``, ``client_key``, ``ca_certificates``). The rules live here once;
`lifecycle._apply_and_validate` calls them for the API, the admin and the portal.

Secrets are write-only: ``auth.client_secret`` and ``client_key`` are stored encrypted and
never read back. An update that leaves them out keeps the stored ones, except that a
client secret never follows the token URL to another origin (as secret headers never
follow the endpoint's URL): then it must be given again.
"""

from collections.abc import Callable
from typing import Any

from deliveries import conf
from deliveries.destinations.http_client import client_tls, oauth2
from deliveries.endpoints import headers
from deliveries.endpoints.field_rules import TLS_FIELDS
from deliveries.models import Endpoint
from webhooks_core.crypto import encryption
from webhooks_core.egress import ssrf

AUTH_KEYS = {"type", "token_url", "client_id", "client_secret", "scope", "audience"}
MAX_TEXT = 2048


def apply(
    endpoint: Endpoint,
    given: dict[str, Any],
    refuse: Callable[[str, str], None],
    *,
    chosen_by_tenant: bool = False,
    moved: bool = False,
) -> str:
    """Set the auth fields among ``given`` on the (unsaved) endpoint, encrypting the
    secrets; every problem goes to ``refuse(field, message)``. ``chosen_by_tenant``: a
    tenant gives them, so the token URL is judged by the tenant's SSRF policy, now and at
    every connect.
    ``moved``: the endpoint's URL now points at another origin, where the bearer tokens
    of its stored client secret are not sent: OAuth2 is dropped unless this change gives
    the secret again. Returns a notice of what was dropped ("" for nothing)."""
    if moved and "auth" not in given and endpoint.auth:
        endpoint.auth = None
        endpoint.encrypted_auth_secret = ""
        return (
            "The OAuth2 delivery auth was removed: the URL now points at another origin "
            "(scheme, host or port), and the tokens of a client secret given for one host "
            "are never sent to another. Give auth again, with its client_secret, in the "
            "same change to keep it."
        )
    if "auth" in given:
        policy = (
            conf.portal_address_policy()
            if chosen_by_tenant
            else conf.endpoint_address_policy(endpoint)
        )
        _apply_oauth2(endpoint, given["auth"], refuse, policy, moved=moved)
        # Fetched under the tenant's policy at every connect too (conf.token_url_policy).
        endpoint.token_url_chosen_by_tenant = chosen_by_tenant and endpoint.auth is not None
    if any(name in given for name in TLS_FIELDS):
        _apply_tls(endpoint, given, refuse)
    return ""


def _stored_secret(endpoint: Endpoint) -> str:
    if endpoint._state.adding or not endpoint.encrypted_auth_secret:
        return ""
    return encryption.decrypt(endpoint.encrypted_auth_secret)


def _apply_oauth2(
    endpoint: Endpoint,
    auth: Any,
    refuse: Callable[[str, str], None],
    policy: ssrf.AddressPolicy,
    *,
    moved: bool = False,
) -> None:
    if auth is None:
        endpoint.auth = None
        endpoint.encrypted_auth_secret = ""
        return
    if not isinstance(auth, dict):
        refuse("auth", 'Give null or an object {"type": "oauth2_client_credentials", …}.')
        return
    problems: list[str] = []
    unknown = sorted(str(k) for k in set(auth) - AUTH_KEYS)
    if unknown:
        problems.append(f"Unknown fields {', '.join(unknown)}.")
    if auth.get("type") != oauth2.AUTH_TYPE:
        problems.append(f'"type" must be "{oauth2.AUTH_TYPE}".')
    text: dict[str, str] = {}
    for name, required in (
        ("token_url", True),
        ("client_id", True),
        ("scope", False),
        ("audience", False),
    ):
        value = auth.get(name)
        if value is None or value == "":
            if required:
                problems.append(f'Give "{name}".')
            continue
        if not isinstance(value, str) or len(value) > MAX_TEXT:
            problems.append(f'"{name}" must be a text of at most {MAX_TEXT} characters.')
            continue
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            problems.append(f'"{name}" contains control characters.')
            continue
        text[name] = value
    token_url = text.get("token_url")
    if token_url:
        problem = ssrf.url_refusal(token_url, policy)
        if problem:
            problems.append(f"token_url: {problem}")
    secret = auth.get("client_secret")
    previous = endpoint.auth if not endpoint._state.adding else None
    if secret is None or secret == "" or secret == headers.MASK:
        stored = _stored_secret(endpoint)
        previous_url = (previous or {}).get("token_url")
        if not stored:
            problems.append('Give "client_secret".')
        elif token_url and not ssrf.same_origin(previous_url, token_url):
            problems.append(
                '"client_secret": the token_url now points at another origin (scheme, host '
                "or port), so the stored secret is not sent there. Give it again."
            )
        elif moved:
            problems.append(
                '"client_secret": the URL now points at another origin (scheme, host or '
                "port), where the stored secret's tokens are not sent. Give it again."
            )
        else:
            secret = stored
    elif not isinstance(secret, str) or len(secret) > MAX_TEXT:
        problems.append(f'"client_secret" must be a text of at most {MAX_TEXT} characters.')
    for problem in problems:
        refuse("auth", problem)
    if problems:
        return
    endpoint.auth = {"type": oauth2.AUTH_TYPE, **text}
    endpoint.encrypted_auth_secret = encryption.encrypt(str(secret))


def _apply_tls(
    endpoint: Endpoint, given: dict[str, Any], refuse: Callable[[str, str], None]
) -> None:
    values: dict[str, str] = {}
    for name in TLS_FIELDS:
        value = given.get(name)
        if name not in given:
            continue
        if value is None:
            value = ""
        if not isinstance(value, str):
            refuse(name, "Give PEM text (or an empty text to remove it).")
            return
        # A browser's textarea posts CRLF line ends.
        values[name] = value.replace("\r\n", "\n").strip()
    certificate = values.get("client_certificate", endpoint.client_certificate)
    ca = values.get("ca_certificates", endpoint.ca_certificates)
    if "client_key" in values:
        key = values["client_key"]
    elif "client_certificate" in values and not values["client_certificate"]:
        key = ""  # removing the certificate removes its key
    else:
        key = (
            encryption.decrypt(endpoint.encrypted_client_key)
            if endpoint.encrypted_client_key
            else ""
        )
    errors = client_tls.problems(certificate, key, ca)
    for field, messages in errors.items():
        for message in messages:
            refuse(field, message)
    if errors:
        return
    if (certificate or ca) and endpoint.url.lower().startswith("http://"):
        refuse(
            "client_certificate" if certificate else "ca_certificates",
            "Mutual TLS and a CA bundle need an https URL.",
        )
        return
    endpoint.client_certificate = certificate
    endpoint.encrypted_client_key = encryption.encrypt(key) if key else ""
    endpoint.ca_certificates = ca


def represent(endpoint: Endpoint) -> dict[str, Any]:
    """What every reader sees of the auth fields: never a secret."""
    return {
        "auth": dict(endpoint.auth) if endpoint.auth else None,
        "client_certificate": endpoint.client_certificate,
        "ca_certificates": endpoint.ca_certificates,
        "has_client_key": bool(endpoint.encrypted_client_key),
    }
