from typing import Any

from django.core.management.base import BaseCommand

from webhooks_core.crypto import encryption


class Command(BaseCommand):
    help = "Print a new key for WEBHOOKS_ENCRYPTION_KEY (a Fernet key)."
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(encryption.generate_key())
