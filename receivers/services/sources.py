"""Source life cycle: create, update, add and rotate verification secrets, delete."""

import logging
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.db import transaction
from django.db.models import ProtectedError
from django.utils import timezone

from receivers import schemes, selectors
from receivers.models import InboxEvent, Source, SourceSecret
from webhooks_core import conf as core_conf
from webhooks_core.crypto import signing
from webhooks_core.crypto.encryption import SecretDecryptionError
from webhooks_core.egress import ssrf

logger = logging.getLogger(__name__)

DEFAULT_ROTATION_GRACE_SECONDS = 24 * 3600


class SecretRequired(ValueError):
    """This scheme's secret is issued by the provider and must be given."""


class InvalidSecret(ValueError):
    """The given secret could never verify a request of the source's scheme."""


class SourceInUse(Exception):
    """The source cannot be deleted now; the message says why and what to do (safe to show)."""


class SourceInvalid(ValueError):
    """The source cannot be saved; ``errors`` maps each field to its reasons (safe to show)."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in errors.items()))


SLUG = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")
BOUNDS: dict[str, tuple[int, int]] = {
    "tolerance_seconds": (1, 3600),
    "max_body_bytes": (1024, 10 * 1024 * 1024),
}
#: What source_create and source_update take besides slug, scheme and secret.
EDITABLE = frozenset(
    {
        "slug",
        "scheme",
        "description",
        "enabled",
        "expected_account",
        "expected_mode",
        "api_base_url",
        "api_token",
        "public_url",
        *BOUNDS,
    }
)


def public_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be the URL a provider signs (None if it can).

    The request's own query string is added to it at verification time, so the URL itself
    has none (nor a fragment, which no request carries).
    """
    if len(url) > 2048:
        return "The URL is longer than 2048 characters."
    try:
        parts = urlsplit(url)
    except ValueError:
        return "Enter a valid http(s) URL."
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "Enter a valid http(s) URL."
    if any(ord(char) <= 32 or ord(char) == 127 for char in url):
        return "The URL contains spaces or control characters."
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return "Give the URL without '?' or '#': the query string of each request is added to it."
    return None


#: Shown when a change of `api_base_url`'s origin drops the stored API token.
DROPPED_ON_NEW_ORIGIN = (
    "The API token was removed: api_base_url now points at another origin (scheme, host "
    "or port), and a token given for one host is never sent to another. Give the token "
    "again (api_token) in the same change to keep one."
)


def origin_changes(source: Source | None, fields: dict[str, Any]) -> bool:
    """Whether these fields move ``source``'s API to another origin (or to none)."""
    return (
        source is not None
        and "api_base_url" in fields
        and not ssrf.same_origin(source.api_base_url, fields["api_base_url"])
    )


def _unusable_secrets(source: Source, scheme: str) -> list[str]:
    """Why the source's unexpired secrets could not be secrets of ``scheme``."""
    problems = []
    for secret in source.secrets.unexpired(timezone.now()).order_by("created_at", "pk"):
        try:
            value = secret.value
        except SecretDecryptionError:
            continue  # cannot verify anything under any scheme; reported by the view's log
        problem = schemes.secret_refusal(schemes.get(scheme), value)
        if problem:
            problems.append(
                f"The secret {secret.fingerprint} cannot be a {scheme} secret: {problem}."
            )
    return problems


def source_validate(*, source: Source | None = None, **fields: Any) -> None:
    """Raise `SourceInvalid` if `source_create` (no source) or `source_update` would
    refuse these fields; writes nothing. Forms call it to show field errors."""
    errors: dict[str, list[str]] = {}

    def refuse(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    unknown = set(fields) - EDITABLE - {"secret"}
    if unknown:
        raise TypeError(f"unexpected source fields {sorted(unknown)}")
    if "slug" in fields:
        slug = fields["slug"]
        if not isinstance(slug, str) or not SLUG.match(slug):
            refuse("slug", "Letters, digits, hyphens and underscores, at most 100.")
        else:
            taken = Source.objects.filter(slug=slug)
            if source is not None:
                taken = taken.exclude(pk=source.pk)
            if taken.exists():
                refuse("slug", "A source with this slug already exists.")
    scheme: str = fields.get("scheme", source.scheme if source else "")
    known = isinstance(scheme, str) and scheme in schemes.SCHEMES
    if "scheme" in fields and not known:
        names = ", ".join(schemes.SCHEMES)
        refuse("scheme", f"{scheme!r} is not a scheme (registered: {names}).")
    for field, (low, high) in BOUNDS.items():
        value = fields.get(field)
        if field in fields and (not isinstance(value, int) or not low <= value <= high):
            refuse(field, f"Must be a whole number from {low} to {high}.")
    if fields.get("expected_mode") not in (None, "", "live", "test"):
        refuse("expected_mode", "live, test, or empty.")
    url = fields.get("api_base_url")
    if url:
        # The token goes to this URL: the same SSRF guard as endpoints (and again at
        # connect time, see receivers.reconciliation.provider_get).
        problem = (
            "The URL is longer than 2048 characters."
            if len(url) > 2048
            else ssrf.url_refusal(url, core_conf.address_policy())
        )
        if problem:
            refuse("api_base_url", problem)
    public_url = fields.get("public_url")
    if public_url is not None and not isinstance(public_url, str):
        refuse("public_url", "Enter a valid http(s) URL.")
    elif public_url:
        problem = public_url_problem(public_url)
        if problem:
            refuse("public_url", problem)
    token = fields.get("api_token")
    if token:
        try:
            token.encode("latin-1")
        except UnicodeEncodeError:
            refuse("api_token", "The token has characters an HTTP header cannot carry.")
        if any(ord(char) < 32 or ord(char) == 127 for char in token):
            refuse("api_token", "The token contains control characters (a pasted line break?).")
    if source is None and known:
        secret = fields.get("secret")
        if not secret and not schemes.get(scheme).generates_secrets:
            refuse("secret", f"a {scheme} source needs the secret the provider gave you")
        elif secret:
            problem = schemes.secret_refusal(schemes.get(scheme), secret)
            if problem:
                refuse("secret", problem)
    if source is not None and known:
        secret = fields.get("secret")
        if secret:
            # A new secret given with the change: it replaces the current ones at once.
            problem = schemes.secret_refusal(schemes.get(scheme), secret)
            if problem:
                refuse("secret", problem)
        elif scheme != source.scheme:
            # Every unexpired secret goes on verifying under the new scheme: each must be
            # one it can take (an HMAC scheme never takes a whpk_ public key).
            for problem in _unusable_secrets(source, scheme):
                refuse(
                    "scheme",
                    f"{problem} Give the new scheme's secret (secret) in the same change "
                    "(the current ones then stop at once), or let that one expire first.",
                )
    if errors:
        raise SourceInvalid(errors)


def _apply(source: Source, fields: dict[str, Any]) -> None:
    for name, value in fields.items():
        if name == "api_token":
            # Empty keeps the stored token (forms never show it back).
            if value:
                source.api_token = value
        else:
            setattr(source, name, value)


@transaction.atomic
def source_update(*, source: Source, **fields: Any) -> Source:
    """Change a source's settings under the rules of `source_create`; raises `SourceInvalid`.

    A change of ``scheme`` re-checks every unexpired secret against the new scheme, unless
    ``secret`` gives the new scheme's secret in the same change: it is added and the
    current ones expire at once. A change of ``api_base_url``'s origin (scheme, host or
    port, or to no URL) drops the stored API token unless ``api_token`` gives one in the
    same change; the returned source's ``notices`` then says so (`DROPPED_ON_NEW_ORIGIN`).
    """
    source = Source.objects.select_for_update().get(pk=source.pk)
    source_validate(source=source, **fields)
    new_secret = fields.pop("secret", None) or None
    drop_token = (
        origin_changes(source, fields)
        and bool(source.encrypted_api_token)
        and not fields.get("api_token")
    )
    _apply(source, fields)
    notices: list[str] = []
    if drop_token:
        source.encrypted_api_token = ""
        notices.append(DROPPED_ON_NEW_ORIGIN)
    source.save()
    if new_secret:
        now = timezone.now()
        source.secrets.expire_by(now, now)
        _add_secret(source, new_secret)
    source.notices = tuple(notices)
    return source


def _check_secret(scheme: str, secret: str) -> None:
    found = schemes.SCHEMES.get(scheme)
    if found is None:
        raise InvalidSecret(f"the scheme {scheme!r} is not registered (RECEIVERS_SCHEMES)")
    problem = schemes.secret_refusal(found, secret)
    if problem:
        raise InvalidSecret(problem)


def _add_secret(source: Source, plain: str) -> SourceSecret:
    secret = SourceSecret(source=source)
    secret.value = plain
    secret.save()
    return secret


@transaction.atomic
def source_create(
    *, slug: str, scheme: str, secret: str | None = None, **fields: Any
) -> tuple[Source, str]:
    """Create a source with its first secret; returns the secret (generated if allowed).

    Raises `SecretRequired` / `InvalidSecret` for the secret, `SourceInvalid` for the rest.
    """
    if scheme not in schemes.SCHEMES:
        # Refused (SourceInvalid, naming the registered schemes) before its secret is read.
        source_validate(slug=slug, scheme=scheme, **fields)
    if not secret:
        if not schemes.get(scheme).generates_secrets:
            raise SecretRequired(f"a {scheme} source needs the secret the provider gave you")
        secret = signing.generate_secret()
    _check_secret(scheme, secret)
    source_validate(slug=slug, scheme=scheme, secret=secret, **fields)
    source = Source(slug=slug, scheme=scheme)
    _apply(source, dict(fields))
    source.save()
    _add_secret(source, secret)
    return source, secret


@transaction.atomic
def source_rotate_secret(
    *,
    source: Source,
    secret: str | None = None,
    grace_seconds: int = DEFAULT_ROTATION_GRACE_SECONDS,
) -> tuple[str, SourceSecret]:
    """Add a new secret; the current ones stay valid for ``grace_seconds`` more.

    Give the provider's new secret, or none to generate one (schemes that say
    ``generates_secrets``: ours and Standard Webhooks among the built-in ones). With
    ``grace_seconds=0`` the old secrets stop verifying at once.
    """
    if not secret:
        scheme = schemes.SCHEMES.get(source.scheme)
        if scheme is None or not scheme.generates_secrets:
            raise SecretRequired(f"a {source.scheme} source needs the provider's new secret")
        secret = signing.generate_secret()
    _check_secret(source.scheme, secret)
    now = timezone.now()
    expires_at = now + timedelta(seconds=grace_seconds)
    source.secrets.expire_by(expires_at, now)
    return secret, _add_secret(source, secret)


@dataclass(frozen=True)
class SourceDeletion:
    slug: str
    inbox_events_deleted: int


def source_delete(*, source_id: int, force: bool = False) -> SourceDeletion:
    """Delete a source, its secrets and its inbox rows, all in one transaction.

    Refused (`SourceInUse`) while the source has inbox rows whose work is not done
    (received, retrying, processing, or failed and waiting for a manual retry), unless
    ``force``: those events would be lost, and their providers will not send them again.
    Also refused while rows of the host's own models refer to the source (a protecting
    foreign key, as the example's payments have). Raises ``Source.DoesNotExist``.

    The source's row is locked first. An arrival stores its row under a foreign key to
    the source, whose check waits for that lock: an arrival committed before it is
    counted (and refuses or joins the deletion), one after it fails as a whole and its
    request is answered as for an unknown source (nothing half-written either way).
    """
    with transaction.atomic():
        source = Source.objects.select_for_update().get(pk=source_id)
        events = InboxEvent.objects.filter(source=source)
        unfinished = selectors.unfinished_inbox_events(source_id=source.pk)
        if unfinished and not force:
            raise SourceInUse(
                f"{source.slug} has {unfinished} inbox event(s) not yet processed (received, "
                "retrying, processing or failed). Let them finish, or delete with force to "
                "drop them too."
            )
        deleted, _ = events.delete()
        try:
            source.delete()
        except ProtectedError as exc:
            models = sorted({type(obj)._meta.label for obj in exc.protected_objects})
            raise SourceInUse(
                f"{source.slug} is still referred to by {', '.join(models)}: delete or move "
                "those rows first."
            ) from None
    logger.info(
        "source deleted",
        extra={"source": source.slug, "inbox_events_deleted": deleted, "forced": force},
    )
    return SourceDeletion(slug=source.slug, inbox_events_deleted=deleted)
