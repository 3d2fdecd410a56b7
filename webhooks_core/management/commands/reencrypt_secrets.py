"""`python manage.py reencrypt_secrets`: the second half of rotating WEBHOOKS_ENCRYPTION_KEY."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webhooks_core.crypto.encryption import SecretDecryptionError
from webhooks_core.crypto.reencrypt import reencrypt_all


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored secret (endpoint and source secrets, signing keys, secret "
        "headers, source API tokens) with the first key of WEBHOOKS_ENCRYPTION_KEY; after "
        "it, the other keys can be removed."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            counts = reencrypt_all()
        except SecretDecryptionError as exc:
            raise CommandError(
                f"{exc}: keep every old key in WEBHOOKS_ENCRYPTION_KEY (after the new one)."
            ) from None
        for label, count in sorted(counts.items()):
            self.stdout.write(f"{label}: {count} re-encrypted")
