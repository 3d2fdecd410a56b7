"""Source life cycle: create, add and rotate verification secrets."""

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from deliveries import signing

from .. import schemes
from ..models import Scheme, Source, SourceSecret

DEFAULT_ROTATION_GRACE_SECONDS = 24 * 3600
#: Schemes whose secret we may generate (we tell the sender); others come from the provider.
GENERATED_SECRET_SCHEMES = (Scheme.OURS, Scheme.STANDARD)


class SecretRequired(ValueError):
    """This scheme's secret is issued by the provider and must be given."""


class InvalidSecret(ValueError):
    """The given secret could never verify a request of the source's scheme."""


def _check_secret(scheme: str, secret: str) -> None:
    problem = schemes.get(scheme).secret_problem(secret)
    if problem:
        raise InvalidSecret(problem)


def _add_secret(source: Source, plain: str) -> SourceSecret:
    secret = SourceSecret(source=source)
    secret.value = plain
    secret.save()
    return secret


@transaction.atomic
def source_create(
    *, slug: str, scheme: str, secret: str | None = None, **fields: object
) -> tuple[Source, str]:
    """Create a source with its first secret; returns the secret (generated if allowed)."""
    if not secret:
        if scheme not in GENERATED_SECRET_SCHEMES:
            raise SecretRequired(f"a {scheme} source needs the secret the provider gave you")
        secret = signing.generate_secret()
    _check_secret(scheme, secret)
    source = Source.objects.create(slug=slug, scheme=scheme, **fields)
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

    Give the provider's new secret, or none to generate one (our scheme and Standard
    Webhooks). With ``grace_seconds=0`` the old secrets stop verifying at once.
    """
    if not secret:
        if source.scheme not in GENERATED_SECRET_SCHEMES:
            raise SecretRequired(f"a {source.scheme} source needs the provider's new secret")
        secret = signing.generate_secret()
    _check_secret(source.scheme, secret)
    now = timezone.now()
    expires_at = now + timedelta(seconds=grace_seconds)
    for old in source.secrets.unexpired(now).select_for_update():
        if old.expires_at is None or old.expires_at > expires_at:
            old.expires_at = expires_at
            old.save(update_fields=["expires_at"])
    return secret, _add_secret(source, secret)
