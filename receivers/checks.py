"""System checks on the receiving side's configuration.

The registry of schemes (``RECEIVERS_SCHEMES``) is checked on every ``manage.py check``.
The stored sources are checked under the tag ``database``: Django runs those for
``manage.py check --database default`` and before ``migrate`` (the ``release`` step), not
on every management command.
"""

from collections.abc import Iterable, Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import DEFAULT_DB_ALIAS, DatabaseError
from django.db.models import Exists, OuterRef
from django.utils import timezone

from receivers import schemes
from receivers.schemes.base import is_public_key
from receivers.schemes.registry import registered
from webhooks_core.check_ids import check_id
from webhooks_core.crypto.encryption import SecretDecryptionError


@register(Tags.compatibility)
def check_schemes(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[CheckMessage]:
    """A host's scheme that cannot be loaded is left out of the registry, and its sources
    answer every request 503 (kept for the provider's retries); say why before that."""
    return [
        Error(
            problem,
            hint="Each entry is the dotted path of a subclass of receivers.schemes.Scheme "
            "with a unique `name` (see the guide 'Write a provider').",
            id=check_id("receivers.E004"),
        )
        for problem in registered().problems
    ]


@register(Tags.database)
def check_sources_can_verify(
    app_configs: Sequence[AppConfig] | None,
    databases: Iterable[str] | None = None,
    **kwargs: Any,
) -> list[CheckMessage]:
    """An enabled source that cannot verify anything refuses every webhook with a 401,
    which the provider sees as our outage; say so before it happens."""
    if not databases or DEFAULT_DB_ALIAS not in databases:
        return []
    from receivers.models import Source, SourceSecret

    now = timezone.now()
    try:
        active = SourceSecret.objects.unexpired(now).filter(source=OuterRef("pk"))
        without_secret = list(
            Source.objects.filter(enabled=True)
            .exclude(Exists(active))
            .values_list("slug", flat=True)
        )
        secrets = list(
            SourceSecret.objects.unexpired(now)
            .filter(source__enabled=True)
            .select_related("source")
            .only("encrypted_value", "fingerprint", "source__slug", "source__scheme")
        )
        schemes_named = list(
            Source.objects.filter(enabled=True)
            .exclude(scheme__in=list(schemes.SCHEMES))
            .values_list("slug", "scheme")
        )
    except DatabaseError:
        return []  # not migrated yet: nothing is configured
    problems: list[CheckMessage] = [
        Warning(
            f"Source {slug!r} is enabled but has no active secret: every request to "
            f"/receivers/{slug}/ is refused with 401.",
            hint="Add a secret to the source (admin: Sources -> Secrets) or disable it.",
            id=check_id("receivers.W003"),
        )
        for slug in without_secret
    ]
    problems += [
        Warning(
            f"Source {slug!r} names the scheme {scheme!r}, which is not registered: every "
            f"request to /receivers/{slug}/ is answered 503.",
            hint="Add the scheme's class to RECEIVERS_SCHEMES (see receivers.E004 for an "
            "entry that does not load), or disable the source.",
            id=check_id("receivers.W006"),
        )
        for slug, scheme in schemes_named
    ]
    for secret in secrets:
        try:
            value = secret.value
        except SecretDecryptionError:
            problems.append(
                Warning(
                    f"A secret of source {secret.source.slug!r} (fingerprint "
                    f"{secret.fingerprint}) cannot be decrypted with WEBHOOKS_ENCRYPTION_KEY.",
                    hint="Keep the old key in WEBHOOKS_ENCRYPTION_KEY (comma-separated, the "
                    "new one first) or enter the secret again.",
                    id=check_id("receivers.W004"),
                )
            )
            continue
        scheme = schemes.SCHEMES.get(secret.source.scheme)
        if scheme is not None and schemes.secret_refusal(scheme, value) and is_public_key(value):
            # Stored before the services refused it: it verifies nothing (schemes.verify).
            problems.append(
                Warning(
                    f"Source {secret.source.slug!r} ({scheme.name}) holds a public key "
                    f"(fingerprint {secret.fingerprint}) as an HMAC secret: it verifies "
                    "nothing, since anyone could sign with a published key.",
                    hint="Rotate to the provider's signing secret, or change the source's "
                    "scheme to 'standard' if the provider signs with ed25519 (v1a).",
                    id=check_id("receivers.W005"),
                )
            )
    return problems
